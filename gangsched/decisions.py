"""One scheduling decision over a mirror's view: shared by the scheduler and the CLI.

The scheduler runs it every cycle on its live mirror; ``gangsched explain``,
``status`` and ``simulate`` run it on a mirror filled from the API server or
from files. The same functions for both, so what the CLI says would happen
is what the scheduler does with the same objects.

Two steps, because the scheduler does one thing in between: from what
:func:`gather_view` found it updates the rooms it holds for departed members
(state only a running scheduler has), then passes them to
:func:`cycle_input`. The CLI, knowing no such state, calls :func:`decide`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gangsched.core.backoff import BindRefusal
from gangsched.core.cycle import CycleInput, CycleResult, run_cycle
from gangsched.core.gangs import Gathered, gather
from gangsched.core.groups import FINISHED_PHASES, GroupSpec
from gangsched.core.holds import Hold
from gangsched.core.model import GangKey, PodKey, Policy
from gangsched.mirror import View


@dataclass(frozen=True, slots=True)
class Gathering:
    groups: Mapping[GangKey, GroupSpec]
    """The valid groups of the view, by key."""
    gathered: Gathered
    finished_uids: frozenset[str]
    """UIDs of groups known to have finished, to pass to the next gathering."""


@dataclass(frozen=True, slots=True)
class Decision:
    gathered: Gathered
    input: CycleInput
    result: CycleResult
    finished_uids: frozenset[str]


def gather_view(
    view: View,
    finished_uids: frozenset[str],
    priority_classes: Mapping[str, int],
    never_preempting_classes: frozenset[str] = frozenset(),
) -> Gathering:
    """The view's pods and groups as gangs.

    A finished group whose pods were deleted must stay finished. Its own
    status says so after a restart; until the watch brings that status back,
    ``finished_uids`` (what this process saw finish) says so.
    """
    groups = {k: g.spec for k, g in view.groups.items() if g.spec is not None}
    policies = {k: g.policy for k, g in view.groups.items() if g.policy is not None}
    finished_before = frozenset(
        k for k, g in view.groups.items()
        if g.uid in finished_uids or g.status.get("phase") in FINISHED_PHASES
    )
    gathered = gather(view.members, groups, policies, finished_before, priority_classes,
                      never_preempting_classes)
    still_finished = frozenset(
        g.uid for k, g in view.groups.items()
        if k in gathered.finished or (g.uid in finished_uids and k not in gathered.counts)
    )
    return Gathering(groups=groups, gathered=gathered, finished_uids=still_finished)


def cycle_input(
    view: View,
    gathered: Gathered,
    *,
    admitted: frozenset[GangKey],
    waiting_since: Mapping[GangKey, float],
    now: float,
    policy: Policy,
    starvation_s: float,
    holds: tuple[Hold, ...] = (),
    preemption: bool = False,
    preempting: Mapping[GangKey, frozenset[GangKey]] | None = None,
    unevictable: frozenset[GangKey] = frozenset(),
    bind_refusals: Mapping[PodKey, BindRefusal] | None = None,
) -> CycleInput:
    """The cycle's input; preemption is the running scheduler's alone (it evicts), so the
    CLI's answers say what placement does without it."""
    keys = {gang.key for gang in gathered.gangs}
    return CycleInput(
        snapshot=view.snapshot,
        gangs=gathered.gangs,
        bound_requests=gathered.bound_requests,
        queues=view.queues,
        admitted=admitted & keys,
        waiting_since={k: v for k, v in waiting_since.items() if k in keys},
        now=now,
        policy=policy,
        starvation_seconds=starvation_s,
        holds=holds,
        bound_pods=gathered.bound_pods,
        preemption=preemption,
        preempting=preempting or {},
        unevictable=unevictable,
        bind_refusals=bind_refusals or {},
    )


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
) -> Decision:
    """Gather the view's gangs and run the pure cycle over them, holding no departed rooms."""
    gathering = gather_view(view, finished_uids, priority_classes)
    inp = cycle_input(view, gathering.gathered, admitted=admitted, waiting_since=waiting_since,
                      now=now, policy=policy, starvation_s=starvation_s)
    return Decision(gathered=gathering.gathered, input=inp, result=run_cycle(inp),
                    finished_uids=gathering.finished_uids)
