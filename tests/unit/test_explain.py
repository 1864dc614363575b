"""``explain``'s core: the figures behind a waiting gang, from the cycle's own input and result."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from gangsched.core.model.objects import (
    Gang,
    GangKey,
    LevelRequest,
    Node,
    Pod,
    PodKey,
    Policy,
    QueueName,
    QueueSpec,
    SubGroup,
    Taint,
)
from gangsched.core.model.resources import Capability, Resources
from gangsched.core.placement.capacity import Snapshot
from gangsched.core.reasons import (
    DoesNotFit,
    DomainRoom,
    Gated,
    QueueNotLeaf,
    ShortOfMembers,
    SubGroupUnknown,
    TopologyUnknown,
    causes,
)
from gangsched.core.reports.explain import Explanation, Verdict, explain_gang
from gangsched.core.stages.cycle import CycleInput, run_cycle
from tests.unit.clusters import GPU, gang, node, pod


def explain(nodes: Sequence[Node], bound: Sequence[Pod], gangs: Sequence[Gang],
            key: str, *, children: Sequence[str] = (), **queue: object) -> Explanation:
    """Explain a gang of the default queue, made with ``queue``'s fields and ``children``."""
    default = QueueName("default")
    kids = {QueueName(name): QueueSpec(QueueName(name), parent=default) for name in children}
    inp = CycleInput(
        snapshot=Snapshot.build(nodes, bound), gangs=tuple(gangs),
        bound_requests={g.key: Resources.parse({"cpu": 1}) for g in gangs if g.bound},
        queues={default: QueueSpec(default, **queue), **kids},  # type: ignore[arg-type]
        admitted=frozenset(g.key for g in gangs if g.bound), waiting_since={}, now=0.0,
        policy=Policy.BINPACK,
    )
    explanation = explain_gang(inp, run_cycle(inp), GangKey(key))
    assert explanation is not None
    return explanation


def test_gpu_gang_blocked_names_the_closest_nodes_and_what_each_lacks() -> None:
    nodes = [node("gpu-0", gpu=1), node("gpu-1", gpu=1),
             node("tainted", gpu=1, taints=[Taint("gpu", "busy", "NoSchedule")])]
    blocker = pod("ns/blocker", gpu=1, node_name="gpu-0")
    train = gang("ns/train", [pod(f"ns/w{i}", gpu=1) for i in range(2)])
    e = explain(nodes, [blocker], [train], "ns/train")

    assert e.verdict is Verdict.WAITING
    assert isinstance(e.reason, DoesNotFit) and e.reason.shapes[0].requests.get(GPU) == 1
    [shape] = e.shapes
    assert (shape.pending, shape.room, shape.short) == (2, 1, 1)
    assert [(f.node, f.fits) for f in shape.closest] == [("gpu-1", 1), ("gpu-0", 0)]
    assert shape.closest[1].lacks.get(GPU) == 1
    assert shape.excluded == {"taint gpu=busy:NoSchedule": 1}
    assert e.remedies[0].startswith("room for 1 more pod(s) of")
    assert "1 nvidia.com/gpu freed on gpu-0 (it lacks only that)" in e.remedies[0], e.remedies


def test_a_gang_no_node_may_take_says_which_rules_keep_it_out() -> None:
    nodes = [node("n0", taints=[Taint("dedicated", "infra", "NoSchedule")]),
             node("n1", unschedulable=True)]
    e = explain(nodes, [], [gang("ns/job", [pod("ns/p0")])], "ns/job")
    [shape] = e.shapes
    assert shape.closest == ()
    assert shape.excluded == {"cordoned": 1, "taint dedicated=infra:NoSchedule": 1}
    assert e.remedies[0].startswith("no node may take pods of")


def test_a_gang_that_fits_is_placed_and_says_where() -> None:
    e = explain([node("n0", cpu="4")], [], [gang("ns/job", [pod("ns/p0"), pod("ns/p1")])],
                "ns/job")
    assert e.verdict is Verdict.PLACED
    assert sorted(n for _, n in e.assignments) == ["n0", "n0"]
    assert e.remedies == ("it fits now: a running gangsched binds it in its next cycle",)


def test_room_reserved_for_an_admitted_gang_is_named_with_its_holder() -> None:
    # ns/spark is admitted with 3 cpu of minResources and one cpu bound: it holds 2 more.
    spark = replace(gang("ns/spark", [], min_member=1, bound=1),
                    min_resources=Resources.parse({"cpu": 3}))
    driver = pod("ns/spark-driver", node_name="n0")
    other = gang("ns/other", [pod(f"ns/o{i}") for i in range(2)])
    e = explain([node("n0", cpu="3")], [driver], [spark, other], "ns/other")
    assert e.verdict is Verdict.WAITING
    assert [(k, r.get("cpu")) for k, r in e.reserved_by_others] == [("ns/spark", 2000)]
    assert any("room is held for admitted gangs (ns/spark)" in r for r in e.remedies), e.remedies


def test_a_queue_cap_in_the_way_is_named() -> None:
    e = explain([node("n0", cpu="8")], [], [gang("ns/job", [pod("ns/p0"), pod("ns/p1")])],
                "ns/job", capability=Capability.parse({"cpu": 1}))
    assert e.verdict is Verdict.WAITING
    assert any("at its capability" in r for r in e.remedies), (e.reason, e.remedies)


def test_a_gang_of_a_queue_with_child_queues_is_told_to_use_a_leaf() -> None:
    e = explain([node("n0", cpu="8")], [], [gang("ns/job", [pod("ns/p0")])], "ns/job",
                children=["q2", "q1"])
    assert e.verdict is Verdict.WAITING
    assert e.reason == QueueNotLeaf(QueueName("default"), (QueueName("q1"), QueueName("q2")))
    assert e.remedies == ("queue default has child queues and only leaf queues take gangs: "
                          "submit it to one of them (the PodGroup's spec.queue, or a lone "
                          "pod's scheduling.gangsched.io/queue annotation)",)


def _room_advice(e: Explanation) -> list[str]:
    return [r for r in e.remedies if "room" in r and "would not let it run" not in r]


def test_a_gang_waiting_only_for_its_gates_is_not_told_it_needs_room() -> None:
    gated = [replace(pod(f"ns/w{i}"), gates=("example.com/quota",)) for i in range(2)]
    e = explain([node("n0", cpu="4")], [], [gang("ns/job", gated)], "ns/job")
    assert isinstance(e.reason, Gated), e.reason
    assert _room_advice(e) == [], e.remedies
    assert len(e.remedies) == 1


def test_a_gang_short_of_members_is_told_to_wait_for_them_not_for_room() -> None:
    e = explain([node("n0", cpu="1")], [],
                [gang("ns/job", [pod("ns/w0"), pod("ns/w1")], min_member=4)], "ns/job")
    assert e.reason is not None
    assert any(isinstance(c, ShortOfMembers) and (c.has, c.needs) == (2, 4)
               for c in causes(e.reason)), e.reason
    assert _room_advice(e) == [], e.remedies


def test_freeing_the_nearest_node_is_offered_for_one_of_several_missing_pods() -> None:
    nodes = [node("gpu-0", gpu=1), node("gpu-1", gpu=2)]
    blockers = [pod("ns/b0", gpu=1, node_name="gpu-0"), pod("ns/b1", gpu=1, node_name="gpu-1")]
    train = gang("ns/train", [pod(f"ns/w{i}", gpu=1) for i in range(3)])
    e = explain(nodes, blockers, [train], "ns/train")
    [shape] = e.shapes
    assert shape.short == 2
    [advice] = _room_advice(e)
    assert "freed on gpu-0 (it lacks only that) would make room for one of them" in advice


def test_a_gang_naming_a_missing_topology_is_told_to_create_it_not_to_free_room() -> None:
    request = LevelRequest("fabric", required="example.com/rack")
    train = replace(gang("ns/train", [pod("ns/w0", gpu=2)]), levels=request)
    e = explain([node("gpu-0", gpu=1)], [], [train], "ns/train")
    assert e.reason == TopologyUnknown("fabric")
    assert len(e.remedies) == 1 and "Topology fabric" in e.remedies[0], e.remedies


def test_a_gang_no_domain_holds_is_told_the_closest_domains_at_each_level_tried() -> None:
    """Racks r0 and r1 of block b0, r2 of block b1, two 8-GPU nodes each; a gang of 24 GPUs
    that prefers a rack and requires a block. No rack holds 24 (each has 16), and no
    block: b0 has 10 free, b1 12."""
    racks = {"r0": "b0", "r1": "b0", "r2": "b1"}
    nodes = [node(f"{rack}-{i}", gpu=8, labels={"block": block, "rack": rack})
             for rack, block in racks.items() for i in range(2)]
    taken = {"r0-0": 8, "r0-1": 6, "r1-0": 0, "r1-1": 8, "r2-0": 4, "r2-1": 0}
    bound = [pod(f"other/{name}", gpu=gpus, node_name=name)
             for name, gpus in taken.items() if gpus]
    request = LevelRequest("fabric", required="block", preferred="rack",
                           levels=("block", "rack"))
    train = replace(gang("ns/train", [pod(f"ns/w{i}", gpu=8) for i in range(3)]),
                    levels=request, topology_keys=("block",))
    e = explain(nodes, bound, [train], "ns/train")
    assert e.verdict is Verdict.WAITING
    assert e.closest_domains == (
        DomainRoom("rack", "r2", GPU, 12, 16, 24), DomainRoom("rack", "r1", GPU, 8, 16, 24),
        DomainRoom("rack", "r0", GPU, 2, 16, 24),
        DomainRoom("block", "b1", GPU, 12, 16, 24), DomainRoom("block", "b0", GPU, 10, 32, 24))
    assert e.closest_domains[0].text() == "rack r2: 12 of 16 nvidia.com/gpu free, 24 asked"


def test_a_pod_naming_an_unknown_sub_group_is_told_to_fix_its_label_not_to_free_room() -> None:
    request = LevelRequest("fabric", levels=("rack",),
                           sub_groups=(SubGroup("tp0", 1, required="rack"),))
    stray = replace(pod("ns/w0", gpu=2), sub_group="tp9")
    train = replace(gang("ns/train", [stray]), levels=request)
    e = explain([node("gpu-0", gpu=1)], [], [train], "ns/train")
    assert e.reason == SubGroupUnknown(PodKey("ns/w0"), "tp9", ("tp0",))
    assert len(e.remedies) == 1 and "sub-group" in e.remedies[0], e.remedies
