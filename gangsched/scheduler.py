"""The scheduling loop: wake on change, take a view, step, hand the actions over.

One cycle at a time, debounced: a burst of watch events (an operator creating
64 pods) becomes one cycle over all of them, not 64 cycles over a growing
gang. The step (:mod:`gangsched.core.step`) is synchronous and pure: it
returns the next state and the actions, which the actuator
(:mod:`gangsched.actuator`) carries out; only binding, evicting and
reporting await, on tasks of their own, after the placements are assumed in
the mirror.

A settled cluster is cheap to keep deciding on: the mirror counts its changes,
and a cycle whose inputs are those of the last full cycle, which changed none
of them, reuses that answer until the clock reaches a threshold that would
change it (:mod:`gangsched.core.thresholds`). A full cycle still runs once a
minute. What is said when is the report plan's (:mod:`gangsched.core.reports.report_plan`);
a write the dispatcher holds back goes out on its own timer, not at a cycle.
"""
from __future__ import annotations

import asyncio
import contextlib
import os
import platform
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

import structlog
from prometheus_client import Counter, Gauge, Histogram, Info

from gangsched import __version__
from gangsched.actuator import Actuator
from gangsched.actuator import ScheduledEvents as ScheduledEvents
from gangsched.allocations import ClaimWriter
from gangsched.binder import Binder
from gangsched.core.forecast import Estimate
from gangsched.core.model.objects import GangKey
from gangsched.core.stages.cycle import CycleResult
from gangsched.core.state import Reported, State
from gangsched.core.step import StepConfig, step
from gangsched.core.thresholds import next_threshold
from gangsched.decisions import step_view
from gangsched.evictor import Evictor
from gangsched.mirror import Mirror
from gangsched.reporting import Reporter

log = structlog.get_logger(__name__)

BUILD = Info("gangsched_build", "The running version of gangsched and of Python, as labels")
BUILD.info({"version": __version__, "python": platform.python_version()})
CYCLES = Counter("gangsched_cycles_total", "Scheduling cycles run")
CYCLE_SECONDS = Histogram(
    "gangsched_cycle_seconds", "Wall time of one scheduling cycle",
    buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)
GANGS_WAITING = Gauge("gangsched_gangs_waiting", "Gangs with pending pods not placed")
GANGS_ASKING = Gauge("gangsched_gangs_asking_for_nodes",
                     "Waiting gangs by what they say to Karpenter's NodePools: AskingForNodes, "
                     "NodesComing, NodePoolLimit or AskingPaused", ["code"])
ASKING_CODES = ("AskingForNodes", "NodesComing", "NodePoolLimit", "AskingPaused")
ESTIMATED_START = Gauge(
    "gangsched_gang_estimated_start_timestamp_seconds",
    "When a waiting gang is expected to start (seconds since the epoch); gangs whose start "
    "is unknown have none",
    ["gang"],
)
GANGS_ESTIMATED = Gauge(
    "gangsched_waiting_gangs_estimated",
    "Waiting gangs by whether their start can be estimated (known) or not (unknown)",
    ["estimate"],
)
WRITE_QUEUE_DEPTH = Gauge(
    "gangsched_write_queue_depth",
    "Status writes and Events waiting to go out to the API server (at most one per object)",
)


FAIL_CYCLE_AFTER_ENV = "GANGSCHED_FAIL_CYCLE_AFTER"
"""Fault injection for tests: with this set to N, every cycle after the N-th raises,
as a bug in the cycle would. Unset in any real deployment."""


class InjectedFault(RuntimeError):
    """The failure ``GANGSCHED_FAIL_CYCLE_AFTER`` asks for."""


def _fail_cycle_after() -> int | None:
    value = os.environ.get(FAIL_CYCLE_AFTER_ENV, "")
    return int(value) if value else None


def _step_default() -> StepConfig:
    return StepConfig(preemption=True)


@dataclass
class SchedulerConfig:
    step: StepConfig = field(default_factory=_step_default)
    """How each cycle decides: the same configuration ``explain``, ``status`` and
    ``simulate`` decide with, built from the same flags (see :mod:`gangsched.cli`)."""
    debounce_s: float = 0.05
    resync_s: float = 5.0
    assume_ttl_s: float = 60.0
    unevictable_s: float = 15.0
    """A gang the Eviction API refused (a PodDisruptionBudget) is no victim for this long."""
    reuse_unchanged: bool = True
    """A cycle whose inputs did not change since the last full one, and for which the
    clock crossed no threshold (:mod:`gangsched.core.thresholds`), reuses its answer
    instead of deciding again: a settled cluster costs next to nothing per resync."""
    scheduled_events: ScheduledEvents = ScheduledEvents.GANG
    """One ``Scheduled`` Event per gang, on its PodGroup, or one per pod as kube-scheduler."""
    refresh_s: float = 60.0
    """With nothing changed, a full cycle still runs this often: Events about pods still
    waiting are sent again (at most once a ``EVENT_INTERVAL_S``) and failed writes retried."""
    fail_cycle_after: int | None = field(default_factory=_fail_cycle_after)
    """Fault injection for tests (``GANGSCHED_FAIL_CYCLE_AFTER``): cycles after this many raise."""

    def step_config(self, evicts: bool) -> StepConfig:
        """The step's configuration; preemption needs an evictor."""
        return replace(self.step, preemption=self.step.preemption and evicts)


@dataclass(frozen=True, slots=True)
class Settled:
    """A full cycle's answer that a cycle on the same inputs gives again, until ``until``."""

    inputs: tuple[object, ...]
    result: CycleResult
    ran_at: float
    """When a full cycle last ran on them."""
    until: float
    """The first threshold the clock reaches after ``ran_at``."""




@dataclass
class Scheduler:
    """The loop: wait for a trigger, take a view, step, hand the actions over.

    ``state`` is all a cycle leaves to the next (see :mod:`gangsched.core.state`);
    it is replaced, never changed, by each step and by each outcome folded in.
    """

    mirror: Mirror
    binder: Binder
    reporter: Reporter
    config: SchedulerConfig = field(default_factory=SchedulerConfig)
    clock: Callable[[], float] = time.time
    may_act: Callable[[], bool] = lambda: True
    """False while a leader cannot be sure it still holds its lease: no cycle runs."""
    evictor: Evictor | None = None
    """Preemption is off without one."""
    claims: ClaimWriter | None = None
    """Writes the devices of gangs whose pods claim them; without one, such gangs are
    never bound (their claims could not be allocated)."""
    on_cycle: Callable[[], None] = lambda: None
    """Called after every cycle: the liveness probe counts them."""
    state: State = field(default_factory=State)
    actuator: Actuator = field(init=False)
    _wake: asyncio.Event = field(default_factory=asyncio.Event)
    _status_stale: bool = False
    _cycle_no: int = 0
    _last_cycle_s: float = 0.0
    _settled: Settled | None = None

    def __post_init__(self) -> None:
        WRITE_QUEUE_DEPTH.set_function(self.reporter.queued)
        self.actuator = Actuator(
            mirror=self.mirror, binder=self.binder, reporter=self.reporter, fold=self.fold,
            trigger=self.trigger, clock=self.clock, evictor=self.evictor, claims=self.claims,
            scheduled_events=self.config.scheduled_events,
            unevictable_s=self.config.unevictable_s, on_idle=self._binds_ended,
        )

    def trigger(self) -> None:
        self._wake.set()

    def fold(self, change: Callable[[State], State]) -> State:
        """Fold an outcome that arrived between cycles into the state."""
        self.state = change(self.state)
        return self.state

    def status_changed(self) -> None:
        """Something a status reports changed, nothing a decision reads: a member
        started running. While gangs are binding the cycle that reports it waits
        for the binds to end (the resync bounds the wait), so a flood of binds
        is not slowed by a cycle per confirmation."""
        if self.actuator.tasks:
            self._status_stale = True
        else:
            self.trigger()

    def _binds_ended(self) -> None:
        if self._status_stale:
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
        await self.actuator.drain()

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
        view = self.mirror.view()
        stepped = step(self.state, step_view(self.mirror, view), now,
                       self.config.step_config(self.evictor is not None))
        elapsed = time.perf_counter() - started
        self._count(elapsed, stepped.result)
        published = self.state.estimates
        self.state = stepped.state
        publish_asking(stepped.state.reported.values())
        if stepped.state.estimates is not published:
            publish_estimates(published, stepped.state.estimates)
        self.actuator.carry_out(stepped.actions, view, now, cycle=self._cycle_no,
                                cycle_ms=round(elapsed * 1000, 2))
        self._settle(inputs, stepped.result, stepped.thresholds, now)
        # cycle_ms is the decision alone (the histogram's figure); with_reports_ms adds
        # handing out binds and the status, condition and Event writes it asks for.
        log.debug("cycle_done", cycle=self._cycle_no, cycle_ms=round(elapsed * 1000, 2),
                  with_reports_ms=round((time.perf_counter() - started) * 1000, 2),
                  reused=False, gangs=stepped.gangs, placed=len(stepped.result.placements))
        return stepped.result

    def _inputs(self) -> tuple[object, ...]:
        """What a cycle decides from: the mirror (its version counts its changes) and the
        state, which outcomes of binds and evictions change between cycles too."""
        return (self.mirror.version, self.state.decision_inputs())

    def _may_reuse(self, settled: Settled, inputs: tuple[object, ...], now: float) -> bool:
        return (
            self.config.reuse_unchanged
            and settled.inputs == inputs
            and now < settled.until
            and now - settled.ran_at < self.config.refresh_s
        )

    def _settle(self, before: tuple[object, ...], result: CycleResult,
                thresholds: tuple[float, ...], now: float) -> None:
        """Keep the answer for reuse when deciding again on its inputs would not change them."""
        if self._inputs() != before:
            self._settled = None
            return
        expiry = self.mirror.next_expiry(self.config.assume_ttl_s)
        moments = (*thresholds, expiry) if expiry is not None else thresholds
        self._settled = Settled(before, result, now, next_threshold(now, moments))

    def _count(self, elapsed: float, result: CycleResult) -> None:
        self._last_cycle_s = elapsed
        CYCLES.inc()
        CYCLE_SECONDS.observe(elapsed)
        GANGS_WAITING.set(len(result.unplaceable))
        self.on_cycle()


def publish_asking(reported: Iterable[Reported]) -> None:
    """How many waiting gangs ask Karpenter for nodes, wait on a NodePool's limit, or
    paused asking, by the reason they show."""
    codes = [said.reason.code for said in reported]
    for code in ASKING_CODES:
        GANGS_ASKING.labels(code).set(codes.count(code))


def publish_estimates(before: Mapping[GangKey, Estimate], now: Mapping[GangKey, Estimate]) -> None:
    """The estimated starts as metrics: one series per waiting gang with a known start,
    removed once it starts, goes or its start turns unknown."""
    for gang, estimate in now.items():
        if estimate.at is not None:
            ESTIMATED_START.labels(gang).set(estimate.at)
    for gang, estimate in before.items():
        if estimate.at is not None and (gang not in now or now[gang].at is None):
            ESTIMATED_START.remove(gang)
    known = sum(1 for estimate in now.values() if estimate.at is not None)
    GANGS_ESTIMATED.labels("known").set(known)
    GANGS_ESTIMATED.labels("unknown").set(len(now) - known)
