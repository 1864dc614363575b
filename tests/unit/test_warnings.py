"""When a PodGroup's and a Queue's Events are due: the report plan decides, with the clock
passed in; the writers send what they are handed."""

from __future__ import annotations

from dataclasses import replace
from typing import cast

from gangsched.core.actions import (
    TellGroupRuntimeProblem,
    TellRuntimeProblem,
    WriteGroupStatus,
    WriteQueueStatus,
)
from gangsched.core.model.objects import QueueName, QueueSpec
from gangsched.core.reports.warnings import warnings_due
from gangsched.core.state import State, Warned
from gangsched.core.step import Stepped, step
from gangsched.core.view import StepView
from tests.unit.test_cycle import node, pod
from tests.unit.test_report_plan import CONFIG, JOB, of_type, showing, waiting_job
from tests.unit.test_step import Cluster, group, members, view

GAP, REPEAT = CONFIG.pacing.event_gap_s, CONFIG.pacing.pod_report_s


def group_events(stepped: Stepped) -> list[tuple[str, str]]:
    """The groups whose Event is due this cycle, with the phase their status says."""
    return [(a.group, a.status.phase.value) for a in of_type(stepped.actions, WriteGroupStatus)
            if a.event]


def run(cluster: StepView, seconds: tuple[float, ...], state: State | None = None
        ) -> list[Stepped]:
    state, steps = state or State(), []
    for at in seconds:
        stepped = step(state, cluster, 1000.0 + at, CONFIG)
        steps.append(stepped)
        state, cluster = stepped.state, showing(cluster, stepped)
    return steps


def unadmitted_job(uid: str = "u1") -> StepView:
    """A job whose minResources (8 CPUs) the cluster (1 CPU) cannot admit: it warns."""
    return view([node("n1", 1)], members("job", 2), [group("job", 2, uid=uid, min_cpu=8)])


def test_a_waiting_groups_warning_is_due_when_new_then_every_five_minutes() -> None:
    steps = run(unadmitted_job(), (0, 5, 60, 290, 310, 320))
    assert [len(group_events(s)) for s in steps] == [1, 0, 0, 0, 1, 0]
    assert group_events(steps[0]) == [(JOB, "Pending")]


def test_a_new_warning_waits_the_gap_after_the_last_and_the_step_wakes_then() -> None:
    said = {"podgroup/u1": Warned("u1", "Unschedulable: needs 4 cpu", 100.0)}
    new = [("podgroup/u1", "u1", "Unschedulable: needs 8 cpu")]
    early = warnings_due(said, new, 100.0 + GAP - 1, GAP, REPEAT)
    assert early.due == frozenset() and early.moments == (100.0 + GAP,)
    assert early.warned == said, "the warning said last is still the one said"
    due = warnings_due(early.warned, new, 100.0 + GAP, GAP, REPEAT)
    assert due.due == {"podgroup/u1"} and due.moments == ()
    assert due.warned["podgroup/u1"] == Warned("u1", "Unschedulable: needs 8 cpu", 100.0 + GAP)


def test_a_group_created_again_under_its_name_is_warned_at_once() -> None:
    first = run(unadmitted_job(), (0,))[0]
    assert [len(group_events(s)) for s in run(unadmitted_job(), (5,), first.state)] == [0]
    again = run(unadmitted_job("another-uid"), (5,), first.state)
    assert [len(group_events(s)) for s in again] == [1]


def test_a_group_that_runs_says_so_once() -> None:
    running = view([node("n1", 2)], members("job", 2, on=["n1", "n1"]), [group("job", 2)])
    assert [group_events(s) for s in run(running, (0, 5, 400))] == [
        [(JOB, "Running")], [], []]


def test_an_unreadable_runtime_is_told_once_per_problem() -> None:
    bad, worse = "is negative", "is not a duration"

    def cluster(problem: str) -> StepView:
        pods = [replace(p, runtime_problem=problem)
                for p in (pod("ns/lone", 8), *members("job", 1))]
        return view([node("n1", 4)], pods, [group("job", 1)])

    steps = run(cluster(bad), (0, 5, 400))
    told = [([t.pod for t in of_type(s.actions, TellRuntimeProblem)],
             [t.group for t in of_type(s.actions, TellGroupRuntimeProblem)]) for s in steps]
    assert told == [(["ns/lone"], [JOB]), ([], []), ([], [])]
    changed = run(cluster(worse), (410,), steps[-1].state)[0]
    assert [t.problem for t in of_type(changed.actions, TellRuntimeProblem)] == [worse]
    assert [t.problem for t in of_type(changed.actions, TellGroupRuntimeProblem)] == [
        f"pod ns/job-0: {worse}"]


def test_a_queue_without_a_place_in_the_tree_is_warned_when_new_then_every_five_minutes(
) -> None:
    cluster = waiting_job()
    lost = QueueSpec(QueueName("lost"), parent=QueueName("nowhere"))
    cluster = replace(cluster, cluster=replace(cast(Cluster, cluster.cluster), queues={
        **cast(Cluster, cluster.cluster).queues, lost.name: lost}))
    steps = run(cluster, (0, 5, 310))
    warned = [[a.queue for a in of_type(s.actions, WriteQueueStatus) if a.event] for s in steps]
    assert warned == [["lost"], [], ["lost"]]
