"""Small clusters for tests of the placement core: builders, strategies, brute force."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from gangsched.core.fit.nodefit import node_excluded_reason
from gangsched.core.kubeobjects.pods import pod_from_api
from gangsched.core.model.objects import (
    Gang,
    GangKey,
    Node,
    NodeName,
    Pod,
    PodKey,
    PodPlacementRules,
    Policy,
    SelectorRequirement,
    SelectorTerm,
    Taint,
    Toleration,
)
from gangsched.core.model.resources import Resources
from gangsched.core.placement.capacity import Placement, Snapshot

GPU = "nvidia.com/gpu"

PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
"""Hypothesis settings for the placement core's property tests."""


def node(
    name: str,
    *,
    cpu: str = "4",
    memory: str = "16Gi",
    gpu: int = 0,
    pods: int = 110,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Taint] = (),
    unschedulable: bool = False,
    ready: bool = True,
) -> Node:
    return Node(
        name=NodeName(name),
        allocatable=Resources.parse({"cpu": cpu, "memory": memory, GPU: gpu, "pods": pods}),
        labels=tuple(sorted((labels or {}).items())),
        taints=tuple(taints),
        unschedulable=unschedulable,
        ready=ready,
    )


def pod(
    key: str,
    *,
    cpu: str = "1",
    memory: str = "1Gi",
    gpu: int = 0,
    selector: Mapping[str, str] | None = None,
    affinity: Sequence[SelectorTerm] = (),
    tolerations: Sequence[Toleration] = (),
    node_name: str | None = None,
    terminal: bool = False,
) -> Pod:
    return Pod(
        key=PodKey(key),
        requests=Resources.parse({"cpu": cpu, "memory": memory, GPU: gpu, "pods": 1}),
        rules=PodPlacementRules(
            node_selector=tuple(sorted((selector or {}).items())),
            required_affinity=tuple(affinity),
            tolerations=tuple(tolerations),
        ),
        node_name=NodeName(node_name) if node_name else None,
        terminal=terminal,
    )


def gang(
    key: str,
    pods: Iterable[Pod],
    *,
    min_member: int | None = None,
    bound: int = 0,
    policy: Policy | None = None,
) -> Gang:
    members = tuple(pods)
    return Gang(
        key=GangKey(key),
        min_member=len(members) + bound if min_member is None else min_member,
        pending=members,
        bound=bound,
        policy=policy,
    )


def workers(prefix: str, count: int, **kwargs: object) -> list[Pod]:
    return [pod(f"{prefix}-{i}", **kwargs) for i in range(count)]  # type: ignore[arg-type]


def assigned(placement: Placement) -> dict[str, str]:
    return {str(key): str(name) for key, name in placement.assignments}


def nodes_used(placement: Placement) -> set[str]:
    return {str(name) for _, name in placement.assignments}


def overcommitted(snapshot: Snapshot, placement: Placement, pods: Iterable[Pod]) -> list[str]:
    """Nodes where the placed pods ask more of some resource than was free."""
    by_key = {p.key: p for p in pods}
    added: dict[NodeName, Resources] = {}
    for key, name in placement.assignments:
        added[name] = added.get(name, Resources.zero()) + by_key[key].requests
    return [str(name) for name, extra in added.items() if not extra.fits(snapshot.free(name))]


def max_placeable(snapshot: Snapshot, pods: Sequence[Pod]) -> int:
    """The largest number of ``pods`` that fit at once, by trying every assignment.

    Deliberately naive (node by node, no equivalence classes, no ordering
    cleverness) so that it shares no idea with the code under test.
    """
    names = sorted(snapshot.nodes)
    eligible = [
        [n for n in names if node_excluded_reason(p.rules, snapshot.nodes[n].node) is None]
        for p in pods
    ]
    free = {n: snapshot.free(n) for n in names}
    best = 0

    def visit(i: int, placed: int) -> None:
        nonlocal best
        if placed + (len(pods) - i) <= best:
            return
        if i == len(pods):
            best = placed
            return
        for n in eligible[i]:
            if pods[i].requests.fits(free[n]):
                free[n] = free[n] - pods[i].requests
                visit(i + 1, placed + 1)
                free[n] = free[n] + pods[i].requests
                if best == len(pods):
                    return
        visit(i + 1, placed)

    visit(0, 0)
    return best


# ---------------------------------------------------------------- strategies

ZONES = ("a", "b")
BUSY = Taint("gpu", "busy", "NoSchedule")


@st.composite
def small_nodes(draw: st.DrawFn, max_nodes: int = 6) -> list[Node]:
    count = draw(st.integers(1, max_nodes))
    result = []
    for i in range(count):
        result.append(
            node(
                f"n{i}",
                cpu=draw(st.sampled_from(["1", "2", "3", "4"])),
                memory=draw(st.sampled_from(["1Gi", "2Gi", "4Gi"])),
                gpu=draw(st.sampled_from([0, 0, 1, 2, 4])),
                pods=draw(st.sampled_from([110, 110, 2])),
                labels={"zone": draw(st.sampled_from(ZONES))},
                taints=draw(st.sampled_from([(), (), (), (BUSY,)])),
                unschedulable=draw(st.sampled_from([False, False, False, False, True])),
                ready=draw(st.sampled_from([True, True, True, True, False])),
            )
        )
    return result


@st.composite
def pod_templates(draw: st.DrawFn) -> dict[str, object]:
    template: dict[str, object] = {
        "cpu": draw(st.sampled_from(["500m", "1", "1500m", "2"])),
        "memory": draw(st.sampled_from(["256Mi", "512Mi", "1Gi", "2Gi"])),
        "gpu": draw(st.sampled_from([0, 0, 1, 2])),
    }
    if draw(st.integers(0, 3)) == 0:
        template["selector"] = {"zone": draw(st.sampled_from(ZONES))}
    affinity = draw(st.integers(0, 5))
    if affinity == 0:
        template["affinity"] = (
            SelectorTerm(
                match_expressions=(
                    SelectorRequirement("zone", "NotIn", (draw(st.sampled_from(ZONES)),)),
                )
            ),
        )
    elif affinity == 1:  # by node name, as DaemonSets and some operators pin pods
        named = SelectorRequirement(
            "metadata.name", draw(st.sampled_from(["In", "NotIn"])),
            (f"n{draw(st.integers(0, 5))}",),
        )
        template["affinity"] = (SelectorTerm(match_fields=(named,)),)
    if draw(st.booleans()):
        template["tolerations"] = (Toleration("gpu", "Exists", "", ""),)
    return template


@st.composite
def small_gangs(draw: st.DrawFn, max_pods: int = 6) -> Gang:
    """Members drawn from one to three templates, so identical pods occur (workers)
    and differing ones too (a parameter server beside its workers)."""
    templates = draw(st.lists(pod_templates(), min_size=1, max_size=3))
    count = draw(st.integers(1, max_pods))
    members = [
        pod(f"ns/p{i}", **draw(st.sampled_from(templates)))  # type: ignore[arg-type]
        for i in range(count)
    ]
    bound = draw(st.sampled_from([0, 0, 0, 1, 2]))
    min_member = draw(st.integers(1, count + bound))
    policy = draw(st.sampled_from([None, Policy.BINPACK, Policy.SPREAD]))
    return gang("ns/g", members, min_member=min_member, bound=bound, policy=policy)


@st.composite
def small_snapshots(draw: st.DrawFn, max_nodes: int = 6) -> Snapshot:
    """Nodes, some already partly used by pods of other schedulers."""
    nodes = draw(small_nodes(max_nodes))
    existing = []
    for i in range(draw(st.integers(0, 4))):
        target = draw(st.sampled_from(nodes))
        existing.append(
            pod(
                f"other/x{i}",
                cpu=draw(st.sampled_from(["250m", "500m", "1"])),
                memory=draw(st.sampled_from(["128Mi", "512Mi"])),
                gpu=draw(st.sampled_from([0, 0, 1])),
                node_name=target.name,
                terminal=draw(st.sampled_from([False, False, False, True])),
            )
        )
    return Snapshot.build(nodes, existing)


@st.composite
def tight_instances(
    draw: st.DrawFn, max_nodes: int = 6, max_pods: int = 6
) -> tuple[Snapshot, Gang]:
    """Bins and items of two dimensions that barely fit, where packing order matters.

    Random clusters are mostly easy (plenty of room, or hopeless); these are
    the instances where a first-fit answer is wrong and the search must work.
    """
    cores = st.sampled_from(["1", "2", "3", "4"])
    gibs = st.sampled_from(["1Gi", "2Gi", "3Gi", "4Gi"])
    count = draw(st.integers(1, max_nodes))
    nodes = [node(f"n{i}", cpu=draw(cores), memory=draw(gibs), gpu=draw(st.sampled_from([0, 1, 2])))
             for i in range(count)]
    shapes = draw(st.lists(
        st.fixed_dictionaries({
            "cpu": st.sampled_from(["500m", "1", "1500m", "2", "3"]),
            "memory": st.sampled_from(["512Mi", "1Gi", "2Gi", "3Gi"]),
            "gpu": st.sampled_from([0, 0, 1]),
        }),
        min_size=2, max_size=3,
    ))
    members = [pod(f"ns/p{i}", **draw(st.sampled_from(shapes)))  # type: ignore[arg-type]
               for i in range(draw(st.integers(2, max_pods)))]
    min_member = draw(st.sampled_from([len(members), len(members), len(members) - 1, 1]))
    policy = draw(st.sampled_from([Policy.BINPACK, Policy.SPREAD]))
    return Snapshot.build(nodes, []), gang("ns/g", members, min_member=min_member, policy=policy)


def pod_read_from_api(name: str, spec: Mapping[str, Any], on: str | None = None,
                      namespace: str = "ns") -> Pod:
    """A pod of ``spec`` read as the scheduler reads it: running on ``on``, else pending;
    its one container asks a cpu unless ``spec`` says otherwise."""
    full: dict[str, Any] = {
        "containers": [{"name": "main", "resources": {"requests": {"cpu": "1"}}}], **spec}
    if on:
        full["nodeName"] = on
    return pod_from_api({
        "metadata": {"name": name, "namespace": namespace,
                     "creationTimestamp": "2024-05-01T12:00:00Z"},
        "spec": full,
        "status": {"phase": "Running" if on else "Pending"},
    })
