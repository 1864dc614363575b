"""What happened to every pod of a run, as seen by polling the API server, and its summary.

Every figure the demo prints or draws comes from here: times are measured on
this machine's monotonic clock from the moment the scenario started, never
written in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

JOB_LABEL = "demo.gangsched.io/job"
TERMINAL = ("Succeeded", "Failed")


@dataclass
class PodTrack:
    name: str
    job: str | None
    created: float
    bound: float | None = None
    running: float | None = None
    done: float | None = None
    node: str | None = None


@dataclass
class Recorder:
    """Pod transitions and the moments some job was partly bound."""

    pods: dict[str, PodTrack] = field(default_factory=dict)
    last_change: float = 0.0
    partly_bound_s: float = 0.0
    most_partly_bound: int = 0
    bought: set[str] | None = None
    """Nodes Karpenter made during the run, where it runs (None elsewhere)."""
    idle_node_s: float = 0.0
    _last_seen: float = 0.0
    _nodes_seen: float = 0.0

    def observe(self, pods: Mapping[str, Mapping[str, Any]], now: float) -> None:
        for name, pod in pods.items():
            track = self.pods.get(name)
            if track is None:
                labels = (pod.get("metadata") or {}).get("labels") or {}
                track = self.pods[name] = PodTrack(name, labels.get(JOB_LABEL), now)
                self.last_change = now
            phase = (pod.get("status") or {}).get("phase")
            if track.bound is None and (pod.get("spec") or {}).get("nodeName"):
                track.bound = now
                track.node = pod["spec"]["nodeName"]
                self.last_change = now
            if track.running is None and phase in ("Running", *TERMINAL):
                track.running = now
                self.last_change = now
            if track.done is None and phase in TERMINAL:
                track.done = now
                self.last_change = now
        for name, track in self.pods.items():
            if name not in pods and track.done is None:
                track.done = now  # deleted
                self.last_change = now
        partly = self.partly_bound_jobs()
        if partly:
            self.partly_bound_s += now - self._last_seen
        self.most_partly_bound = max(self.most_partly_bound, partly)
        self._last_seen = now

    def observe_nodes(self, nodes: set[str], working: set[str], now: float) -> None:
        """Karpenter's nodes at ``now``: those that no working pod is on stand idle."""
        self.bought = (self.bought or set()) | nodes
        self.idle_node_s += (now - self._nodes_seen) * len(nodes - working)
        self._nodes_seen = now

    def partly_bound_jobs(self) -> int:
        """Jobs holding nodes with some pods while others of theirs wait: the deadlock's mark."""
        bound: dict[str, int] = {}
        waiting: dict[str, int] = {}
        for track in self.pods.values():
            if track.job is None or track.done is not None:
                continue
            side = bound if track.bound is not None else waiting
            side[track.job] = side.get(track.job, 0) + 1
        return sum(1 for job in bound if waiting.get(job))


@dataclass(frozen=True)
class RunSummary:
    scenario: str
    contender: str
    jobs: int
    finished: int
    seconds: float
    """Until the last job finished, or until the last change seen when stuck."""
    stuck: bool
    pods: int
    pods_bound: int
    partly_bound_s: float
    most_partly_bound: int
    jobs_split: int | None = None
    """Jobs whose pods were bound in more than one rack; None where nodes have no racks."""
    nodes_bought: int | None = None
    idle_node_s: float | None = None
    """Node-seconds of bought nodes with no pod doing work on them, where Karpenter runs."""

    def as_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(frozen=True)
class Run:
    summary: RunSummary
    pods: tuple[PodTrack, ...]
    ended: float


def summarize(scenario: str, contender: str, jobs: int, finished: int, recorder: Recorder,
              ended: float, finished_at: float | None,
              racks: Mapping[str, str] | None = None) -> Run:
    """The run's figures; ``racks``, each node's rack, where the scenario has them."""
    tracks = tuple(sorted(recorder.pods.values(), key=lambda t: (t.created, t.name)))
    gang_pods = [t for t in tracks if t.job is not None]
    split = None
    if racks:
        held: dict[str, set[str]] = {}
        for track in gang_pods:
            if track.job is not None and track.node is not None:
                held.setdefault(track.job, set()).add(racks.get(track.node, track.node))
        split = sum(1 for used in held.values() if len(used) > 1)
    summary = RunSummary(
        scenario=scenario,
        contender=contender,
        jobs=jobs,
        finished=finished,
        seconds=round(finished_at if finished_at is not None else recorder.last_change, 1),
        stuck=finished_at is None,
        pods=len(gang_pods),
        pods_bound=sum(1 for t in gang_pods if t.bound is not None),
        partly_bound_s=round(recorder.partly_bound_s, 1),
        most_partly_bound=recorder.most_partly_bound,
        jobs_split=split,
        nodes_bought=None if recorder.bought is None else len(recorder.bought),
        idle_node_s=None if recorder.bought is None else round(recorder.idle_node_s, 1),
    )
    return Run(summary, tracks, ended)
