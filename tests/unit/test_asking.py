"""Only pods that more nodes would let run say ``Unschedulable``, which cluster autoscalers
add nodes for; every other waiting pod says ``GangWaiting`` (or ``SchedulingGated``)."""

from __future__ import annotations

from dataclasses import replace
from typing import cast

from prometheus_client import REGISTRY

from gangsched.core.actions import GANG_WAITING, GATED, UNSCHEDULABLE, MarkUnschedulable
from gangsched.core.asking import AskLimits, wants_room
from gangsched.core.model.objects import (
    GangKey,
    Node,
    NodePool,
    Pod,
    PodKey,
    PodPlacementRules,
    QueueSpec,
    SelectorRequirement,
)
from gangsched.core.model.resources import Capability, Resources
from gangsched.core.reasons import (
    AskingForNodes,
    GatedByKueue,
    InSubGroup,
    NodePoolLimit,
    NodesComing,
    NoNodes,
    ShortOfMembers,
    SubGroupUnknown,
    SuspendedByKueue,
)
from gangsched.core.state import Reported, State
from gangsched.core.step import StepConfig, Stepped, step
from gangsched.core.view import StepView
from gangsched.scheduler import publish_asking
from tests.unit.test_cycle import DEFAULT, node, pod
from tests.unit.test_step import Cluster, Group, group, members, view

CONFIG = StepConfig(starvation_s=30.0)


def conditions(stepped: Stepped) -> dict[str, str]:
    """The ``PodScheduled=False`` reason each pod written this step is given."""
    return {a.pod: a.condition_reason for a in stepped.actions
            if isinstance(a, MarkUnschedulable)}


def codes(stepped: Stepped) -> dict[GangKey, str]:
    return {u.gang: u.reason.code for u in (*stepped.result.unplaceable,
                                             *stepped.result.unadmitted)}


def test_a_gang_short_of_members_waits_without_asking_for_nodes() -> None:
    """Five of eight members exist: new nodes would sit idle until the rest come."""
    stepped = step(State(), view([node("n1", 2)], members("job", 5), [group("job", 8)]),
                   1000.0, CONFIG)
    assert codes(stepped) == {GangKey("ns/job"): "ShortOfMembers"}
    assert set(conditions(stepped).values()) == {GANG_WAITING}
    assert len(conditions(stepped)) == 5


def test_a_whole_gang_without_room_asks_for_nodes() -> None:
    stepped = step(State(), view([node("n1", 2)], members("job", 4), [group("job", 4)]),
                   1000.0, CONFIG)
    assert codes(stepped) == {GangKey("ns/job"): "DoesNotFit"}
    assert conditions(stepped) == dict.fromkeys(
        [f"ns/job-{i}" for i in range(4)], UNSCHEDULABLE)


def test_a_gang_over_its_queues_cap_waits_without_asking_for_nodes() -> None:
    """New nodes do not raise a queue's capability."""
    cluster = view([node("n1", 4)], members("job", 2), [group("job", 2)])
    capped = replace(cast(Cluster, cluster.cluster), queues={
        DEFAULT: QueueSpec(DEFAULT, capability=Capability.parse({"cpu": 1}))})
    stepped = step(State(), replace(cluster, cluster=capped), 1000.0, CONFIG)
    assert codes(stepped) == {GangKey("ns/job"): "CapabilityExceeded"}
    assert set(conditions(stepped).values()) == {GANG_WAITING}


def test_a_gang_held_behind_a_starving_one_waits_and_the_starving_one_asks() -> None:
    """The small gang would fit now but for the room held for the starving one: nodes
    added are for the starving gang, which asks; the small one does not."""
    pods = [pod("ns/other", 1, on="n1"), *members("big", 4), *members("small", 1)]
    cluster = view([node("n1", 2), node("n2", 2)], pods,
                   [group("big", 4), group("small", 1, uid="u2")])
    first = step(State(), cluster, 1000.0, CONFIG)
    starving = step(first.state, cluster, 1031.0, CONFIG)
    assert codes(starving) == {GangKey("ns/big"): "Starving",
                               GangKey("ns/small"): "HeldForStarving"}
    said = conditions(starving)
    assert said["ns/small-0"] == GANG_WAITING
    assert {said[f"ns/big-{i}"] for i in range(4)} == {UNSCHEDULABLE}


def test_a_gated_member_says_gated_and_its_gang_does_not_ask() -> None:
    pods = members("job", 2)
    pods[1] = replace(pods[1], gates=("example.com/wait",))
    stepped = step(State(), view([node("n1", 4)], pods, [group("job", 2)]), 1000.0, CONFIG)
    assert codes(stepped) == {GangKey("ns/job"): "Gated"}
    assert conditions(stepped) == {"ns/job-0": GANG_WAITING, "ns/job-1": GATED}


def test_a_condition_with_the_right_message_and_the_wrong_reason_is_written_again() -> None:
    """A pod whose condition still says ``Unschedulable`` (written before, or by another
    scheduler) while its gang cannot use nodes is told ``GangWaiting``, though the
    message already reads right: the reason follows the state, not the text."""
    cluster = view([node("n1", 2)], members("job", 5), [group("job", 8)])
    first = step(State(), cluster, 1000.0, CONFIG)
    message = {a.pod: a.message for a in first.actions if isinstance(a, MarkUnschedulable)}
    pods = cast(Cluster, cluster.cluster).pods
    shown = replace(cluster, cluster=replace(cast(Cluster, cluster.cluster), pods={
        key: replace(record, scheduled_message=message[key],
                     scheduled_reason=GANG_WAITING if key != "ns/job-0" else UNSCHEDULABLE)
        for key, record in pods.items()}))
    again = step(first.state, shown, 1001.0, CONFIG)
    assert conditions(again) == {"ns/job-0": GANG_WAITING}



# ---- with Karpenter's NodePools -----------------------------------------------------------

def pool(name: str = "default", *, cpu: int | None = None, zones: tuple[str, ...] = ()
         ) -> NodePool:
    """A NodePool with ``cpu`` cores left under its limits (None: no limits)."""
    requirements = (SelectorRequirement("topology.kubernetes.io/zone", "In", zones),
                    ) if zones else ()
    return NodePool(name, None if cpu is None else (("cpu", cpu * 1000),),
                    requirements=requirements)


def with_pools(cluster: StepView, *pools: NodePool) -> StepView:
    return replace(cluster, nodepools=pools)


def big(name: str, pods: int, *, uid: str = "u1") -> tuple[list[Pod], Group]:
    """A gang of ``pods`` one-cpu pods, which one 1-cpu node cannot hold."""
    return members(name, pods), group(name, pods, uid=uid)


def test_a_gang_a_nodepool_can_hold_asks_for_nodes_saying_so() -> None:
    pods, job = big("job", 4)
    stepped = step(State(), with_pools(view([node("n1", 1)], pods, [job]), pool(cpu=8)),
                   1000.0, CONFIG)
    (reason,) = [u.reason for u in stepped.result.unplaceable]
    said = stepped.state.reported[GangKey("ns/job")].reason
    assert isinstance(said, AskingForNodes) and said.cause == reason
    assert (said.pods, said.need.get("cpu")) == (4, 4000)
    assert set(conditions(stepped).values()) == {UNSCHEDULABLE}


def test_a_gang_larger_than_any_nodepools_room_left_does_not_ask() -> None:
    pods, job = big("job", 4)
    stepped = step(State(), with_pools(view([node("n1", 1)], pods, [job]), pool(cpu=3)),
                   1000.0, CONFIG)
    said = stepped.state.reported[GangKey("ns/job")].reason
    assert isinstance(said, NodePoolLimit)
    assert (said.need.get("cpu"), said.headroom, said.ahead) == (
        4000, (("default", Resources.of({"cpu": 3000})),), ())
    assert set(conditions(stepped).values()) == {GANG_WAITING}


def test_when_the_limit_holds_one_gang_only_the_first_in_order_asks() -> None:
    """Two gangs of 4 cpu, room left for one: the older asks, the younger waits behind it
    (Karpenter buys one whole gang, not half of each)."""
    first, one = big("first", 4)
    second, two = big("second", 4, uid="u2")
    second = [replace(p, created=10.0) for p in second]
    cluster = with_pools(view([node("n1", 1)], [*first, *second], [one, two]), pool(cpu=6))
    stepped = step(State(), cluster, 1000.0, CONFIG)
    reported = stepped.state.reported
    assert isinstance(reported[GangKey("ns/first")].reason, AskingForNodes)
    behind = reported[GangKey("ns/second")].reason
    assert isinstance(behind, NodePoolLimit) and behind.ahead == (GangKey("ns/first"),)
    said = conditions(stepped)
    assert {said[f"ns/first-{i}"] for i in range(4)} == {UNSCHEDULABLE}
    assert {said[f"ns/second-{i}"] for i in range(4)} == {GANG_WAITING}


def test_a_gang_whose_pods_no_nodepool_makes_nodes_for_does_not_ask() -> None:
    pods, job = big("job", 4)
    pods = [replace(p, rules=PodPlacementRules(
        node_selector=(("topology.kubernetes.io/zone", "c"),))) for p in pods]
    stepped = step(State(), with_pools(view([node("n1", 1)], pods, [job]),
                                       pool(zones=("a", "b"))), 1000.0, CONFIG)
    said = stepped.state.reported[GangKey("ns/job")].reason
    assert isinstance(said, NodePoolLimit) and said.headroom == ()
    assert set(conditions(stepped).values()) == {GANG_WAITING}
    in_b = [replace(p, rules=PodPlacementRules(
        node_selector=(("topology.kubernetes.io/zone", "b"),))) for p in pods]
    again = step(State(), with_pools(view([node("n1", 1)], in_b, [job]),
                                     pool(zones=("a", "b"))), 1000.0, CONFIG)
    assert isinstance(again.state.reported[GangKey("ns/job")].reason, AskingForNodes)


def test_a_gang_asking_too_long_pauses_then_asks_again() -> None:
    """Asked 300 s without being placed: it stops asking for 300 s (what was bought for it
    goes back to consolidation), and the step wakes at each end."""
    pods, job = big("job", 4)
    cluster = with_pools(view([node("n1", 1)], pods, [job]), pool(cpu=8))
    config = StepConfig(starvation_s=1e6, asking=AskLimits(node_hold_s=300.0, backoff_s=300.0))
    state, codes_seen, moments = State(), [], []
    for now in (1000.0, 1299.0, 1300.0, 1599.0, 1600.0):
        stepped = step(state, cluster, now, config)
        state = stepped.state
        codes_seen.append(state.reported[GangKey("ns/job")].reason.code)
        moments.append(min(t for t in stepped.thresholds if t > now))
    assert codes_seen == ["AskingForNodes", "AskingForNodes", "AskingPaused", "AskingPaused",
                          "AskingForNodes"]
    assert moments[0] == 1300.0 and moments[2] == 1600.0


def test_a_gang_short_of_members_says_so_as_before_where_nodepools_exist() -> None:
    stepped = step(State(), with_pools(view([node("n1", 2)], members("job", 5),
                                            [group("job", 8)]), pool(cpu=100)), 1000.0, CONFIG)
    assert codes(stepped) == {GangKey("ns/job"): "ShortOfMembers"}
    assert stepped.state.reported[GangKey("ns/job")].reason.code == "ShortOfMembers"


def test_the_gangs_asking_waiting_on_a_limit_or_paused_are_counted_by_code() -> None:
    first, one = big("first", 4)
    second, two = big("second", 4, uid="u2")
    second = [replace(p, created=10.0) for p in second]
    stepped = step(State(), with_pools(view([node("n1", 1)], [*first, *second], [one, two]),
                                       pool(cpu=6)), 1000.0, CONFIG)
    publish_asking(stepped.state.reported.values())
    counted = {code: REGISTRY.get_sample_value("gangsched_gangs_asking_for_nodes",
                                               {"code": code})
               for code in ("AskingForNodes", "NodePoolLimit", "AskingPaused")}
    assert counted == {"AskingForNodes": 1.0, "NodePoolLimit": 1.0, "AskingPaused": 0.0}


def test_a_sub_group_without_room_asks_and_one_waiting_for_a_label_or_kueue_does_not() -> None:
    """More nodes let a sub-group that no domain holds run; a pod naming an unknown
    sub-group, or a job Kueue has not admitted, would leave them idle."""
    gang, pod_key = GangKey("ns/job"), PodKey("ns/job-0")
    assert wants_room(InSubGroup("tp0", NoNodes(gang)))
    assert not wants_room(InSubGroup("tp0", ShortOfMembers(gang, 1, 2)))
    assert not wants_room(SubGroupUnknown(pod_key, "tp9"))
    assert not wants_room(SuspendedByKueue(gang, "job-wl"))
    assert not wants_room(GatedByKueue(pod_key, 0))


# ---- nodes made for a gang go to that gang ------------------------------------------------

def made(name: str, cores: int, at: float, zone: str = "a") -> Node:
    """A node a NodePool launched at ``at``, as Karpenter labels it."""
    return replace(node(name, cores), created=at, labels=(
        ("karpenter.sh/nodepool", "default"), ("topology.kubernetes.io/zone", zone)))


FULL = node("n1", 0)


def asking_then(*nodes: Node, config: StepConfig = CONFIG, zone: str | None = None
                ) -> tuple[State, StepView]:
    """A gang of four one-cpu pods (in ``zone`` if given) asking at 1000 on a full
    cluster; then ``nodes`` and a gang of two arriving later (younger, so second in order):
    the state after the first step, and the view with both gangs and the nodes."""
    pods, job = big("job", 4)
    if zone is not None:
        pods = [replace(p, rules=PodPlacementRules(
            node_selector=(("topology.kubernetes.io/zone", zone),))) for p in pods]
    small = [replace(p, created=1005.0) for p in members("small", 2)]
    state = step(State(), with_pools(view([FULL], pods, [job]), pool(cpu=8)),
                 1000.0, config).state
    return state, with_pools(view([FULL, *nodes], [*pods, *small],
                                  [job, group("small", 2, uid="u2")]), pool(cpu=8))


def placed(stepped: Stepped) -> list[GangKey]:
    return [placement.gang for placement in stepped.result.placements]


def test_a_node_made_for_an_asking_gang_is_held_for_it_and_not_given_to_a_later_gang() -> None:
    """The first of the gang's two nodes is up: the small gang that came meanwhile could
    fit there, but taking it would leave the big gang short of the room bought for it."""
    state, up = asking_then(made("k1", 2, 1003.0))
    stepped = step(state, up, 1010.0, CONFIG)
    assert placed(stepped) == []
    said = stepped.state.reported[GangKey("ns/job")].reason
    assert isinstance(said, NodesComing)
    assert (said.nodes, said.missing.get("cpu")) == (("k1",), 2000)
    assert {conditions(stepped)[f"ns/job-{i}"] for i in range(4)} == {UNSCHEDULABLE}
    assert "k1 made for it" in (stepped.result.holding[GangKey("ns/job")])

    _, both = asking_then(made("k1", 2, 1003.0), made("k2", 2, 1004.0))
    assert placed(step(stepped.state, both, 1012.0, CONFIG)) == [GangKey("ns/job")]


def test_a_node_made_before_the_gang_asked_is_not_held_for_it() -> None:
    state, older = asking_then(made("k1", 2, 990.0))
    assert placed(step(state, older, 1010.0, CONFIG)) == [GangKey("ns/small")]


def test_a_node_whose_labels_the_gang_refuses_is_not_held_for_it() -> None:
    """Bought in zone b while the gang asks for zone a: it was made for someone else."""
    state, other = asking_then(made("k1", 2, 1003.0, zone="b"), zone="a")
    assert placed(step(state, other, 1010.0, CONFIG)) == [GangKey("ns/small")]


def test_a_gang_that_stops_asking_lets_its_nodes_go() -> None:
    """Asked 300 s and never completed: it pauses, and the node made for it takes others."""
    config = StepConfig(starvation_s=1e6, asking=AskLimits(node_hold_s=300.0, backoff_s=300.0))
    state, up = asking_then(made("k1", 2, 1003.0), config=config)
    state = step(state, up, 1010.0, config).state
    late = step(state, up, 1300.0, config)
    assert late.state.reported[GangKey("ns/job")].reason.code == "AskingPaused"
    assert placed(late) == [GangKey("ns/small")]


def test_a_gang_asking_keeps_asking_when_its_nodepools_limits_count_its_nodes() -> None:
    """Karpenter counts the nodes it launches for the gang in its NodePool's resources: the
    room left drops to nothing, and the gang must not flip to NodePoolLimit (and its pods
    from Unschedulable) while its nodes come."""
    pods, job = big("job", 4)
    state = step(State(), with_pools(view([FULL], pods, [job]), pool(cpu=4)),
                 1000.0, CONFIG).state
    launched = step(state, with_pools(view([FULL], pods, [job]), pool(cpu=0)), 1005.0, CONFIG)
    assert isinstance(launched.state.reported[GangKey("ns/job")].reason, AskingForNodes)
    assert {conditions(launched).get(f"ns/job-{i}", UNSCHEDULABLE) for i in range(4)} == {
        UNSCHEDULABLE}


def test_nodes_coming_keeps_pods_unschedulable_and_is_counted() -> None:
    cause = NoNodes(GangKey("ns/job"))
    assert wants_room(NodesComing(("k1",), Resources.zero(), cause))
    publish_asking([Reported(NodesComing(("k1",), Resources.zero(), cause), 0.0)])
    assert REGISTRY.get_sample_value("gangsched_gangs_asking_for_nodes",
                                     {"code": "NodesComing"}) == 1.0
