"""Topology in levels: a gang in the tightest level that holds it, or waiting whole.

A cluster of two blocks of two racks of two 8-GPU nodes; a Topology names
block, rack and host, widest first. A gang preferring a rack lands in one
rack while one holds it, else in one block, else anywhere; a gang requiring
a rack lands in one or waits, naming the racks that came closest.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gangsched.core.kubeobjects.fields import ObjectError
from gangsched.core.kubeobjects.podgroups import group_from_api
from gangsched.core.kubeobjects.queues import topology_levels_from_api
from gangsched.core.model.objects import (
    Flavor,
    Gang,
    GangKey,
    LevelRequest,
    Node,
    Policy,
    QueueSpec,
)
from gangsched.core.placement.capacity import Capacity, Placement, Snapshot, Unplaceable
from gangsched.core.placement.topology import (
    domains_of,
    place_in_levels,
    place_in_one_domain,
    preferred_keys,
    with_levels,
)
from gangsched.core.reasons import DoesNotFit, LevelHeld, NoDomainHolds, TopologyUnknown
from gangsched.core.stages.gangs import Member
from gangsched.core.state import State
from gangsched.core.step import step
from gangsched.core.view import StepView
from tests.unit import test_dra_extended as extended
from tests.unit.clusters import GPU, gang, node, pod, workers
from tests.unit.test_cycle import DEFAULT
from tests.unit.test_step import CONFIG, Cluster, Group, Record

BLOCK, RACK, HOST = "block", "rack", "kubernetes.io/hostname"
LEVELS = (BLOCK, RACK, HOST)
TOPOLOGIES = {"fabric": LEVELS}
RACKS = {"r0": "b0", "r1": "b0", "r2": "b1", "r3": "b1"}


def fabric(taken: Sequence[int] = (0,) * 8) -> Snapshot:
    """Two 8-GPU nodes per rack, ``taken`` GPUs already in use on each node in turn."""
    nodes: list[Node] = []
    pods = []
    for index, (rack, block) in enumerate((r, b) for r, b in RACKS.items() for _ in range(2)):
        name = f"{rack}-{index % 2}"
        nodes.append(node(name, gpu=8, cpu="64", memory="256Gi",
                          labels={BLOCK: block, RACK: rack, HOST: name}))
        if taken[index]:
            pods.append(pod(f"other/{name}", gpu=taken[index], node_name=name))
    return Snapshot.build(nodes, pods)


def levelled(gpus: int, *, required: str | None = None, preferred: str | None = None) -> Gang:
    """A gang of 8-GPU workers (one of 4 GPUs for an odd half)."""
    pods = workers("ml/w", gpus // 8, gpu=8) + workers("ml/h", 1, gpu=gpus % 8) * bool(gpus % 8)
    gang = Gang(GangKey("ml/train"), len(pods), tuple(pods),
                levels=LevelRequest("fabric", required, preferred))
    return with_levels(gang, TOPOLOGIES)


def place(snapshot: Snapshot, gang: Gang) -> Placement | Unplaceable:
    return place_in_levels(Capacity(snapshot), gang, Policy.BINPACK,
                           lambda keys: domains_of(snapshot, keys))


def racks_used(placement: Placement) -> set[str]:
    return {str(name).split("-")[0] for _, name in placement.assignments}


def test_a_gang_preferring_a_rack_lands_in_one_rack_while_one_holds_it() -> None:
    placed = place(fabric(), levelled(16, preferred=RACK))
    assert isinstance(placed, Placement)
    assert len(racks_used(placed)) == 1
    assert placed.level == LevelHeld(RACK, racks_used(placed).pop(), RACK)


def test_a_gang_preferring_a_rack_lands_in_one_block_when_no_rack_holds_it() -> None:
    # No rack has two whole nodes free; each block has two, one per rack: b0 with 24 GPUs
    # free, b1 with 20. The gang of 16 goes where it leaves the least room, b1.
    placed = place(fabric((4, 0, 4, 0, 6, 0, 0, 6)), levelled(16, preferred=RACK))
    assert isinstance(placed, Placement)
    assert {RACKS[rack] for rack in racks_used(placed)} == {"b1"}
    assert placed.level == LevelHeld(BLOCK, "b1", RACK)


def test_a_gang_no_block_holds_spreads_and_says_so_unless_a_level_is_required() -> None:
    taken = (0, 8, 8, 8, 0, 8, 8, 4)  # free: 8 in block b0, 12 in b1
    placed = place(fabric(taken), levelled(20, preferred=RACK))
    assert isinstance(placed, Placement)
    assert {RACKS[rack] for rack in racks_used(placed)} == {"b0", "b1"}
    assert placed.level == LevelHeld("", "", RACK)

    waits = place(fabric(taken), levelled(20, required=BLOCK, preferred=RACK))
    assert isinstance(waits, Unplaceable) and isinstance(waits.reason, NoDomainHolds)


def test_a_gang_requiring_a_rack_waits_whole_naming_the_closest_racks() -> None:
    taken = (4, 0, 8, 0, 6, 6, 8, 8)  # free per rack: r0 12, r1 8, r2 4, r3 0
    decision = place(fabric(taken), levelled(16, required=RACK))
    assert isinstance(decision, Unplaceable)
    reason = decision.reason
    assert isinstance(reason, NoDomainHolds) and reason.domains == 4
    assert [shown.domain for shown in reason.shown] == [
        "block=b0,rack=r0", "block=b0,rack=r1", "block=b1,rack=r2"]


def test_among_racks_that_hold_the_gang_the_fullest_is_chosen() -> None:
    placed = place(fabric((0, 0, 0, 2, 0, 0, 0, 0)), levelled(12, preferred=RACK))
    assert isinstance(placed, Placement) and racks_used(placed) == {"r1"}


def test_preferred_levels_go_from_the_preferred_one_out_to_the_required_one() -> None:
    request = LevelRequest("fabric", BLOCK, HOST, LEVELS)
    assert preferred_keys(request) == ((BLOCK, RACK, HOST), (BLOCK, RACK))
    assert preferred_keys(LevelRequest("fabric", None, RACK, LEVELS)) == ((BLOCK, RACK), (BLOCK,))
    assert preferred_keys(LevelRequest("fabric", RACK, BLOCK, LEVELS)) == ()


@given(taken=st.lists(st.sampled_from((0, 2, 4, 6, 8)), min_size=8, max_size=8),
       gpus=st.sampled_from((8, 12, 16, 24, 32)))
def test_a_preferred_rack_is_taken_whenever_one_holds_the_gang(
    taken: list[int], gpus: int,
) -> None:
    snapshot = fabric(taken)
    some_rack_holds = any(_fits_alone(snapshot, gpus, rack) for rack in RACKS)
    placed = place(snapshot, levelled(gpus, preferred=RACK))
    if some_rack_holds:
        assert isinstance(placed, Placement) and len(racks_used(placed)) == 1
        assert placed.level is not None and placed.level.level == RACK
    elif isinstance(placed, Placement):
        assert placed.level is not None and placed.level.level != RACK


@given(taken=st.lists(st.sampled_from((0, 2, 4, 6, 8)), min_size=8, max_size=8),
       gpus=st.sampled_from((8, 12, 16, 24)), preferred=st.sampled_from((None, HOST)))
def test_a_required_rack_is_never_spread_over(
    taken: list[int], gpus: int, preferred: str | None,
) -> None:
    snapshot = fabric(taken)
    placed = place(snapshot, levelled(gpus, required=RACK, preferred=preferred))
    some_rack_holds = any(_fits_alone(snapshot, gpus, rack) for rack in RACKS)
    assert isinstance(placed, Placement) == some_rack_holds
    if isinstance(placed, Placement):
        assert len(racks_used(placed)) == 1


def _fits_alone(snapshot: Snapshot, gpus: int, rack: str) -> bool:
    """Whether the gang's pods fit on the rack's two nodes, by their free GPUs."""
    free = sorted((snapshot.nodes[name].free.get(GPU)
                   for name in snapshot.nodes if name.startswith(rack)), reverse=True)
    sizes = [8] * (gpus // 8) + ([gpus % 8] if gpus % 8 else [])
    for size in sorted(sizes, reverse=True):
        fitting = [i for i, room in enumerate(free) if room >= size]
        if not fitting:
            return False
        best = min(fitting, key=lambda i: free[i])
        free[best] -= size
    return True


# ---- the PodGroup and the Topology as read, and the reasons they give -------------------


def podgroup(topology: object) -> dict[str, object]:
    return {"metadata": {"name": "train", "namespace": "ml",
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"minMember": 2, "topology": topology}}


def test_a_podgroup_names_a_topology_and_its_levels() -> None:
    spec = group_from_api(podgroup({"name": "fabric", "required": BLOCK, "preferred": RACK}),
                          Flavor.GANGSCHED)
    assert spec.topology == LevelRequest("fabric", BLOCK, RACK)
    with pytest.raises(ObjectError, match=r"topology\.preferred"):
        group_from_api(podgroup({"name": "fabric", "preferred": 3}), Flavor.GANGSCHED)


def test_a_topology_lists_its_levels_widest_first() -> None:
    body = {"metadata": {"name": "fabric"},
            "spec": {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}, {"nodeLabel": HOST}]}}
    assert topology_levels_from_api(body) == LEVELS


def two_workers(topology: Mapping[str, object], snapshot: Snapshot,
                topologies: Mapping[str, tuple[str, ...]]) -> Cluster:
    """A PodGroup of two 8-GPU workers asking ``topology``, on ``snapshot``."""
    spec = group_from_api(podgroup(topology), Flavor.GANGSCHED)
    pods = [replace(pod(f"ml/w-{i}", gpu=8), gang=spec.key) for i in range(2)]
    return Cluster(
        snapshot=snapshot,
        members=tuple(Member(p, spec.key) for p in pods),
        groups={spec.key: Group(spec.key, Flavor.GANGSCHED, "u1", spec)},
        queues={DEFAULT: QueueSpec(DEFAULT)},
        pods={p.key: Record(p, f"uid-{p.key}") for p in pods},
        topologies=topologies,
    )


@pytest.mark.parametrize(("topologies", "expected"), [
    ({}, TopologyUnknown("fabric")),
    ({"fabric": (BLOCK, HOST)}, TopologyUnknown("fabric", RACK, (BLOCK, HOST))),
])
def test_a_gang_naming_a_missing_topology_or_level_waits_saying_which(
    topologies: dict[str, tuple[str, ...]], expected: TopologyUnknown,
) -> None:
    cluster = two_workers({"name": "fabric", "preferred": RACK}, fabric(), topologies)
    stepped = step(State(), StepView(cluster), 100.0, CONFIG)
    (waiting,) = stepped.result.unplaceable
    assert waiting.reason == expected

    found = step(State(), StepView(replace(cluster, topologies=TOPOLOGIES)), 100.0, CONFIG)
    assert [p.level for p in found.result.placements] == [LevelHeld(RACK, "r0", RACK)]


def test_a_gang_only_the_last_rack_holds_lands_there() -> None:
    # Every rack but r3 is full or nearly: racks passed over must not hide the one that fits.
    placed = place(fabric((8, 8, 4, 8, 8, 4, 0, 0)), levelled(16, required=RACK))
    assert isinstance(placed, Placement) and racks_used(placed) == {"r3"}
    assert placed.level == LevelHeld(RACK, "r3", "")


# ---- domains passed over for their free room ---------------------------------------------


def test_a_rack_holding_the_gang_s_minimum_is_searched_though_short_of_all_its_pods() -> None:
    # Only r3 has room, 4 GPUs on each node: the two 2-GPU workers the minimum needs fit
    # there, though not the 8-GPU one beside them nor all three.
    pods = (*workers("ml/big", 1, gpu=8), *workers("ml/small", 2, gpu=2))
    subject = with_levels(Gang(GangKey("ml/train"), 2, pods,
                            levels=LevelRequest("fabric", RACK, None)), TOPOLOGIES)
    placed = place(fabric((8, 8, 8, 8, 8, 8, 4, 4)), subject)
    assert isinstance(placed, Placement) and racks_used(placed) == {"r3"}
    assert sorted(str(pod) for pod, _ in placed.assignments) == ["ml/small-0", "ml/small-1"]


def test_a_node_another_scheduler_overcommitted_takes_no_room_from_its_rack() -> None:
    # r1-0 runs 80 CPUs of another scheduler's pods on 64: its rack still has r1-1's 64.
    nodes = [node(name, cpu="64", labels={BLOCK: "b0", RACK: name[:2], HOST: name})
             for name in ("r0-0", "r0-1", "r1-0", "r1-1")]
    busy = [pod("other/r0-0", cpu="40", node_name="r0-0"),
            pod("other/r0-1", cpu="40", node_name="r0-1"),
            pod("other/r1-0", cpu="80", node_name="r1-0")]
    snapshot = Snapshot.build(nodes, busy)
    subject = with_levels(Gang(GangKey("ml/train"), 1, tuple(workers("ml/w", 1, cpu="60")),
                            levels=LevelRequest("fabric", RACK, None)), TOPOLOGIES)
    placed = place(snapshot, subject)
    assert isinstance(placed, Placement) and dict(placed.assignments) == {"ml/w-0": "r1-1"}


def test_a_rack_with_room_enough_in_pieces_is_searched_and_named_with_its_refusal() -> None:
    # r0 has 8 GPUs free, 4 on each node: enough in sum for an 8-GPU worker, not on one node.
    taken = (4, 4, 8, 8, 8, 8, 8, 0)
    placed = place(fabric(taken), levelled(8, required=RACK))
    assert isinstance(placed, Placement) and racks_used(placed) == {"r3"}

    waits = place(fabric((*taken[:7], 8)), levelled(8, required=RACK))
    assert isinstance(waits, Unplaceable) and isinstance(waits.reason, NoDomainHolds)
    # r0 searched and refused; r1 and r2, passed over for their room, searched to say why.
    assert [(shown.domain, shown.cause.shapes[0].short)
            for shown in waits.reason.shown if isinstance(shown.cause, DoesNotFit)] == [
        ("block=b0,rack=r0", {GPU: 2}), ("block=b0,rack=r1", {GPU: 2}),
        ("block=b1,rack=r2", {GPU: 2})]
    assert [(room.value, room.free, room.asked) for room in waits.reason.closest] == [
        ("r0", 8, 8), ("r1", 0, 8), ("r2", 0, 8)]


def test_a_rack_whose_devices_serve_a_resource_its_nodes_do_not_list_is_searched() -> None:
    # The nodes list no example.com/gpu; a DeviceClass serves it from their devices.
    served = extended.snapshot(["n-0", "n-1"])
    nodes = [replace(usage.node, labels=((RACK, "r0"),)) for usage in served.nodes.values()]
    snapshot = replace(Snapshot.build(nodes, []), devices=served.devices)
    pods = [extended.gpu_pod(f"w-{i}") for i in range(2)]
    confined = replace(gang("ns/g", pods), topology_keys=(RACK,))
    decision = place_in_one_domain(Capacity(snapshot), confined, Policy.BINPACK,
                                   domains_of(snapshot, (RACK,)))
    assert isinstance(decision, Placement) and len(decision.claims) == 2
