"""The actuator carries a step's actions out and folds their outcomes back into the state.

The writers are replaced by recording fakes of our own classes (the binder,
the evictor and the reporter): what is checked is which call each action
becomes, with which records, and what an outcome does to the state.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, cast

from prometheus_client import REGISTRY
from structlog.testing import capture_logs

from gangsched.actuator import Actuator, ScheduledEvents
from gangsched.allocations import ClaimWriter
from gangsched.binder import Binder, BindOutcome
from gangsched.core.actions import (
    Action,
    Bind,
    Evict,
    ForgetWritten,
    LogDecision,
    MarkGroupInvalid,
    MarkUnschedulable,
    WriteGroupStatus,
    WriteQueueStatus,
)
from gangsched.core.dra.devices import ClaimKey
from gangsched.core.dra.placing import ClaimWrite
from gangsched.core.kubeobjects.groups import Flavor, GroupStatus, MemberCounts, Phase
from gangsched.core.kubeobjects.status_bodies import QueueStatus
from gangsched.core.model.objects import GangKey, NodeName, PodKey, QueueName
from gangsched.core.model.resources import Resources
from gangsched.core.placement.capacity import Placement
from gangsched.core.placement.preemption import Preemption
from gangsched.core.state import InFlight, State
from gangsched.dispatcher import Answer
from gangsched.evictor import EvictionOutcome, Evictor
from gangsched.feed import Feed
from gangsched.mirror import Mirror
from gangsched.reporting import Reporter
from tests.unit.test_scheduler_reuse import node, pod, podgroup

JOB = GangKey("ns/job")


@dataclass
class RecordingReporter:
    """Notes every call the actuator makes, by method name and arguments."""

    calls: list[tuple[str, tuple[Any, ...]]] = field(default_factory=list)

    def __getattr__(self, name: str) -> Callable[..., None]:
        def record(*args: Any, **kwargs: Any) -> None:
            self.calls.append((name, args))
        return record

    async def drain(self) -> None:
        return None

    def named(self, name: str) -> list[tuple[Any, ...]]:
        return [args for called, args in self.calls if called == name]


@dataclass
class AnsweringBinder:
    status: int
    asked: list[Placement] = field(default_factory=list)

    async def bind_gang(self, placement: Placement,
                        uids: Mapping[PodKey, str] | None = None) -> list[BindOutcome]:
        self.asked.append(placement)
        return [BindOutcome(p, n, self.status, "denied by policy")
                for p, n in placement.assignments]


@dataclass
class RefusingEvictor:
    async def evict_all(
        self, pods: tuple[PodKey, ...], uids: Mapping[PodKey, str] | None = None
    ) -> tuple[list[EvictionOutcome], list[EvictionOutcome]]:
        return [EvictionOutcome(pods[0], 429, "Cannot evict pod: budget")], []


@dataclass
class Shell:
    mirror: Mirror
    reporter: RecordingReporter
    binder: AnsweringBinder
    actuator: Actuator
    state: State
    woken: int = 0


def shell(status: int = 201, state: State | None = None) -> Shell:
    mirror = Mirror(scheduler_names=frozenset({"gang"}))
    Feed(mirror).replace("nodes", [node("n1", 2)])
    Feed(mirror).replace("pods", [pod("job-0", "job", 1), pod("job-1", "job", 1),
                            pod("old-0", "old", 1)])
    Feed(mirror).upsert_group(Flavor.GANGSCHED, podgroup("job", 2, None))
    reporter, binder = RecordingReporter(), AnsweringBinder(status)
    made = Shell(mirror, reporter, binder, cast(Actuator, None), state or State())

    def fold(change: Callable[[State], State]) -> State:
        made.state = change(made.state)
        return made.state

    def wake() -> None:
        made.woken += 1

    made.actuator = Actuator(
        mirror=mirror, binder=cast(Binder, binder), reporter=cast(Reporter, reporter),
        fold=fold, trigger=wake, clock=lambda: 500.0,
        evictor=cast(Evictor, RefusingEvictor()), scheduled_events=ScheduledEvents.POD,
        unevictable_s=15.0,
    )
    return made


PLACEMENT = Placement(JOB, ((PodKey("ns/job-0"), NodeName("n1")),
                            (PodKey("ns/job-1"), NodeName("n1"))))


def carry(made: Shell, *actions: Action) -> None:
    async def run() -> None:
        made.actuator.carry_out(actions, made.mirror.view(), 500.0, cycle=1, cycle_ms=1.0)
        seen = {pod: made.mirror.is_placed(pod) for pod, _ in PLACEMENT.assignments}
        made.reporter.calls.append(("placed_before_answer", (seen,)))
        await made.actuator.drain()

    asyncio.run(run())


def test_a_gang_is_assumed_before_its_binds_and_bound_pods_are_reported() -> None:
    made = shell(201)
    carry(made, Bind(PLACEMENT, first_created=None))
    assert made.binder.asked == [PLACEMENT]
    (seen,) = made.reporter.named("placed_before_answer")
    assert seen == ({PodKey("ns/job-0"): True, PodKey("ns/job-1"): True},)
    assert [args[0] for args in made.reporter.named("pod_placed")] == ["ns/job-0", "ns/job-1"]
    scheduled = made.reporter.named("pod_scheduled")
    assert [(args[0].pod.key, args[1]) for args in scheduled] == [
        ("ns/job-0", "n1"), ("ns/job-1", "n1")]
    assert made.state.bind_refusals == {} and made.woken == 0


def test_a_refused_bind_is_forgotten_in_the_mirror_and_backs_off_in_the_state() -> None:
    made = shell(403)
    carry(made, Bind(PLACEMENT, first_created=None))
    assert not made.mirror.is_placed(PodKey("ns/job-0")), "its room is free again"
    refusal = made.state.bind_refusals[PodKey("ns/job-0")]
    assert (refusal.refusals, refusal.status, refusal.until) == (1, 403, 501.0)
    assert refusal.message == "denied by policy"
    assert made.woken == 1, "its gang now says why it waits"


def test_a_refused_eviction_ends_the_preemption_and_spares_the_victim_a_while() -> None:
    placement = Placement(JOB, ())
    preemption = Preemption(JOB, (GangKey("ns/old"),), (PodKey("ns/old-0"),), placement)
    made = shell(state=State(preempting={JOB: InFlight(frozenset({GangKey("ns/old")}), 400.0)}))
    carry(made, Evict(preemption, {GangKey("ns/old"): (PodKey("ns/old-0"),)}, ()))
    assert made.state.preempting == {}
    assert made.state.unevictable == {GangKey("ns/old"): 515.0}
    assert made.reporter.named("preempted") == [], "nobody was preempted"


def test_reports_go_to_the_reporter_with_the_records_of_the_view() -> None:
    made = shell()
    status = GroupStatus(Phase.PENDING, MemberCounts(), "Unschedulable", "no room")
    carry(made,
          MarkUnschedulable(PodKey("ns/job-0"), "no room"),
          MarkUnschedulable(PodKey("ns/job-1"), "gated", gated=True),
          MarkUnschedulable(PodKey("ns/gone"), "no room"),
          WriteGroupStatus(JOB, status, 1),
          MarkGroupInvalid(JOB),
          WriteQueueStatus(QueueName("default"), QueueStatus(Resources.zero(), 1, 0),
                           Fraction(0), Fraction(1)),
          ForgetWritten(),
          LogDecision.of("gang_waiting", gang=JOB))
    names = [name for name, _ in made.reporter.calls if name != "placed_before_answer"]
    assert names == ["pod_unschedulable", "pod_gated", "group_status", "group_invalid",
                     "queue_status", "retain"], "a pod gone from the view is skipped"
    (record, message), = made.reporter.named("pod_unschedulable")
    assert (record.uid, message) == ("uid-job-0", "no room")
    (group, written, observed), = made.reporter.named("group_status")
    assert (group.uid, written, observed) == ("uid-job", status, 1)


class BrokenBinder:
    async def bind_gang(self, placement: Placement,
                        uids: Mapping[PodKey, str] | None = None) -> list[BindOutcome]:
        raise RuntimeError("a bug in the binder")


def test_a_bind_that_fails_on_a_bug_is_logged_not_lost() -> None:
    made = shell()
    made.actuator.binder = cast(Binder, BrokenBinder())
    with capture_logs() as logs:
        carry(made, Bind(PLACEMENT, first_created=None))
    (failed,) = [line for line in logs if line["event"] == "action_failed"]
    assert failed["task"] == "bind-ns/job" and "a bug in the binder" in failed["error"]
    assert made.actuator.tasks == set()


def sample(name: str, **labels: str) -> float | None:
    return REGISTRY.get_sample_value(name, labels)


def test_a_bind_failure_is_counted_under_its_http_code() -> None:
    before = sample("gangsched_bind_failures_total", code="403") or 0.0
    carry(shell(403), Bind(PLACEMENT, first_created=None))
    assert sample("gangsched_bind_failures_total", code="403") == before + 2


def test_a_gang_wait_is_counted_under_its_queue() -> None:
    queue = {"queue": "wait-test"}
    carry(shell(201), Bind(PLACEMENT, first_created=490.0, queue=QueueName("wait-test")))
    assert sample("gangsched_gang_wait_seconds_count", **queue) == 1
    assert sample("gangsched_gang_wait_seconds_sum", **queue) == 10.0, "clock 500, created 490"


def test_queue_gauges_follow_what_the_queue_holds_and_go_with_the_queue() -> None:
    made, gpu = shell(), QueueName("gpu-test")
    held = Resources.of({"cpu": 1500, "nvidia.com/gpu": 2})
    carry(made, WriteQueueStatus(gpu, QueueStatus(held, 1, 2), Fraction(1, 2), Fraction(1, 3)))
    allocated = "gangsched_queue_allocated"
    assert sample(allocated, queue=gpu, resource="cpu") == 1.5, "cores, not milli-CPU"
    assert sample(allocated, queue=gpu, resource="nvidia.com/gpu") == 2
    assert sample("gangsched_queue_dominant_share", queue=gpu) == 0.5
    assert sample("gangsched_queue_weight_share", queue=gpu) == 1 / 3
    assert sample("gangsched_pending_gangs", queue=gpu) == 1
    carry(made, WriteQueueStatus(gpu, QueueStatus(Resources.of({"cpu": 1000}), 0, 1),
                                 Fraction(1, 4), Fraction(1, 3)))
    assert sample(allocated, queue=gpu, resource="nvidia.com/gpu") is None, "none held now"
    assert sample(allocated, queue=gpu, resource="cpu") == 1
    carry(made, ForgetWritten())  # the view has no such queue: it was deleted
    assert sample(allocated, queue=gpu, resource="cpu") is None
    assert sample("gangsched_queue_weight_share", queue=gpu) is None


@dataclass
class HalfEvictor:
    """Lets the dry run pass and then the first pod go, refusing the rest: a budget
    spent by someone else between the two."""

    async def evict_all(
        self, pods: tuple[PodKey, ...], uids: Mapping[PodKey, str] | None = None
    ) -> tuple[list[EvictionOutcome], list[EvictionOutcome]]:
        return [], [EvictionOutcome(p, 201 if i == 0 else 429, "budget")
                    for i, p in enumerate(pods)]


def test_an_eviction_stopped_half_way_ends_the_preemption_and_holds_the_victims_room() -> None:
    old, gone, kept = GangKey("ns/old"), PodKey("ns/old-0"), PodKey("ns/old-1")
    made = shell(state=State(preempting={JOB: InFlight(frozenset({old}), 400.0)}))
    Feed(made.mirror).upsert("pods", pod("old-1", "old", 1))
    Feed(made.mirror).upsert_group(Flavor.GANGSCHED, podgroup("old", 2, None))
    made.actuator.evictor = cast(Evictor, HalfEvictor())
    events = RecordingReporter()
    made.reporter.events = events  # type: ignore[attr-defined]
    preemption = Preemption(JOB, (old,), (gone, kept), Placement(JOB, ()))
    carry(made, Evict(preemption, {old: (gone, kept)}, ()))
    assert made.state.preempting == {}, "the preemptor holds no room for a victim that stays"
    assert made.state.unevictable == {old: 515.0}
    # The member that went is seated as of the last cycle: the next sees it depart and
    # holds its room for a replacement, as for any running gang that loses a member.
    assert made.state.seats[gone].gang == old and kept not in made.state.seats
    on_groups = {(args[0].key, args[1]) for args in events.named("on_group")}
    assert on_groups == {("ns/old", "PreemptionStopped"), ("ns/job", "PreemptionStopped")}
    assert [(args[0].pod.key, args[1]) for args in events.named("on_pod")] == [
        (kept, "PreemptionStopped")]
    assert events.named("preempted"), "the preemption is reported as it went"


@dataclass
class RefusingClaimWriter:
    """Our claim writer's contract, answering every write with one refusal."""

    status: int

    async def write(self, writes: Any) -> list[Answer]:
        return [Answer(self.status, "requires resource=resourceclaims/binding")] * len(writes)

    async def undo(self, writes: Any) -> None:
        return None


def test_a_gang_whose_claim_writes_are_refused_is_a_failure_not_a_placement() -> None:
    """What the alerts read: a gang retried on refused claim writes for ever must count as
    failing binds and never as placed, or GangschedGangsStuck and GangschedBindFailures
    stay silent while it waits."""
    made = shell(201)
    made.actuator.claims = cast(ClaimWriter, RefusingClaimWriter(422))
    write = ClaimWrite(ClaimKey("ns/gpus"), "uid-gpus", "1", None, ())
    placed, failures = sample("gangsched_gangs_placed_total"), sample(
        "gangsched_bind_failures_total", code="422") or 0.0
    carry(made, Bind(Placement(JOB, PLACEMENT.assignments, (write,)), first_created=None))
    assert made.binder.asked == [], "no pod is bound without its devices"
    assert sample("gangsched_gangs_placed_total") == placed
    assert sample("gangsched_bind_failures_total", code="422") == failures + 2


def test_a_gang_counts_as_placed_once_its_binds_are_taken() -> None:
    placed = sample("gangsched_gangs_placed_total")
    carry(shell(403), Bind(PLACEMENT, first_created=None))
    assert sample("gangsched_gangs_placed_total") == placed, "refused binds place nothing"
    carry(shell(201), Bind(PLACEMENT, first_created=None))
    assert sample("gangsched_gangs_placed_total") == (placed or 0.0) + 1
