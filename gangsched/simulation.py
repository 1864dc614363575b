"""``gangsched simulate``: the scheduler's own decisions, replayed on a clock that jumps.

No cluster is touched. The objects (from files, or listed from a cluster)
fill a mirror; each step is the scheduler's step (:func:`gangsched.core.step.step`)
from the state the last one returned, starting from the state the objects'
status shows (:func:`gangsched.decisions.published_state`). What it binds is
bound by writing ``nodeName`` into the objects; the gangs it evicts for a
preemptor go back to pending, as their controllers would create their pods
again. Then the clock jumps to the moment the next pod finishes and marks it
Succeeded. A pod runs for its ``kwok.gangsched.io/run-for`` annotation (what
the local cluster's fake kubelets honour), or for ``default_run_s``. What
never runs is reported with the reason the last step gave.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from gangsched.clusterobjects import ClusterObjects
from gangsched.core.actions import Evict, SelectClaimNode
from gangsched.core.model.objects import GangKey, NodeName, PodKey
from gangsched.core.model.runtimes import parse_duration
from gangsched.core.reasons import LevelHeld, Reason, code_of, render
from gangsched.core.step import StepConfig, step
from gangsched.decisions import published_state, step_view
from gangsched.feed import Feed
from gangsched.mirror import Mirror

RUN_FOR = "kwok.gangsched.io/run-for"
HOSTNAME = "kubernetes.io/hostname"
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
    evicted_s: float | None = None
    """When it was evicted for a preemptor, before it finished; None if it was not."""
    level: LevelHeld | None = None
    """For a gang with Topology levels: the level and domain it landed in."""


@dataclass(frozen=True, slots=True)
class Eviction:
    at_s: float
    preemptor: GangKey
    victims: tuple[GangKey, ...]


@dataclass(frozen=True, slots=True)
class Simulation:
    runs: tuple[GangRun, ...]
    """Gangs in the order they are placed; a gang placed twice (replacements) twice."""
    never: tuple[tuple[GangKey, Reason], ...]
    """Gangs still waiting when nothing more would finish, with the last reason."""
    not_ours: tuple[PodKey, ...]
    """Pending pods of other schedulers: they hold nothing and are not simulated."""
    evictions: tuple[Eviction, ...] = ()
    """Gangs evicted whole for a preemptor (priority or reclaim), in order."""

    def as_json(self) -> dict[str, Any]:
        return {
            "runs": [
                {"gang": r.gang, "startSeconds": r.start_s, "endSeconds": r.end_s,
                 "estimatedStartSeconds": r.estimated_start_s,
                 "evictedSeconds": r.evicted_s,
                 "pods": [{"pod": pod, "node": node} for pod, node in r.nodes],
                 "level": None if r.level is None else {
                     "nodeLabel": r.level.level, "value": r.level.value,
                     "preferred": r.level.preferred,
                     "subGroups": [{"name": sub.sub_group, "nodeLabel": sub.level,
                                    "value": sub.value} for sub in r.level.sub_groups]}}
                for r in self.runs
            ],
            "never": [{"gang": gang, "code": code_of(reason), "reason": render(reason)}
                      for gang, reason in self.never],
            "notOurs": list(self.not_ours),
            "evictions": [{"atSeconds": e.at_s, "preemptor": e.preemptor,
                           "victims": list(e.victims)} for e in self.evictions],
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
    step_config: StepConfig,
    default_run_s: float,
    now: float,
) -> Simulation:
    """Replay the scheduler's steps on a clock that jumps from one pod's end to the next,
    each step from the state the one before returned."""
    objects = copy.deepcopy(objects)
    pods: dict[PodKey, dict[str, Any]] = {_key(p): p for p in objects.pods}
    mirror = objects.mirror(scheduler_names)
    clock = _Clock.of(pods, mirror, default_run_s)
    not_ours = tuple(sorted(
        k for k, r in mirror.pods.items()
        if not r.ours and r.pod.node_name is None and not r.pod.terminal
    ))

    claims = {_key(c): c for c in objects.storage.get("persistentvolumeclaims", ())}
    hostnames = {str((n.get("metadata") or {}).get("name")):
                 ((n.get("metadata") or {}).get("labels") or {}).get(HOSTNAME)
                 for n in objects.nodes}
    state = published_state(step_view(mirror, mirror.view()), now)
    runs: list[GangRun] = []
    evictions: list[Eviction] = []
    reasons: dict[GangKey, Reason] = {}
    first_estimates: dict[GangKey, float | None] = {}
    at = 0.0
    for _ in range(MAX_STEPS):
        stepped = step(state, step_view(mirror, mirror.view()), now + at, step_config)
        state, result = stepped.state, stepped.result
        for gang, estimate in state.estimates.items():
            first_estimates.setdefault(gang, None if estimate.at is None else estimate.at - now)
        reasons = {u.gang: u.reason for u in (*result.unplaceable, *result.unadmitted)}
        evicts = [action for action in stepped.actions if isinstance(action, Evict)]
        provisions = [action for action in stepped.actions
                      if isinstance(action, SelectClaimNode) and action.node is not None]
        for provision in provisions:
            _provisioned(mirror, claims[PodKey(provision.claim)], provision,
                         hostnames.get(str(provision.node)))
        for evict in evicts:
            evictions.append(Eviction(at, evict.preemption.preemptor, evict.preemption.victims))
            for victim, victim_pods in evict.victim_pods.items():
                for pod_key in victim_pods:
                    _pending_again(mirror, pods[pod_key], len(evictions))
                    clock.ends.pop(pod_key, None)
                _cut_short(runs, victim, at)
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
                                placement.assignments, first_estimates.get(placement.gang),
                                level=placement.level))
        if result.placements or evicts or provisions:
            continue  # what was done changes what the next step sees: step again now
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
        evictions=tuple(evictions),
    )


def _provisioned(mirror: Mirror, claim: dict[str, Any], given: SelectClaimNode,
                 hostname: str | None) -> None:
    """What the provisioner and the persistent-volume controller do with a
    WaitForFirstConsumer claim given a node: a volume made there (pinned by the node's
    hostname label, when it has one), and the claim bound to it."""
    name = f"simulated-{given.claim.replace('/', '-')}"
    spec = claim.setdefault("spec", {})
    volume: dict[str, Any] = {
        "capacity": {"storage": ((spec.get("resources") or {}).get("requests") or {}).get(
            "storage", "0")},
        "storageClassName": spec.get("storageClassName") or ""}
    if hostname:
        volume["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": HOSTNAME, "operator": "In", "values": [hostname]}]}]}}
    Feed(mirror).upsert("persistentvolumes", {
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": name, "uid": name}, "spec": volume})
    spec["volumeName"] = name
    notes = claim.setdefault("metadata", {}).setdefault("annotations", {})
    notes.update({"pv.kubernetes.io/bind-completed": "yes",
                  "volume.kubernetes.io/selected-node": str(given.node)})
    claim["status"] = {"phase": "Bound"}
    Feed(mirror).upsert("persistentvolumeclaims", claim)


def _cut_short(runs: list[GangRun], gang: GangKey, at: float) -> None:
    """The gang's last run ends at ``at``, evicted, not when its pods would have finished."""
    for i in reversed(range(len(runs))):
        if runs[i].gang == gang:
            runs[i] = replace(runs[i], end_s=None, evicted_s=at)
            return


def _pending_again(mirror: Mirror, pod: dict[str, Any], generation: int) -> None:
    """An evicted pod, created again by its controller: a new pod under the same name,
    pending."""
    pod.get("spec", {}).pop("nodeName", None)
    pod["status"] = {"phase": "Pending"}
    meta = pod.setdefault("metadata", {})
    meta["uid"] = f"{meta.get('uid', '')}-{generation}"
    Feed(mirror).upsert("pods", pod)
