"""Volcano Jobs (``batch.volcano.sh``) run by vc-controller-manager, scheduled by gangsched.

A user who replaces vc-scheduler alone keeps Volcano's controller-manager and
writes ``schedulerName: gang`` on the Job. The controller creates the Job's
PodGroup (``scheduling.volcano.sh``) and its pods only once the group leaves
Pending, so gangsched admitting the group is what lets the Job start at all.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pykube
import pytest

from devcluster.controlplane import LocalCluster, NodeShape
from devcluster.peers import install_volcano_crds
from tests.e2e.conftest import SchedulerProcess
from tests.e2e.operators import volcano_controller, volcano_controller_dir
from tests.e2e.scenario import live, only_nodes
from tests.e2e.workspace import Workspace, node_of, phase_of, wait_for

GPU_NODES = NodeShape(cpu="16", memory="64Gi", gpus=4)
JOB_API = "batch.volcano.sh/v1alpha1"


@pytest.fixture(scope="module")
def controller(
    cluster: LocalCluster, gangsched: SchedulerProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    home = volcano_controller_dir()
    install_volcano_crds(cluster, home / "bin")
    with volcano_controller(cluster, home, tmp_path_factory.mktemp("volcano")):
        yield


@pytest.fixture
def eight_gpus(cluster: LocalCluster, ws: Workspace) -> Iterator[None]:
    """Two nodes of four GPUs; afterwards the Jobs go first, or their controller recreates pods."""
    only_nodes(cluster, 2, GPU_NODES)
    yield
    cls = pykube.object_factory(ws.api, JOB_API, "Job")
    for job in cls.objects(ws.api, namespace=ws.name):
        job.delete()
    wait_for(lambda: not list(cls.objects(ws.api, namespace=ws.name)), timeout=30,
             what="the Volcano Jobs to go")


def volcano_job(ws: Workspace, name: str, workers: int, gpus: int,
                run_for: str | None = None) -> dict[str, Any]:
    """A Volcano Job as a user writes it without Volcano's admission webhook (its defaults
    spelled out): every worker needed at once, the whole job restarted when one fails."""
    annotations = {"kwok.gangsched.io/run-for": run_for} if run_for else {}
    container = {"name": "worker", "image": "busybox", "resources": {
        "requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(gpus)},
        "limits": {"nvidia.com/gpu": str(gpus)}}}
    return {
        "apiVersion": JOB_API, "kind": "Job",
        "metadata": {"name": name, "namespace": ws.name},
        "spec": {
            "schedulerName": "gang", "queue": "default", "minAvailable": workers,
            "maxRetry": 3,
            "policies": [{"event": "PodFailed", "action": "RestartJob"}],
            "tasks": [{
                "name": "worker", "replicas": workers, "minAvailable": workers,
                "template": {"metadata": {"annotations": annotations}, "spec": {
                    "restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                    "containers": [container]}},
            }],
        },
    }


def job_status(ws: Workspace, name: str) -> dict[str, Any]:
    cls = pykube.object_factory(ws.api, JOB_API, "Job")
    found = cls.objects(ws.api, namespace=ws.name).get_or_none(name=name)
    return dict((found.obj.get("status") or {}) if found else {})


def job_phase(ws: Workspace, name: str) -> str | None:
    return (job_status(ws, name).get("state") or {}).get("phase")


def job_pods(ws: Workspace, name: str) -> dict[str, dict[str, Any]]:
    return {k: p for k, p in ws.pods().items() if k.startswith(f"{name}-worker-")}


def running_whole(ws: Workspace, name: str, size: int) -> bool:
    pods = job_pods(ws, name)
    return len(pods) == size and all(phase_of(p) == "Running" and node_of(p)
                                     for p in pods.values())


@pytest.mark.usefixtures("controller", "eight_gpus")
def test_two_volcano_jobs_of_six_gpus_on_eight_run_whole_one_after_the_other_and_complete(
    ws: Workspace,
) -> None:
    names = ("vj-a", "vj-b")
    for name in names:
        ws.create(volcano_job(ws, name, workers=3, gpus=2, run_for="3s"))
    most = 0
    phases: dict[str, set[str]] = {name: set() for name in names}
    split_since: dict[str, float] = {}

    def both_completed() -> bool:
        nonlocal most
        pods = ws.pods()
        live_jobs = {n for n in names if any(live(p) for k, p in pods.items()
                                             if k.startswith(f"{n}-worker-"))}
        most = max(most, len(live_jobs))
        now = time.monotonic()
        for name in names:
            waiting = [p for k, p in pods.items()
                       if k.startswith(f"{name}-worker-") and not node_of(p)]
            if name in live_jobs and waiting:
                # The binds of one gang are concurrent: a poll may fall between them.
                since = split_since.setdefault(name, now)
                assert now - since < 2.0, f"{name} split: {len(waiting)} workers left waiting"
            else:
                split_since.pop(name, None)
            phases[name].add(job_phase(ws, name) or "")
        return all(job_phase(ws, name) == "Completed" for name in names)

    wait_for(both_completed, timeout=90, interval=0.2, what="both Volcano Jobs to complete")
    assert most == 1, f"{most} jobs of six GPUs ran at once on eight"
    assert all("Running" in seen for seen in phases.values()), phases


@pytest.mark.usefixtures("controller", "eight_gpus")
def test_a_volcano_job_whose_worker_fails_restarts_whole_and_runs_again(ws: Workspace) -> None:
    # Long enough to outlast the test: KWOK completes any pod a Job owns at once otherwise.
    ws.create(volcano_job(ws, "vj-restart", workers=4, gpus=1, run_for="1h"))
    wait_for(lambda: running_whole(ws, "vj-restart", 4) and job_phase(ws, "vj-restart")
             == "Running", timeout=60, what="the Volcano Job to run whole")
    first = {p["metadata"]["uid"] for p in job_pods(ws, "vj-restart").values()}

    ws.finish_pod("vj-restart-worker-1", phase="Failed")

    def restarted_whole() -> bool:
        pods = job_pods(ws, "vj-restart")
        fresh = {p["metadata"]["uid"] for p in pods.values()}
        return (len(pods) == 4 and not fresh & first and running_whole(ws, "vj-restart", 4)
                and job_phase(ws, "vj-restart") == "Running")

    wait_for(restarted_whole, timeout=60, interval=0.2,
             what="four new workers running and the Job Running again")
    assert job_status(ws, "vj-restart").get("retryCount") == 1
