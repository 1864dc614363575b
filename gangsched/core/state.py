"""What the scheduler carries from one cycle to the next, as one immutable value.

A cycle decides from the cluster and from what earlier cycles decided: who
was admitted, since when gangs wait, whose room is held, which preemption is
under way, which binds the API server refused, what was last reported. All of
it is here, in one frozen value that :func:`gangsched.core.step.step` takes
and returns anew, so a sequence of cycles can be replayed from its first
state and a test can hold any state it likes.

Outcomes that arrive between cycles (a bind refused or done, an eviction
refused) are folded in by the pure functions below, which return a new state:
the shell swaps its reference, and nothing is mutated in place.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from gangsched.core.fit.volumes import Provisioning
from gangsched.core.forecast import Estimate, known_starts
from gangsched.core.model.objects import GangKey, PodKey, QueueName
from gangsched.core.placement.holds import Hold, Seat
from gangsched.core.reasons import Reason, render
from gangsched.core.stages.backoff import BindRefusal, refused


@dataclass(frozen=True, slots=True)
class InFlight:
    """A preemption under way: its victims are being evicted or are terminating."""

    victims: frozenset[GangKey]
    since: float


@dataclass(frozen=True, slots=True)
class Reported:
    """The reason last reported for a waiting gang, and since when (the report plan
    decides when it is replaced: :func:`gangsched.core.reports.report_plan.reported_reasons`)."""

    reason: Reason
    since: float
    text: str = field(init=False, compare=False, repr=False)
    """The reason rendered, once: a reason kept for many cycles is not worded again each."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "text", render(self.reason))


@dataclass(frozen=True, slots=True)
class PodReport:
    """What a waiting pod was last reported as waiting for (``since``), and when its
    Event was last asked for (``at``) and what it said (``said``): see
    :func:`gangsched.core.reports.report_plan.waiting_pods`.
    """

    uid: str
    reason: str
    since: float
    at: float
    said: str = ""


@dataclass(frozen=True, slots=True)
class Asked:
    """A gang asking for nodes since ``since`` (see core.asking); once it asked too long
    without being placed, it asks no more until ``paused_until``."""

    since: float
    paused_until: float | None = None


@dataclass(frozen=True, slots=True)
class State:
    """Everything one cycle leaves to the next. Its mappings are never changed once made."""

    admitted: frozenset[GangKey] = frozenset()
    waiting_since: Mapping[GangKey, float] = field(default_factory=dict)
    finished_uids: frozenset[str] = frozenset()
    """Groups this process saw finish, by UID (see :func:`gangsched.core.view.gather_view`)."""
    holds: tuple[Hold, ...] = ()
    seats: Mapping[PodKey, Seat] = field(default_factory=dict)
    """Last cycle's live members of groups: who is missing now departed since."""
    group_uids: Mapping[GangKey, str] = field(default_factory=dict)
    """The UID each group had last cycle: a new UID under the same name is a new group."""
    preempting: Mapping[GangKey, InFlight] = field(default_factory=dict)
    unevictable: Mapping[GangKey, float] = field(default_factory=dict)
    """Gangs the Eviction API refused, to when they may be chosen again."""
    bind_refusals: Mapping[PodKey, BindRefusal] = field(default_factory=dict)
    """Pods whose last bind was refused, backing off (see core.stages.backoff)."""
    logged_reasons: Mapping[GangKey, str] = field(default_factory=dict)
    reported: Mapping[GangKey, Reported] = field(default_factory=dict)
    """The reason each waiting gang was last reported with (see core.reports.report_plan)."""
    pod_reports: Mapping[PodKey, PodReport] = field(default_factory=dict)
    queues_served: frozenset[QueueName] = frozenset()
    """Queues with a gang of this scheduler at the last full cycle: one left empty gets
    its counts written back to zero once."""
    provisioning: Mapping[GangKey, Provisioning] = field(default_factory=dict)
    """Gangs placed whose WaitForFirstConsumer claims are being provisioned (core.provisioning)."""
    cycles: int = 0
    """Full cycles run: what is remembered of written objects is pruned every so many."""
    reclaimed_at: Mapping[QueueName, float] = field(default_factory=dict)
    """When each queue last reclaimed, while its reclaim interval lasts (core.stages.reclaim)."""
    estimates: Mapping[GangKey, Estimate] = field(default_factory=dict)
    """When each waiting gang is expected to start (core.forecast); the starving gang's
    estimate is the time of its reservation in the next cycle."""
    forecast_from: tuple[object, ...] = ()
    """What ``estimates`` were forecast from (``forecast.fingerprint``): recomputed only
    when it moves."""
    forecast_at: float | None = None
    """When ``estimates`` were forecast: not again within ``ForecastLimits.min_interval_s``."""
    forecast_stale: bool = False
    """The last cycle moved what ``estimates`` were made from, and the forecast was put
    off (``ForecastLimits.throttle_gangs``): the next cycle reserves by none of them."""
    asked: Mapping[GangKey, Asked] = field(default_factory=dict)
    """Gangs asking Karpenter for nodes, or paused from asking (core.asking)."""

    def decision_inputs(self) -> tuple[object, ...]:
        """What a cycle decides from: equal before and after a cycle, and with the
        cluster unchanged, the next cycle would decide the same again."""
        return (self.admitted, frozenset(self.waiting_since), self.finished_uids, self.holds,
                self.preempting, self.unevictable, self.bind_refusals, self.provisioning,
                frozenset(self.reclaimed_at),
                frozenset(known_starts(self.estimates).items()), self.forecast_stale,
                frozenset(self.asked.items()))


def bind_refused(state: State, pod: PodKey, *, now: float, status: int, message: str) -> State:
    """The pod's bind was refused: it backs off once more (see core.stages.backoff)."""
    refusal = refused(state.bind_refusals.get(pod), now=now, status=status, message=message)
    return replace(state, bind_refusals={**state.bind_refusals, pod: refusal})


def binds_done(state: State, pods: Iterable[PodKey]) -> State:
    """These pods are bound: whatever backoff they had is over."""
    done = [pod for pod in pods if pod in state.bind_refusals]
    if not done:
        return state
    return replace(state, bind_refusals={
        pod: refusal for pod, refusal in state.bind_refusals.items() if pod not in done})


def eviction_refused(
    state: State, preemptor: GangKey, blocked: Iterable[GangKey], *, until: float
) -> State:
    """The Eviction API refused some victims (a PodDisruptionBudget): the preemption ends,
    and those gangs are no victims until ``until``."""
    return replace(
        state,
        preempting={k: v for k, v in state.preempting.items() if k != preemptor},
        unevictable={**state.unevictable, **dict.fromkeys(blocked, until)},
    )


def eviction_stopped(
    state: State, preemptor: GangKey, stranded: Iterable[GangKey],
    departed: Mapping[PodKey, Seat], *, until: float,
) -> State:
    """Some victim pods went and the Eviction API refused others (a budget spent
    meanwhile): the preemption ends, and each stranded victim is a running gang that
    lost members, whose rooms are held for their replacements as any such gang's are.

    Its departed members are seated again as of the last cycle, so the next one
    sees them depart outside the preemption: while it was under way their room
    was the preemptor's, and their departure was not held for.
    """
    ended = eviction_refused(state, preemptor, stranded, until=until)
    return replace(ended, seats={**departed, **ended.seats})
