"""Sub-groups: each inside one domain of its own level, all inside the gang's domain.

A cluster of two blocks of two racks of two NVLink domains of two 4-GPU
nodes; a Topology names block, rack, NVLink domain and host, widest first.
Tensor-parallel groups of 8 GPUs each land in one NVLink domain, pipeline
stages each in one rack, all of them in one block; the gang is placed whole
or waits whole, taking nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import pytest

from gangsched.core.actions import MarkUnschedulable
from gangsched.core.kubeobjects.fields import ObjectError
from gangsched.core.kubeobjects.podgroups import SUB_GROUP_LABEL, group_from_api
from gangsched.core.kubeobjects.pods import pod_from_api
from gangsched.core.kubeobjects.status_bodies import MESSAGE_LIMIT
from gangsched.core.model.objects import (
    Flavor,
    Gang,
    GangKey,
    LevelRequest,
    Node,
    Pod,
    PodKey,
    Policy,
    QueueSpec,
    SubGroup,
)
from gangsched.core.placement.capacity import Capacity, Placement, Snapshot, Unplaceable
from gangsched.core.placement.preemption import Candidate, choose_victims_in_one_domain
from gangsched.core.placement.topology import domains_of, place_in_levels, with_levels
from gangsched.core.reasons import (
    DomainRoom,
    InSubGroup,
    LevelHeld,
    ShortOfMembers,
    SubGroupHeld,
    SubGroupUnknown,
    TopologyUnknown,
    causes,
    code_of,
    render,
)
from gangsched.core.reports.explain import closest_domains
from gangsched.core.stages.gangs import Member
from gangsched.core.state import State
from gangsched.core.step import step
from gangsched.core.view import StepView
from tests.unit.clusters import GPU, node, pod
from tests.unit.test_cycle import DEFAULT
from tests.unit.test_dra import (
    claim_obj,
    claiming,
    cliques,
    devices_of,
    held_by,
    inventory,
    request,
)
from tests.unit.test_step import CONFIG, Cluster, Group, Record

BLOCK, RACK, NVLINK, HOST = "block", "rack", "nvlink", "kubernetes.io/hostname"
LEVELS = (BLOCK, RACK, NVLINK, HOST)
TOPOLOGIES = {"fabric": LEVELS}
NODES = [f"n{i:02}" for i in range(16)]
"""Node ``n<i>``: NVLink domain nv<i//2>, rack r<i//4>, block b<i//8>."""


def where(name: str) -> dict[str, str]:
    index = int(name[1:])
    return {BLOCK: f"b{index // 8}", RACK: f"r{index // 4}", NVLINK: f"nv{index // 2}",
            HOST: name}


def fabric(taken: Mapping[str, int] | None = None) -> Snapshot:
    """Sixteen 4-GPU nodes, ``taken`` GPUs already in use on some."""
    nodes: list[Node] = [node(name, gpu=4, cpu="64", memory="256Gi", labels=where(name))
                         for name in NODES]
    pods = [pod(f"other/{name}", gpu=gpus, node_name=name)
            for name, gpus in (taken or {}).items()]
    return Snapshot.build(nodes, pods)


def member(name: str, sub: str | None, gpu: int = 2, node_name: str | None = None) -> Pod:
    placed = pod(f"ml/{name}", gpu=gpu, node_name=node_name)
    return replace(placed, sub_group=sub)


def training(subs: Sequence[SubGroup], pods: Sequence[Pod], *, required: str | None = BLOCK,
             bound: Sequence[Pod] = ()) -> Gang:
    gang = Gang(GangKey("ml/train"), len(pods) + len(bound), tuple(pods), bound=len(bound),
                bound_on=frozenset(p.node_name for p in bound if p.node_name),
                bound_in=tuple((p.sub_group, p.node_name)
                               for p in bound if p.node_name and p.sub_group),
                levels=LevelRequest("fabric", required, sub_groups=tuple(subs)))
    return with_levels(gang, TOPOLOGIES)


def tensor_parallel(groups: int = 2) -> Gang:
    """Groups of four 2-GPU workers, each group required in one NVLink domain."""
    subs = [SubGroup(f"tp{g}", 4, required=NVLINK) for g in range(groups)]
    return training(subs, [member(f"tp{g}-{i}", f"tp{g}") for g in range(groups)
                           for i in range(4)])


def place(capacity: Capacity, snapshot: Snapshot, gang: Gang) -> Placement | Unplaceable:
    return place_in_levels(capacity, gang, Policy.BINPACK,
                           lambda keys: domains_of(snapshot, keys))


def labels_of(placement: Placement, prefix: str, level: str) -> set[str]:
    return {where(str(node))[level] for key, node in placement.assignments
            if str(key).startswith(f"ml/{prefix}")}


def test_tensor_parallel_groups_each_land_in_one_nvlink_domain_inside_one_block() -> None:
    snapshot = fabric()
    placed = place(Capacity(snapshot), snapshot, tensor_parallel())
    assert isinstance(placed, Placement) and len(placed.assignments) == 8
    tp0, tp1 = labels_of(placed, "tp0", NVLINK), labels_of(placed, "tp1", NVLINK)
    assert len(tp0) == 1 and len(tp1) == 1 and tp0 != tp1
    assert len(labels_of(placed, "tp", BLOCK)) == 1
    block = labels_of(placed, "tp", BLOCK).pop()
    assert placed.level == LevelHeld(BLOCK, block, "", (
        SubGroupHeld("tp0", NVLINK, tp0.pop()), SubGroupHeld("tp1", NVLINK, tp1.pop())))


def test_pipeline_stages_each_land_in_one_rack_of_one_block() -> None:
    # Rack r0 has 4 GPUs free, r1 none, r2 and r3 all 16: a stage of 8 fits in r2 or r3
    # only, so every stage goes to block b1.
    snapshot = fabric({"n00": 4, "n01": 4, "n02": 4, **{f"n0{i}": 4 for i in range(4, 8)}})
    subs = [SubGroup(f"stage{s}", 2, required=RACK) for s in range(3)]
    pods = [member(f"stage{s}-{i}", f"stage{s}", gpu=4) for s in range(3) for i in range(2)]
    placed = place(Capacity(snapshot), snapshot, training(subs, pods))
    assert isinstance(placed, Placement)
    for s in range(3):
        assert len(labels_of(placed, f"stage{s}", RACK)) == 1
    assert labels_of(placed, "stage", BLOCK) == {"b1"}


def test_a_gang_whose_sub_group_no_domain_holds_waits_whole_taking_nothing() -> None:
    # Two GPUs taken on one node of every NVLink domain: 6 of 8 free in each, 24 in each
    # block. The 16 GPUs of the gang fit in one block, but no group of 8 fits one domain.
    snapshot = fabric({name: 2 for name in NODES[::2]})
    capacity = Capacity(snapshot)
    before = capacity.free_total()
    decision = place(capacity, snapshot, tensor_parallel())
    assert isinstance(decision, Unplaceable)
    assert [code_of(reason) for reason in causes(decision.reason)][:6] == [
        "NoDomainHolds", "InDomain", "InSubGroup", "NoDomainHolds", "InDomain", "DoesNotFit"]
    assert capacity.free_total() == before
    line = render(decision.reason)
    assert len(line) <= MESSAGE_LIMIT and "in block=b0: sub-group tp0" in line
    assert "in block=b1: sub-group tp0" in line, "the condition's message names every block"
    assert closest_domains(decision.reason)[:3] == (
        DomainRoom(BLOCK, "b0", GPU, 24, 32, 16), DomainRoom(BLOCK, "b1", GPU, 24, 32, 16),
        DomainRoom(NVLINK, "nv0", GPU, 6, 8, 8))

    plain = replace(tensor_parallel(), pending=tuple(
        replace(p, sub_group=None) for p in tensor_parallel().pending))
    spread = place(capacity, snapshot, plain)
    assert isinstance(spread, Placement) and len(labels_of(spread, "tp", NVLINK)) > 2


def test_a_sub_group_preferring_nvlink_lands_in_one_rack_when_no_nvlink_domain_holds_it() -> None:
    snapshot = fabric({name: 2 for name in NODES[::2]})
    subs = [SubGroup("tp0", 4, required=RACK, preferred=NVLINK)]
    placed = place(Capacity(snapshot), snapshot,
                   training(subs, [member(f"tp0-{i}", "tp0") for i in range(4)]))
    assert isinstance(placed, Placement)
    (rack,) = labels_of(placed, "tp0", RACK)
    assert placed.level is not None
    assert placed.level.sub_groups == (SubGroupHeld("tp0", RACK, rack),)


def test_a_sub_group_with_a_member_bound_stays_in_its_nvlink_domain() -> None:
    snapshot = fabric()
    bound = [member("tp0-0", "tp0", node_name="n11")]  # nv5, rack r2, block b1
    subs = [SubGroup("tp0", 4, required=NVLINK), SubGroup("tp1", 4, required=NVLINK)]
    pending = [member("tp0-1", "tp0"), member("tp0-2", "tp0"), member("tp0-3", "tp0"),
               *(member(f"tp1-{i}", "tp1") for i in range(4))]
    placed = place(Capacity(snapshot), snapshot, training(subs, pending, bound=bound))
    assert isinstance(placed, Placement)
    assert labels_of(placed, "tp0", NVLINK) == {"nv5"}
    assert labels_of(placed, "tp", BLOCK) == {"b1"}


def test_members_in_no_sub_group_land_inside_the_gangs_domain() -> None:
    snapshot = fabric()
    subs = [SubGroup("tp0", 4, required=NVLINK)]
    pods = [*(member(f"tp0-{i}", "tp0") for i in range(4)), member("driver", None, gpu=1)]
    placed = place(Capacity(snapshot), snapshot, training(subs, pods, required=RACK))
    assert isinstance(placed, Placement) and len(placed.assignments) == 5
    assert len({where(str(n))[RACK] for _, n in placed.assignments}) == 1


# ---- the PodGroup as read, and the gangs that wait for their sub-groups -----------------


def podgroup(topology: object) -> dict[str, object]:
    return {"metadata": {"name": "train", "namespace": "ml",
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"minMember": 8, "topology": topology}}


def test_a_podgroup_lists_its_sub_groups_and_their_levels() -> None:
    spec = group_from_api(podgroup({"name": "fabric", "required": BLOCK, "subGroups": [
        {"name": "tp0", "minMember": 4, "required": NVLINK},
        {"name": "tp1", "minMember": 4, "required": RACK, "preferred": NVLINK}]}),
        Flavor.GANGSCHED)
    assert spec.topology == LevelRequest("fabric", BLOCK, sub_groups=(
        SubGroup("tp0", 4, NVLINK), SubGroup("tp1", 4, RACK, NVLINK)))
    for bad in ({"name": "tp0", "minMember": 0}, {"minMember": 2},
                {"name": "tp0", "required": 3}):
        with pytest.raises(ObjectError, match=r"topology\.subGroups\[0\]"):
            group_from_api(podgroup({"name": "fabric", "subGroups": [bad]}), Flavor.GANGSCHED)


def stepped_with(sub_groups: list[dict[str, object]], labels: Sequence[str],
                 topologies: Mapping[str, tuple[str, ...]] = TOPOLOGIES
                 ) -> tuple[list[Unplaceable], list[Placement], list[MarkUnschedulable]]:
    spec = group_from_api(podgroup({"name": "fabric", "required": BLOCK,
                                    "subGroups": sub_groups}), Flavor.GANGSCHED)
    pods = [replace(member(f"w-{i}", label), gang=spec.key) for i, label in enumerate(labels)]
    cluster = Cluster(
        snapshot=fabric(),
        members=tuple(Member(p, spec.key) for p in pods),
        groups={spec.key: Group(spec.key, Flavor.GANGSCHED, "u1", replace(spec, min_member=1))},
        queues={DEFAULT: QueueSpec(DEFAULT)},
        pods={p.key: Record(p, f"uid-{p.key}") for p in pods},
        topologies=topologies,
    )
    stepped = step(State(), StepView(cluster), 100.0, CONFIG)
    marks = [a for a in stepped.actions if isinstance(a, MarkUnschedulable)]
    return list(stepped.result.unplaceable), list(stepped.result.placements), marks


TP = [{"name": "tp0", "minMember": 4, "required": NVLINK},
      {"name": "tp1", "minMember": 4, "required": NVLINK}]


def test_a_pod_naming_an_unknown_sub_group_keeps_its_gang_waiting_and_says_which() -> None:
    waiting, placed, marks = stepped_with(TP, ["tp0"] * 4 + ["tp1"] * 3 + ["tp2"])
    assert placed == []
    assert [w.reason for w in waiting] == [
        SubGroupUnknown(PodKey("ml/w-7"), "tp2", ("tp0", "tp1"))]
    assert len(marks) == 8 and all(mark.event for mark in marks)


def test_a_sub_group_short_of_members_or_at_an_unknown_level_keeps_its_gang_waiting() -> None:
    waiting, _, _ = stepped_with(TP, ["tp0"] * 4 + ["tp1"] * 3)
    assert [w.reason for w in waiting] == [
        InSubGroup("tp1", ShortOfMembers(GangKey("ml/train"), 3, 4))]
    waiting, _, _ = stepped_with(TP, ["tp0"] * 4 + ["tp1"] * 4,
                                 topologies={"fabric": (BLOCK, RACK, HOST)})
    assert [w.reason for w in waiting] == [
        TopologyUnknown("fabric", NVLINK, (BLOCK, RACK, HOST))]


def test_a_gang_of_sub_groups_is_placed_by_the_step_saying_where_each_landed() -> None:
    waiting, placed, _ = stepped_with(TP, ["tp0"] * 4 + ["tp1"] * 4)
    assert waiting == []
    (placement,) = placed
    assert placement.level is not None
    assert [sub.level for sub in placement.level.sub_groups] == [NVLINK, NVLINK]
    assert len({sub.value for sub in placement.level.sub_groups}) == 2


# ---- with devices: a claim's matchAttribute constraint holds inside the sub-group's domain


def test_sub_groups_and_claims_constrained_to_one_clique_hold_together() -> None:
    """Racks r0 (n-0, n-1) and r1 (n-2, n-3) of eight fake GPUs a node, cliques of four.
    In r0 two GPUs of every clique are taken: eight GPUs free, but no four in one clique,
    so each sub-group of two pods claiming a clique of four lands in r1."""
    names = ["n-0", "n-1", "n-2", "n-3"]
    taken = [claim_obj(f"other-{n}", request(count=4), status=held_by(n, (0, 1, 4, 5)))
             for n in names[:2]]
    claims = [claim_obj(f"c-{s}-{i}", request(count=4), one_clique=True)
              for s in range(2) for i in range(2)]
    base = Snapshot.build(
        [node(n, cpu="16", memory="64Gi",
              labels={BLOCK: "b0", RACK: f"r{index // 2}", HOST: n})
         for index, n in enumerate(names)], [])
    snapshot = replace(base, devices=inventory(names, [*taken, *claims]))
    pods = [replace(claiming(f"ns/tp{s}-{i}", f"c-{s}-{i}"),
                    sub_group=f"tp{s}")
            for s in range(2) for i in range(2)]
    subs = tuple(SubGroup(f"tp{s}", 2, required=RACK) for s in range(2))
    gang = with_levels(Gang(GangKey("ns/train"), 4, tuple(pods),
                            levels=LevelRequest("fabric", BLOCK, sub_groups=subs)),
                       {"fabric": (BLOCK, RACK, HOST)})
    placed = place(Capacity(snapshot), snapshot, gang)
    assert isinstance(placed, Placement)
    assert {str(n) for _, n in placed.assignments} == {"n-2", "n-3"}
    allocated = devices_of(placed)
    assert len(allocated) == 4
    for refs in allocated.values():
        assert len(refs) == 4 and len(cliques(refs)) == 1


# ---- preemption: victims that free one domain per sub-group ----------------------------


def test_preemption_for_sub_groups_frees_whole_nvlink_domains_inside_one_block() -> None:
    """Every node full with a one-pod gang of 4 GPUs; those on the first node of each
    NVLink domain of block b0 are the cheapest to evict. Evicting them frees 16 GPUs in
    b0, but 4 in each NVLink domain, where a sub-group of 8 needs one domain whole."""
    running = [pod(f"lo/{name}", gpu=4, node_name=name) for name in NODES]
    snapshot = Snapshot.build([node(name, gpu=4, cpu="64", memory="256Gi", labels=where(name))
                               for name in NODES], running)
    candidates = [Candidate(GangKey(str(p.key)), 0 if p.node_name in ("n00", "n02", "n04",
                                                                        "n06") else 1,
                            0.0, (p,)) for p in running]
    gang = tensor_parallel()
    chosen = choose_victims_in_one_domain(snapshot, gang, candidates,
                                          domains_of(snapshot, (BLOCK,)))
    assert chosen is not None and len(chosen.victims) == 4
    freed = {where(str(victim).split("/", 1)[1])[NVLINK] for victim in chosen.victims}
    assert len(freed) == 2, chosen.victims
    assert {where(str(n))[NVLINK] for _, n in chosen.placement.assignments} == freed


def test_a_pod_joins_a_sub_group_by_its_label() -> None:
    def raw(labels: dict[str, str]) -> dict[str, object]:
        return {"metadata": {"name": "w-0", "namespace": "ml", "labels": labels},
                "spec": {"containers": [{"name": "main"}]}}

    assert pod_from_api(raw({SUB_GROUP_LABEL: "tp0", "app": "train"})).sub_group == "tp0"
    assert pod_from_api(raw({"app": "train"})).sub_group is None
