"""Scenario 3: training jobs of GPU workers created at once, on a cluster that fits one.

Three jobs, each wanting all four GPUs of the cluster, arrive together as
their operators create them: a TFJob (one CPU-only parameter server and four
GPU workers) grouped by a scheduler-plugins PodGroup and label, a PyTorchJob
grouped by a Volcano PodGroup and annotation, and an MPIJob-like job grouped
by gangsched's own PodGroup. The test plays the training framework: a job's
workers make progress only once all of them run, and then finish together a
couple of seconds later. Under kube-scheduler each job gets some workers and
none ever runs whole; under gangsched whole jobs run one after another.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pykube
import pytest

from devcluster.controlplane import LocalCluster, NodeShape
from tests.e2e.conftest import SchedulerProcess
from tests.e2e.scenario import create_interleaved, live, only_nodes, overcommitted, timed
from tests.e2e.workspace import (
    Workspace,
    bound_at,
    node_of,
    phase_of,
    scheduled_condition,
    wait_for,
)

GPU_NODES = NodeShape(cpu="8", memory="32Gi", gpus=2)
WORKERS = 4
TRAIN_S = 2.0
KUBE_OBSERVE_S = 8.0


@dataclass(frozen=True)
class Job:
    name: str
    flavor: str
    pods: tuple[str, ...]
    gpu_pods: tuple[str, ...]

    @property
    def min_resources(self) -> dict[str, str]:
        return {"cpu": str(len(self.pods)), "nvidia.com/gpu": str(len(self.gpu_pods))}


def _job(name: str, flavor: str, *, ps: bool = False) -> Job:
    workers = tuple(f"{name}-worker-{i}" for i in range(WORKERS))
    return Job(name, flavor, ((f"{name}-ps-0",) if ps else ()) + workers, workers)


TFJOB = _job("tfjob", "coscheduling", ps=True)
PYTORCH = _job("pytorch", "volcano")
MPI = _job("mpi", "gangsched")
JOBS = (TFJOB, PYTORCH, MPI)


@pytest.fixture
def four_gpus(cluster: LocalCluster) -> None:
    only_nodes(cluster, 2, GPU_NODES)


@dataclass
class Training:
    """The test playing the operators' pods and the training code inside them."""

    ws: Workspace
    scheduler: str
    all_running_at: dict[str, float] = field(default_factory=dict)
    finished: set[str] = field(default_factory=set)
    jobs_live_at_once: int = 0
    live_order: list[str] = field(default_factory=list)

    native: bool = False
    """Every job a native PodGroup (Kubernetes 1.37), whichever scheduler binds it."""
    partly_bound_s: dict[str, float] = field(default_factory=dict)
    """Per job, how long it was seen with some but not all of its pods bound."""
    _partly_since: dict[str, float] = field(default_factory=dict)

    def manifest(self, job: Job, name: str) -> dict[str, Any]:
        grouped = self.scheduler == "gang" or self.native
        return self.ws.pod(name, cpu="1", gpus=1 if name in job.gpu_pods else 0,
                           scheduler=self.scheduler, group=job.name if grouped else None,
                           marker="native" if self.native else job.flavor,
                           labels={"job-name": job.name})

    def creations(self, job: Job) -> list[Callable[[], None]]:
        return [functools.partial(self._create, job, name) for name in job.pods]

    def _create(self, job: Job, name: str) -> None:
        self.ws.create(self.manifest(job, name))

    def step(self) -> dict[str, dict[str, Any]]:
        """Finish every job whose pods have all run for ``TRAIN_S``; note who holds room."""
        pods = self.ws.pods()
        now = time.monotonic()
        holding = [job.name for job in JOBS
                   if any(name in pods and live(pods[name]) for name in job.pods)]
        self.jobs_live_at_once = max(self.jobs_live_at_once, len(holding))
        for name in holding:
            if name not in self.live_order:
                self.live_order.append(name)
        for job in JOBS:
            placed = sum(1 for name in job.pods if node_of(pods.get(name, {})))
            if 0 < placed < len(job.pods) and job.name not in self.finished:
                since = self._partly_since.setdefault(job.name, now)
                self.partly_bound_s[job.name] = round(now - since, 2)
            else:
                self._partly_since.pop(job.name, None)
        for job in JOBS:
            if job.name in self.finished:
                continue
            if all(phase_of(pods.get(name, {})) == "Running" for name in job.pods):
                started = self.all_running_at.setdefault(job.name, now)
                if now - started >= TRAIN_S:
                    for name in job.pods:  # the CPU-only PS first, then the GPU workers
                        self.ws.finish_pod(name)
                    self.finished.add(job.name)
        return pods



@pytest.mark.usefixtures("four_gpus")
def test_kube_scheduler_gives_every_job_a_part_and_none_runs(
    ws: Workspace, cluster: LocalCluster
) -> None:
    training = Training(ws, scheduler="kube")
    with timed("training-3-jobs-4-gpus", "kube-scheduler",
               outcome=f"deadlock: 0 of {len(JOBS)} jobs run in {KUBE_OBSERVE_S:.0f}s") as record:
        started = time.monotonic()
        create_interleaved([training.creations(job) for job in JOBS])
        gpu_pods = [name for job in JOBS for name in job.gpu_pods]
        wait_for(lambda: sum(1 for n in gpu_pods if node_of(training.step().get(n, {}))) == 4,
                 timeout=60, what="kube-scheduler to hand out all four GPUs")
        record["deadlocked_after_s"] = round(time.monotonic() - started, 2)
        deadline = time.monotonic() + KUBE_OBSERVE_S
        while time.monotonic() < deadline:
            training.step()
            time.sleep(0.5)

    pods = ws.pods()
    assert training.finished == set(), "no job can train with part of its workers"
    bound_per_job = {job.name: sum(1 for n in job.pods if node_of(pods[n])) for job in JOBS}
    assert all(0 < count < len(job.pods) for job, count in zip(JOBS, bound_per_job.values(),
                                                                 strict=True)), bound_per_job
    waiting = [n for job in JOBS for n in job.gpu_pods if not node_of(pods[n])]
    assert len(waiting) == len(JOBS) * WORKERS - 4
    condition = scheduled_condition(pods[waiting[0]])
    assert condition is not None and condition["reason"] == "Unschedulable", condition
    assert overcommitted(cluster, pods.values()) == {}


@pytest.mark.usefixtures("four_gpus")
def test_gangsched_runs_whole_jobs_one_after_another(
    ws: Workspace, cluster: LocalCluster, gangsched: SchedulerProcess
) -> None:
    training = Training(ws, scheduler="gang")
    volcano_phases: list[str] = []
    coscheduling_statuses: list[dict[str, Any]] = []
    worst: dict[str, Any] = {}
    operator_errors: list[BaseException] = []

    def volcano_operator() -> None:
        """training-operator with Volcano: no pod until the PodGroup is Inqueue."""
        try:
            ws.create(ws.podgroup(PYTORCH.name, min_member=len(PYTORCH.pods),
                                  min_resources=PYTORCH.min_resources, flavor="volcano"))
            wait_for(lambda: volcano_phases and volcano_phases[-1] in ("Inqueue", "Running"),
                     timeout=60, what="the Volcano PodGroup to be Inqueue")
            create_interleaved([[c] for c in training.creations(PYTORCH)])
        except BaseException as error:  # reported by the main thread
            operator_errors.append(error)

    def watch() -> bool:
        pods = training.step()
        worst.update(overcommitted(cluster, pods.values()))
        if (phase := _status(ws, PYTORCH).get("phase")) and (
            not volcano_phases or volcano_phases[-1] != phase
        ):
            volcano_phases.append(phase)
        status = _status(ws, TFJOB)
        if status and (not coscheduling_statuses or coscheduling_statuses[-1] != status):
            coscheduling_statuses.append(status)
        assert not operator_errors, operator_errors
        return len(training.finished) == len(JOBS)

    with timed("training-3-jobs-4-gpus", "gangsched",
               outcome=f"{len(JOBS)} of {len(JOBS)} jobs run whole, one after another"
               ) as record:
        ws.create(ws.podgroup(TFJOB.name, min_member=len(TFJOB.pods),
                              min_resources=TFJOB.min_resources, flavor="coscheduling"))
        ws.create(ws.podgroup(MPI.name, min_member=len(MPI.pods)))
        operator = threading.Thread(target=volcano_operator, daemon=True)
        operator.start()
        create_interleaved([training.creations(TFJOB), training.creations(MPI)])
        wait_for(watch, timeout=120, interval=0.1,
                 what=f"every job to run whole and finish (finished: {sorted(training.finished)},"
                      f" Volcano phases {volcano_phases})")
        operator.join(timeout=10)
        record["jobs_holding_gpus_at_once"] = training.jobs_live_at_once
        record["longest_partly_bound_s"] = max(training.partly_bound_s.values(), default=0.0)

    assert training.jobs_live_at_once == 1, (
        f"{training.jobs_live_at_once} jobs held GPUs at once; order {training.live_order}"
    )
    assert sorted(training.live_order) == sorted(job.name for job in JOBS)
    assert worst == {}, f"nodes overcommitted: {worst}"
    pods = ws.pods()
    for job in JOBS:
        times = [bound_at(pods[name]) for name in job.pods]
        assert max(times) - min(times) <= 2.0, f"{job.name} bound piecemeal: {times}"

    # Volcano: Inqueue on admission (training-operator waits for it), then Running.
    assert "Inqueue" in volcano_phases and "Running" in volcano_phases, volcano_phases
    assert volcano_phases.index("Inqueue") < volcano_phases.index("Running"), volcano_phases
    # scheduler-plugins: its status is written in its own shape.
    running = [s for s in coscheduling_statuses if s.get("phase") == "Running"]
    assert running and running[0].get("scheduled") == len(TFJOB.pods), coscheduling_statuses
    wait_for(lambda: _status(ws, TFJOB).get("phase") == "Finished"
             and _status(ws, TFJOB).get("succeeded") == len(TFJOB.pods),
             timeout=20, what=f"TFJob PodGroup Finished, last {_status(ws, TFJOB)}")
    wait_for(lambda: _status(ws, PYTORCH).get("phase") == "Completed", timeout=20,
             what=f"PyTorchJob PodGroup Completed, last {_status(ws, PYTORCH)}")


@pytest.mark.usefixtures("four_gpus")
def test_native_gang_scheduler_on_the_same_jobs(ws: Workspace, cluster: LocalCluster) -> None:
    """kube-scheduler 1.37 with each job a native gang PodGroup of all its pods."""
    training = Training(ws, scheduler="kube", native=True)
    worst: dict[str, Any] = {}

    def watch() -> bool:
        pods = training.step()
        worst.update(overcommitted(cluster, pods.values()))
        return len(training.finished) == len(JOBS)

    with timed("training-3-jobs-4-gpus", "kube-scheduler 1.37 native gang",
               outcome=f"{len(JOBS)} of {len(JOBS)} jobs run whole") as record:
        for job in JOBS:
            ws.create(ws.native_podgroup(job.name, min_count=len(job.pods)))
        create_interleaved([training.creations(job) for job in JOBS])
        wait_for(watch, timeout=120, interval=0.1,
                 what=f"every job to run and finish (finished: {sorted(training.finished)})")
        record["jobs_holding_gpus_at_once"] = training.jobs_live_at_once
        record["longest_partly_bound_s"] = max(training.partly_bound_s.values(), default=0.0)

    assert worst == {}, f"nodes overcommitted: {worst}"
    pods = ws.pods()
    for job in JOBS:
        times = [bound_at(pods[name]) for name in job.pods]
        assert max(times) - min(times) <= 2.0, f"{job.name} bound piecemeal: {times}"


def _status(ws: Workspace, job: Job) -> dict[str, Any]:
    try:
        return dict(ws.podgroup_obj(job.name, job.flavor).get("status") or {})
    except pykube.exceptions.ObjectDoesNotExist:  # not created yet
        return {}
