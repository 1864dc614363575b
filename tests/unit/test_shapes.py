"""Shape indexes: which node groups can take how many pods of one shape, kept current."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gangsched.core.fit.nodefit import node_excluded_reason
from gangsched.core.model.objects import NodeName, Pod, SelectorRequirement, SelectorTerm
from gangsched.core.model.resources import Resources, is_extended
from gangsched.core.placement.shapes import FreeNodes, ShapeIndex
from gangsched.core.placement.snapshot import Snapshot
from tests.unit.clusters import PROPERTY, node, pod, pod_templates, small_snapshots


def room_by_hand(free: Resources, requests: Resources) -> int:
    """How many pods fit, by taking one more until one does not."""
    count = 0
    while requests.scale(count + 1).fits(free):
        count += 1
    return count


def stranded_by_hand(free: Resources, requests: Resources) -> int:
    return sum(amount for name, amount in free.amounts.items()
               if amount > 0 and is_extended(name) and requests.get(name) == 0)


def eligible_nodes(snapshot: Snapshot, nodes: FreeNodes, member: Pod) -> dict[NodeName, int]:
    """Room per node the pod's rules admit, node by node."""
    return {
        name: room_by_hand(nodes.free[name], member.requests)
        for name, usage in snapshot.nodes.items()
        if node_excluded_reason(member.rules, usage.node) is None
    }


def buckets(shape: ShapeIndex, nodes: FreeNodes) -> list[tuple[int, int]]:
    """(stranded devices, room) of each group, in the order spread visits them."""
    return [(stranded_by_hand(free, shape.requests), shape.room(free))
            for _, free in shape.for_spread()]


def check_against_nodes(snapshot: Snapshot, nodes: FreeNodes, member: Pod) -> None:
    shape = nodes.shape(member.requests, member.rules)
    rooms = eligible_nodes(snapshot, nodes, member)
    room, short = shape.counts()
    expected: dict[int, int] = {}
    for fits in rooms.values():
        if fits:
            expected[fits] = expected.get(fits, 0) + 1
    assert room == expected
    assert sum(short.values()) == sum(1 for fits in rooms.values() if not fits)
    for resource in short:
        assert any(member.requests.short_of(nodes.free[name]).get(resource)
                   for name, fits in rooms.items() if not fits)
    # Every group with room, and only those, in spread order: no devices
    # stranded first, then the roomiest.
    groups = list(shape.for_spread())
    admitted = {(nodes.index.kind_of[name], nodes.free[name])
                for name, fits in rooms.items() if fits}
    assert sorted(groups, key=str) == sorted(admitted, key=str)
    order = buckets(shape, nodes)
    assert order == sorted(order, key=lambda bucket: (bucket[0], -bucket[1]))
    for remaining in (1, 2, 3, 8):
        chosen = shape.best_for_binpack(remaining)
        if not rooms or not any(rooms.values()):
            assert chosen is None
            continue
        assert chosen is not None
        assert best_bucket(order, remaining) == (
            stranded_by_hand(chosen[1], member.requests), shape.room(chosen[1])
        )


def best_bucket(order: list[tuple[int, int]], remaining: int) -> tuple[int, int]:
    """Binpack's choice by hand: fewest stranded devices; then the tightest room that
    takes the whole run, else the largest room."""
    fewest = min(stranded for stranded, _ in order)
    rooms = [room for stranded, room in order if stranded == fewest]
    whole = [room for room in rooms if room >= remaining]
    return fewest, (min(whole) if whole else max(rooms))


@PROPERTY
@given(small_snapshots(), pod_templates())
def test_an_index_counts_every_node_the_rules_admit_by_room(
    snapshot: Snapshot, template: dict[str, object]
) -> None:
    member = pod("ns/p", **template)  # type: ignore[arg-type]
    check_against_nodes(snapshot, FreeNodes(snapshot.index), member)


@PROPERTY
@given(small_snapshots(), st.lists(pod_templates(), min_size=1, max_size=3),
       st.lists(st.tuples(st.integers(0, 5), st.sampled_from(["take", "give"]),
                          st.sampled_from(["250m", "1", "2"]), st.sampled_from([0, 1])),
                max_size=12))
def test_indexes_stay_current_as_nodes_fill_and_empty(
    snapshot: Snapshot, templates: list[dict[str, object]],
    moves: list[tuple[int, str, str, int]],
) -> None:
    """Indexes built before a pass agree with the nodes after any sequence of
    binds and releases, as a fresh look at every node would."""
    members = [pod(f"ns/p{i}", **template)  # type: ignore[arg-type]
               for i, template in enumerate(templates)]
    nodes = FreeNodes(snapshot.index)
    for member in members:
        nodes.shape(member.requests, member.rules)  # built now, kept current by moves
    names = sorted(snapshot.nodes)
    for number, direction, cpu, gpu in moves:
        amount = Resources.parse({"cpu": cpu, "nvidia.com/gpu": gpu, "pods": 1})
        nodes.take([(names[number % len(names)], amount)], sign=1 if direction == "take" else -1)
    for member in members:
        check_against_nodes(snapshot, nodes, member)


def test_moves_can_be_undone_exactly() -> None:
    snapshot = Snapshot.build([node("n0"), node("n1"), node("n2", cpu="8")], [])
    nodes = FreeNodes(snapshot.index)
    member = pod("ns/p", cpu="2")
    before = (dict(nodes.free), nodes.shape(member.requests, member.rules).counts())
    nodes.begin()
    nodes.take([(NodeName("n0"), member.requests), (NodeName("n2"), member.requests.scale(3))])
    assert nodes.shape(member.requests, member.rules).counts()[0] == {1: 2, 2: 1}
    nodes.undo()
    assert (dict(nodes.free), nodes.shape(member.requests, member.rules).counts()) == before


def test_a_rule_on_names_counts_only_the_nodes_it_names() -> None:
    snapshot = Snapshot.build([node(f"n{i}") for i in range(4)], [])
    only = SelectorTerm(match_fields=(SelectorRequirement("metadata.name", "In", ("n2",)),))
    member = pod("ns/p", cpu="1", affinity=[only])
    nodes = FreeNodes(snapshot.index)
    shape = nodes.shape(member.requests, member.rules)
    assert shape.counts() == ({4: 1}, {})
    group = shape.best_for_binpack(4)
    assert group is not None and shape.room(group[1]) == 4
    nodes.take([(NodeName("n1"), member.requests.scale(4))])  # another node fills up
    assert shape.counts() == ({4: 1}, {})
    nodes.take([(NodeName("n2"), member.requests.scale(4))])
    assert shape.counts() == ({}, {"cpu": 1})
    assert shape.best_for_binpack(1) is None
