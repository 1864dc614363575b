"""One scheduling decision over a mirror: the scheduler's step, for the CLI too.

The scheduler runs :func:`gangsched.core.step.step` every cycle on its live
mirror and keeps the :class:`~gangsched.core.state.State` it returns.
``gangsched explain``, ``status`` and ``simulate`` run the very same step on
a mirror filled from the API server or from files, so every policy the
scheduler applies (preemption, reclaim, a starving gang's reservation,
backfill, disruption budgets, claims provisioned first) is in their answer.
They start from the state the cluster says the scheduler reached
(:func:`published_state`); ``simulate`` then threads the state each step
returns into the next, as the scheduler does.
"""

from __future__ import annotations

from dataclasses import replace

from gangsched.core.forecast import known_starts
from gangsched.core.kubeobjects.status_bodies import queue_conditions_current
from gangsched.core.model.objects import GangKey
from gangsched.core.queues.hierarchy import build_tree
from gangsched.core.state import State
from gangsched.core.step import StepConfig, Stepped, step
from gangsched.core.view import StepView, gather_view
from gangsched.mirror import Mirror, View

ADMITTED_PHASES = frozenset({"Inqueue", "Scheduling", "Running", "Unknown"})
"""Phases, in every flavour, of a group the scheduler has admitted."""


def step_view(mirror: Mirror, view: View) -> StepView:
    """What a step reads of the mirror: its view and the tables beside it."""
    held = mirror.groups_and_queues
    problems = build_tree(view.queues).invalid
    return StepView(
        view, priority_classes=held.priority_classes,
        never_preempting_classes=frozenset(held.never_preempting_classes),
        bad_pods=dict(mirror.bad_pods),
        budgets=tuple(mirror.budgets_and_storage.budgets.values()),
        nodepools=tuple(mirror.budgets_and_storage.nodepools.values()),
        queues_settled=frozenset(
            name for name, spec in held.queues.items()
            if queue_conditions_current(spec.open, spec.error,
                                        held.queue_conditions.get(name, ()),
                                        problems[name].problem
                                        if name in problems else None)),
    )


def published_state(view: StepView, now: float) -> State:
    """What the scheduler carries between cycles, as far as the cluster shows it.

    A group whose status phase says it was admitted is admitted; a gang has
    waited since its first pending member (or, with none, its PodGroup) was
    created (objects read from files, created "later", wait from ``now``), as a
    scheduler running all along would have it wait, so a gang past the
    starvation threshold holds its room. What only the running
    process knows (the room of departed members held for their replacements,
    a preemption under way, refused binds) is not shown by the cluster and
    starts empty.
    """
    cluster = view.cluster
    admitted = frozenset(key for key, group in cluster.groups.items()
                         if group.status.get("phase") in ADMITTED_PHASES)
    gathering = gather_view(cluster, frozenset(), view.priority_classes,
                            view.never_preempting_classes)
    waiting_since: dict[GangKey, float] = {}
    for gang in gathering.gathered.gangs:
        if gang.pending:
            waiting_since[gang.key] = min(now, *(pod.created for pod in gang.pending))
        elif (spec := gathering.groups.get(gang.key)) is not None:
            waiting_since[gang.key] = min(now, spec.created)
    return State(admitted=admitted, waiting_since=waiting_since)


def decide(view: StepView, state: State, now: float, config: StepConfig) -> Stepped:
    """One step from ``state``; when it forecast starts that ``state`` did not know, one
    more from ``state`` with that forecast, as the scheduler's next cycle decides (a
    starving gang's estimated start is its reservation, which backfill reads)."""
    stepped = step(state, view, now, config)
    forecast = stepped.state
    if known_starts(state.estimates) or not known_starts(forecast.estimates):
        return stepped
    return step(replace(state, estimates=forecast.estimates, forecast_from=forecast.forecast_from,
                        forecast_at=forecast.forecast_at), view, now, config)
