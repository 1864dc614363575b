"""The frozen view of a cycle: what each node has requested, and how nodes are grouped."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gangsched.core.fit.nodefit import PER_NODE_LABELS, node_excluded_reason, uses_node_name
from gangsched.core.model.objects import Node, NodeName, Pod
from gangsched.core.model.resources import Resources
from gangsched.core.placement.snapshot import Snapshot
from tests.unit.clusters import PROPERTY, node, pod, pod_templates, small_nodes, small_snapshots


@st.composite
def bound_pods(draw: st.DrawFn, nodes: list[Node]) -> list[Pod]:
    """Pods of any scheduler on the nodes, some on a node that is gone, some finished."""
    names = [str(member.name) for member in nodes] + ["gone"]
    return [
        pod(f"ns/p{i}", cpu=draw(st.sampled_from(["100m", "1", "3"])),
            memory=draw(st.sampled_from(["128Mi", "1Gi"])), gpu=draw(st.sampled_from([0, 1])),
            node_name=draw(st.sampled_from(names)), terminal=draw(st.booleans()))
        for i in range(draw(st.integers(0, 12)))
    ]


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[Node], list[Pod]]:
    nodes = draw(small_nodes())
    return nodes, draw(bound_pods(nodes))


@PROPERTY
@given(clusters())
def test_each_node_holds_the_sum_of_its_live_pods(cluster: tuple[list[Node], list[Pod]]) -> None:
    """Pods of every scheduler count against a node; finished pods and pods on a
    node we do not know hold nothing; free is what the kubelet would still admit."""
    nodes, pods = cluster
    snapshot = Snapshot.build(nodes, pods)
    assert set(snapshot.nodes) == {member.name for member in nodes}
    for member in nodes:
        live = [p.requests for p in pods if p.node_name == member.name and not p.terminal]
        usage = snapshot.nodes[member.name]
        assert usage.requested == Resources.sum(live)
        assert snapshot.free(member.name) == member.allocatable - Resources.sum(live)


def test_a_node_can_be_overcommitted_by_another_scheduler() -> None:
    """Free goes negative rather than being clamped: the node is full, whoever filled it."""
    snapshot = Snapshot.build([node("n0", cpu="1")], [pod("x/a", cpu="2", node_name="n0")])
    assert snapshot.free(NodeName("n0")).get("cpu") == -1000


def kind_signature(member: Node) -> object:
    labels = tuple(item for item in member.labels if item[0] not in PER_NODE_LABELS)
    return labels, member.taints, member.unschedulable, member.ready, member.features


@PROPERTY
@given(small_snapshots())
def test_the_index_groups_every_node_once_by_kind_and_free(snapshot: Snapshot) -> None:
    index = snapshot.index
    seen = []
    for kind, groups in enumerate(index.classes):
        for free, members in groups.items():
            for name in members:
                seen.append(name)
                assert index.kind_of[name] == kind
                assert snapshot.free(name) == free == index.free[name]
                same = kind_signature(snapshot.nodes[name].node)
                assert same == kind_signature(index.kinds[kind])
    assert sorted(seen) == sorted(snapshot.nodes)
    assert len({kind_signature(kind) for kind in index.kinds}) == len(index.kinds)
    assert sum(index.kind_size) == len(snapshot.nodes)
    largest: dict[str, int] = {}
    for usage in snapshot.nodes.values():
        for resource, amount in usage.node.allocatable.amounts.items():
            largest[resource] = max(largest.get(resource, 0), amount)
    assert index.max_allocatable == Resources.of(largest)


@PROPERTY
@given(small_snapshots(), pod_templates())
def test_cached_fit_answers_are_the_answer_for_every_node(
    snapshot: Snapshot, template: dict[str, object]
) -> None:
    """Fit is asked once per kind of node (or per node, for rules on names), and the
    answer is the one each node of the kind gives."""
    rules = pod("ns/p", **template).rules  # type: ignore[arg-type]
    index = snapshot.index
    per_kind = index.kind_reasons(rules)
    for name, usage in snapshot.nodes.items():
        verdict = node_excluded_reason(rules, usage.node)
        if uses_node_name(rules):
            assert index.name_reasons(rules)[name] == verdict
            if verdict is None:
                assert per_kind[index.kind_of[name]] is None
        else:
            assert per_kind[index.kind_of[name]] == verdict
    if uses_node_name(rules):
        for kind, reason in enumerate(per_kind):
            admitted = [name for name, k in index.kind_of.items()
                        if k == kind and index.name_reasons(rules)[name] is None]
            assert (reason is None) == bool(admitted)
