"""What a cycle reports for waiting pods, groups and queues, and when it reports it again."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
from typing import TypeVar, cast

from gangsched.core.actions import (
    Action,
    Bind,
    ForgetWritten,
    MarkGroupInvalid,
    MarkInvalid,
    MarkUnschedulable,
    TellRuntimeProblem,
    WriteGroupStatus,
    WriteQueueStatus,
)
from gangsched.core.model.objects import GangKey, Pod, PodKey, QueueName, QueueSpec
from gangsched.core.placement.capacity import Snapshot
from gangsched.core.reasons import GroupInvalid, GroupMissing, render
from gangsched.core.reports.report_plan import FORGET_EVERY, Pacing
from gangsched.core.state import State
from gangsched.core.step import StepConfig, Stepped, step
from gangsched.core.view import StepView
from tests.unit.test_cycle import DEFAULT, cpu, node, pod
from tests.unit.test_step import Cluster, Group, group, members, status_of, view

T = TypeVar("T")
CONFIG = StepConfig(starvation_s=1e6, pacing=Pacing(pod_report_s=300.0))
JOB = GangKey("ns/job")


def marked(stepped: Stepped) -> list[tuple[str, bool]]:
    return [(a.pod, a.gated) for a in stepped.actions if isinstance(a, MarkUnschedulable)]


def told_reason(stepped: Stepped) -> str:
    return stepped.state.reported[JOB].text


def told(stepped: Stepped) -> list[str]:
    """The pods whose Event is due this cycle."""
    return [a.pod for a in stepped.actions if isinstance(a, MarkUnschedulable) and a.event]


def showing(cluster: StepView, stepped: Stepped) -> StepView:
    """The view once every condition asked for is written and seen by the mirror."""
    said = {a.pod: a for a in stepped.actions if isinstance(a, MarkUnschedulable)}
    pods = cast(Cluster, cluster.cluster).pods
    return replace(cluster, cluster=replace(cast(Cluster, cluster.cluster), pods={
        key: replace(record, scheduled_message=mark.message,
                     scheduled_reason=mark.condition_reason)
        if (mark := said.get(key)) is not None else record
        for key, record in pods.items()}))


def of_type(actions: tuple[Action, ...], kind: type[T]) -> list[T]:
    return [a for a in actions if isinstance(a, kind)]


def waiting_job(pods: list[Pod] | None = None, uids: dict[str, str] | None = None) -> StepView:
    return view([node("n1", 1)], pods or members("job", 2), [group("job", 2)], uids=uids)


def test_a_waiting_pod_is_told_when_its_reason_is_new_then_every_five_minutes() -> None:
    state, cluster, counts = State(), waiting_job(), []
    for seconds in (0, 5, 10, 20, 200, 290, 310, 320):
        stepped = step(state, cluster, 1000.0 + seconds, CONFIG)
        counts.append((len(told(stepped)), len(marked(stepped))))
        state, cluster = stepped.state, showing(cluster, stepped)
    # Both pods' Events and conditions at once, nothing while the conditions say the
    # reason, both Events again 300 s after the last.
    assert counts == [(2, 2), (0, 0), (0, 0), (0, 0), (0, 0), (0, 0), (2, 2), (0, 0)]


def test_a_reason_that_changes_within_two_seconds_is_told_when_the_gap_ends() -> None:
    first = step(State(), waiting_job(), 1000.0, CONFIG)
    bigger = view([node("n1", 1)], members("job", 3), [group("job", 3)])
    soon = step(first.state, bigger, 1001.0, CONFIG)
    assert told(soon) == ["ns/job-2"], "within the gap the reason told before stands, and a "\
        "new pod is told it"
    assert 1002.0 - 0.01 <= min(t for t in soon.thresholds if t > 1001.0) <= 1002.0, (
        "the step wakes when the gap ends")
    ended = step(soon.state, bigger, 1002.0, CONFIG)
    assert len(marked(ended)) == 3, "every condition says the new reason at once"


def test_an_event_for_a_new_reason_waits_ten_seconds_after_the_last_then_goes() -> None:
    """A pod whose reason changes a few seconds after its last Event gets the Event of
    the reason that holds when the ten seconds are up, not one per change."""
    first = step(State(), waiting_job(), 1000.0, CONFIG)
    bigger = view([node("n1", 1)], members("job", 3), [group("job", 3)])
    changed = step(first.state, bigger, 1003.0, CONFIG)
    assert told(changed) == ["ns/job-2"], "the new pod's first Event goes at once"
    assert 1010.0 in changed.thresholds, "the step wakes when the held Events are due"
    assert told(step(changed.state, bigger, 1009.0, CONFIG)) == []
    due = step(changed.state, bigger, 1010.0, CONFIG)
    assert told(due) == ["ns/job-0", "ns/job-1"]
    assert all(a.message == told_reason(due) for a in due.actions
               if isinstance(a, MarkUnschedulable) and a.event)
    assert told(step(due.state, bigger, 1013.0, CONFIG)) == [], (
        "ns/job-2's Event already said the reason that holds")


def test_a_condition_not_showing_the_reason_is_written_again_at_the_next_cycle() -> None:
    """A condition write refused because the pod changed meanwhile (409) is not retried
    by the writers: the next cycle, however late, asks for it again, without an Event."""
    first = step(State(), waiting_job(), 1000.0, CONFIG)
    cluster = showing(waiting_job(), first)
    lost = replace(cluster, cluster=replace(cast(Cluster, cluster.cluster), pods={
        **cast(Cluster, cluster.cluster).pods,
        PodKey("ns/job-1"): replace(cast(Cluster, cluster.cluster).pods[PodKey("ns/job-1")],
                                    scheduled_message=None)}))
    again = step(first.state, lost, 1060.0, CONFIG)
    assert marked(again) == [("ns/job-1", False)] and told(again) == []


def test_a_new_reason_or_a_new_pod_under_the_same_name_is_reported_at_once() -> None:
    state = State()
    for seconds in (0, 20):
        state = step(state, waiting_job(), 1000.0 + seconds, CONFIG).state
    assert told(step(state, waiting_job(), 1030.0, CONFIG)) == []
    recreated = waiting_job(uids={"ns/job-0": "second-life"})
    assert told(step(state, recreated, 1030.0, CONFIG)) == ["ns/job-0"]
    bigger = view([node("n1", 1)], members("job", 3), [group("job", 3)])
    assert len(told(step(state, bigger, 1030.0, CONFIG))) == 3, "its reason changed"


def test_a_gated_pod_is_marked_gated_not_unschedulable() -> None:
    pods = members("job", 2)
    gated = [replace(pods[0], gates=("example.com/wait",)), pods[1]]
    stepped = step(State(), waiting_job(gated), 1000.0, CONFIG)
    assert sorted(marked(stepped)) == [("ns/job-0", True), ("ns/job-1", False)]


def test_pods_of_a_missing_or_invalid_group_and_unreadable_pods_say_why() -> None:
    invalid = Group(GangKey("ns/broken"), group("broken", 1).flavor, "u9", None,
                    error="minMember must be at least 1")
    cluster = view([node("n1", 4)], [*members("lost", 1), *members("broken", 1)], [invalid])
    cluster = replace(cluster, bad_pods={PodKey("ns/odd"): "cpu: bad quantity"})
    stepped = step(State(), cluster, 1000.0, CONFIG)
    messages = {a.pod: a.message for a in of_type(stepped.actions, MarkUnschedulable)}
    assert messages == {
        "ns/lost-0": render(GroupMissing(GangKey("ns/lost"))),
        "ns/broken-0": render(GroupInvalid(GangKey("ns/broken"), "minMember must be at least 1")),
    }
    assert of_type(stepped.actions, MarkInvalid) == [MarkInvalid(PodKey("ns/odd"),
                                                                 "cpu: bad quantity")]
    assert of_type(stepped.actions, MarkGroupInvalid) == [MarkGroupInvalid(invalid.key)]


def test_a_pod_of_a_missing_group_is_told_as_a_waiting_pod_is_not_every_cycle() -> None:
    state, cluster, counts = State(), view([node("n1", 4)], members("lost", 1), []), []
    for seconds in (0, 60, 120, 310):
        stepped = step(state, cluster, 1000.0 + seconds, CONFIG)
        counts.append((told(stepped), len(marked(stepped))))
        state, cluster = stepped.state, showing(cluster, stepped)
    assert counts == [(["ns/lost-0"], 1), ([], 0), ([], 0), (["ns/lost-0"], 1)]


def test_a_pod_in_no_podgroup_is_told_itself_of_an_unreadable_runtime() -> None:
    bad = "annotation scheduling.gangsched.io/expected-runtime='-5m' is negative"
    waiting, running = pod("ns/lone", 8), pod("ns/ran", 1, on="n1")
    pods = [replace(p, runtime_problem=bad) for p in (waiting, running, *members("job", 1))]
    stepped = step(State(), view([node("n1", 4)], pods, [group("job", 1)]), 1000.0, CONFIG)
    told = of_type(stepped.actions, TellRuntimeProblem)
    assert sorted(t.pod for t in told) == ["ns/lone", "ns/ran"]
    assert {t.problem for t in told} == {bad}
    # A PodGroup's member is told of on its group, with its status.
    assert status_of(stepped.actions, JOB).status.runtime_problem == f"pod ns/job-0: {bad}"


def test_a_basic_policy_group_says_its_members_runtime_is_unreadable() -> None:
    """Each pod of a basic-policy group is placed alone, as a gang of its own; the group's
    status still tells of a member's unreadable runtime, as any group's does."""
    bad = "annotation scheduling.gangsched.io/expected-runtime='soon' is not a duration"
    basic = group("job", 2)
    assert basic.spec is not None
    basic = replace(basic, spec=replace(basic.spec, basic=True))
    pods = members("job", 2)
    cluster = view([node("n1", 1)], [pods[0], replace(pods[1], runtime_problem=bad)], [basic])
    stepped = step(State(), cluster, 1000.0, CONFIG)
    assert status_of(stepped.actions, JOB).status.runtime_problem == f"pod ns/job-1: {bad}"
    assert of_type(stepped.actions, TellRuntimeProblem) == []


def test_every_group_and_queue_gets_its_whole_status() -> None:
    running = members("run", 2, on=["n1", "n1"])
    cluster = view([node("n1", 2)], [*running, *members("job", 2)],
                   [group("run", 2), group("job", 2)])
    stepped = step(State(), cluster, 1000.0, CONFIG)
    statuses = {a.group: a.status for a in of_type(stepped.actions, WriteGroupStatus)}
    assert set(statuses) == {GangKey("ns/run"), JOB}
    assert statuses[JOB].message and statuses[GangKey("ns/run")].phase.value == "Running"
    (queue,) = of_type(stepped.actions, WriteQueueStatus)
    assert (queue.queue, queue.status.allocated.get("cpu"), queue.status.pending,
            queue.status.running) == (DEFAULT, cpu(2).get("cpu"), 1, 1)


def test_what_writers_remember_is_pruned_every_hundred_full_cycles() -> None:
    before = State(cycles=FORGET_EVERY - 2)
    first = step(before, waiting_job(), 1000.0, CONFIG)
    second = step(first.state, waiting_job(), 1001.0, CONFIG)
    assert of_type(first.actions, ForgetWritten) == []
    assert of_type(second.actions, ForgetWritten) == [ForgetWritten()]


def test_each_queue_reports_its_share_of_the_cluster_against_its_weights_and_its_state() -> None:
    running = members("run", 2, on=["n1", "n1"])
    batch = QueueSpec(QueueName("batch"), weight=3, open=False, error="weight: 'x'")
    shown = view([node("n1", 4)], running, [group("run", 2)])
    cluster = StepView(replace(cast(Cluster, shown.cluster),
                               queues={DEFAULT: QueueSpec(DEFAULT), batch.name: batch}))
    stepped = step(State(), cluster, 1000.0, CONFIG)
    written = {a.queue: a for a in of_type(stepped.actions, WriteQueueStatus)}
    assert (written[DEFAULT].dominant_share, written[DEFAULT].weight_share) == (
        Fraction(1, 2), Fraction(1, 4)), "2 of 4 cores held; weight 1 of 4"
    assert (written[batch.name].dominant_share, written[batch.name].weight_share) == (
        Fraction(0), Fraction(3, 4))
    assert (written[DEFAULT].status.open, written[DEFAULT].status.error) == (True, None)
    assert (written[batch.name].status.open, written[batch.name].status.error) == (
        False, "weight: 'x'")


def test_a_queue_without_our_gangs_gets_only_its_conditions_and_only_until_they_are_said(
) -> None:
    """Schedulers by other names share the Queues: the one with no gang in a queue writes
    its conditions while no status says them, never its zeros over the other's counts;
    a queue its last gang left gets its counts written back to zero once."""
    running = members("run", 2, on=["n1", "n1"])
    batch = QueueSpec(QueueName("batch"))
    shown = view([node("n1", 4)], running, [group("run", 2)])
    both = replace(cast(Cluster, shown.cluster),
                   queues={DEFAULT: QueueSpec(DEFAULT), batch.name: batch})
    fresh = step(State(), StepView(both), 1000.0, CONFIG)
    written = {a.queue: a.counts for a in of_type(fresh.actions, WriteQueueStatus)}
    assert written == {DEFAULT: True, batch.name: False}
    settled = StepView(both, queues_settled=frozenset({DEFAULT, batch.name}))
    later = step(fresh.state, settled, 1001.0, CONFIG)
    assert [(a.queue, a.counts) for a in of_type(later.actions, WriteQueueStatus)] == [
        (DEFAULT, True)]
    emptied = StepView(replace(both, members=(), pods={}, groups={}, snapshot=Snapshot.build(
        [node("n1", 4)], [])), queues_settled=frozenset({DEFAULT, batch.name}))
    gone = step(later.state, emptied, 1002.0, CONFIG)
    assert [(a.queue, a.counts, a.status.running) for a in
            of_type(gone.actions, WriteQueueStatus)] == [(DEFAULT, True, 0)]
    after = step(gone.state, emptied, 1003.0, CONFIG)
    assert of_type(after.actions, WriteQueueStatus) == []


def test_a_podgroup_whose_pods_another_scheduler_places_leaves_its_queues_counts_alone(
) -> None:
    """Every scheduler sees every PodGroup; the one without a pod of the group must not
    write its counts (nothing running there) over those of the one that bound them."""
    theirs = group("theirs", 2)
    alone = view([node("n1", 4)], [], [theirs])
    fresh = step(State(), alone, 1000.0, CONFIG)
    assert [(a.queue, a.counts) for a in of_type(fresh.actions, WriteQueueStatus)] == [
        (DEFAULT, False)]
    assert fresh.state.queues_served == frozenset()


def test_a_podgroup_only_other_schedulers_pods_name_gets_no_status_until_one_of_ours_does(
) -> None:
    """No status over the other scheduler's, no count in the queue, no admission; one
    pod of ours naming the group makes it ours again."""
    theirs = group("job", 1)
    named = view([node("n1", 4)], [], [theirs])
    foreign = StepView(replace(cast(Cluster, named.cluster),
                               named_by_others=frozenset({JOB})))
    alone = step(State(), foreign, 1000.0, CONFIG)
    assert of_type(alone.actions, WriteGroupStatus) == []
    assert of_type(alone.actions, MarkGroupInvalid) == []
    assert alone.gangs == 0 and alone.state.admitted == frozenset()
    assert [(a.queue, a.counts, a.status.pending) for a in
            of_type(alone.actions, WriteQueueStatus)] == [(DEFAULT, False, 0)]
    unreadable = StepView(replace(cast(Cluster, foreign.cluster),
                                  groups={JOB: Group(JOB, theirs.flavor, "u1", None, "bad")}))
    assert of_type(step(State(), unreadable, 1000.0, CONFIG).actions, MarkGroupInvalid) == []
    ours = view([node("n1", 4)], members("job", 1), [theirs])
    joined = StepView(replace(cast(Cluster, ours.cluster), named_by_others=frozenset({JOB})))
    stepped = step(alone.state, joined, 1001.0, CONFIG)
    assert [a.group for a in of_type(stepped.actions, WriteGroupStatus)] == [JOB]
    assert [a.placement.gang for a in of_type(stepped.actions, Bind)] == [JOB]
