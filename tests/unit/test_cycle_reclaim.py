"""Reclaim inside the cycle: a queue below its deserved share evicts whole gangs of queues
above theirs, never of a queue at or under its share, never of an opted-out queue, and not
again while its interval lasts."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from gangsched.core.model.objects import Gang, GangKey, NodeName, Pod, Policy, QueueName, QueueSpec
from gangsched.core.model.resources import Resources
from gangsched.core.placement.capacity import Snapshot
from gangsched.core.reasons import (
    DoesNotFit,
    NotReclaimable,
    Preempting,
    ProtectedByShare,
)
from gangsched.core.reports.explain import explain_gang
from gangsched.core.stages.cycle import CycleInput, CycleResult, run_cycle
from tests.unit.test_cycle import gang, node, pod, reasons
from tests.unit.test_dra import claim_obj, claiming, gpu_cluster, held_by, request

A, B, C = QueueName("a"), QueueName("b"), QueueName("c")
NODES = [node("n1", 4), node("n2", 4)]


def running(key: str, queue: QueueName, on: str, *, priority: int = 0,
            created: float = 0.0) -> tuple[Gang, tuple[Pod, ...]]:
    """A gang of two 1-CPU members bound on ``on``."""
    members = tuple(pod(f"{key}-{i}", 1, gang=key, on=on) for i in range(2))
    return (Gang(GangKey(key), 2, (), bound=2, queue=queue, priority=priority,
                 created=created), members)


def cycle(everyone: Iterable[tuple[Gang, tuple[Pod, ...]]], waiting: Iterable[Gang],
          queues: Iterable[QueueSpec], *, reclaim: bool = True,
          paused: frozenset[QueueName] = frozenset()) -> CycleResult:
    return run_cycle(inputs(everyone, waiting, queues, reclaim=reclaim, paused=paused))


def inputs(everyone: Iterable[tuple[Gang, tuple[Pod, ...]]], waiting: Iterable[Gang],
           queues: Iterable[QueueSpec], *, reclaim: bool = True,
           paused: frozenset[QueueName] = frozenset()) -> CycleInput:
    gangs = list(everyone)
    return CycleInput(
        snapshot=Snapshot.build(NODES, [p for _, members in gangs for p in members]),
        gangs=(*(g for g, _ in gangs), *waiting),
        bound_requests={g.key: Resources.sum(p.requests for p in members) for g, members in gangs},
        queues={spec.name: spec for spec in queues},
        admitted=frozenset(), waiting_since={}, now=1000.0, policy=Policy.BINPACK,
        bound_pods={g.key: members for g, members in gangs},
        preemption=True, reclaim=reclaim, reclaim_paused=paused,
    )


def a_holds_everything(priority: int = 0) -> list[tuple[Gang, tuple[Pod, ...]]]:
    """Queue a's four gangs fill both nodes: it borrowed b's half while b was empty."""
    return [running(f"ns/a-{i}", A, f"n{1 + i // 2}", priority=priority, created=i)
            for i in range(4)]


def test_a_queue_below_its_share_reclaims_whole_gangs_of_the_queue_above() -> None:
    # b's gang has higher priority than nothing: reclaim, not preemption, makes its room.
    result = cycle(a_holds_everything(priority=5), [gang("ns/b-0", 2, queue="b")],
                   [QueueSpec(A), QueueSpec(B)])
    (chosen,) = result.preemptions
    assert chosen.reclaim_for == "b" and chosen.preemptor == "ns/b-0"
    assert chosen.victims == ("ns/a-3",), "the youngest of a's gangs, whole"
    reason = reasons(result)["ns/b-0"]
    assert isinstance(reason, Preempting) and reason.reclaim_for == "b"
    assert reason.victims == ("ns/a-3",)


def test_a_queue_is_never_taken_below_its_share_nor_a_queue_past_its_own() -> None:
    # a holds 6 of 8 CPUs, b 2: b deserves 4, so it may reclaim 2 more, not 4 (that would
    # put it past its share), and a may go down to its 4, not below.
    gangs = [running("ns/a-0", A, "n1"), running("ns/a-1", A, "n1"),
             running("ns/a-2", A, "n2"), running("ns/b-run", B, "n2")]
    small = cycle(gangs, [gang("ns/b-0", 2, queue="b")], [QueueSpec(A), QueueSpec(B)])
    (taken,) = small.preemptions
    assert len(taken.victims) == 1 and taken.victims[0].startswith("ns/a-")
    big = cycle(gangs, [gang("ns/b-big", 4, queue="b")], [QueueSpec(A), QueueSpec(B)])
    assert big.preemptions == ()
    # Three queues: a holds 6, c 2; b deserves a third. c is under its share: never a victim.
    three = cycle([*gangs[:3], running("ns/c-run", C, "n2")], [gang("ns/b-0", 2, queue="b")],
                  [QueueSpec(A), QueueSpec(B), QueueSpec(C)])
    (taken,) = three.preemptions
    assert len(taken.victims) == 1 and taken.victims[0].startswith("ns/a-")


def test_an_opted_out_queue_is_never_reclaimed_from() -> None:
    result = cycle(a_holds_everything(), [gang("ns/b-0", 2, queue="b")],
                   [QueueSpec(A, reclaimable=False), QueueSpec(B)])
    assert result.preemptions == ()
    assert not isinstance(reasons(result)["ns/b-0"], Preempting)


def test_a_gang_kept_waiting_only_by_an_opted_out_queue_says_so() -> None:
    specs = [QueueSpec(A, reclaimable=False), QueueSpec(B)]
    result = cycle(a_holds_everything(), [gang("ns/b-0", 2, queue="b")], specs)
    reason = reasons(result)["ns/b-0"]
    assert isinstance(reason, NotReclaimable) and reason.queues == (A,)
    assert isinstance(reason.cause, DoesNotFit) and reason.cause.need == 2
    # Past b's share (4 of 8 CPUs) reclaim could not help: the reason is the fit's.
    big = cycle(a_holds_everything(), [gang("ns/b-big", 5, queue="b")], specs)
    assert isinstance(reasons(big)["ns/b-big"], DoesNotFit)
    inp = inputs(a_holds_everything(), [gang("ns/b-0", 2, queue="b")], specs)
    explained = explain_gang(inp, run_cycle(inp), GangKey("ns/b-0"))
    assert explained is not None
    assert any("not reclaimable" in remedy for remedy in explained.remedies), explained


def test_reclaim_is_off_unless_asked_and_paused_after_a_queue_reclaimed() -> None:
    specs = [QueueSpec(A), QueueSpec(B)]
    assert cycle(a_holds_everything(), [gang("ns/b-0", 2, queue="b")], specs,
                 reclaim=False).preemptions == ()
    assert cycle(a_holds_everything(), [gang("ns/b-0", 2, queue="b")], specs,
                 paused=frozenset({B})).preemptions == ()


def test_weights_and_the_tree_set_what_a_queue_deserves() -> None:
    # b weighs 3 against a's 1: it deserves 6 of 8 CPUs and may take 4 back in one go.
    result = cycle(a_holds_everything(), [gang("ns/b-0", 4, queue="b")],
                   [QueueSpec(A), QueueSpec(B, weight=3)])
    (chosen,) = result.preemptions
    assert len(chosen.victims) == 2
    # Under a team whose other queue is idle, b deserves what the team does: half.
    tree = [QueueSpec(QueueName("team")), QueueSpec(A),
            replace(QueueSpec(B), parent=QueueName("team")),
            replace(QueueSpec(C), parent=QueueName("team"))]
    under_team = cycle(a_holds_everything(), [gang("ns/b-0", 4, queue="b")], tree)
    assert len(under_team.preemptions[0].victims) == 2


TEAMS = [QueueSpec(QueueName("t1")), QueueSpec(QueueName("t2")),
         *(replace(QueueSpec(QueueName(leaf)), parent=QueueName(team))
           for leaf, team in (("a1", "t1"), ("a2", "t1"), ("b1", "t2"), ("b2", "t2")))]
"""Two teams of two queues, all of equal weight: each team deserves 4 of the 8 CPUs, each
queue with work 2 of them."""


def test_a_team_at_its_share_is_not_reclaimed_from_though_one_of_its_queues_borrowed() -> None:
    """b1 holds 4 CPUs, twice its queue's share, but only because its team's other queue
    b2 has not got its own yet: team t2 holds exactly its share. a1 reclaims from its own
    team's a2, which borrowed from a1, never from t2, though b1's gangs are the youngest."""
    everyone = [running("ns/a2-0", QueueName("a2"), "n1", created=0.0),
                running("ns/a2-1", QueueName("a2"), "n1", created=1.0),
                running("ns/b1-0", QueueName("b1"), "n2", created=2.0),
                running("ns/b1-1", QueueName("b1"), "n2", created=3.0)]
    waiting = [gang("ns/a1-0", 2, queue="a1"),
               gang("ns/b2-big", 6, queue="b2")]  # more than b2 deserves: it reclaims nothing
    result = cycle(everyone, waiting, TEAMS)
    (chosen,) = result.preemptions
    assert (chosen.preemptor, chosen.reclaim_for) == ("ns/a1-0", "a1")
    assert chosen.victims == ("ns/a2-1",), "the youngest gang of a2, in a1's own team"


def test_a_queue_of_a_team_past_its_share_reclaims_only_within_its_team() -> None:
    """Teams t1 and t2 deserve 2 CPUs each, t3 (weight 2) 4, but t3's one gang is too big
    to run: t1 and t2 hold 4 each. a1, under its own share of 1, may take back from its
    own team's a2, not from t2's b1: that would put its team further past its share,
    though b1 is past its own too and its gangs are the youngest."""
    teams = [*TEAMS, QueueSpec(QueueName("t3"), weight=2),
             replace(QueueSpec(QueueName("c1")), parent=QueueName("t3"))]
    everyone = [running("ns/a2-0", QueueName("a2"), "n1", created=0.0),
                running("ns/a2-1", QueueName("a2"), "n1", created=1.0),
                running("ns/b1-0", QueueName("b1"), "n2", created=2.0),
                running("ns/b1-1", QueueName("b1"), "n2", created=3.0)]
    waiting = [gang("ns/a1-0", 1, queue="a1"), gang("ns/c1-big", 8, queue="c1")]
    result = cycle(everyone, waiting, teams)
    (chosen,) = result.preemptions
    assert (chosen.preemptor, chosen.victims) == ("ns/a1-0", ("ns/a2-1",))


def test_priority_takes_from_another_team_only_room_that_team_borrows() -> None:
    """With reclaim on, a1's high-priority gang evicts a2's gang, which borrows within its
    own team, not b1's younger one: b1 borrows from b2, but team t2 holds only its share,
    and what priority took from t2 t2 would reclaim back. With reclaim off, priority alone
    decides, as before."""
    everyone = [running("ns/a2-0", QueueName("a2"), "n1", created=0.0),
                running("ns/a2-1", QueueName("a2"), "n1", created=1.0),
                running("ns/b1-0", QueueName("b1"), "n2", created=2.0),
                running("ns/b1-1", QueueName("b1"), "n2", created=3.0)]
    waiting = [gang("ns/a1-hi", 2, queue="a1", priority=1000),
               gang("ns/b2-big", 6, queue="b2")]
    (chosen,) = cycle(everyone, waiting, TEAMS).preemptions
    assert (chosen.preemptor, chosen.victims, chosen.reclaim_for) == (
        "ns/a1-hi", ("ns/a2-1",), None)
    (by_priority,) = cycle(everyone, waiting, TEAMS, reclaim=False).preemptions
    assert by_priority.victims == ("ns/b1-1",)


def test_a_gang_that_would_take_another_queue_below_its_share_waits_and_says_so() -> None:
    everyone = [*(running(f"ns/a-{i}", A, "n1", priority=1000, created=i) for i in range(2)),
                *(running(f"ns/b-{i}", B, "n2", created=i) for i in range(2))]
    waiting = [gang("ns/a-hi", 2, queue="a", priority=1000)]
    inp = inputs(everyone, waiting, [QueueSpec(A), QueueSpec(B)])
    result = run_cycle(inp)
    assert result.preemptions == ()
    reason = reasons(result)["ns/a-hi"]
    assert isinstance(reason, ProtectedByShare) and reason.queues == (B,)
    assert isinstance(reason.cause, DoesNotFit)
    explained = explain_gang(inp, result, GangKey("ns/a-hi"))
    assert explained is not None
    assert any("above its deserved share" in remedy for remedy in explained.remedies), explained
    # b above its share gives up the room it borrows, by priority, as before.
    borrowing = [everyone[0], *(running(f"ns/b-{i}", B, on, created=i)
                                for i, on in enumerate(["n1", "n2", "n2"]))]
    (chosen,) = cycle(borrowing, waiting, [QueueSpec(A), QueueSpec(B)]).preemptions
    assert chosen.victims == ("ns/b-2",)


def test_a_queue_below_its_share_reclaims_gpus_a_borrowing_queue_holds_through_claims() -> None:
    """Queue a runs a gang on each node's eight GPUs (claims) and a cpu gang; b's gang
    claims eight GPUs. Evicting a GPU gang of a deallocates its claim, so one of those
    goes, not the cpu gang, which frees no device."""
    def bound(key: str, on: str, *claims: str, cores: int = 1) -> tuple[Gang, list[Pod]]:
        member = replace(claiming(f"{key}-0", *claims), node_name=NodeName(on),
                         gang=GangKey(key), requests=Resources.of({"cpu": cores * 1000}))
        return Gang(GangKey(key), 1, (), bound=1, queue=A), [member]

    running_a = [bound("ns/a-0", "n-0", "a0"), bound("ns/a-1", "n-1", "a1"),
                 bound("ns/a-cpu", "n-0", cores=15)]
    claims = [claim_obj("a0", request(count=8), status=held_by("n-0", range(8), "a-0-0")),
              claim_obj("a1", request(count=8), status=held_by("n-1", range(8), "a-1-0")),
              claim_obj("b0", request(count=8))]
    waiting_b = Gang(GangKey("ns/b-0"), 1, (claiming("ns/b-0-0", "b0"),), queue=B)
    result = run_cycle(gpu_cluster(["n-0", "n-1"], claims, running_a, [waiting_b],
                                   queues={A: QueueSpec(A), B: QueueSpec(B)},
                                   preemption=True, reclaim=True))
    (chosen,) = result.preemptions
    assert chosen.reclaim_for == "b" and chosen.victims in (("ns/a-0",), ("ns/a-1",))
