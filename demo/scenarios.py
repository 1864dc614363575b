"""The seed workloads, played as their operators and frameworks would play them.

Each scenario creates its pods through a :class:`Contender` (which decides
the scheduler and how the gang is declared) and then acts on what the
cluster shows: Spark creates executors once its driver runs; training code
makes progress only when all of a job's workers run. The pods themselves are
KWOK's: bound pods become Running; pods with ``kwok.gangsched.io/run-for``
succeed after that long. GPUs are ``nvidia.com/gpu`` counts, but in the DRA
scenario, where they are devices of the fake driver's ResourceSlices, claimed
through ResourceClaimTemplates.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

import pykube

from demo.contenders import Contender, Gang
from demo.timeline import JOB_LABEL
from devcluster import fakedriver
from devcluster.controlplane import NodeShape
from devcluster.fakedriver import claim_template, claiming
from devcluster.karpenter import GPU, nodepool
from tests.e2e.workspace import Workspace, node_of, phase_of

Pods = Mapping[str, Mapping[str, Any]]
TRAIN_S = 2.0
"""How long a training job runs once all its workers run."""


class Scenario(Protocol):
    key: ClassVar[str]
    title: ClassVar[str]
    short: ClassVar[str]
    racks: ClassVar[Mapping[str, str]]
    """Each node's rack, for a scenario whose nodes are in racks; else empty."""
    nodes: int
    shape: NodeShape
    jobs: int
    nodepools: ClassVar[tuple[Mapping[str, Any], ...]]
    """Karpenter's NodePools: a scenario that names some runs with Karpenter buying its
    nodes (:mod:`devcluster.karpenter`), on none of ``nodes`` of its own."""

    def __init__(self, ws: Workspace, contender: Contender) -> None: ...

    def submit(self) -> None: ...

    def step(self, pods: Pods, now: float) -> None: ...

    def finished(self) -> int: ...


def _pod(ws: Workspace, contender: Contender, name: str, gang: Gang | None, *,
         cpu: str = "1", gpus: int = 0, run_for: str | None = None) -> dict[str, Any]:
    manifest = ws.pod(name, cpu=cpu, gpus=gpus, scheduler="kube", run_for=run_for,
                      labels={JOB_LABEL: gang.name} if gang else {})
    return contender.member(manifest, gang) if gang else manifest


def _declare(ws: Workspace, contender: Contender, gang: Gang) -> None:
    group = contender.podgroup(ws.name, gang)
    if group is not None:
        ws.create(group)


def _running(pods: Pods, names: list[str]) -> bool:
    return all(phase_of(pods.get(name, {})) == "Running" for name in names)


@dataclass
class Spark:
    """Six jobs of a driver and two executors (1 CPU each) on 3 nodes x 2 CPU."""

    ws: Workspace
    contender: Contender
    key: ClassVar[str] = "spark"
    title: ClassVar[str] = "Spark: 6 jobs x (driver + 2 executors) on 6 CPUs"
    short: ClassVar[str] = "Spark, 6 jobs on 6 CPUs"
    racks: ClassVar[Mapping[str, str]] = {}
    nodepools: ClassVar[tuple[Mapping[str, Any], ...]] = ()
    nodes: int = 3
    shape: NodeShape = field(default_factory=lambda: NodeShape(cpu="2", memory="8Gi"))
    jobs: int = 6
    executors_made: set[int] = field(default_factory=set)
    done: set[int] = field(default_factory=set)

    def submit(self) -> None:
        for job in range(self.jobs):
            # The driver alone exists up front: the gang is declared by minResources.
            gang = self._gang(job)
            _declare(self.ws, self.contender, gang)
            self.ws.create(_pod(self.ws, self.contender, f"spark-{job}-driver", gang))

    def _gang(self, job: int) -> Gang:
        return Gang(f"spark-{job}", 1, {"cpu": "3"})

    def step(self, pods: Pods, now: float) -> None:
        for job in range(self.jobs):
            driver = f"spark-{job}-driver"
            if job in self.done or phase_of(pods.get(driver, {})) != "Running":
                continue
            executors = [f"spark-{job}-exec-{i}" for i in range(2)]
            if job not in self.executors_made:
                self.ws.create(*(_pod(self.ws, self.contender, name, self._gang(job),
                                      run_for="3s") for name in executors))
                self.executors_made.add(job)
            elif all(phase_of(pods.get(name, {})) == "Succeeded" for name in executors):
                self.ws.finish_pod(driver)
                self.done.add(job)

    def finished(self) -> int:
        return len(self.done)


@dataclass
class GpuBlocker:
    """A blocker holds one of two GPUs; a 2-worker job arrives; the blocker goes after 4 s."""

    ws: Workspace
    contender: Contender
    key: ClassVar[str] = "gpu-blocker"
    title: ClassVar[str] = "GPU blocker: 2-worker job, one of 2 GPUs held for 4 s"
    short: ClassVar[str] = "GPU blocker"
    racks: ClassVar[Mapping[str, str]] = {}
    nodepools: ClassVar[tuple[Mapping[str, Any], ...]] = ()
    nodes: int = 2
    shape: NodeShape = field(default_factory=lambda: NodeShape(cpu="8", memory="32Gi", gpus=1))
    jobs: int = 1
    hold_s: float = 4.0
    job_created: float | None = None
    blocker_deleted: bool = False
    all_running: float | None = None
    done: bool = False

    def submit(self) -> None:
        self.ws.create(_pod(self.ws, self.contender, "blocker", None, gpus=1))

    def step(self, pods: Pods, now: float) -> None:
        workers = ["train-worker-0", "train-worker-1"]
        if self.job_created is None and phase_of(pods.get("blocker", {})) == "Running":
            gang = Gang("train", 2)
            _declare(self.ws, self.contender, gang)
            self.ws.create(*(_pod(self.ws, self.contender, name, gang, gpus=1)
                             for name in workers))
            self.job_created = now
        if (self.job_created is not None and not self.blocker_deleted
                and now - self.job_created >= self.hold_s):
            self.ws.delete_pod("blocker")
            self.blocker_deleted = True
        if not self.done and _running(pods, workers):
            self.all_running = self.all_running if self.all_running is not None else now
            if now - self.all_running >= TRAIN_S:
                for name in workers:
                    self.ws.finish_pod(name)
                self.done = True

    def finished(self) -> int:
        return int(self.done)


class _Trains(Protocol):
    ws: Workspace
    jobs: int
    all_running: dict[str, float]
    done: set[str]

    def _names(self, job: str) -> list[str]: ...


def _train(scenario: _Trains, pods: Pods, now: float, prefix: str) -> None:
    """Each job ``<prefix>-<j>`` trains for TRAIN_S once all its workers run, then ends."""
    for j in range(scenario.jobs):
        job = f"{prefix}-{j}"
        names = scenario._names(job)
        if job in scenario.done or not _running(pods, names):
            continue
        started = scenario.all_running.setdefault(job, now)
        if now - started >= TRAIN_S:
            for name in names:
                scenario.ws.finish_pod(name)
            scenario.done.add(job)


@dataclass
class Training:
    """Three jobs of 4 one-GPU workers each, created interleaved, on 2 nodes x 2 GPUs."""

    ws: Workspace
    contender: Contender
    key: ClassVar[str] = "training"
    title: ClassVar[str] = "Training: 3 jobs x 4 GPU workers on 4 GPUs"
    short: ClassVar[str] = "Training, 3 jobs on 4 GPUs"
    racks: ClassVar[Mapping[str, str]] = {}
    nodepools: ClassVar[tuple[Mapping[str, Any], ...]] = ()
    nodes: int = 2
    shape: NodeShape = field(default_factory=lambda: NodeShape(cpu="8", memory="32Gi", gpus=2))
    jobs: int = 3
    workers: int = 4
    all_running: dict[str, float] = field(default_factory=dict)
    done: set[str] = field(default_factory=set)

    def _names(self, job: str) -> list[str]:
        return [f"{job}-worker-{i}" for i in range(self.workers)]

    def submit(self) -> None:
        gangs = [Gang(f"job-{j}", self.workers) for j in range(self.jobs)]
        for gang in gangs:
            _declare(self.ws, self.contender, gang)
        for i in range(self.workers):  # operators create their pods side by side
            for gang in gangs:
                self.ws.create(_pod(self.ws, self.contender, f"{gang.name}-worker-{i}", gang,
                                    gpus=1))

    def step(self, pods: Pods, now: float) -> None:
        _train(self, pods, now, "job")

    def finished(self) -> int:
        return len(self.done)


RESOURCE_API = fakedriver.RESOURCE_API
CLIQUE_GPUS = 4
"""The fake driver's NVLink clique: half of a node's 8 GPUs."""


@dataclass
class Cliques:
    """Four jobs of 8 GPUs (2 workers, each claiming a whole NVLink clique of 4) on 3
    nodes of 8 fake GPUs (6 cliques), after two one-GPU serving pods that stay.

    Devices are claimed through DRA (ResourceClaimTemplates, the fake driver's
    slices). Where the serving pods go decides the rest: spread over two nodes
    they break two cliques and leave four whole, one per first worker of each
    job; packed into one clique they leave five, two jobs' worth at a time.
    """

    ws: Workspace
    contender: Contender
    key: ClassVar[str] = "dra-cliques"
    title: ClassVar[str] = "DRA: 4 jobs x 8 GPUs, a clique of 4 per worker, on 3 nodes x 8 GPUs"
    short: ClassVar[str] = "DRA cliques, 4 jobs on 24 GPUs"
    racks: ClassVar[Mapping[str, str]] = {}
    nodepools: ClassVar[tuple[Mapping[str, Any], ...]] = ()
    nodes: int = 3
    shape: NodeShape = field(default_factory=lambda: NodeShape(cpu="16", memory="64Gi"))
    jobs: int = 4
    workers: int = 2
    serving: int = 2
    jobs_created: bool = False
    all_running: dict[str, float] = field(default_factory=dict)
    done: set[str] = field(default_factory=set)

    def _names(self, job: str) -> list[str]:
        return [f"{job}-worker-{i}" for i in range(self.workers)]

    def manifests(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]],
                                 list[dict[str, Any]]]:
        """The claim templates, the serving pods, and the jobs' PodGroups and workers
        (workers created side by side, as operators create them)."""
        templates = [claim_template(self.ws.name, "one-gpu", 1),
                     claim_template(self.ws.name, "clique", CLIQUE_GPUS, one_clique=True)]
        serving = [claiming(_pod(self.ws, self.contender, f"serving-{i}", None), "one-gpu")
                   for i in range(self.serving)]
        for pod in serving:
            pod["spec"]["schedulerName"] = self.contender.scheduler_name
        gangs = [Gang(f"cliques-{j}", self.workers) for j in range(self.jobs)]
        groups = [group for gang in gangs
                  if (group := self.contender.podgroup(self.ws.name, gang))]
        workers = [claiming(_pod(self.ws, self.contender, f"{gang.name}-worker-{i}", gang),
                            "clique")
                   for i in range(self.workers) for gang in gangs]
        return templates, serving, [*groups, *workers]

    def submit(self) -> None:
        fakedriver.publish(self.ws.api, [f"node-{i}" for i in range(self.nodes)])
        templates, serving, _ = self.manifests()
        self.ws.create(*templates, *serving)

    def step(self, pods: Pods, now: float) -> None:
        if not self.jobs_created:
            if _running(pods, [f"serving-{i}" for i in range(self.serving)]):
                self.ws.create(*self.manifests()[2])
                self.jobs_created = True
            return
        _train(self, pods, now, "cliques")

    def finished(self) -> int:
        return len(self.done)


RACK = "topology.example.com/rack"
TOPOLOGY = "demo-racks"


@dataclass
class Racks:
    """Two jobs of 8 GPUs (4 workers of 2 GPUs), created side by side, on two racks of three
    nodes x 4 GPUs (even nodes in one, odd in the other, as names seldom follow racks),
    after a serving pod of 2 GPUs on the first node of each rack: each rack still holds
    one job whole (10 GPUs free), but nodes taken in any order of their own span both.

    Each contender is told, as its API can say it, to keep a job in one rack (gangsched's
    ``spec.topology.required``, the native ``schedulingConstraints.topology``);
    kube-scheduler alone has no way to say it. A job split across racks runs, but its
    workers talk over the link between the racks."""

    ws: Workspace
    contender: Contender
    key: ClassVar[str] = "racks"
    title: ClassVar[str] = "Racks: 2 jobs x 8 GPUs on 2 racks of 3 nodes x 4 GPUs"
    short: ClassVar[str] = "Racks, 2 jobs of 8 GPUs"
    racks: ClassVar[Mapping[str, str]] = {f"node-{i}": f"r{i % 2}" for i in range(6)}
    nodepools: ClassVar[tuple[Mapping[str, Any], ...]] = ()
    nodes: int = 6
    shape: NodeShape = field(default_factory=lambda: NodeShape(cpu="8", memory="32Gi", gpus=4))
    jobs: int = 2
    workers: int = 4
    serving: tuple[str, ...] = ("node-0", "node-1")
    jobs_created: bool = False
    all_running: dict[str, float] = field(default_factory=dict)
    done: set[str] = field(default_factory=set)

    def _names(self, job: str) -> list[str]:
        return [f"{job}-worker-{i}" for i in range(self.workers)]

    def submit(self) -> None:
        for name, rack in self.racks.items():
            node = pykube.Node.objects(self.ws.api).get(name=name)
            node.obj["metadata"].setdefault("labels", {})[RACK] = rack
            node.update()
        topology = pykube.object_factory(self.ws.api, "scheduling.gangsched.io/v1alpha1",
                                         "Topology")
        if topology.objects(self.ws.api).get_or_none(name=TOPOLOGY) is None:
            topology(self.ws.api, {"apiVersion": "scheduling.gangsched.io/v1alpha1",
                                   "kind": "Topology", "metadata": {"name": TOPOLOGY},
                                   "spec": {"levels": [{"nodeLabel": RACK}]}}).create()
        for node in self.serving:
            pod = self.ws.pod(f"serving-{node}", cpu="1", gpus=2,
                              scheduler=self.contender.scheduler_name,
                              node_selector={"kubernetes.io/hostname": node})
            self.ws.create(pod)

    def _create_jobs(self) -> None:
        jobs = [Gang(f"racks-{j}", self.workers) for j in range(self.jobs)]
        for job in jobs:
            group = self.contender.podgroup(self.ws.name, job, one_domain=(TOPOLOGY, RACK))
            if group is not None:
                self.ws.create(group)
        for i in range(self.workers):  # operators create their pods side by side
            for job in jobs:
                self.ws.create(_pod(self.ws, self.contender, f"{job.name}-worker-{i}", job,
                                    gpus=2))

    def step(self, pods: Pods, now: float) -> None:
        if not self.jobs_created:
            if _running(pods, [f"serving-{node}" for node in self.serving]):
                self._create_jobs()
                self.jobs_created = True
            return
        _train(self, pods, now, "racks")

    def finished(self) -> int:
        return len(self.done)


@dataclass
class Autoscaling:
    """Three jobs of 4 one-GPU workers on a cluster of no node, Karpenter buying 1-GPU
    nodes for what waits; the last job's fourth worker never comes (its operator is held
    by a quota), so that job is a partial gang for as long as the run lasts.

    The run lasts ``horizon_s`` at least: long enough to see what a partial gang's
    bought nodes cost while the whole jobs have long finished.
    """

    ws: Workspace
    contender: Contender
    key: ClassVar[str] = "autoscaling"
    title: ClassVar[str] = ("Autoscaling: 3 jobs x 4 GPU workers, one short of a worker, "
                            "on nodes Karpenter buys")
    short: ClassVar[str] = "Autoscaling, a job short"
    nodepools: ClassVar[tuple[Mapping[str, Any], ...]] = (
        nodepool("gpu", limits={GPU: "16", "cpu": "100"}, instance_types=("g-1gpu",)),)
    racks: ClassVar[Mapping[str, str]] = {}
    nodes: int = 0
    shape: NodeShape = field(default_factory=NodeShape)
    jobs: int = 2
    workers: int = 4
    horizon_s: float = 40.0
    now: float = 0.0
    all_running: dict[str, float] = field(default_factory=dict)
    done: set[str] = field(default_factory=set)

    def _names(self, job: str) -> list[str]:
        return [f"{job}-worker-{i}" for i in range(self.workers)]

    def submit(self) -> None:
        jobs = [Gang(f"job-{j}", self.workers) for j in range(self.jobs + 1)]
        for job in jobs:
            _declare(self.ws, self.contender, job)
        for i in range(self.workers):
            for job in jobs:
                if job != jobs[-1] or i < self.workers - 1:
                    self.ws.create(_pod(self.ws, self.contender, f"{job.name}-worker-{i}", job,
                                        gpus=1))

    def step(self, pods: Pods, now: float) -> None:
        self.now = now
        _train(self, pods, now, "job")

    def finished(self) -> int:
        """The whole jobs done, once the horizon is reached (the short one never is)."""
        return len(self.done) if self.now >= self.horizon_s else 0

    def working_nodes(self, pods: Pods) -> set[str]:
        """Nodes a worker of a job training (all its workers running) is on: a bought
        node on none of them stands idle, whatever waits on it."""
        return {node for job, _ in self.all_running.items() if job not in self.done
                for name in self._names(job) if (node := node_of(pods.get(name, {})))}


SCENARIOS = (Spark, GpuBlocker, Training, Cliques, Racks)
"""What ``make demo`` runs; :class:`Autoscaling` needs Karpenter and runs alone
(``make demo-autoscaling``)."""


def bound_pods(pods: Pods) -> int:
    return sum(1 for pod in pods.values() if node_of(pod))
