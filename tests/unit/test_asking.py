"""Only pods that more nodes would let run say ``Unschedulable``, which cluster autoscalers
add nodes for; every other waiting pod says ``GangWaiting`` (or ``SchedulingGated``)."""

from __future__ import annotations

from dataclasses import replace
from typing import cast

from gangsched.core.actions import GANG_WAITING, GATED, UNSCHEDULABLE, MarkUnschedulable
from gangsched.core.model.objects import GangKey, QueueSpec
from gangsched.core.model.resources import Capability
from gangsched.core.state import State
from gangsched.core.step import StepConfig, Stepped, step
from tests.unit.test_cycle import DEFAULT, node, pod
from tests.unit.test_step import Cluster, group, members, view

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

