"""Gang placement: all or nothing, policies, reasons, capacity bookkeeping."""

from __future__ import annotations

from typing import Any

import pytest

from gangsched.core.model.objects import (
    Gang,
    GangKey,
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
from gangsched.core.placement.capacity import (
    Capacity,
    Placement,
    Snapshot,
    Unplaceable,
    apply,
    place_gang,
    remove,
)
from gangsched.core.reasons import DoesNotFit, MembersMissing, NoNodes, Reason
from tests.unit.clusters import (
    GPU,
    assigned,
    gang,
    node,
    nodes_used,
    overcommitted,
    pod,
    workers,
)


def snapshot(*nodes: object, pods: tuple[Pod, ...] = ()) -> Snapshot:
    return Snapshot.build(nodes, pods)  # type: ignore[arg-type]


def gpu_pod(key: str, gpus: int, **kwargs: object) -> Pod:
    return pod(key, cpu="1", memory="1Gi", gpu=gpus, **kwargs)  # type: ignore[arg-type]


def holder(name: str, on: str, *, gpu: int = 0, cpu: str = "0") -> Pod:
    """A pod of another scheduler already using part of a node."""
    return pod(f"other/{name}", cpu=cpu, memory="0", gpu=gpu, node_name=on)


# ---------------------------------------------------------------- snapshot


def test_snapshot_sums_bound_non_terminal_pods_on_known_nodes() -> None:
    s = snapshot(
        node("n1", cpu="4"),
        pods=(
            pod("a/1", cpu="1", node_name="n1"),
            pod("a/2", cpu="500m", node_name="n1"),
            pod("a/3", cpu="2", node_name="n1", terminal=True),
            pod("a/4", cpu="2", node_name="gone"),
            pod("a/5", cpu="2"),
        ),
    )
    assert s.nodes[NodeName("n1")].requested.get("cpu") == 1500
    assert s.free(NodeName("n1")).get("cpu") == 2500
    assert set(s.nodes) == {"n1"}


# ---------------------------------------------------------------- all or nothing


def test_gang_is_placed_whole_or_not_at_all() -> None:
    s = snapshot(node("n1", cpu="2"), node("n2", cpu="1"))
    fits = gang("ns/a", workers("ns/a", 3, cpu="1"))
    too_big = gang("ns/b", workers("ns/b", 4, cpu="1"))
    placement = place_gang(s, fits)
    assert isinstance(placement, Placement)
    assert len(placement.assignments) == 3
    decision = place_gang(s, too_big)
    assert isinstance(decision, Unplaceable)


def test_unplaceable_consumes_nothing() -> None:
    s = snapshot(node("n1", cpu="2"), node("n2", cpu="1"))
    capacity = Capacity.from_snapshot(s)
    before = {name: capacity.free(name) for name in s.nodes}
    assert isinstance(capacity.place(gang("ns/b", workers("ns/b", 4, cpu="1"))), Unplaceable)
    assert {name: capacity.free(name) for name in s.nodes} == before


def test_identical_waiting_gangs_report_the_room_left_when_each_was_tried() -> None:
    """Gangs of one shape that do not fit share their figures only while no node's room
    moved: one placed in between changes what the next is told."""
    capacity = Capacity.from_snapshot(snapshot(node("n1", cpu="2"), node("n2", cpu="2")))

    def room_told(key: str) -> dict[int, int]:
        decision = capacity.place(gang(key, workers(key, 5, cpu="1")))
        assert isinstance(decision, Unplaceable) and isinstance(decision.reason, DoesNotFit)
        return dict(decision.reason.shapes[0].room)

    first, second = room_told("ns/a"), room_told("ns/b")
    assert first == second == {2: 2}
    assert isinstance(capacity.place(gang("ns/c", workers("ns/c", 1, cpu="1"))), Placement)
    assert room_told("ns/d") == {2: 1, 1: 1}


def test_bound_members_count_toward_min_member() -> None:
    s = snapshot(node("n1", cpu="2"))
    # minMember 4 with 2 already running: the 2 pending ones suffice
    decision = place_gang(s, gang("ns/a", workers("ns/a", 2, cpu="1"), min_member=4, bound=2))
    assert isinstance(decision, Placement)
    assert len(decision.assignments) == 2


def test_too_few_pending_members_waits_with_a_reason_that_does_not_count_them() -> None:
    s = snapshot(node("n1", cpu="8"))
    decision = place_gang(s, gang("ns/a", workers("ns/a", 2), min_member=4, bound=1))
    assert isinstance(decision, Unplaceable)
    more = place_gang(s, gang("ns/a", workers("ns/a", 1), min_member=4, bound=1))
    assert isinstance(more, Unplaceable) and more.reason == decision.reason
    assert decision.reason == MembersMissing(GangKey("ns/a"), need=3, min_member=4, bound=1)


def test_replacement_member_of_running_gang_needs_no_gang_check() -> None:
    s = snapshot(node("n1", cpu="1"))
    decision = place_gang(s, gang("ns/a", workers("ns/a", 2), min_member=3, bound=3))
    assert isinstance(decision, Placement)
    assert len(decision.assignments) == 1  # one of the two fits; that is enough
    nothing = place_gang(s, gang("ns/a", workers("ns/a", 1, cpu="2"), min_member=3, bound=3))
    assert isinstance(nothing, Unplaceable)


def test_pods_beyond_min_member_are_placed_when_they_fit() -> None:
    s = snapshot(node("n1", cpu="3"))
    decision = place_gang(s, gang("ns/a", workers("ns/a", 5, cpu="1"), min_member=2))
    assert isinstance(decision, Placement)
    assert len(decision.assignments) == 3


def test_extra_pods_never_cost_the_gang_its_minimum() -> None:
    # A big optional pod placed first would leave room for only one small one.
    s = snapshot(node("n1", cpu="3", memory="4Gi"))
    members = [
        pod("ns/small-0", cpu="500m", memory="512Mi"),
        pod("ns/small-1", cpu="500m", memory="512Mi"),
        pod("ns/big", cpu="3", memory="2Gi"),
    ]
    decision = place_gang(s, gang("ns/a", members, min_member=2))
    assert isinstance(decision, Placement)
    assert set(assigned(decision)) == {"ns/small-0", "ns/small-1"}


def test_heterogeneous_members_found_where_greedy_fails() -> None:
    # Only one arrangement works: the parameter server on n2, a worker on each of n0, n1.
    s = snapshot(
        node("n0", cpu="3", memory="2Gi"),
        node("n1", cpu="1", memory="4Gi"),
        node("n2", cpu="2", memory="1Gi"),
    )
    members = [pod("ns/ps", cpu="2", memory="1Gi"),
               pod("ns/w-0", cpu="1", memory="2Gi"), pod("ns/w-1", cpu="1", memory="2Gi")]
    assert isinstance(Capacity(s, budget=0).place(gang("ns/tf", members)), Unplaceable)
    decision = place_gang(s, gang("ns/tf", members))
    assert isinstance(decision, Placement)
    where = assigned(decision)
    assert where["ns/ps"] == "n2"
    assert {where["ns/w-0"], where["ns/w-1"]} == {"n0", "n1"}
    assert not overcommitted(s, decision, members)


# ---------------------------------------------------------------- filters


def test_pods_only_go_where_rules_allow() -> None:
    s = snapshot(
        node("tainted", gpu=8, taints=[Taint("gpu", "busy", "NoSchedule")]),
        node("zone-b", gpu=8, labels={"zone": "b"}),
        node("zone-a", gpu=8, labels={"zone": "a"}),
    )
    selected = [gpu_pod(f"ns/s-{i}", 1, selector={"zone": "a"}) for i in range(2)]
    decision = place_gang(s, gang("ns/s", selected))
    assert isinstance(decision, Placement)
    assert nodes_used(decision) == {"zone-a"}
    tolerant = [gpu_pod(f"ns/t-{i}", 8, tolerations=[Toleration("gpu", "Exists", "", "")])
                for i in range(3)]
    decision = place_gang(s, gang("ns/t", tolerant))
    assert isinstance(decision, Placement)
    assert nodes_used(decision) == {"tainted", "zone-a", "zone-b"}


def test_match_fields_pins_pods_to_named_nodes() -> None:
    s = snapshot(node("n1", cpu="2"), node("n2", cpu="2"), node("n3", cpu="2"))
    pinned = SelectorTerm(match_fields=(SelectorRequirement("metadata.name", "In", ("n2",)),))
    members = [pod(f"ns/p-{i}", cpu="1", affinity=[pinned]) for i in range(2)]
    decision = place_gang(s, gang("ns/a", members))
    assert isinstance(decision, Placement)
    assert nodes_used(decision) == {"n2"}
    three = [pod(f"ns/q-{i}", cpu="1", affinity=[pinned]) for i in range(3)]
    refused = place_gang(s, gang("ns/b", three))
    assert isinstance(refused, Unplaceable)
    assert does_not_fit(refused.reason).shapes[0].excluded == {"node affinity": 2}


def hosts(count: int, cpu: str = "2") -> Snapshot:
    """Nodes labelled as every real node is: with their own hostname."""
    return snapshot(*(node(f"n{i}", cpu=cpu, labels={"kubernetes.io/hostname": f"n{i}",
                                                     "zone": "a"})
                      for i in range(count)))


def test_nodes_differing_only_in_hostname_are_one_kind() -> None:
    s = hosts(50)
    assert len(s.index.kinds) == 1


@pytest.mark.parametrize("by", ["nodeSelector", "affinity"])
def test_a_hostname_rule_still_picks_its_one_node(by: str) -> None:
    s = hosts(3)
    wanted = SelectorTerm(match_expressions=(
        SelectorRequirement("kubernetes.io/hostname", "In", ("n2",)),))
    rules: dict[str, Any] = (
        {"selector": {"kubernetes.io/hostname": "n2"}} if by == "nodeSelector"
        else {"affinity": [wanted]})
    members = [pod(f"ns/p-{i}", cpu="1", **rules) for i in range(2)]
    decision = place_gang(s, gang("ns/a", members))
    assert isinstance(decision, Placement)
    assert nodes_used(decision) == {"n2"}
    three = [pod(f"ns/q-{i}", cpu="1", **rules) for i in range(3)]
    assert isinstance(place_gang(s, gang("ns/b", three)), Unplaceable)


def test_cordoned_and_not_ready_nodes_take_nothing() -> None:
    not_ready = Taint("node.kubernetes.io/not-ready", "", "NoSchedule")
    s = snapshot(node("c", unschedulable=True), node("r", ready=False, taints=[not_ready]),
                 node("ok", cpu="1"))
    decision = place_gang(s, gang("ns/a", workers("ns/a", 2, cpu="1")))
    assert isinstance(decision, Unplaceable)
    assert does_not_fit(decision.reason).shapes[0].excluded == {"cordoned": 1, "not ready": 1}


# ---------------------------------------------------------------- policies


def test_binpack_uses_fewest_nodes_and_spread_the_most() -> None:
    s = snapshot(*(node(f"n{i}", cpu="8") for i in range(6)))
    members = workers("ns/a", 4, cpu="1")
    packed = place_gang(s, gang("ns/a", members))
    spread = place_gang(s, gang("ns/a", members), Policy.SPREAD)
    assert isinstance(packed, Placement) and isinstance(spread, Placement)
    assert len(nodes_used(packed)) == 1
    assert len(nodes_used(spread)) == 4


def test_spread_doubles_up_only_when_nodes_run_out() -> None:
    s = snapshot(*(node(f"n{i}", cpu="8") for i in range(3)))
    decision = place_gang(s, gang("ns/a", workers("ns/a", 7, cpu="1")), Policy.SPREAD)
    assert isinstance(decision, Placement)
    per_node: dict[str, int] = {}
    for _, name in decision.assignments:
        per_node[name] = per_node.get(name, 0) + 1
    assert sorted(per_node.values()) == [2, 2, 3]


def test_gang_policy_overrides_the_scheduler_policy() -> None:
    s = snapshot(*(node(f"n{i}", cpu="8") for i in range(4)))
    spread_gang = gang("ns/a", workers("ns/a", 4, cpu="1"), policy=Policy.SPREAD)
    decision = place_gang(s, spread_gang, Policy.BINPACK)
    assert isinstance(decision, Placement)
    assert len(nodes_used(decision)) == 4


def test_gpu_pods_fill_a_partly_used_node_exactly() -> None:
    s = snapshot(
        node("whole-1", cpu="64", memory="256Gi", gpu=8),
        node("partial", cpu="64", memory="256Gi", gpu=8),
        node("whole-2", cpu="64", memory="256Gi", gpu=8),
        pods=(holder("x", "partial", gpu=6),),
    )
    small = place_gang(s, gang("ns/small", [gpu_pod(f"ns/s-{i}", 1) for i in range(2)]))
    assert isinstance(small, Placement)
    assert nodes_used(small) == {"partial"}
    big = place_gang(s, gang("ns/big", [gpu_pod(f"ns/b-{i}", 1) for i in range(8)]))
    assert isinstance(big, Placement)
    assert len(nodes_used(big)) == 1 and nodes_used(big) != {"partial"}


def test_half_gangs_prefer_the_half_free_node_over_a_whole_one() -> None:
    s = snapshot(
        node("whole", cpu="64", memory="256Gi", gpu=8),
        node("half", cpu="64", memory="256Gi", gpu=8),
        pods=(holder("x", "half", gpu=4),),
    )
    capacity = Capacity.from_snapshot(s)
    first = capacity.place(gang("ns/a", [gpu_pod(f"ns/a-{i}", 1) for i in range(4)]))
    assert isinstance(first, Placement)
    assert nodes_used(first) == {"half"}
    # the whole node stayed whole for an 8-GPU job
    second = capacity.place(gang("ns/b", [gpu_pod(f"ns/b-{i}", 2) for i in range(4)]))
    assert isinstance(second, Placement)
    assert nodes_used(second) == {"whole"}


def test_cpu_pods_keep_off_idle_gpu_nodes() -> None:
    s = snapshot(node("gpu", cpu="64", memory="256Gi", gpu=8),
                 node("cpu-1", cpu="4"), node("cpu-2", cpu="4"))
    decision = place_gang(s, gang("ns/a", workers("ns/a", 6, cpu="1")))
    assert isinstance(decision, Placement)
    assert "gpu" not in nodes_used(decision)
    spread = place_gang(s, gang("ns/a", workers("ns/a", 2, cpu="1")), Policy.SPREAD)
    assert isinstance(spread, Placement)
    assert nodes_used(spread) == {"cpu-1", "cpu-2"}


# ---------------------------------------------------------------- reasons


def does_not_fit(reason: Reason) -> DoesNotFit:
    assert isinstance(reason, DoesNotFit), reason
    return reason


def test_reason_gives_figures() -> None:
    only_gpu = Resources.of({GPU: 2, "pods": 1})
    members = tuple(Pod(PodKey(f"ns/w-{i}"), only_gpu) for i in range(4))
    busy = Taint("gpu", "busy", "NoSchedule")
    s = snapshot(
        node("a", gpu=3), node("b", gpu=3), node("c", gpu=3),
        node("t1", gpu=8, taints=[busy]), node("t2", gpu=8, taints=[busy]),
        node("cordoned", gpu=8, unschedulable=True),
    )
    decision = place_gang(s, Gang(GangKey("ns/train"), 4, members))
    assert isinstance(decision, Unplaceable)
    [shape] = does_not_fit(decision.reason).shapes
    assert (shape.wanted, dict(shape.room), dict(shape.short)) == (4, {1: 3}, {})
    assert shape.excluded == {"taint gpu=busy:NoSchedule": 2, "cordoned": 1}


def test_reason_names_the_short_resource_and_bound_members() -> None:
    s = snapshot(node("a", cpu="2", gpu=1), node("b", cpu="2"))
    members = [gpu_pod(f"ns/w-{i}", 1) for i in range(2)]
    decision = place_gang(s, gang("ns/x", members, min_member=3, bound=1))
    assert isinstance(decision, Unplaceable)
    reason = does_not_fit(decision.reason)
    assert (reason.need, reason.bound, reason.min_member) == (2, 1, 3)
    [shape] = reason.shapes
    assert (dict(shape.room), dict(shape.short)) == ({1: 1}, {GPU: 1})


def test_reason_for_mixed_members_that_fit_apart_but_not_together() -> None:
    s = snapshot(node("a", cpu="2"))
    members = [pod("ns/ps", cpu="2"), pod("ns/w", cpu="1", memory="2Gi")]
    decision = place_gang(s, gang("ns/tf", members))
    assert isinstance(decision, Unplaceable)
    shapes = does_not_fit(decision.reason).shapes
    assert [(shape.wanted, shape.fits_alone) for shape in shapes] == [(1, True), (1, True)]


def test_reason_when_there_are_no_nodes() -> None:
    decision = place_gang(snapshot(), gang("ns/a", workers("ns/a", 1)))
    assert isinstance(decision, Unplaceable)
    assert decision.reason == NoNodes(GangKey("ns/a"))


# ---------------------------------------------------------------- capacity


def test_capacity_carries_consumption_from_gang_to_gang() -> None:
    s = snapshot(node("n1", cpu="4"), node("n2", cpu="4"))
    capacity = Capacity.from_snapshot(s)
    assert isinstance(capacity.place(gang("ns/a", workers("ns/a", 3, cpu="2"))), Placement)
    assert isinstance(capacity.place(gang("ns/b", workers("ns/b", 2, cpu="2"))), Unplaceable)
    assert isinstance(capacity.place(gang("ns/c", workers("ns/c", 1, cpu="2"))), Placement)
    assert capacity.free_total().get("cpu") == 0


def test_release_returns_exactly_what_was_taken_and_allows_a_retry() -> None:
    s = snapshot(node("n1", cpu="4"), node("n2", cpu="4"))
    capacity = Capacity.from_snapshot(s)
    before = {name: capacity.free(name) for name in s.nodes}
    first = capacity.place(gang("ns/a", workers("ns/a", 3, cpu="2")))
    assert isinstance(first, Placement)
    blocked = gang("ns/b", workers("ns/b", 4, cpu="2"))
    assert isinstance(capacity.place(blocked), Unplaceable)
    capacity.release(first)
    assert {name: capacity.free(name) for name in s.nodes} == before
    assert isinstance(capacity.place(blocked), Placement)


def test_free_total_skips_unusable_nodes_and_overcommitment() -> None:
    s = snapshot(
        node("ok", cpu="4", memory="1Gi", pods=10),
        node("cordoned", cpu="4", memory="1Gi", pods=10, unschedulable=True),
        node("over", cpu="1", memory="1Gi", pods=10),
        pods=(holder("x", "over", cpu="3"),),
    )
    total = Capacity.from_snapshot(s).free_total()
    assert total.get("cpu") == 4000
    assert total.get("memory") == 2 * 2**30
    assert total.get("pods") == 19


def test_apply_then_remove_restores_the_snapshot() -> None:
    s = snapshot(node("n1", cpu="4"), node("n2", cpu="4"))
    members = workers("ns/a", 3, cpu="2")
    placement = place_gang(s, gang("ns/a", members))
    assert isinstance(placement, Placement)
    applied = apply(s, placement, members)
    assert applied != s
    assert sum(applied.free(n).get("cpu") for n in applied.nodes) == 2000
    assert remove(applied, placement, members) == s


def test_snapshot_does_not_change_when_the_caller_mutates_its_dict() -> None:
    s = snapshot(node("n1"))
    nodes = dict(s.nodes)
    frozen = Snapshot(nodes)
    nodes.clear()
    assert set(frozen.nodes) == {"n1"}


def test_same_input_gives_the_same_output() -> None:
    s = snapshot(*(node(f"n{i}", cpu=str(1 + i % 3), gpu=i % 2 * 4) for i in range(12)))
    members = workers("ns/a", 5, cpu="1") + [gpu_pod(f"ns/g-{i}", 2) for i in range(3)]
    results = {repr(place_gang(s, gang("ns/a", members), policy)) for policy in
               (Policy.BINPACK,) * 3}
    assert len(results) == 1


def test_rules_of_identical_pods_share_work_but_not_results() -> None:
    # Two gangs identical but for a selector must land on different nodes.
    s = snapshot(node("a", labels={"zone": "a"}), node("b", labels={"zone": "b"}))
    capacity = Capacity.from_snapshot(s)
    in_a = capacity.place(gang("ns/a", [pod("ns/a-0", selector={"zone": "a"})]))
    in_b = capacity.place(gang("ns/b", [pod("ns/b-0", selector={"zone": "b"})]))
    assert isinstance(in_a, Placement) and isinstance(in_b, Placement)
    assert nodes_used(in_a) == {"a"} and nodes_used(in_b) == {"b"}
    assert PodPlacementRules() != PodPlacementRules(node_selector=(("zone", "a"),))


def test_many_pod_shapes_in_one_pass_stay_consistent() -> None:
    s = snapshot(*(node(f"n{i}", cpu="16", memory="64Gi") for i in range(8)))
    capacity = Capacity.from_snapshot(s)
    current = s
    for i in range(1, 90):  # more shapes than the capacity keeps indexes for
        members = workers(f"ns/g{i}", 2, cpu=f"{100 + i}m", memory="128Mi")
        decision = capacity.place(gang(f"ns/g{i}", members))
        if isinstance(decision, Placement):
            current = apply(current, decision, members)
    assert {n: capacity.free(n) for n in s.nodes} == {n: current.free(n) for n in s.nodes}
    probe = gang("ns/probe", workers("ns/probe", 3, cpu="4"))
    assert type(capacity.place(probe)) is type(Capacity.from_snapshot(current).place(probe))
