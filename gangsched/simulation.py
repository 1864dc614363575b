"""``gangsched simulate``: the scheduler's own decisions, replayed on a clock that jumps.

No cluster is touched. The objects (from files, or listed from a cluster)
fill a mirror; each step runs the very decision the scheduler runs, binds
what it places by writing ``nodeName`` into the objects, then jumps to the
moment the next pod finishes and marks it Succeeded. A pod runs for its
``kwok.gangsched.io/run-for`` annotation (what the local cluster's fake
kubelets honour), or for ``default_run_s``. What never runs is reported with
the reason the last step gave.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gangsched.clusterobjects import ClusterObjects, admitted_groups
from gangsched.core.forecast import known_starts
from gangsched.core.model import GangKey, NodeName, PodKey, Policy
from gangsched.core.reasons import Reason, code_of, render
from gangsched.core.runtimes import parse_duration
from gangsched.decisions import decide
from gangsched.feed import Feed
from gangsched.mirror import Mirror

RUN_FOR = "kwok.gangsched.io/run-for"
MAX_STEPS = 10_000


@dataclass(frozen=True, slots=True)
class GangRun:
    gang: GangKey
    start_s: float
    end_s: float | None
    """When its last pod placed at ``start_s`` finishes; None if some never finish."""
    nodes: tuple[tuple[PodKey, NodeName], ...]
    estimated_start_s: float | None = None
    """The start first estimated for it while it waited (core.forecast); None when it
    never waited or its start was unknown then."""


@dataclass(frozen=True, slots=True)
class Simulation:
    runs: tuple[GangRun, ...]
    """Gangs in the order they are placed; a gang placed twice (replacements) twice."""
    never: tuple[tuple[GangKey, Reason], ...]
    """Gangs still waiting when nothing more would finish, with the last reason."""
    not_ours: tuple[PodKey, ...]
    """Pending pods of other schedulers: they hold nothing and are not simulated."""

    def as_json(self) -> dict[str, Any]:
        return {
            "runs": [
                {"gang": r.gang, "startSeconds": r.start_s, "endSeconds": r.end_s,
                 "estimatedStartSeconds": r.estimated_start_s,
                 "pods": [{"pod": pod, "node": node} for pod, node in r.nodes]}
                for r in self.runs
            ],
            "never": [{"gang": gang, "code": code_of(reason), "reason": render(reason)}
                      for gang, reason in self.never],
            "notOurs": list(self.not_ours),
        }


@dataclass
class _Clock:
    run_for: dict[PodKey, float] = field(default_factory=dict)
    ends: dict[PodKey, float] = field(default_factory=dict)

    @classmethod
    def of(cls, pods: Mapping[PodKey, Mapping[str, Any]], mirror: Mirror,
           default_run_s: float) -> _Clock:
        """How long each pod runs (its annotation, else ``default_run_s`` for ours), and
        when those already running end."""
        clock = cls()
        for key, pod in pods.items():
            annotation = ((pod.get("metadata") or {}).get("annotations") or {}).get(RUN_FOR)
            parsed = parse_duration(str(annotation)) if annotation else None
            record = mirror.pods.get(key)
            ours = record is not None and record.ours
            if parsed is not None or ours:
                clock.run_for[key] = parsed if parsed is not None else default_run_s
            terminal = (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
            if (pod.get("spec") or {}).get("nodeName") and not terminal and key in clock.run_for:
                clock.ends[key] = clock.run_for[key]
        return clock


def _key(obj: Mapping[str, Any]) -> PodKey:
    meta = obj.get("metadata") or {}
    return PodKey(f"{meta.get('namespace', 'default')}/{meta.get('name')}")


def simulate(
    objects: ClusterObjects,
    *,
    scheduler_names: frozenset[str],
    policy: Policy,
    starvation_s: float,
    default_run_s: float,
    now: float,
    backfill: bool = True,
) -> Simulation:
    """Replay the scheduler's decisions on a clock that jumps from one pod's end to the next.

    Between steps it carries what the scheduler carries that placement reads:
    admissions, waiting times and the estimated starts (a starving gang's is
    its reservation, which gangs known to end before it may backfill into).
    """
    objects = copy.deepcopy(objects)
    pods: dict[PodKey, dict[str, Any]] = {_key(p): p for p in objects.pods}
    mirror = objects.mirror(scheduler_names)
    clock = _Clock.of(pods, mirror, default_run_s)
    not_ours = tuple(sorted(
        k for k, r in mirror.pods.items()
        if not r.ours and r.pod.node_name is None and not r.pod.terminal
    ))

    admitted = admitted_groups(objects)
    waiting_since: dict[GangKey, float] = {}
    finished_uids: frozenset[str] = frozenset()
    runs: list[GangRun] = []
    reasons: dict[GangKey, Reason] = {}
    first_estimates: dict[GangKey, float | None] = {}
    estimated: dict[GangKey, float] = {}
    at = 0.0
    for _ in range(MAX_STEPS):
        decision = decide(
            mirror.view(), admitted=admitted, waiting_since=waiting_since,
            finished_uids=finished_uids, priority_classes=mirror.groups_and_queues.priority_classes,
            now=now + at, policy=policy, starvation_s=starvation_s,
            estimated_starts=estimated, backfill=backfill,
        )
        estimated = known_starts(decision.estimates)
        for gang, estimate in decision.estimates.items():
            first_estimates.setdefault(gang, None if estimate.at is None else estimate.at - now)
        result = decision.result
        admitted, finished_uids = result.admitted, decision.finished_uids
        reasons = {u.gang: u.reason for u in (*result.unplaceable, *result.unadmitted)}
        waiting_since = {g: waiting_since.get(g, now + at) for g in reasons}
        for placement in result.placements:
            ends: list[float] = []
            for pod_key, node in placement.assignments:
                pod = pods[pod_key]
                pod.setdefault("spec", {})["nodeName"] = node
                pod.setdefault("status", {})["phase"] = "Running"
                Feed(mirror).upsert("pods", pod)
                if pod_key in clock.run_for:
                    clock.ends[pod_key] = at + clock.run_for[pod_key]
                    ends.append(clock.ends[pod_key])
            complete = len(ends) == len(placement.assignments)
            runs.append(GangRun(placement.gang, at, max(ends) if complete and ends else None,
                                placement.assignments, first_estimates.get(placement.gang)))
        if result.placements:
            continue  # a placement can change admission and reservations: decide again now
        if not clock.ends:
            break
        at = min(clock.ends.values())
        for pod_key in [k for k, end in clock.ends.items() if end <= at]:
            del clock.ends[pod_key]
            pods[pod_key]["status"]["phase"] = "Succeeded"
            Feed(mirror).upsert("pods", pods[pod_key])
    return Simulation(
        runs=tuple(runs),
        never=tuple(sorted(reasons.items())),
        not_ours=not_ours,
    )
