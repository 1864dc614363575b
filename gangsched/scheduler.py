"""The scheduling loop: wake on change, take a view, run the pure cycle, act on it.

One cycle at a time, debounced: a burst of watch events (an operator creating
64 pods) becomes one cycle over all of them, not 64 cycles over a growing
gang. The cycle itself is synchronous and pure; only binding and reporting
await, on tasks of their own, after the placements are assumed in the mirror.

A settled cluster is cheap to keep deciding on: the mirror counts its changes,
and a cycle whose inputs are those of the last full cycle, which changed none
of them, reuses that answer until the clock reaches a threshold that would
change it (:mod:`gangsched.core.thresholds`). Full cycles still run for a
while after every change and once a minute, so what the reporter rate-limits
goes out as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

import structlog
from prometheus_client import Counter, Gauge, Histogram

from gangsched.binder import Binder, BindOutcome
from gangsched.core.backoff import BindRefusal, refused
from gangsched.core.cycle import CycleResult, run_cycle
from gangsched.core.gangs import Gathered
from gangsched.core.groups import (
    Flavor,
    GroupSpec,
    GroupStatus,
    MemberCounts,
    Phase,
    group_status,
)
from gangsched.core.holds import GroupLife, Hold, Seat, seats_of, update_holds
from gangsched.core.model import GangKey, PodKey, Policy, QueueName
from gangsched.core.placement import Placement
from gangsched.core.preemption import Preemption
from gangsched.core.reasons import Reason, Reported, reported_reasons
from gangsched.core.resources import Resources
from gangsched.core.thresholds import next_threshold
from gangsched.decisions import cycle_input, gather_view
from gangsched.evictor import Evictor
from gangsched.mirror import Mirror, View
from gangsched.reporting import Reporter

log = structlog.get_logger(__name__)

CYCLES = Counter("gangsched_cycles_total", "Scheduling cycles run")
CYCLE_SECONDS = Histogram(
    "gangsched_cycle_seconds", "Wall time of one scheduling cycle",
    buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)
GANGS_PLACED = Counter("gangsched_gangs_placed_total", "Gangs placed")
PODS_BOUND = Counter("gangsched_pods_bound_total", "Pods bound")
BIND_FAILURES = Counter("gangsched_bind_failures_total", "Binding calls that failed")
GANGS_WAITING = Gauge("gangsched_gangs_waiting", "Gangs with pending pods not placed")
GANG_WAIT_SECONDS = Histogram(
    "gangsched_gang_wait_seconds",
    "From the creation of a gang's first member to the whole gang bound",
    buckets=(0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600),
)
PENDING_GANGS = Gauge(
    "gangsched_pending_gangs", "PodGroups not yet running nor finished, per queue", ["queue"]
)
GANGS_PREEMPTED = Counter("gangsched_gangs_preempted_total", "Gangs evicted whole for another")
WRITE_QUEUE_DEPTH = Gauge(
    "gangsched_write_queue_depth",
    "Status writes and Events waiting to go out to the API server (at most one per object)",
)


class ScheduledEvents(enum.Enum):
    """Where the ``Scheduled`` Event of a bound gang goes."""

    GANG = "gang"
    """One on the PodGroup naming every pod's node; pods without a PodGroup get their own."""
    POD = "pod"
    """One on every pod, as kube-scheduler writes them."""


FAIL_CYCLE_AFTER_ENV = "GANGSCHED_FAIL_CYCLE_AFTER"
"""Fault injection for tests: with this set to N, every cycle after the N-th raises,
as a bug in the cycle would. Unset in any real deployment."""


class InjectedFault(RuntimeError):
    """The failure ``GANGSCHED_FAIL_CYCLE_AFTER`` asks for."""


def _fail_cycle_after() -> int | None:
    value = os.environ.get(FAIL_CYCLE_AFTER_ENV, "")
    return int(value) if value else None


@dataclass
class SchedulerConfig:
    policy: Policy = Policy.BINPACK
    debounce_s: float = 0.05
    resync_s: float = 5.0
    assume_ttl_s: float = 60.0
    starvation_s: float = 60.0
    replacement_grace_s: float = 60.0
    preemption: bool = True
    preemption_timeout_s: float = 60.0
    """A preemptor not placed this long after its victims were evicted stops holding room."""
    unevictable_s: float = 15.0
    """A gang the Eviction API refused (a PodDisruptionBudget) is no victim for this long."""
    reuse_unchanged: bool = True
    """A cycle whose inputs did not change since the last full one, and for which the
    clock crossed no threshold (:mod:`gangsched.core.thresholds`), reuses its answer
    instead of deciding again: a settled cluster costs next to nothing per resync."""
    settle_s: float = 15.0
    """After the inputs change, every cycle decides in full for this long, so what the
    reporter held back (an Event within ``EVENT_CHANGE_GAP_S`` of the last) goes out."""
    reason_hold_s: float = 60.0
    """A waiting gang's reported reason keeps its figures this long when only they moved
    (see :func:`gangsched.core.reasons.reported_reasons`)."""
    pod_report_s: float = 300.0
    """A waiting pod is reported to the reporter when its reason changes, and with an
    unchanged reason again after this long (its FailedScheduling Event sent again, a
    failed condition write retried), as kube-scheduler retries an unschedulable pod
    within five minutes: thousands of waiting pods must not cost an Event each a minute."""
    scheduled_events: ScheduledEvents = ScheduledEvents.GANG
    """One ``Scheduled`` Event per gang, on its PodGroup, or one per pod as kube-scheduler."""
    refresh_s: float = 60.0
    """With nothing changed, a full cycle still runs this often: Events about pods still
    waiting are sent again (at most once a ``EVENT_INTERVAL_S``) and failed writes retried."""
    fail_cycle_after: int | None = field(default_factory=_fail_cycle_after)
    """Fault injection for tests (``GANGSCHED_FAIL_CYCLE_AFTER``): cycles after this many raise."""


@dataclass(frozen=True, slots=True)
class InFlight:
    """A preemption under way: its victims are being evicted or are terminating."""

    victims: frozenset[GangKey]
    since: float


@dataclass(frozen=True, slots=True)
class PodReport:
    """What a waiting pod was last reported as waiting for.

    Reported every cycle while the reason is new (for ``settle_s``, so an Event the
    reporter held back goes out once it settles), then once every ``pod_report_s``.
    """

    uid: str
    reason: str
    since: float
    at: float


@dataclass(frozen=True, slots=True)
class Settled:
    """A full cycle's answer that a cycle on the same inputs gives again, until ``until``."""

    inputs: tuple[object, ...]
    result: CycleResult
    since: float
    """When a full cycle first reached this answer on these inputs."""
    ran_at: float
    """When a full cycle last ran on them."""
    until: float
    """The first threshold the clock reaches after ``ran_at``."""


@dataclass
class Scheduler:
    mirror: Mirror
    binder: Binder
    reporter: Reporter
    config: SchedulerConfig = field(default_factory=SchedulerConfig)
    clock: Callable[[], float] = time.time
    may_act: Callable[[], bool] = lambda: True
    """False while a leader cannot be sure it still holds its lease: no cycle runs."""
    evictor: Evictor | None = None
    """Preemption is off without one."""
    admitted: frozenset[GangKey] = frozenset()
    preempting: dict[GangKey, InFlight] = field(default_factory=dict)
    unevictable: dict[GangKey, float] = field(default_factory=dict)
    """Gangs the Eviction API refused, to when they may be chosen again."""
    waiting_since: dict[GangKey, float] = field(default_factory=dict)
    finished_uids: set[str] = field(default_factory=set)
    holds: tuple[Hold, ...] = ()
    seats: dict[PodKey, Seat] = field(default_factory=dict)
    """Last cycle's live members of groups: who is missing now departed since."""
    group_uids: dict[GangKey, str] = field(default_factory=dict)
    """The UID each group had last cycle: a new UID under the same name is a new group."""
    bind_refusals: dict[PodKey, BindRefusal] = field(default_factory=dict)
    """Pods whose last bind was refused, backing off (see core.backoff)."""
    _wake: asyncio.Event = field(default_factory=asyncio.Event)
    _binds: set[asyncio.Task[None]] = field(default_factory=set)
    """Binds and evictions under way."""
    _status_stale: bool = False
    _cycle_no: int = 0
    _last_cycle_s: float = 0.0
    _logged_reasons: dict[GangKey, str] = field(default_factory=dict)
    _reported: dict[GangKey, Reported] = field(default_factory=dict)
    _pod_reports: dict[PodKey, PodReport] = field(default_factory=dict)
    _settled: Settled | None = None
    _full_cycles: int = 0
    _thresholds: list[float] = field(default_factory=list)
    """Moments at which the last full cycle's answer changes with the clock alone."""
    on_cycle: Callable[[], None] = lambda: None
    """Called after every cycle: the liveness probe counts them."""

    def __post_init__(self) -> None:
        WRITE_QUEUE_DEPTH.set_function(self.reporter.queued)

    def trigger(self) -> None:
        self._wake.set()

    def status_changed(self) -> None:
        """Something a status reports changed, nothing a decision reads: a member
        started running. While gangs are binding the cycle that reports it waits
        for the binds to end (the resync bounds the wait), so a flood of binds
        is not slowed by a cycle per confirmation."""
        if self._binds:
            self._status_stale = True
        else:
            self.trigger()

    def _track(self, task: asyncio.Task[None]) -> None:
        self._binds.add(task)
        task.add_done_callback(self._untrack)

    def _untrack(self, task: asyncio.Task[None]) -> None:
        self._binds.discard(task)
        if not self._binds and self._status_stale:
            self._status_stale = False
            self.trigger()

    async def run(self) -> None:
        while True:
            # The resync timeout: schedule timeouts and starvation advance with the clock alone.
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for may swallow a
            # cancellation that meets a wake-up, and this loop would never stop.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.config.resync_s):
                    await self._wake.wait()
            # Coalesce a burst of events into one cycle, and under load keep cycles
            # to about a third of the loop's time so binds and watches keep flowing.
            await asyncio.sleep(max(self.config.debounce_s, 2 * self._last_cycle_s))
            self._wake.clear()
            if self.may_act():
                self.cycle()

    async def drain(self) -> None:
        while self._binds:
            await asyncio.gather(*list(self._binds), return_exceptions=True)
        await self.reporter.drain()

    # ---- one cycle ------------------------------------------------------------
    def cycle(self) -> CycleResult:
        """Decide, or reuse the last answer when nothing it depends on has changed."""
        self._cycle_no += 1
        limit = self.config.fail_cycle_after
        if limit is not None and self._cycle_no > limit:
            raise InjectedFault(f"cycle {self._cycle_no}: {FAIL_CYCLE_AFTER_ENV}={limit}")
        started = time.perf_counter()
        now = self.clock()
        for pod in self.mirror.expire(now, self.config.assume_ttl_s):
            log.warning("assumption_expired", pod=pod)
        inputs = self._inputs()
        settled = self._settled
        if settled is not None and self._may_reuse(settled, inputs, now):
            elapsed = time.perf_counter() - started
            self._count(elapsed, settled.result)
            log.debug("cycle_done", cycle=self._cycle_no, cycle_ms=round(elapsed * 1000, 2),
                      with_reports_ms=round(elapsed * 1000, 2), reused=True,
                      gangs=None, placed=0)
            return settled.result
        before = self._state()
        result = self._decide(now, started)
        self._settle(inputs, before, result, now)
        return result

    def _inputs(self) -> tuple[object, ...]:
        """What a cycle reads that changes outside cycles: the mirror, preemptions
        and refused binds."""
        return (self.mirror.version, tuple(self.preempting.items()),
                tuple(self.unevictable.items()), tuple(self.bind_refusals.items()))

    def _state(self) -> tuple[object, ...]:
        """What a cycle reads and may itself change for the next one."""
        return (self._inputs(), self.admitted, frozenset(self.waiting_since),
                frozenset(self.finished_uids), self.holds)

    def _may_reuse(self, settled: Settled, inputs: tuple[object, ...], now: float) -> bool:
        return (
            self.config.reuse_unchanged
            and settled.inputs == inputs
            and now < settled.until
            and now - settled.since >= self.config.settle_s
            and now - settled.ran_at < self.config.refresh_s
        )

    def _settle(self, inputs: tuple[object, ...], before: tuple[object, ...],
                result: CycleResult, now: float) -> None:
        """Keep the answer for reuse when deciding again on its inputs would not change them."""
        if self._state() != before:
            self._settled = None
            return
        previous = self._settled
        since = previous.since if previous is not None and previous.inputs == inputs else now
        self._settled = Settled(inputs, result, since, now,
                                next_threshold(now, self._thresholds))

    def _count(self, elapsed: float, result: CycleResult) -> None:
        self._last_cycle_s = elapsed
        CYCLES.inc()
        CYCLE_SECONDS.observe(elapsed)
        GANGS_WAITING.set(len(result.unplaceable))
        self.on_cycle()

    def _decide(self, now: float, started: float) -> CycleResult:
        """One full cycle: view, gangs, decisions, binds handed out, reports."""
        self._full_cycles += 1
        view = self.mirror.view()
        self._forget_replaced_groups(view)
        self._forget_refusals()
        gathering = gather_view(view, frozenset(self.finished_uids),
                                self.mirror.priority_classes,
                                frozenset(self.mirror.never_preempting_classes))
        gathered = gathering.gathered
        self.finished_uids = set(gathering.finished_uids)
        self._update_holds(view, gathering.groups, gathered, now)
        self._settle_preemptions(gathered, now)
        result = run_cycle(cycle_input(
            view, gathered, admitted=self.admitted, waiting_since=self.waiting_since, now=now,
            policy=self.config.policy, starvation_s=self.config.starvation_s, holds=self.holds,
            preemption=self.config.preemption and self.evictor is not None,
            preempting={k: v.victims for k, v in self.preempting.items()},
            unevictable=frozenset(k for k, until in self.unevictable.items() if until > now),
            bind_refusals=self.bind_refusals,
        ))
        self.admitted = result.admitted
        elapsed = time.perf_counter() - started
        self._count(elapsed, result)
        bound_log = log.bind(cycle=self._cycle_no)

        # PodGroups refused admission before they have pods wait too: their
        # status says why, and their schedule timeout runs.
        reasons = {u.gang: u.reason for u in (*result.unplaceable, *result.unadmitted)}
        for gang in list(self.waiting_since):
            if gang not in reasons:
                del self.waiting_since[gang]
        for gang in reasons:
            self.waiting_since.setdefault(gang, now)
        self._reported = reported_reasons(self._reported, reasons, now,
                                          self.config.reason_hold_s)
        shown = {gang: reported.text for gang, reported in self._reported.items()}
        self._thresholds = self._threshold_moments(view, reasons)

        # A gang placed whole (none of it bound before) has waited since its first
        # member was created; replacements for running gangs are not gang waits.
        first_created = {
            gang.key: min(pod.created for pod in gang.pending)
            for gang in gathered.gangs if gang.bound == 0 and gang.pending
        }
        for preemption in result.preemptions:
            self._start_preemption(preemption, gathered, view, now)
        for placement in result.placements:
            if self.preempting.pop(placement.gang, None) is not None:
                bound_log.info("preemptor_placed", gang=placement.gang)
            self.mirror.assume(placement, now)
            for pod, _ in placement.assignments:
                self.reporter.pod_placed(pod)
            GANGS_PLACED.inc()
            bound_log.info(
                "gang_placed",
                gang=placement.gang,
                pods=len(placement.assignments),
                nodes=sorted({node for _, node in placement.assignments}),
                cycle_ms=round(elapsed * 1000, 2),
            )
            self._track(asyncio.create_task(
                self._bind(placement, first_created.get(placement.gang))))

        self._report(view, gathered, result, shown, now)
        self._log_waiting(bound_log, gathered, shown, elapsed)
        # cycle_ms is the decision alone (the histogram's figure); with_reports_ms adds
        # handing out binds and the status, condition and Event writes it asks for.
        bound_log.debug("cycle_done", cycle_ms=round(elapsed * 1000, 2),
                        with_reports_ms=round((time.perf_counter() - started) * 1000, 2),
                        reused=False, gangs=len(gathered.gangs),
                        placed=len(result.placements))
        return result

    def _threshold_moments(self, view: View, reasons: Mapping[GangKey, Reason]) -> list[float]:
        """When the clock alone would change this cycle's answer (see core.thresholds),
        or what it reports: a reason held back is reported once its hold ends."""
        config = self.config
        moments = [since + config.starvation_s for since in self.waiting_since.values()]
        moments.extend(reported.since + config.reason_hold_s
                       for gang, reported in self._reported.items()
                       if reported.reason != reasons[gang])
        for gang, since in self.waiting_since.items():
            group = view.groups.get(gang)
            if group is not None and group.spec is not None and (
                group.spec.timeout_seconds is not None
            ):
                moments.append(since + group.spec.timeout_seconds)
        moments.extend(hold.until for hold in self.holds)
        moments.extend(flight.since + config.preemption_timeout_s
                       for flight in self.preempting.values())
        moments.extend(self.unevictable.values())
        moments.extend(refusal.until for refusal in self.bind_refusals.values())
        expiry = self.mirror.next_expiry(config.assume_ttl_s)
        if expiry is not None:
            moments.append(expiry)
        return moments

    def _update_holds(
        self, view: View, groups: Mapping[GangKey, GroupSpec], gathered: Gathered, now: float
    ) -> None:
        """Hold the room of members a running gang lost since the last cycle (see core.holds)."""
        seats = seats_of((m.pod, m.group) for m in view.members if m.group in groups)
        lives = {
            key: GroupLife(view.groups[key].uid, spec.min_member)
            for key, spec in groups.items() if key not in gathered.finished
        }
        succeeded = {m.pod.key for m in view.members if m.succeeded}
        holds = update_holds(self.seats, seats, self.holds, lives, succeeded,
                             now=now, grace=self.config.replacement_grace_s)
        # A gang being preempted loses its members on purpose: its room is the
        # preemptor's, not its replacements'.
        evicting = {victim for flight in self.preempting.values() for victim in flight.victims}
        holds = tuple(hold for hold in holds if hold.gang not in evicting)
        for hold in set(holds) - set(self.holds):
            log.info("replacement_held", gang=hold.gang, pod=hold.pod.key,
                     node=hold.pod.node_name, seconds=self.config.replacement_grace_s)
        for hold in set(self.holds) - set(holds):
            log.info("replacement_hold_released", gang=hold.gang, pod=hold.pod.key)
        self.holds = holds
        self.seats = seats

    def _forget_replaced_groups(self, view: View) -> None:
        """Drop what was decided for a PodGroup that was deleted and created again.

        Its admission and waiting time belonged to the old object: carried
        over, the new group would skip admission or time out early.
        """
        uids = {key: group.uid for key, group in view.groups.items()}
        for key, uid in uids.items():
            if self.group_uids.get(key, uid) != uid:
                self.admitted = self.admitted - {key}
                self.waiting_since.pop(key, None)
                self._logged_reasons.pop(key, None)
                self._reported.pop(key, None)
        self.group_uids = uids

    def _log_waiting(
        self,
        bound_log: structlog.typing.FilteringBoundLogger,
        gathered: Gathered,
        reasons: Mapping[GangKey, str],
        elapsed: float,
    ) -> None:
        """One line per gang when the reason it waits changes, not one per cycle."""
        pending = {gang.key: len(gang.pending) for gang in gathered.gangs}
        for gang, reason in reasons.items():
            if self._logged_reasons.get(gang) != reason:
                bound_log.info("gang_waiting", gang=gang, pods=pending.get(gang, 0),
                               reason=reason, cycle_ms=round(elapsed * 1000, 2))
        self._logged_reasons = dict(reasons)

    # ---- preemption -------------------------------------------------------------
    def _settle_preemptions(self, gathered: Gathered, now: float) -> None:
        """Forget preemptions whose preemptor is gone or placed elsewhere, or that
        have waited too long: their room is no longer held for anyone."""
        waiting = {gang.key for gang in gathered.gangs if gang.pending}
        for key, flight in list(self.preempting.items()):
            if key not in waiting or now - flight.since > self.config.preemption_timeout_s:
                del self.preempting[key]
                log.info("preemption_ended", gang=key, pending=key in waiting)
        for key, until in list(self.unevictable.items()):
            if until <= now:
                del self.unevictable[key]

    def _start_preemption(
        self, preemption: Preemption, gathered: Gathered, view: View, now: float
    ) -> None:
        self.preempting[preemption.preemptor] = InFlight(frozenset(preemption.victims), now)
        pods_of = {
            victim: tuple(p.key for p in gathered.bound_pods.get(victim, ()))
            for victim in preemption.victims
        }
        preemptor_pods = next(
            (tuple(p.key for p in g.pending) for g in gathered.gangs
             if g.key == preemption.preemptor), (),
        )
        self._track(asyncio.create_task(
            self._evict(preemption, pods_of, preemptor_pods, view, now)))

    async def _evict(
        self,
        preemption: Preemption,
        pods_of: Mapping[GangKey, tuple[PodKey, ...]],
        preemptor_pods: tuple[PodKey, ...],
        view: View,
        now: float,
    ) -> None:
        """Evict every victim pod, or none when a PodDisruptionBudget forbids any of them."""
        if self.evictor is None:
            return
        refused, done = await self.evictor.evict_all(preemption.pods)
        if refused:
            by_pod = {pod: victim for victim, pods in pods_of.items() for pod in pods}
            blocked = {by_pod[o.pod] for o in refused if o.pod in by_pod}
            for victim in blocked:
                self.unevictable[victim] = now + self.config.unevictable_s
            self.preempting.pop(preemption.preemptor, None)
            log.info("preemption_refused", gang=preemption.preemptor, victims=sorted(blocked),
                     status=sorted({o.status for o in refused}), detail=refused[0].detail[:200])
            self.trigger()
            return
        failed = [o for o in done if not o.evicted]
        GANGS_PREEMPTED.inc(len(preemption.victims))
        log.info("gangs_preempted", gang=preemption.preemptor, victims=list(preemption.victims),
                 pods=len(preemption.pods), failed=len(failed))
        for outcome in failed:
            log.warning("eviction_failed", pod=outcome.pod, status=outcome.status,
                        detail=outcome.detail)
        self.reporter.preempted(preemption.preemptor, pods_of, view.groups, view.pods,
                                preemptor_pods)
        self.trigger()

    async def _bind(self, placement: Placement, first_created: float | None) -> None:
        outcomes = await self.binder.bind_gang(placement)
        failed = [o for o in outcomes if not o.bound]
        if not failed and first_created is not None:
            GANG_WAIT_SECONDS.observe(max(0.0, self.clock() - first_created))
        group = self.mirror.groups.get(placement.gang)
        per_gang = self.config.scheduled_events is ScheduledEvents.GANG and group is not None
        for outcome in outcomes:
            record = self.mirror.pods.get(outcome.pod)
            if outcome.bound:
                PODS_BOUND.inc()
                self.bind_refusals.pop(outcome.pod, None)
                if record is not None:
                    self.reporter.pod_scheduled(record, outcome.node, placement.gang,
                                                event=not per_gang)
            else:
                BIND_FAILURES.inc()
                self.mirror.forget(outcome.pod)
                if outcome.refused:
                    self._refused(outcome)
        if per_gang and group is not None and len(failed) < len(outcomes):
            self.reporter.gang_scheduled(
                group, [(o.pod, o.node) for o in outcomes if o.bound])
        if failed:
            self._log_failures(placement, failed, len(outcomes))
            self.trigger()  # its gang now says why it waits

    def _refused(self, outcome: BindOutcome) -> None:
        """Back the pod off, and wake the scheduler when its backoff ends."""
        refusal = refused(self.bind_refusals.get(outcome.pod), now=self.clock(),
                          status=outcome.status, message=outcome.detail)
        self.bind_refusals[outcome.pod] = refusal
        asyncio.get_running_loop().call_later(refusal.delay(), self.trigger)

    def _forget_refusals(self) -> None:
        """A pod that went or got bound (by us or anyone) backs off no more."""
        for pod in list(self.bind_refusals):
            record = self.mirror.pods.get(pod)
            if record is None or record.pod.node_name is not None:
                del self.bind_refusals[pod]

    def _log_failures(self, placement: Placement, failed: list[BindOutcome], total: int) -> None:
        for outcome in failed:
            refusal = self.bind_refusals.get(outcome.pod)
            log.warning("bind_failed", gang=placement.gang, pod=outcome.pod, node=outcome.node,
                        status=outcome.status, detail=outcome.detail,
                        refusals=refusal.refusals if refusal else None,
                        retry_after_s=refusal.delay() if refusal else None)
        if len(failed) < total:
            log.warning("gang_partly_bound", gang=placement.gang, bound=total - len(failed),
                        failed=len(failed))

    # ---- reporting --------------------------------------------------------------
    def _report(
        self,
        view: View,
        gathered: Gathered,
        result: CycleResult,
        reasons: Mapping[GangKey, str],
        now: float,
    ) -> None:
        placed = {p.gang for p in result.placements}
        pod_reports: dict[PodKey, PodReport] = {}
        for gang in gathered.gangs:
            reason = reasons.get(gang.key)
            if reason is None:
                continue
            for pod in gang.pending:
                record = view.pods.get(pod.key)
                if record is None:
                    continue
                last = self._pod_reports.get(pod.key)
                if last is None or (last.uid, last.reason) != (record.uid, reason):
                    last = PodReport(record.uid, reason, now, now)
                elif (now - last.since >= self.config.settle_s
                      and now - last.at < self.config.pod_report_s):
                    pod_reports[pod.key] = last
                    continue
                else:
                    last = replace(last, at=now)
                pod_reports[pod.key] = last
                if pod.gates:
                    self.reporter.pod_gated(record, reason)
                else:
                    self.reporter.pod_unschedulable(record, reason)
        self._pod_reports = pod_reports
        for key, pods in gathered.orphans.items():
            group = view.groups.get(key)
            message = (
                f"PodGroup {key} is invalid: {group.error}" if group is not None and group.error
                else f"waiting for PodGroup {key} to exist"
            )
            for pod in pods:
                record = view.pods.get(pod.key)
                if record is not None:
                    self.reporter.pod_unschedulable(record, message)
        for pod_key, error in self.mirror.bad_pods.items():
            self.reporter.pod_invalid(pod_key, error)

        # A basic-policy group is no gang: its pods are, and the group says what
        # the first of them waits for, and is binding while any of them is.
        group_reasons = dict(reasons)
        for solo, owner in gathered.solo_of.items():
            if solo in reasons:
                group_reasons.setdefault(owner, reasons[solo])
            if solo in placed:
                placed = placed | {owner}

        statuses: dict[GangKey, GroupStatus] = {}
        for key, group in view.groups.items():
            if group.spec is None:
                if group.flavor is not Flavor.NATIVE or key in gathered.orphans:
                    self.reporter.group_invalid(group)
                continue
            counts = gathered.counts.get(key)
            if counts is None and key in gathered.finished:
                continue  # its pods are gone: the status it ended with stays
            if counts is None and group.flavor is Flavor.NATIVE:
                continue  # none of its pods is ours: kube-scheduler's group, not ours
            status = group_status(
                group.spec,
                counts or MemberCounts(),
                admitted=key in result.admitted,
                waiting_reason=group_reasons.get(key),
                waited_seconds=now - self.waiting_since.get(key, now),
                binding=key in placed,
                holding=result.holding.get(key),
            )
            statuses[key] = status
            self.reporter.group_status(group, status, group.spec.generation)
        self._report_queues(view, gathered, statuses)
        if self._full_cycles % 100 == 0:
            self.reporter.retain(view.groups, view.pods)

    def _report_queues(
        self, view: View, gathered: Gathered, statuses: Mapping[GangKey, GroupStatus]
    ) -> None:
        allocated: dict[QueueName, Resources] = {q: Resources.zero() for q in view.queues}
        pending: dict[QueueName, int] = dict.fromkeys(view.queues, 0)
        running: dict[QueueName, int] = dict.fromkeys(view.queues, 0)
        for gang in gathered.gangs:
            queue = gang.queue
            if queue not in allocated:
                continue  # its queue does not exist: it waits, counted nowhere
            allocated[queue] = allocated[queue] + gathered.bound_requests.get(
                gang.key, Resources.zero()
            )
            status = statuses.get(gang.key)
            if status is None:
                continue
            if status.phase is Phase.RUNNING:
                running[queue] += 1
            elif not status.phase.finished:
                pending[queue] += 1
        for queue in view.queues:
            self.reporter.queue_status(queue, allocated[queue], pending[queue], running[queue])
            PENDING_GANGS.labels(queue=queue).set(pending[queue])
