"""The order of turns on its own: in what order one cycle serves the gangs that wait.

Each test builds a session over a small cluster, lets triage pass the gangs
through and runs every turn; what it checks is who got the room and what
the others were told, as figures and reason kinds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction

from hypothesis import given
from hypothesis import strategies as st

from gangsched.core.model.objects import Gang, GangKey, Node, Pod, Policy, QueueName, QueueSpec
from gangsched.core.model.resources import Resources
from gangsched.core.placement.capacity import Snapshot
from gangsched.core.reasons import (
    DoesNotFit,
    HeldForStarving,
    PartlyBound,
    Reason,
    ReservedByAdmitted,
    Starving,
)
from gangsched.core.stages.cycle import run
from gangsched.core.stages.session import CycleInput, Session
from tests.unit.clusters import PROPERTY
from tests.unit.test_cycle import DEFAULT, gang, node, pod


def session(
    nodes: Sequence[Node],
    gangs: Iterable[Gang],
    *,
    running: Iterable[Pod] = (),
    queues: Iterable[QueueSpec] = (),
    preemption: bool = False,
    preempting: Mapping[str, Iterable[str]] | None = None,
    unevictable: Iterable[str] = (),
    admitted: Iterable[str] = (),
) -> Session:
    """A session over ``nodes`` with ``running`` pods bound, each counted for its gang."""
    bound_pods: dict[GangKey, tuple[Pod, ...]] = {}
    for member in running:
        if member.gang is not None:
            bound_pods[member.gang] = (*bound_pods.get(member.gang, ()), member)
    specs = {DEFAULT: QueueSpec(DEFAULT), **{spec.name: spec for spec in queues}}
    return Session(CycleInput(
        snapshot=Snapshot.build(nodes, [p for pods in bound_pods.values() for p in pods]),
        gangs=tuple(gangs),
        bound_requests={key: Resources.sum(p.requests for p in pods)
                        for key, pods in bound_pods.items()},
        queues=specs,
        admitted=frozenset(GangKey(k) for k in admitted),
        waiting_since={},
        now=1000.0,
        policy=Policy.BINPACK,
        bound_pods=bound_pods,
        preemption=preemption,
        preempting={GangKey(k): frozenset(GangKey(v) for v in vs)
                    for k, vs in (preempting or {}).items()},
        unevictable=frozenset(GangKey(k) for k in unevictable),
    ))


def allocated(s: Session) -> Session:
    run(s)
    return s


def placed(s: Session) -> list[tuple[str, int]]:
    """Each placement in the order it was made: the gang and how many pods it got."""
    return [(p.gang, len(p.assignments)) for p in s.placements]


def waiting(s: Session) -> dict[str, Reason]:
    return {u.gang: u.reason for u in s.unplaceable}


def bound_members(key: str, count: int, on: str) -> list[Pod]:
    return [pod(f"{key}-{i}", 1, gang=key, on=on) for i in range(count)]


def test_replacements_up_to_min_member_go_before_other_gangs_and_extras_wait_their_turn() -> None:
    # ns/run lost one of its three workers and asks for it back plus two extras;
    # ns/new, of higher priority, wants two pods. Three cores are free.
    run = gang("ns/run", 3, min_member=3, bound=2, first=2)
    new = gang("ns/new", 2, priority=10)
    s = allocated(session([node("n1", 5)], [run, new], running=bound_members("ns/run", 2, "n1")))
    assert placed(s) == [("ns/run", 1), ("ns/new", 2)]
    (replacement,) = s.placements[0].assignments
    assert replacement[0] == "ns/run-2", "the oldest pending member replaces the lost one"
    assert isinstance(waiting(s)["ns/run"], DoesNotFit), "its extras found no room left"


def test_replacements_go_first_even_ahead_of_a_queue_with_no_share() -> None:
    # Only one core is free: the lost member takes it, though ns/new's queue has nothing.
    run = gang("ns/run", 1, min_member=3, bound=2, first=2)
    new = gang("ns/new", 1, queue="b", priority=100)
    s = allocated(session([node("n1", 3)], [new, run], running=bound_members("ns/run", 2, "n1"),
                          queues=[QueueSpec(QueueName("b"))]))
    assert placed(s) == [("ns/run", 1)]
    reason = waiting(s)["ns/new"]
    assert isinstance(reason, DoesNotFit) and reason.need == 1


def test_a_nominated_preemptor_whose_victims_are_gone_is_placed_before_anyone() -> None:
    # The victims have left: four cores free. An older gang of higher priority in an
    # emptier queue would take them first in fair order; the preemptor evicted for them.
    preemptor = gang("ns/urgent", 4, priority=50, created=500.0)
    rival = gang("ns/rival", 2, queue="a", priority=90, created=0.0)
    s = allocated(session([node("n1", 4)], [rival, preemptor], queues=[QueueSpec(QueueName("a"))],
                          preemption=True, preempting={"ns/urgent": ["ns/gone"]}))
    assert placed(s) == [("ns/urgent", 4)]
    assert isinstance(waiting(s)["ns/rival"], DoesNotFit)


def test_queues_are_served_furthest_below_their_weighted_share_within_one_cycle() -> None:
    # Eight one-core gangs wait in each queue, eight cores in all; b weighs three times a.
    # Ordering the queues once at the start would give every core to one of them.
    light, heavy = QueueSpec(QueueName("a"), weight=1), QueueSpec(QueueName("b"), weight=3)
    gangs = [gang(f"ns/{q}{i}", 1, queue=q, created=float(i)) for q in "ab" for i in range(8)]
    s = allocated(session([node("n1", 4), node("n2", 4)], gangs, queues=[light, heavy]))
    served = [p.gang for p in s.placements]
    assert len(served) == 8
    assert sorted(served) == ["ns/a0", "ns/a1", *(f"ns/b{i}" for i in range(6))]
    # Within a queue, first come first served; across queues, interleaved as shares rise.
    assert served[:4] == ["ns/a0", "ns/b0", "ns/b1", "ns/b2"]


def test_within_a_queue_priority_comes_before_age() -> None:
    old, urgent = gang("ns/old", 2, created=0.0), gang("ns/urgent", 2, priority=5, created=9.0)
    s = allocated(session([node("n1", 2)], [old, urgent]))
    assert placed(s) == [("ns/urgent", 2)]
    assert isinstance(waiting(s)["ns/old"], DoesNotFit)


def test_extras_beyond_min_member_wait_for_their_queue_s_turn() -> None:
    # ns/run is whole (four of four bound) and wants two elastic extras; its queue already
    # holds half the cluster, so ns/new in an idle queue is served first and takes the room.
    run = gang("ns/run", 2, min_member=4, bound=4, queue="a", priority=100, first=4)
    new = gang("ns/new", 4, queue="b")
    s = allocated(session([node("n1", 8)], [run, new], running=bound_members("ns/run", 4, "n1"),
                          queues=[QueueSpec(QueueName("a")), QueueSpec(QueueName("b"))]))
    assert placed(s) == [("ns/new", 4)]
    reason = waiting(s)["ns/run"]
    assert isinstance(reason, DoesNotFit) and reason.bound == 4


def test_extras_of_a_gang_in_the_emptier_queue_go_before_a_fuller_queue_s_gang() -> None:
    run = gang("ns/run", 2, min_member=1, bound=1, queue="a", first=1)
    other = [pod(f"ns/busy-{i}", 1, gang="ns/busy", on="n1") for i in range(4)]
    busy = Gang(GangKey("ns/busy"), min_member=4, pending=(), bound=4, queue=QueueName("b"))
    new = gang("ns/new", 2, queue="b", priority=100)
    s = allocated(session(
        [node("n1", 4), node("n2", 3)], [run, busy, new],
        running=[*bound_members("ns/run", 1, "n2"), *other],
        queues=[QueueSpec(QueueName("a")), QueueSpec(QueueName("b"))]))
    assert placed(s) == [("ns/run", 2)]
    assert isinstance(waiting(s)["ns/new"], DoesNotFit)


def test_a_gang_whose_lost_member_finds_no_room_holds_room_for_it_and_not_for_its_extras() -> None:
    # ns/run lacks one two-core member and wants one extra; one core is free. Its lost
    # member's room is held at once (a gang below minMember idles all it runs), so the
    # core is not ns/tiny's; its extra is held nothing.
    run = gang("ns/run", 2, 2, min_member=3, bound=2, first=2)
    tiny = gang("ns/tiny", 1, priority=100)
    s = allocated(session([node("n1", 3)], [run, tiny], running=bound_members("ns/run", 2, "n1")))
    assert placed(s) == []
    reason = waiting(s)["ns/run"]
    assert isinstance(reason, Starving) and reason.urgency == PartlyBound(bound=2, min_member=3)
    assert reason.hold.get("cpu") == 2000, "one member's room, not the extra's"
    assert isinstance(reason.cause, DoesNotFit) and reason.cause.need == 1
    blocked = waiting(s)["ns/tiny"]
    assert isinstance(blocked, HeldForStarving) and blocked.starving == "ns/run"


def test_a_podgroup_with_no_pods_yet_is_admitted_in_its_queue_s_fair_turn() -> None:
    # Queue a already runs two cores; queue b's Spark PodGroup has no pods yet and asks
    # four. b is further below its share, so the PodGroup is admitted first and its
    # reservation stands against queue a's next gang, which would otherwise fit.
    spark = gang("ns/spark", 0, min_member=1, min_cpu=4, queue="b")
    run = Gang(GangKey("ns/a-run"), min_member=2, pending=(), bound=2, queue=QueueName("a"))
    new = gang("ns/a-new", 4, queue="a", priority=100)
    s = allocated(session([node("n1", 8)], [run, new, spark],
                          running=bound_members("ns/a-run", 2, "n1"),
                          queues=[QueueSpec(QueueName("a")), QueueSpec(QueueName("b"))]))
    assert "ns/spark" in s.newly_admitted and placed(s) == []
    reason = waiting(s)["ns/a-new"]
    assert isinstance(reason, ReservedByAdmitted)
    assert reason.reserved.get("cpu") == 4000 and reason.placed.get("cpu") == 4000


@PROPERTY
@given(st.lists(st.tuples(st.integers(1, 4), st.integers(0, 6)), min_size=1, max_size=4),
       st.integers(1, 12))
def test_no_queue_got_a_gang_while_another_with_gangs_waiting_was_further_below_its_share(
    drawn: list[tuple[int, int]], cores: int,
) -> None:
    # Queues of drawn weights, each with a drawn number of one-core gangs, on too few
    # cores for all: each queue's last gang went to it while it was the furthest
    # below its weighted share, so, its last gang taken back, it is not above any
    # queue that still has gangs waiting.
    specs = [QueueSpec(QueueName(f"q{i}"), weight=weight) for i, (weight, _) in enumerate(drawn)]
    gangs = [gang(f"ns/q{i}-{j}", 1, queue=f"q{i}", created=float(j))
             for i, (_, count) in enumerate(drawn) for j in range(count)]
    s = allocated(session([node("n1", cores)], gangs, queues=specs))
    got = {spec.name: 0 for spec in specs}
    for p in s.placements:
        got[QueueName(p.gang.split("-")[0].removeprefix("ns/"))] += 1
    assert sum(got.values()) == min(cores, len(gangs)), "no core left idle while gangs wait"
    waited = {QueueName(key.split("-")[0].removeprefix("ns/")) for key in waiting(s)}
    weight = {spec.name: spec.weight for spec in specs}
    for taker, taken in got.items():
        for behind in waited:
            if taken and behind != taker:
                assert Fraction(taken - 1, weight[taker]) <= Fraction(got[behind], weight[behind])
