"""One step of the scheduler: the state carried between cycles, a view, the clock in;
the next state and the actions to carry out, out.

Pure, as the cycle it wraps: the shell takes a view of its mirror, calls
:func:`step`, keeps the state it returns and hands the actions to the
writers. Around the placement cycle (:func:`gangsched.core.stages.cycle.run_cycle`)
the step keeps what no single cycle can know: a PodGroup created again under
the same name is a new group, the room of members a running gang lost is held
for their replacements, a preemption under way holds the preemptor's room
until it is placed or times out, refused binds back off, and what is reported
is paced (:mod:`gangsched.core.reports.report_plan`).
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from typing import TypeVar

from gangsched.core.actions import Action, Bind, Evict, LogDecision
from gangsched.core.asking import (
    AskLimits,
    ask_for_nodes,
    asking_gangs,
    bought_holds,
    nodes_coming,
)
from gangsched.core.disruption import budgets_to_write, others_budgets, with_own_budgets
from gangsched.core.forecast import (
    ForecastLimits,
    fingerprint,
    forecast,
    known_starts,
    running_ends,
)
from gangsched.core.model.objects import DEFAULT_QUEUE, GangKey, PodKey, Policy
from gangsched.core.placement.holds import GroupLife, Hold, Seat, seats_of, update_holds
from gangsched.core.provisioning import ProvisionLimits, provision_first
from gangsched.core.reasons import Reason
from gangsched.core.reports.report_plan import Pacing, plan_reports, reported_reasons
from gangsched.core.stages.cycle import CycleInput, CycleResult, run_cycle
from gangsched.core.stages.gangs import Gathered
from gangsched.core.state import InFlight, State
from gangsched.core.view import Gathering, StepView, cycle_input, gather_view

V = TypeVar("V")


@dataclass(frozen=True, slots=True)
class StepConfig:
    policy: Policy = Policy.BINPACK
    starvation_s: float = 60.0
    replacement_grace_s: float = 60.0
    preemption: bool = False
    """Whether gangs may be evicted for others: the shell must have an evictor."""
    preemption_timeout_s: float = 60.0
    """A preemptor not placed this long after its victims were evicted stops holding room."""
    pacing: Pacing = field(default_factory=Pacing)
    provisioning: ProvisionLimits = field(default_factory=ProvisionLimits)
    """How long a placed gang waits for its claims to be provisioned, and then backs off."""
    reclaim: bool = False
    """Whether queues below their deserved share reclaim room from queues above theirs
    (core.stages.reclaim); it needs ``preemption``."""
    reclaim_interval_s: float = 10.0
    """A queue that reclaimed reclaims again only after this long."""
    forecast: ForecastLimits = field(default_factory=ForecastLimits)
    """How far the estimated starts of waiting gangs look ahead (core.forecast)."""
    backfill: bool = True
    """Whether gangs that end before the starving gang's reservation may use its room."""
    disruption_budgets: bool = False
    """Whether a gang bound whole gets a PodDisruptionBudget of its own (core.disruption)."""
    asking: AskLimits = field(default_factory=AskLimits)
    """How long a gang asks Karpenter for nodes before it pauses, and for how long."""


@dataclass(frozen=True, slots=True)
class Stepped:
    state: State
    actions: tuple[Action, ...]
    result: CycleResult
    input: CycleInput
    """What the cycle decided from: ``gangsched explain`` reads its figures."""
    gathered: Gathered
    """The view's gangs and member counts, as the cycle read them."""
    thresholds: tuple[float, ...]
    """When the clock alone would change this answer or what it reports
    (see :mod:`gangsched.core.thresholds`); the shell adds its own (assumptions)."""
    gangs: int
    """How many gangs the view holds, for the cycle's log line."""


def step(state: State, view: StepView, now: float, config: StepConfig) -> Stepped:
    """Decide one cycle and say what to do about it."""
    state = forget_replaced_groups(state, view)
    logged = state.logged_reasons
    refusals = {
        pod: refusal for pod, refusal in state.bind_refusals.items()
        if (record := view.cluster.pods.get(pod)) is not None and record.pod.node_name is None
    }  # a pod that went or got bound (by us or anyone) backs off no more
    gathering = gather_view(view.cluster, state.finished_uids, view.priority_classes,
                            view.never_preempting_classes)
    gathered = gathering.gathered
    holds, seats, notes = held_rooms(state, view, gathering, now, config)
    snapshot = view.cluster.snapshot
    coming = nodes_coming(state.asked, gathered.gangs, snapshot, now, config.asking) \
        if view.nodepools else {}
    preempting, unevictable, ended = settle_preemptions(state, gathered, now, config)
    reclaimed = {queue: at for queue, at in state.reclaimed_at.items()
                 if now - at < config.reclaim_interval_s}
    inp = replace(cycle_input(
        view.cluster, gathered, admitted=state.admitted, waiting_since=state.waiting_since, now=now,
        policy=config.policy, starvation_s=config.starvation_s,
        holds=(*holds, *bought_holds(coming, snapshot, state.asked, config.asking)),
        preemption=config.preemption,
        preempting={k: v.victims for k, v in preempting.items()},
        unevictable=frozenset(k for k, until in unevictable.items() if until > now),
        bind_refusals=refusals, budgets=others_budgets(view.budgets),
        estimated_starts={} if state.forecast_stale else known_starts(state.estimates),
        backfill=config.backfill,
    ), reclaim=config.reclaim and config.preemption, reclaim_paused=frozenset(reclaimed))
    result = run_cycle(inp)
    reclaimed.update((p.reclaim_for, now) for p in result.preemptions if p.reclaim_for)
    forecast_state = estimated_starts(state, inp, result, config)
    result, claim_writes, provisioning = provision_first(
        result, gathered.gangs, view.cluster.storage, state.provisioning, now, config.provisioning)
    # PodGroups refused admission before they have pods wait too: their
    # status says why, and their schedule timeout runs.
    reasons, asked = ask_for_nodes(
        {u.gang: u.reason for u in (*result.unplaceable, *result.unadmitted)},
        gathered.gangs, view.nodepools, state.asked, now,
        config.asking, coming)
    waiting_since = {gang: state.waiting_since.get(gang, now) for gang in reasons}
    reported = reported_reasons(state.reported, reasons, now, config.pacing.figures_hold_s,
                                config.pacing.change_gap_s)
    shown = {gang: text.text for gang, text in reported.items()}  # rendered once, here
    state = replace(
        state, admitted=result.admitted, waiting_since=waiting_since,
        finished_uids=gathering.finished_uids, holds=holds, seats=seats,
        unevictable=unevictable, bind_refusals=refusals, reported=reported,
        logged_reasons=shown, cycles=state.cycles + 1, provisioning=provisioning, asked=asked,
        reclaimed_at=reclaimed,
        estimates=forecast_state.estimates, forecast_from=forecast_state.forecast_from,
        forecast_at=forecast_state.forecast_at, forecast_stale=forecast_state.forecast_stale,
    )
    thresholds = threshold_moments(state, view, preempting, reasons, config)
    preempting, acts = hand_out(result, gathered, preempting, now)
    acts = with_own_budgets(acts, view.cluster.groups, view.budgets)
    if config.disruption_budgets:
        evicting = {victim for flight in preempting.values() for victim in flight.victims}
        acts.extend(budgets_to_write(view.cluster.groups, gathering.groups,
                                     gathered.bound_pods, view.budgets, evicting))
    plan = plan_reports(view, gathered, result, shown, waiting_since=waiting_since,
                        previous=state.pod_reports, now=now, pacing=config.pacing,
                        cycle=state.cycles, served_before=state.queues_served,
                        estimates=state.estimates, state=state,
                        asking=asking_gangs(reported))
    waiting = waiting_logs(gathered, shown, logged)
    return Stepped(
        state=replace(state, preempting=preempting, pod_reports=plan.pod_reports,
                      queues_served=plan.queues_served, warned=plan.warned,
                      phases=plan.phases, runtime_told=plan.runtime_told),
        actions=(*notes, *ended, *claim_writes, *acts, *plan.actions, *waiting),
        result=result,
        input=inp,
        gathered=gathered,
        thresholds=(*thresholds, *plan.event_moments),
        gangs=len(gathered.gangs),
    )


def estimated_starts(
    state: State, inp: CycleInput, result: CycleResult, config: StepConfig
) -> State:
    """When each waiting gang is expected to start (core.forecast), forecast again only
    when what the last forecast was made from moved, and not within
    ``min_interval_s`` of the last: most cycles reuse it."""
    if not result.unplaceable:
        return replace(state, estimates={}, forecast_from=(), forecast_stale=False)
    ends = running_ends(inp)
    made_from = fingerprint(inp, result, ends)
    if made_from and made_from == state.forecast_from:
        return replace(state, forecast_stale=False)
    limits, at = config.forecast, state.forecast_at
    if (made_from and at is not None and len(inp.gangs) > limits.throttle_gangs
            and inp.now - at < limits.min_interval_s):
        waiting = {u.gang for u in result.unplaceable}
        return replace(state, forecast_stale=True, estimates={
            gang: estimate for gang, estimate in state.estimates.items() if gang in waiting})
    estimates = forecast(inp, result, limits, ends, any_known=bool(made_from))
    return replace(state, estimates=state.estimates if estimates == state.estimates
                   else estimates, forecast_from=made_from, forecast_stale=False,
                   forecast_at=inp.now if made_from else at)


def forget_replaced_groups(state: State, view: StepView) -> State:
    """Drop what was decided for a PodGroup that was deleted and created again.

    Its admission and waiting time belonged to the old object: carried
    over, the new group would skip admission or time out early.
    """
    uids = {key: group.uid for key, group in view.cluster.groups.items()}
    replaced = {key for key, uid in uids.items() if state.group_uids.get(key, uid) != uid}
    if not replaced:
        return replace(state, group_uids=uids) if uids != state.group_uids else state

    return replace(
        state, group_uids=uids, admitted=state.admitted - replaced,
        waiting_since=_without(state.waiting_since, replaced),
        logged_reasons=_without(state.logged_reasons, replaced),
        reported=_without(state.reported, replaced),
    )


def _without(values: Mapping[GangKey, V], gone: AbstractSet[GangKey]) -> dict[GangKey, V]:
    return {key: value for key, value in values.items() if key not in gone}


def held_rooms(
    state: State, view: StepView, gathering: Gathering, now: float, config: StepConfig
) -> tuple[tuple[Hold, ...], dict[PodKey, Seat], list[Action]]:
    """Hold the room of members a running gang lost since the last cycle (see
    core.placement.holds)."""
    groups, gathered = gathering.groups, gathering.gathered
    seats = seats_of(((m.pod, m.group) for m in view.cluster.members if m.group in groups),
                     view.cluster.snapshot.devices)
    lives = {
        key: GroupLife(view.cluster.groups[key].uid, spec.min_member)
        for key, spec in groups.items() if key not in gathered.finished
    }
    succeeded = {m.pod.key for m in view.cluster.members if m.succeeded}
    holds = update_holds(state.seats, seats, state.holds, lives, succeeded,
                         now=now, grace=config.replacement_grace_s)
    # A gang being preempted loses its members on purpose: its room is the
    # preemptor's, not its replacements'.
    evicting = {victim for flight in state.preempting.values() for victim in flight.victims}
    holds = tuple(hold for hold in holds if hold.gang not in evicting)
    notes: list[Action] = [
        LogDecision.of("replacement_held", gang=hold.gang, pod=hold.pod.key,
                       node=hold.pod.node_name, seconds=config.replacement_grace_s)
        for hold in holds if hold not in state.holds
    ]
    notes.extend(LogDecision.of("replacement_hold_released", gang=hold.gang, pod=hold.pod.key)
                 for hold in state.holds if hold not in holds)
    return holds, seats, notes


def settle_preemptions(
    state: State, gathered: Gathered, now: float, config: StepConfig
) -> tuple[dict[GangKey, InFlight], dict[GangKey, float], list[Action]]:
    """Forget preemptions whose preemptor is gone or placed elsewhere, or that have
    waited too long: their room is no longer held for anyone. Refused victims whose
    time is up may be chosen again."""
    waiting = {gang.key for gang in gathered.gangs if gang.pending}
    preempting: dict[GangKey, InFlight] = {}
    ended: list[Action] = []
    for key, flight in state.preempting.items():
        if key not in waiting or now - flight.since > config.preemption_timeout_s:
            ended.append(LogDecision.of("preemption_ended", gang=key, pending=key in waiting))
        else:
            preempting[key] = flight
    unevictable = {key: until for key, until in state.unevictable.items() if until > now}
    return preempting, unevictable, ended


def hand_out(
    result: CycleResult, gathered: Gathered, preempting: Mapping[GangKey, InFlight],
    now: float,
) -> tuple[dict[GangKey, InFlight], list[Action]]:
    """Evictions for new preemptions, then binds in the cycle's order; a preemptor
    placed ends its preemption."""
    flights = dict(preempting)
    actions: list[Action] = []
    if not result.preemptions and not result.placements:
        return flights, actions  # the common full cycle: nothing to look up
    gangs = {gang.key: gang for gang in gathered.gangs}
    for preemption in result.preemptions:
        flights[preemption.preemptor] = InFlight(frozenset(preemption.victims), now)
        victim_pods = {
            victim: tuple(p.key for p in gathered.bound_pods.get(victim, ()))
            for victim in preemption.victims
        }
        preemptor = gangs.get(preemption.preemptor)
        pending = tuple(p.key for p in preemptor.pending) if preemptor is not None else ()
        actions.append(Evict(preemption, victim_pods, pending))
    for placement in result.placements:
        if flights.pop(placement.gang, None) is not None:
            actions.append(LogDecision.of("preemptor_placed", gang=placement.gang))
        gang = gangs.get(placement.gang)
        # A gang placed whole (none of it bound before) has waited since its first
        # member was created; replacements for running gangs are not gang waits.
        first_created = (min(pod.created for pod in gang.pending)
                         if gang is not None and gang.bound == 0 and gang.pending else None)
        actions.append(Bind(placement, first_created,
                            gang.queue if gang is not None else DEFAULT_QUEUE))
    return flights, actions


def waiting_logs(
    gathered: Gathered, shown: Mapping[GangKey, str], logged: Mapping[GangKey, str]
) -> list[Action]:
    """One line per gang when the reason it waits changes, not one per cycle."""
    pending = {gang.key: len(gang.pending) for gang in gathered.gangs}
    return [
        LogDecision.of("gang_waiting", gang=gang, pods=pending.get(gang, 0), reason=reason)
        for gang, reason in shown.items() if logged.get(gang) != reason
    ]


def threshold_moments(
    state: State,
    view: StepView,
    preempting: Mapping[GangKey, InFlight],
    reasons: Mapping[GangKey, Reason],
    config: StepConfig,
) -> tuple[float, ...]:
    """When the clock alone would change this cycle's answer (see core.thresholds),
    or what it reports: a reason held back is reported once its hold ends."""
    moments = [since + config.starvation_s for since in state.waiting_since.values()]
    moments.extend(reported.since + wait
                   for gang, reported in state.reported.items()
                   if reported.reason != reasons[gang]
                   for wait in (config.pacing.change_gap_s, config.pacing.figures_hold_s))
    for gang, since in state.waiting_since.items():
        group = view.cluster.groups.get(gang)
        spec = group.spec if group is not None else None
        if spec is not None and spec.timeout_seconds is not None:
            moments.append(since + spec.timeout_seconds)
        if spec is not None and spec.topology is not None and spec.topology.preferred_wait_s:
            # A gang waiting for its preferred level takes a wider one once its wait ends.
            moments.append(since + spec.topology.preferred_wait_s)
    moments.extend(hold.until for hold in state.holds)
    if state.forecast_stale and state.forecast_at is not None:
        # A forecast put off by its minimum interval is made once the interval ends.
        moments.append(state.forecast_at + config.forecast.min_interval_s)
    moments.extend(flight.since + config.preemption_timeout_s for flight in preempting.values())
    moments.extend(state.unevictable.values())
    moments.extend(at + config.reclaim_interval_s for at in state.reclaimed_at.values())
    moments.extend(refusal.until for refusal in state.bind_refusals.values())
    moments.extend(asked.since + config.asking.node_hold_s if asked.paused_until is None
                   else asked.paused_until for asked in state.asked.values())
    for provisioning in state.provisioning.values():
        moments.append(provisioning.since + config.provisioning.timeout_s)
        if provisioning.backoff_until is not None:
            moments.append(provisioning.backoff_until)
    return tuple(moments)

