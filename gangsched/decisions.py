"""One scheduling decision over a mirror's view: shared by the scheduler and the CLI.

The scheduler runs it every cycle on its live mirror; ``gangsched explain``,
``status`` and ``simulate`` run it on a mirror filled from the API server or
from files. The same functions for both, so what the CLI says would happen
is what the scheduler does with the same objects.

The scheduler's step (:func:`gangsched.core.step.step`) gathers the view and
builds the cycle's input with the state it carries between cycles; the CLI,
knowing no such state, calls :func:`decide`, which does the same with none.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from gangsched.core.cycle import CycleInput, CycleResult, run_cycle
from gangsched.core.forecast import Estimate, forecast, known_starts
from gangsched.core.gangs import Gathered
from gangsched.core.model import GangKey, Policy
from gangsched.core.view import cycle_input, gather_view
from gangsched.mirror import View


@dataclass(frozen=True, slots=True)
class Decision:
    gathered: Gathered
    input: CycleInput
    result: CycleResult
    finished_uids: frozenset[str]
    estimates: Mapping[GangKey, Estimate]
    """When each gang the cycle left waiting is expected to start (core.forecast)."""


def decide(
    view: View,
    *,
    admitted: frozenset[GangKey],
    waiting_since: Mapping[GangKey, float],
    finished_uids: frozenset[str],
    priority_classes: Mapping[str, int],
    now: float,
    policy: Policy,
    starvation_s: float,
    estimated_starts: Mapping[GangKey, float] | None = None,
    backfill: bool = True,
) -> Decision:
    """Gather the view's gangs and run the pure cycle over them, holding no departed rooms,
    and forecast when the gangs left waiting start.

    ``estimated_starts`` are the last decision's (a starving gang's is its
    reservation); None, for a caller that keeps none, decides twice, the second
    time with the first's estimates, as the scheduler's next cycle would.
    """
    gathering = gather_view(view, finished_uids, priority_classes)
    inp = cycle_input(view, gathering.gathered, admitted=admitted, waiting_since=waiting_since,
                      now=now, policy=policy, starvation_s=starvation_s,
                      estimated_starts=estimated_starts, backfill=backfill)
    result = run_cycle(inp)
    estimates = forecast(inp, result)
    if estimated_starts is None and known_starts(estimates):
        inp = replace(inp, estimated_starts=known_starts(estimates))
        result = run_cycle(inp)
        estimates = forecast(inp, result)
    return Decision(gathered=gathering.gathered, input=inp, result=result,
                    finished_uids=gathering.finished_uids, estimates=estimates)
