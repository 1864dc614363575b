"""Carries a step's actions out, and folds what comes back into the scheduler's state.

The step (:mod:`gangsched.core.step`) decides what to bind, evict, write and
log; this module only does it, through the mirror (assume, forget), the
binder, the evictor, the reporter and the logger. Binds and evictions await
the API server on tasks of their own; their outcomes (a bind refused, a gang
bound, an eviction refused) go back into the state through the pure
functions of :mod:`gangsched.core.state`, and wake the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import partial

import structlog
from prometheus_client import Counter, Gauge, Histogram

from gangsched.allocations import ClaimWriter
from gangsched.binder import Binder, BindOutcome
from gangsched.core.actions import (
    Action,
    Bind,
    Evict,
    ForgetWritten,
    LogDecision,
    MarkGroupInvalid,
    MarkInvalid,
    MarkUnschedulable,
    SelectClaimNode,
    TellGroupRuntimeProblem,
    TellRuntimeProblem,
    WriteBudget,
    WriteGroupStatus,
    WriteQueueStatus,
)
from gangsched.core.model.objects import PodKey, QueueName
from gangsched.core.model.resources import CPU
from gangsched.core.placement.capacity import Placement
from gangsched.core.placement.holds import Seat
from gangsched.core.stages.backoff import BindRefusal
from gangsched.core.state import (
    State,
    bind_refused,
    binds_done,
    eviction_refused,
    eviction_stopped,
)
from gangsched.dispatcher import Answer
from gangsched.evictor import Evictor
from gangsched.mirror import GroupRecord, Mirror, View
from gangsched.reporting import Reporter

log = structlog.get_logger(__name__)

GANGS_PLACED = Counter("gangsched_gangs_placed_total",
                       "Gangs placed whose every bind (and claim write) the API server took")
PODS_BOUND = Counter("gangsched_pods_bound_total", "Pods bound")
BIND_FAILURES = Counter(
    "gangsched_bind_failures_total",
    "Pods not bound as decided, by HTTP status code of the refused binding or claim write "
    "(0: the request itself failed)", ["code"],
)
GANG_WAIT_SECONDS = Histogram(
    "gangsched_gang_wait_seconds",
    "From the creation of a gang's first member to the whole gang bound, per queue",
    ["queue"],
    buckets=(0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600),
)
PENDING_GANGS = Gauge(
    "gangsched_pending_gangs", "PodGroups not yet running nor finished, per queue", ["queue"]
)
QUEUE_ALLOCATED = Gauge(
    "gangsched_queue_allocated",
    "Resources a queue's gangs hold, in base units (cores, bytes, devices)",
    ["queue", "resource"],
)
QUEUE_DOMINANT_SHARE = Gauge(
    "gangsched_queue_dominant_share",
    "The largest part of any schedulable cluster resource a queue holds (0 to 1)", ["queue"],
)
QUEUE_WEIGHT_SHARE = Gauge(
    "gangsched_queue_weight_share",
    "The part of the cluster a queue's weight entitles it to when every queue wants more: "
    "at each level of the queue tree, its weight over its siblings'",
    ["queue"],
)
QUEUE_DESERVED_SHARE = Gauge(
    "gangsched_queue_deserved_share",
    "The part of the cluster a queue deserves now: its weight's part of its parent's, "
    "shared with the sibling queues that have gangs",
    ["queue"],
)
GANGS_PREEMPTED = Counter("gangsched_gangs_preempted_total", "Gangs evicted whole for another")

@dataclass
class QueueFigures:
    """Sets the per-queue gauges, and drops the series of resources and queues that are gone:
    a label set once is exported until removed, and a stale one would show room still held."""

    resources: dict[QueueName, set[str]] = field(default_factory=dict)
    """The resource series set per queue."""

    def show(self, figures: WriteQueueStatus) -> None:
        queue, status = figures.queue, figures.status
        PENDING_GANGS.labels(queue=queue).set(status.pending)
        QUEUE_DOMINANT_SHARE.labels(queue=queue).set(float(figures.dominant_share))
        QUEUE_WEIGHT_SHARE.labels(queue=queue).set(float(figures.weight_share))
        QUEUE_DESERVED_SHARE.labels(queue=queue).set(float(figures.deserved_share))
        held = {name for name, amount in status.allocated.items() if amount}
        for name in self.resources.get(queue, set()) - held:
            _drop(QUEUE_ALLOCATED, queue, name)
        for name in held:
            QUEUE_ALLOCATED.labels(queue=queue, resource=name).set(
                base_units(name, status.allocated.get(name)))
        self.resources[queue] = held

    def retain(self, queues: Iterable[QueueName]) -> None:
        """Forget the series of deleted queues."""
        for queue in set(self.resources) - set(queues):
            for name in self.resources.pop(queue):
                _drop(QUEUE_ALLOCATED, queue, name)
            for gauge in (PENDING_GANGS, QUEUE_DOMINANT_SHARE, QUEUE_WEIGHT_SHARE,
                          QUEUE_DESERVED_SHARE):
                _drop(gauge, queue)


def _drop(gauge: Gauge, *labels: str) -> None:
    """Remove one series; one never set (or removed already) is no error."""
    with contextlib.suppress(KeyError):
        gauge.remove(*labels)


def base_units(name: str, amount: int) -> float:
    """Prometheus counts in base units: cores, not the milli-CPU the core adds up."""
    return amount / 1000 if name == CPU else float(amount)


Fold = Callable[[Callable[[State], State]], State]
"""Applies a pure change to the scheduler's state and returns the new state."""


class ScheduledEvents(enum.Enum):
    """Where the ``Scheduled`` Event of a bound gang goes."""

    GANG = "gang"
    """One on the PodGroup naming every pod's node; pods without a PodGroup get their own."""
    POD = "pod"
    """One on every pod, as kube-scheduler writes them."""


@dataclass
class Actuator:
    mirror: Mirror
    binder: Binder
    reporter: Reporter
    fold: Fold
    trigger: Callable[[], None]
    """Wakes the loop: an outcome changed what the next cycle decides or reports."""
    clock: Callable[[], float]
    evictor: Evictor | None = None
    claims: ClaimWriter | None = None
    """Writes claim allocations before a gang's binds (see :mod:`gangsched.allocations`)."""
    scheduled_events: ScheduledEvents = ScheduledEvents.GANG
    unevictable_s: float = 15.0
    """A gang the Eviction API refused (a PodDisruptionBudget) is no victim for this long."""
    on_idle: Callable[[], None] = lambda: None
    """Called when the last bind or eviction under way ends."""
    tasks: set[asyncio.Task[None]] = field(default_factory=set)
    """Binds and evictions under way."""
    queue_figures: QueueFigures = field(default_factory=QueueFigures)

    def carry_out(self, actions: Iterable[Action], view: View, now: float, *,
                  cycle: int, cycle_ms: float) -> None:
        """Do what the step asked, in its order; ``view`` is the one it decided on."""
        decisions = log.bind(cycle=cycle)
        for action in actions:
            match action:
                case Bind():
                    self._place(action, view, now, decisions.bind(cycle_ms=cycle_ms))
                case Evict():
                    self._track(asyncio.create_task(
                        self._evict(action, view, now),
                        name=f"evict-for-{action.preemption.preemptor}"))
                case SelectClaimNode(claim=claim, node=node):
                    decisions.info("claim_node_selected" if node else "claim_node_released",
                                   claim=claim, node=node)
                    self.mirror.budgets_and_storage.assume_claim_node(claim, node)
                    self.binder.select_claim_node(claim, node)
                case LogDecision(event=event, fields=fields):
                    decisions.info(event, **dict(fields), cycle_ms=cycle_ms)
                case WriteBudget():
                    if self.evictor is not None:
                        self.evictor.write_budget(action)
                case _:
                    self._report(action, view)

    def _report(self, action: Action, view: View) -> None:
        match action:
            case MarkUnschedulable(pod=pod, message=message, gated=gated, event=event):
                record = view.pods.get(pod)
                if record is not None and gated:
                    self.reporter.pod_gated(record, message)
                elif record is not None:
                    self.reporter.pod_unschedulable(record, message, event=event,
                                                    reason=action.condition_reason)
            case MarkInvalid(pod=pod, error=error):
                self.reporter.pod_invalid(pod, error)
            case TellRuntimeProblem(pod=pod, problem=problem):
                record = view.pods.get(pod)
                if record is not None:
                    self.reporter.pod_runtime_problem(record, problem)
            case TellGroupRuntimeProblem(group=key, problem=problem):
                self.reporter.group_runtime_problem(view.groups[key], problem)
            case WriteGroupStatus(group=key, status=status, observed_generation=observed,
                                  event=event):
                self.reporter.group_status(view.groups[key], status, observed, event=event)
            case MarkGroupInvalid(group=key, error=error, event=event):
                self.reporter.group_invalid(view.groups[key], error, event=event)
            case WriteQueueStatus(queue=queue, status=status, counts=counts, event=event):
                held = self.mirror.groups_and_queues
                self.reporter.queue_status(queue, status, held.queue_conditions.get(queue, ()),
                                           counts=counts, event=event,
                                           shown=held.queue_allocated.get(queue, frozenset()))
                self.queue_figures.show(action)
            case ForgetWritten():
                self.reporter.retain(view.groups, view.pods)
                self.queue_figures.retain(view.queues)

    def _place(self, action: Bind, view: View, now: float,
               decisions: structlog.typing.FilteringBoundLogger) -> None:
        """Assume the gang whole before awaiting any bind, so the next cycle sees its room taken."""
        placement = action.placement
        self.mirror.assume(placement, now)
        for pod, _ in placement.assignments:
            self.reporter.pod_placed(pod)
        decisions.info(
            "gang_placed",
            gang=placement.gang,
            pods=len(placement.assignments),
            nodes=sorted({node for _, node in placement.assignments}),
        )
        # The UIDs of the pods decided on, taken now: a pod created again under the same
        # name before its bind goes out is another pod, and its bind is refused.
        uids = {pod: self.mirror.pods[pod].uid for pod, _ in placement.assignments
                if pod in self.mirror.pods}
        self._track(asyncio.create_task(
            self._bind(placement, action.first_created, action.queue, uids,
                       view.groups.get(placement.gang)),
            name=f"bind-{placement.gang}"))

    # ---- tasks under way --------------------------------------------------------
    def _track(self, task: asyncio.Task[None]) -> None:
        self.tasks.add(task)
        task.add_done_callback(self._untrack)

    def _untrack(self, task: asyncio.Task[None]) -> None:
        """A bind or eviction that failed on a bug says so at once: nobody awaits it, and
        its error would otherwise surface, if ever, when the task is collected."""
        self.tasks.discard(task)
        if not task.cancelled() and (error := task.exception()) is not None:
            log.error("action_failed", task=task.get_name(), error=repr(error))
        if not self.tasks:
            self.on_idle()

    async def drain(self) -> None:
        while self.tasks:
            await asyncio.gather(*list(self.tasks), return_exceptions=True)
        await self.reporter.drain()

    # ---- evictions ----------------------------------------------------------------
    async def _evict(self, action: Evict, view: View, now: float) -> None:
        """Evict every victim pod, or none when a PodDisruptionBudget forbids any of them."""
        if self.evictor is None:
            return
        preemption, pods_of = action.preemption, action.victim_pods
        if action.own_budgets:
            await self.evictor.drop_budgets(action.own_budgets)
        refused, done = await self.evictor.evict_all(
            preemption.pods, uids={p: view.pods[p].uid for p in preemption.pods if p in view.pods})
        if refused:
            by_pod = {pod: victim for victim, pods in pods_of.items() for pod in pods}
            blocked = {by_pod[o.pod] for o in refused if o.pod in by_pod}
            self.fold(partial(eviction_refused, preemptor=preemption.preemptor,
                              blocked=blocked, until=now + self.unevictable_s))
            log.info("preemption_refused", gang=preemption.preemptor, victims=sorted(blocked),
                     status=sorted({o.status for o in refused}), detail=refused[0].detail[:200])
            self.trigger()
            return
        failed = [o for o in done if not o.evicted]
        GANGS_PREEMPTED.inc(len(preemption.victims))
        log.info("gangs_preempted", gang=preemption.preemptor, victims=list(preemption.victims),
                 pods=len(preemption.pods), failed=len(failed),
                 reclaim_for=preemption.reclaim_for)
        for outcome in failed:
            log.warning("eviction_failed", pod=outcome.pod, status=outcome.status,
                        detail=outcome.detail)
        self.reporter.events.preempted(preemption.preemptor, pods_of, view.groups, view.pods,
                                       action.preemptor_pods, reclaim_for=preemption.reclaim_for)
        if failed:
            self._stranded(action, view, now, {o.pod for o in failed})
        self.trigger()

    def _stranded(self, action: Evict, view: View, now: float, kept: set[PodKey]) -> None:
        """Evictions refused after others of the same victim went (a budget spent between
        the dry run and the real one): end the preemption, hold the victim's departed rooms
        for its replacements, and tell both sides."""
        preemption = action.preemption
        stranded = {victim: pods for victim, pods in action.victim_pods.items()
                    if kept & set(pods)}
        departed = {pod: Seat(view.pods[pod].pod, victim)
                    for victim, pods in stranded.items() for pod in pods
                    if pod not in kept and pod in view.pods}
        self.fold(partial(eviction_stopped, preemptor=preemption.preemptor,
                          stranded=stranded, departed=departed, until=now + self.unevictable_s))
        log.warning("preemption_stopped_half_way", gang=preemption.preemptor,
                    victims=sorted(stranded), kept=len(kept), departed=len(departed))
        events = self.reporter.events
        for victim, pods in stranded.items():
            left = sum(1 for pod in pods if pod in kept)
            message = (f"Preemption by gang {preemption.preemptor} stopped half-way: the "
                       f"Eviction API refused {left} of {len(pods)} pods (a "
                       f"PodDisruptionBudget); the room of those evicted is held for their "
                       f"replacements")
            if (group := view.groups.get(victim)) is not None:
                events.on_group(group, "PreemptionStopped", message, type_="Warning")
            if (preemptor := view.groups.get(preemption.preemptor)) is not None:
                events.on_group(preemptor, "PreemptionStopped",
                                f"Preempting gang {victim} stopped half-way: {left} of "
                                f"{len(pods)} pods were refused eviction (a "
                                f"PodDisruptionBudget); the preemption ends", type_="Warning")
            for pod in pods:
                if pod in kept and (record := view.pods.get(pod)) is not None:
                    events.on_pod(record, "PreemptionStopped", message)

    # ---- binds --------------------------------------------------------------------
    async def _bind(self, placement: Placement, first_created: float | None, queue: QueueName,
                    uids: Mapping[PodKey, str], group: GroupRecord | None) -> None:
        if placement.claims and not await self._allocate(placement):
            return
        outcomes = await self.binder.bind_gang(placement, uids=uids)
        failed = [o for o in outcomes if not o.bound]
        if not failed:
            # Counted once the API server took every bind: a gang whose binds or claim
            # writes are refused on every retry must not look like progress.
            GANGS_PLACED.inc()
        if not failed and first_created is not None:
            GANG_WAIT_SECONDS.labels(queue=queue).observe(max(0.0, self.clock() - first_created))
        per_gang = self.scheduled_events is ScheduledEvents.GANG and group is not None
        for outcome in outcomes:
            record = self.mirror.pods.get(outcome.pod)
            if outcome.bound:
                PODS_BOUND.inc()
                self.mirror.finish_binding(outcome.pod, self.clock())
                if record is not None:
                    self.reporter.pod_scheduled(record, outcome.node, placement.gang,
                                                event=not per_gang)
            else:
                BIND_FAILURES.labels(code=str(outcome.status)).inc()
                self.mirror.forget(outcome.pod)
                if outcome.refused:
                    self._refused(outcome)
        state = self.fold(partial(binds_done, pods=[o.pod for o in outcomes if o.bound]))
        if per_gang and group is not None and len(failed) < len(outcomes):
            self.reporter.gang_scheduled(
                group, [(o.pod, o.node) for o in outcomes if o.bound], placement.level)
        if failed:
            _log_failures(placement, failed, len(outcomes), state.bind_refusals)
            self.trigger()  # its gang now says why it waits

    async def _allocate(self, placement: Placement) -> bool:
        """Write every claim of the gang; if any write is refused, undo the others, forget
        the gang's assumptions and back its pods off, so no pod is bound without its devices
        and no device stays allocated to a gang that was not bound."""
        answers = (await self.claims.write(placement.claims) if self.claims is not None
                   else [Answer(0, "no claim writer", sent=False)] * len(placement.claims))
        refused = [(write, answer) for write, answer in zip(placement.claims, answers, strict=True)
                   if not answer.accepted]
        if not refused:
            return True
        accepted = [w for w, a in zip(placement.claims, answers, strict=True) if a.accepted]
        write, answer = refused[0]
        log.warning("claims_not_written", gang=placement.gang, claim=write.claim,
                    status=answer.status, detail=answer.detail[:200], refused=len(refused),
                    undone=len(accepted))
        if accepted and self.claims is not None:
            await self.claims.undo(accepted)
        self.mirror.forget_claims(tuple(w.claim for w in placement.claims))
        for pod, node in placement.assignments:
            BIND_FAILURES.labels(code=str(answer.status)).inc()
            self.mirror.forget(pod)
            self._refused(BindOutcome(pod, node, answer.status, f"ResourceClaim {write.claim} "
                                      f"could not be written: {answer.detail}", answer.sent))
        self.trigger()
        return False

    def _refused(self, outcome: BindOutcome) -> None:
        """Back the pod off, and wake the scheduler when its backoff ends."""
        state = self.fold(partial(bind_refused, pod=outcome.pod, now=self.clock(),
                                  status=outcome.status, message=outcome.detail))
        delay = state.bind_refusals[outcome.pod].delay()
        asyncio.get_running_loop().call_later(delay, self.trigger)


def _log_failures(
    placement: Placement, failed: list[BindOutcome], total: int,
    refusals: Mapping[PodKey, BindRefusal],
) -> None:
    for outcome in failed:
        refusal = refusals.get(outcome.pod)
        log.warning("bind_failed", gang=placement.gang, pod=outcome.pod, node=outcome.node,
                    status=outcome.status, detail=outcome.detail,
                    refusals=refusal.refusals if refusal else None,
                    retry_after_s=refusal.delay() if refusal else None)
    if len(failed) < total:
        log.warning("gang_partly_bound", gang=placement.gang, bound=total - len(failed),
                    failed=len(failed))

