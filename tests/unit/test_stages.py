"""Each stage of the cycle on its own, over one session: what it records and what it leaves."""

from __future__ import annotations

from dataclasses import replace

from gangsched.core.model.objects import Gang, GangKey, Policy, QueueName, QueueSpec
from gangsched.core.model.resources import Capability
from gangsched.core.placement.capacity import Snapshot
from gangsched.core.reasons import (
    AdmissionNoRoom,
    CapabilityExceeded,
    Gated,
    QueueMissing,
    Reason,
    Starving,
)
from gangsched.core.stages.admit import admit
from gangsched.core.stages.place import place
from gangsched.core.stages.session import CycleInput, Session, Waits
from gangsched.core.stages.starve import wait
from gangsched.core.stages.triage import triage
from gangsched.core.stages.trial import PLACED
from tests.unit.test_cycle import DEFAULT, SIX_CPU, cpu, gang, pod

CAPPED = QueueSpec(QueueName("q"), capability=Capability.parse({"cpu": 2}))


def session(*gangs: Gang, waiting_since: dict[str, float] | None = None) -> Session:
    return Session(CycleInput(
        snapshot=Snapshot.build(SIX_CPU, [pod("other/blocker", 1, on="n1")]),
        gangs=gangs,
        bound_requests={},
        queues={DEFAULT: QueueSpec(DEFAULT), CAPPED.name: CAPPED},
        admitted=frozenset(),
        waiting_since={GangKey(k): v for k, v in (waiting_since or {}).items()},
        now=100.0,
        policy=Policy.BINPACK,
    ))


def recorded(s: Session) -> dict[str, Reason]:
    return {u.gang: u.reason for u in (*s.unplaceable, *s.unadmitted)}


def test_triage_lets_through_only_gangs_that_room_could_place() -> None:
    gated = gang("ns/gated", 2)
    gated = replace(gated, pending=(replace(gated.pending[0], gates=("g",)), gated.pending[1]))
    s = session(gang("ns/ok", 1), gang("ns/lost", 1, queue="nope"), gated)
    assert [g.key for g in triage(s)] == ["ns/ok"]
    lost, stopped = recorded(s)["ns/lost"], recorded(s)["ns/gated"]
    assert lost == QueueMissing(QueueName("nope"))
    assert isinstance(stopped, Gated)
    assert s.reserved.is_zero, "a gang held back holds no room"


def test_admission_refused_records_why_and_promises_nothing() -> None:
    s = session(gang("ns/spark", 1, min_member=1, min_cpu=6))
    spark = s.gangs[0]
    refusal = admit(s, spark)
    assert isinstance(refusal, Waits) and isinstance(refusal.reason, AdmissionNoRoom)
    assert s.admitted == set() and s.reserved.is_zero


def test_admission_granted_reserves_the_whole_job() -> None:
    s = session(gang("ns/spark", 1, min_member=1, min_cpu=3))
    assert admit(s, s.gangs[0]) is True
    assert s.newly_admitted == ["ns/spark"]
    assert s.reserved == cpu(3)


def test_a_refused_placement_leaves_the_capacity_as_it_found_it() -> None:
    capped, other = gang("ns/a", 3, queue="q"), gang("ns/b", 3)
    s = session(capped, other)
    free_before = s.free
    tried = place(s, capped)
    assert tried is not None and isinstance(tried.reason, CapabilityExceeded) and tried.fitted
    assert s.placements == [] and s.free == free_before
    # The very room the refused gang tried is still there for the next one.
    assert place(s, other) == PLACED
    assert [p.gang for p in s.placements] == ["ns/b"]


def test_only_the_first_starving_gang_holds_room() -> None:
    first, second = gang("ns/a", 2), gang("ns/b", 2)
    s = session(first, second, waiting_since={"ns/a": 0.0, "ns/b": 0.0})
    wait(s, first, QueueMissing(QueueName("x")))
    wait(s, second, QueueMissing(QueueName("x")))
    assert s.starving == "ns/a"
    assert isinstance(recorded(s)["ns/a"], Starving)
    assert recorded(s)["ns/b"] == QueueMissing(QueueName("x"))
    assert set(s.holding) == {"ns/a"}
