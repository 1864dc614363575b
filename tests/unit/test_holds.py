"""Room held for a running gang's replacements: when it starts, what it keeps out, when it ends."""

from __future__ import annotations

from dataclasses import replace

from gangsched.core.kubeobjects.groups import Flavor, GroupSpec, MemberCounts, Phase, group_status
from gangsched.core.model.objects import (
    Gang,
    GangKey,
    Node,
    Pod,
    PodKey,
    Policy,
    QueueName,
    QueueSpec,
)
from gangsched.core.model.resources import Resources
from gangsched.core.placement.capacity import Snapshot
from gangsched.core.placement.holds import GroupLife, Hold, Seat, seats_of, update_holds
from gangsched.core.stages.cycle import CycleInput, CycleResult, run_cycle
from tests.unit.test_cycle import DEFAULT, gang, node, placed, pod

JOB = GangKey("ns/job")
GRACE = 60.0


def seats(*pods: Pod) -> dict[PodKey, Seat]:
    return seats_of((p, p.gang) for p in pods)


def workers(count: int, *, key: str = "ns/job") -> list[Pod]:
    """``count`` live workers of ``key``, one per node n1, n2, ..."""
    return [pod(f"{key}-{i}", gang=key, on=f"n{i + 1}") for i in range(count)]


def holds_after(
    before: list[Pod], after: list[Pod], *, min_member: int = 4, held: tuple[Hold, ...] = (),
    now: float = 100.0, uid: str = "u1", succeeded: frozenset[PodKey] = frozenset(),
) -> tuple[Hold, ...]:
    return update_holds(seats(*before), seats(*after), held,
                        {JOB: GroupLife(uid, min_member)}, succeeded, now=now, grace=GRACE)


def test_a_running_gang_that_drops_below_min_member_holds_the_departed_room() -> None:
    four = workers(4)
    (hold,) = holds_after(four, four[:3])
    assert (hold.gang, hold.pod.key, hold.pod.node_name) == (JOB, "ns/job-3", "n4")
    assert hold.until == 100.0 + GRACE


def test_no_hold_for_a_member_that_succeeded_or_a_gang_still_at_min_member() -> None:
    four = workers(4)
    assert holds_after(four, four[:3], succeeded=frozenset({PodKey("ns/job-3")})) == ()
    assert holds_after(four, four[:3], min_member=3) == ()
    assert holds_after(four[:3], four[:2]) == (), "it was not running: nothing to keep"
    assert holds_after(four, []) == (), "a job deleted whole strands nobody"


def test_a_gang_already_holding_holds_each_further_loss_too() -> None:
    four = workers(4)
    first = holds_after(four, four[:3])
    both = holds_after(four[:3], four[:2], held=first, now=110.0)
    assert sorted(h.pod.key for h in both) == ["ns/job-2", "ns/job-3"]


def test_holds_end_with_the_grace_a_replacement_or_the_group() -> None:
    four = workers(4)
    held = holds_after(four, four[:3])
    assert holds_after(four[:3], four[:3], held=held, now=159.0) == held
    assert holds_after(four[:3], four[:3], held=held, now=160.0) == (), "grace over"
    replacement = pod("ns/job-new", gang="ns/job", on="n4")
    assert holds_after(four[:3], [*four[:3], replacement], held=held, now=101.0) == ()
    assert holds_after(four[:3], four[:3], held=held, uid="u2", now=101.0) == (), "new group"
    assert holds_after(four[:3], [], held=held, now=101.0) == (), "the rest went too"


def test_one_replacement_of_two_ends_the_older_hold() -> None:
    four = workers(4)
    held = holds_after(four[:3], four[:2], held=holds_after(four, four[:3]), now=110.0)
    back = pod("ns/job-new", gang="ns/job", on="n4")
    (left,) = holds_after(four[:2], [*four[:2], back], held=held, now=111.0)
    assert left.pod.key == "ns/job-2"


def cycle(nodes: list[Node], gangs: list[Gang], holds: tuple[Hold, ...]) -> CycleResult:
    return run_cycle(CycleInput(
        snapshot=Snapshot.build(nodes, ()), gangs=tuple(gangs), bound_requests={},
        queues={DEFAULT: QueueSpec(DEFAULT)}, admitted=frozenset(), waiting_since={},
        now=1000.0, policy=Policy.BINPACK, holds=holds,
    ))


def _held_room(on: str = "n1", cores: int = 1) -> Hold:
    return Hold(JOB, "u1", pod("ns/job-3", cores, gang="ns/job", on=on), until=1e9)


def test_a_waiting_gang_cannot_take_the_held_room() -> None:
    result = cycle([node("n1", 1), node("n2", 1)],
                   [replace(gang("ns/job", 0), bound=3, min_member=4), gang("ns/waiter", 2)],
                   holds=(_held_room(),))
    assert placed(result) == []
    assert "holding the room of 1 departed member" in result.holding[JOB]
    assert "n1" in result.holding[JOB]


def test_the_gangs_own_replacement_takes_the_held_room() -> None:
    replacement = Gang(JOB, min_member=4, pending=(pod("ns/job-new", gang="ns/job"),), bound=3)
    result = cycle([node("n1", 1)], [gang("ns/waiter", 1), replacement], holds=(_held_room(),))
    assert placed(result) == ["ns/job"]
    assert JOB not in result.holding


def test_room_held_elsewhere_when_its_node_is_full_and_nowhere_when_none_is_left() -> None:
    result = cycle([node("n1", 1), node("n2", 1)], [gang("ns/job", 0)],
                   holds=(_held_room(on="n9"),))
    assert "on n1" in result.holding[JOB] or "on n2" in result.holding[JOB]
    result = cycle([node("n1", 1)], [gang("ns/job", 0)], holds=(_held_room(cores=2),))
    assert JOB not in result.holding


def test_a_holding_group_says_it_runs_one_short_and_why() -> None:
    spec = GroupSpec(JOB, flavor=Flavor.VOLCANO, min_member=4, min_resources=Resources.zero(),
                     queue=QueueName("default"), created=0.0)
    status = group_status(spec, MemberCounts(scheduled=3, running=3), admitted=True,
                          waiting_reason=None, waited_seconds=0, holding="holding the room")
    assert status.phase is Phase.RUNNING and status.reason == "ReplacementHeld"
    assert "3 of minMember 4" in status.message and "holding the room" in status.message


def test_a_member_that_leaves_twice_is_held_once_and_the_cycle_still_runs() -> None:
    """A replacement created under the departed member's name (StatefulSets,
    training-operator's ``job-worker-N``) that leaves again while its gang is still
    short must not leave two holds for one pod: the cycle would hold, and then
    release, the same stand-in twice."""
    five = workers(5)
    first = holds_after(five, five[:3], min_member=5)
    back = pod("ns/job-4", gang="ns/job", on="n5")
    rejoined = holds_after(five[:3], [*five[:3], back], min_member=5, held=first, now=101.0)
    assert [h.pod.key for h in rejoined] == ["ns/job-3"], "job-4 is back: only job-3 is held"
    again = holds_after([*five[:3], back], five[:3], min_member=5, held=rejoined, now=102.0)
    keys = [h.pod.key for h in again]
    assert sorted(keys) == ["ns/job-3", "ns/job-4"] and len(set(keys)) == len(keys)

    stale = (*first, Hold(JOB, "u1", back, until=162.0))
    replacement = Gang(JOB, min_member=5, bound=3, pending=(
        pod("ns/job-a", gang="ns/job"), pod("ns/job-b", gang="ns/job")))
    nodes = [node(f"n{i}", 1) for i in range(1, 7)]
    from_update = holds_after([*five[:3], back], five[:3], min_member=5, held=stale, now=102.0)
    assert len({h.pod.key for h in from_update}) == len(from_update)
    assert placed(cycle(nodes, [replacement], from_update)) == ["ns/job"]
