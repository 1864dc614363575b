"""Gathering pods into gangs: terminating pods hold their node's room but are no members."""

from __future__ import annotations

from dataclasses import replace

from gangsched.core.kubeobjects.pods import pod_from_api
from gangsched.core.model.objects import (
    Flavor,
    GangKey,
    GroupSpec,
    NodeName,
    Pod,
    Policy,
    QueueName,
    QueueSpec,
    solo_gang_key,
)
from gangsched.core.model.resources import Resources
from gangsched.core.placement.capacity import Snapshot
from gangsched.core.stages.cycle import CycleInput, run_cycle
from gangsched.core.stages.gangs import Gathered, Member, gather
from tests.unit.test_cycle import DEFAULT, node, placed, placed_pods, pod

JOB = GangKey("ns/job")
SPEC = GroupSpec(JOB, Flavor.GANGSCHED, 4, Resources.zero(), DEFAULT, 0.0)


def generation(name: str, count: int, *, on: str | None = None,
               terminating: bool = False) -> list[Pod]:
    return [replace(pod(f"ns/{name}-{i}", gang="ns/job", on=on), terminating=terminating)
            for i in range(count)]


def members(pods: list[Pod]) -> list[Member]:
    return [Member(p, JOB, running=p.node_name is not None) for p in pods]


def placed_after(gathered: Gathered, pods: list[Pod], admitted: frozenset[GangKey]) -> set[str]:
    """One cycle on a 4-cpu node holding every pod of ``pods`` that has a node."""
    result = run_cycle(CycleInput(
        snapshot=Snapshot.build([node("n1", 4)], pods),
        gangs=gathered.gangs,
        bound_requests=gathered.bound_requests,
        queues={DEFAULT: QueueSpec(DEFAULT)},
        admitted=admitted,
        waiting_since={},
        now=0.0,
        policy=Policy.BINPACK,
        bound_pods=gathered.bound_pods,
    ))
    assert not placed(result) or placed(result) == [JOB]
    return placed_pods(result)


def test_terminating_members_are_no_members_of_their_gang() -> None:
    old = generation("old", 4, on="n1", terminating=True)
    new = generation("new", 4)
    gathered = gather(members(old + new), {JOB: SPEC})
    (job,) = gathered.gangs
    assert job.bound == 0
    assert [p.key for p in job.pending] == [p.key for p in new]
    assert gathered.counts[JOB].scheduled == 0 and gathered.counts[JOB].pending == 4
    assert JOB not in gathered.bound_pods and JOB not in gathered.bound_requests


def test_a_pending_pod_being_deleted_is_never_placed() -> None:
    deleted = generation("gone", 1, terminating=True)
    gathered = gather(members(deleted), {JOB: replace(SPEC, min_member=1)})
    assert all(gang.pending == () for gang in gathered.gangs)


def test_a_new_generation_waits_whole_until_the_old_one_has_gone() -> None:
    """The old pods hold the node's room while they terminate; the new generation
    of four must not be bound into it, neither wholly nor in part."""
    old = generation("old", 4, on="n1", terminating=True)
    new = generation("new", 4)
    admitted = frozenset({JOB})
    assert placed_after(gather(members(old + new), {JOB: SPEC}), old + new, admitted) == set()
    # One old pod gone: room for one, still not for four.
    assert placed_after(gather(members(old[1:] + new), {JOB: SPEC}), old[1:] + new,
                        admitted) == set()
    assert placed_after(gather(members(new), {JOB: SPEC}), new, admitted) == {
        p.key for p in new}


def test_preemption_victims_still_terminating_are_no_running_gang() -> None:
    victims = generation("victim", 4, on="n1", terminating=True)
    gathered = gather(members(victims), {JOB: SPEC})
    assert [(gang.key, gang.bound, gang.bound_on) for gang in gathered.gangs] == [
        (JOB, 0, frozenset())]
    assert JOB not in gathered.counts and JOB not in gathered.bound_pods


def test_a_gangs_priority_is_what_its_pods_were_admitted_with() -> None:
    # The group names a class its pods do not carry: it never raises the gang above them.
    spec = replace(SPEC, priority_class="high")
    pods = [replace(p, priority=5) for p in generation("w", 4)]
    gathered = gather(members(pods), {JOB: spec}, priority_classes={"high": 5})
    assert [g.priority for g in gathered.gangs] == [5] and gathered.invalid == {}
    # With no pods yet the class orders the group (it has nothing to preempt with).
    empty = gather([], {JOB: spec}, priority_classes={"high": 1000})
    assert [g.priority for g in empty.gangs] == [1000]


def test_one_member_of_a_high_class_never_lifts_its_gangs_priority() -> None:
    # Three priority-0 pods, one of 1000 (a 10m pod of a quota-limited class), one of them
    # bound: with no class on the group, the lowest member decides, pending or bound.
    pods = [replace(p, priority=0) for p in generation("w", 3)]
    tiny = replace(pod("ns/tiny", gang="ns/job"), priority=1000)
    assert [g.priority for g in gather(members([*pods, tiny]), {JOB: SPEC}).gangs] == [0]
    high = [replace(p, priority=1000) for p in generation("h", 3)]
    low_bound = replace(pod("ns/low", gang="ns/job", on="n1"), priority=7)
    assert [g.priority for g in gather(members([*high, low_bound]), {JOB: SPEC}).gangs] == [7]
    # A class on the group, matched by every member, is the gang's priority.
    classed = gather(members(high), {JOB: replace(SPEC, priority_class="high")},
                     priority_classes={"high": 1000})
    assert [g.priority for g in classed.gangs] == [1000]


def test_a_pod_in_no_podgroup_is_a_gang_of_the_default_queue_while_it_runs() -> None:
    running = replace(pod("ns/alone", 2, on="n1"), priority=3, created=7.0)
    gathered = gather([Member(running, None, running=True)], {})
    key = solo_gang_key(running.key)
    (gang,) = gathered.gangs
    assert (gang.key, gang.queue, gang.bound, gang.pending) == (key, DEFAULT, 1, ())
    assert (gang.priority, gang.created, gang.bound_on) == (3, 7.0, frozenset({"n1"}))
    assert gathered.bound_requests[key] == running.requests
    assert gathered.bound_pods[key] == (running,)
    # Finished, it is no gang any more.
    assert gather([Member(running, None, succeeded=True)], {}).gangs == ()


def test_a_pod_in_no_podgroup_is_in_the_queue_its_annotation_names_waiting_and_running() -> None:
    manifest = {"metadata": {"name": "alone", "namespace": "ns", "uid": "u",
                             "annotations": {"scheduling.gangsched.io/queue": "team-a"},
                             "creationTimestamp": "2026-01-01T00:00:00Z"},
                "spec": {"schedulerName": "gang", "containers": [
                    {"name": "main", "resources": {"requests": {"cpu": "1"}}}]}}
    waiting = pod_from_api(manifest)
    assert waiting.queue == "team-a"
    running = replace(waiting, node_name=NodeName("n1"))
    for member in (Member(waiting, None), Member(running, None, running=True)):
        (gang,) = gather([member], {}).gangs
        assert gang.queue == "team-a"
    grouped = replace(waiting, gang=GangKey("ns/job"))
    spec = GroupSpec(GangKey("ns/job"), Flavor.GANGSCHED, min_member=1,
                     min_resources=Resources.zero(), queue=QueueName("team-b"), created=0.0,
                     generation=1)
    (gang,) = gather([Member(grouped, GangKey("ns/job"))], {spec.key: spec}).gangs
    assert gang.queue == "team-b", "a group's pods are in their group's queue"


def test_a_group_naming_a_class_its_pods_do_not_have_is_invalid() -> None:
    spec = replace(SPEC, priority_class="high")
    pods = generation("w", 4)  # admitted at priority 0
    gathered = gather(members(pods), {JOB: spec}, priority_classes={"high": 1000})
    assert gathered.gangs == ()
    assert "priorityClassName high (value 1000)" in gathered.invalid[JOB]
    assert "has 0" in gathered.invalid[JOB]
    assert [p.key for p in gathered.orphans[JOB]] == [p.key for p in pods]  # they wait
    # A class not known yet is not judged; the pods' priority stands.
    unknown = gather(members(pods), {JOB: spec}, priority_classes={})
    assert [g.priority for g in unknown.gangs] == [0] and unknown.invalid == {}


def test_a_group_only_other_schedulers_pods_name_is_theirs_until_one_of_ours_does() -> None:
    """A second scheduler sharing the PodGroup API (coscheduling, another gangsched)
    places the groups its pods name; one with no pods at all stays ours, as operators
    create the group first and its pods once it is admitted."""
    theirs = gather([], {JOB: SPEC}, named_by_others=frozenset({JOB}))
    assert theirs.gangs == () and theirs.theirs == frozenset({JOB})
    assert JOB not in theirs.counts and JOB not in theirs.finished
    podless = gather([], {JOB: SPEC})
    assert [gang.key for gang in podless.gangs] == [JOB] and podless.theirs == frozenset()
    ours = generation("ours", 1)
    joined = gather(members(ours), {JOB: SPEC}, named_by_others=frozenset({JOB}))
    assert [(gang.key, len(gang.pending)) for gang in joined.gangs] == [(JOB, 1)]
    assert joined.theirs == frozenset() and joined.counts[JOB].pending == 1
    # Ours leaving it (terminating) leaves it theirs again.
    leaving = gather(members(generation("ours", 1, terminating=True)), {JOB: SPEC},
                     named_by_others=frozenset({JOB}))
    assert leaving.gangs == () and leaving.theirs == frozenset({JOB})
