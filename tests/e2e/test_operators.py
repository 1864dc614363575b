"""The real clients: Kubeflow training-operator v1.8.1 and mpi-operator v0.6.0 against gangsched.

Each runs in both of its gang modes. With scheduler-plugins the operators
write ``schedulerName: gang`` and scheduler-plugins PodGroups; with Volcano
they write ``schedulerName: volcano`` and Volcano PodGroups. The session's
gangsched, given both names, serves both, standing in for Volcano with
nothing else changed. Throughout, every PodGroup's status
is sampled: none may show a condition its phase contradicts.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pykube
import pytest
import requests

from devcluster.controlplane import LocalCluster, NodeShape
from tests.e2e.conftest import SchedulerProcess
from tests.e2e.operators import install_crds, mpi_operator, operators_dir, training_operator
from tests.e2e.scenario import live, only_nodes, overcommitted
from tests.e2e.workspace import (
    PODGROUP_API,
    Workspace,
    bound,
    bound_at,
    node_of,
    phase_of,
    wait_for,
)

MODES = {"scheduler-plugins": ("gang", "coscheduling"), "volcano": ("volcano", "volcano")}
"""Gang mode → (the scheduler name the operators are given, the PodGroup flavour they create)."""
GPU_NODES = NodeShape(cpu="16", memory="64Gi", gpus=4)


@pytest.fixture(scope="module")
def operators_home(cluster: LocalCluster) -> Path:
    home = operators_dir()
    install_crds(cluster, home / "crds")
    return home


@pytest.fixture(scope="module", params=sorted(MODES))
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def training(
    mode: str, cluster: LocalCluster, operators_home: Path, gangsched: SchedulerProcess,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[None]:
    with training_operator(cluster, operators_home, tmp_path_factory.mktemp("training"),
                           MODES[mode][0]):
        yield


@pytest.fixture(scope="module")
def mpi(
    mode: str, cluster: LocalCluster, operators_home: Path, gangsched: SchedulerProcess,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[None]:
    with mpi_operator(cluster, operators_home, tmp_path_factory.mktemp("mpi"), MODES[mode][0]):
        yield


@pytest.fixture
def eight_gpus(cluster: LocalCluster) -> None:
    only_nodes(cluster, 2, GPU_NODES)


# ---- watching PodGroups ---------------------------------------------------------------


def contradictions(status: dict[str, Any]) -> list[str]:
    """Conditions the phase gives the lie to, in Volcano's and our words."""
    phase = status.get("phase")
    found = []
    for condition in status.get("conditions") or []:
        if condition.get("status") != "True":
            continue
        kind = condition.get("type")
        if kind == "Unschedulable" and phase in ("Running", "Completed"):
            found.append(f"{kind} while {phase}")
        if kind == "Scheduled" and phase in ("Pending", "Inqueue"):
            found.append(f"{kind} while {phase}")
    return found


@dataclass
class GroupWatch:
    """Samples every PodGroup of the namespace, five times a second, on its own thread."""

    ws: Workspace
    flavor: str
    seen: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self._cls = pykube.object_factory(self.ws.api, PODGROUP_API[self.flavor], "PodGroup")
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            try:
                found = list(self._cls.objects(self.ws.api, namespace=self.ws.name))
            except requests.RequestException:
                continue  # a moment's refusal of the API server; the next sample sees it
            for group in found:
                status = group.obj.get("status") or {}
                self.seen.extend(f"{group.name}: {c}: {status}" for c in contradictions(status))

    def groups(self) -> dict[str, dict[str, Any]]:
        return {g.name: g.obj for g in self._cls.objects(self.ws.api, namespace=self.ws.name)}

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        assert self.seen == [], f"PodGroup status contradicting its phase: {self.seen[:3]}"


JOB_KINDS = (("kubeflow.org/v1", "TFJob"), ("kubeflow.org/v1", "PyTorchJob"),
             ("kubeflow.org/v2beta1", "MPIJob"))


@pytest.fixture
def groups(mode: str, ws: Workspace) -> Iterator[GroupWatch]:
    """Watches the PodGroups; afterwards deletes the jobs, or their operators recreate pods."""
    watch = GroupWatch(ws, MODES[mode][1])
    yield watch
    for api_version, kind in JOB_KINDS:
        wait_for(functools.partial(_delete_jobs, ws, api_version, kind), timeout=30,
                 what=f"the {kind}s to be deleted")
    watch.close()


def _delete_jobs(ws: Workspace, api_version: str, kind: str) -> bool:
    """True once deleted; False to try again while a CRD just installed answers 429."""
    try:
        cls = pykube.object_factory(ws.api, api_version, kind)
        for job in cls.objects(ws.api, namespace=ws.name):
            job.delete()
    except requests.HTTPError as error:
        if error.response is not None and error.response.status_code == 429:
            return False
        raise
    return True


# ---- jobs as users write them ---------------------------------------------------------------


def _container(name: str, gpus: int, cpu: str = "1") -> dict[str, Any]:
    requests = {"cpu": cpu, "memory": "1Gi", **({"nvidia.com/gpu": str(gpus)} if gpus else {})}
    limits = {"nvidia.com/gpu": str(gpus)} if gpus else {}
    return {"name": name, "image": "busybox", "resources": {"requests": requests,
                                                            "limits": limits}}


def _template(container: dict[str, Any], run_for: str | None) -> dict[str, Any]:
    annotations = {"kwok.gangsched.io/run-for": run_for} if run_for else {}
    return {"metadata": {"annotations": annotations},
            "spec": {"terminationGracePeriodSeconds": 0, "containers": [container]}}


def pytorchjob(ws: Workspace, name: str, workers: int = 4, run_for: str | None = None
               ) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": ws.name},
        "spec": {"pytorchReplicaSpecs": {"Worker": {
            "replicas": workers, "restartPolicy": "OnFailure",
            "template": _template(_container("pytorch", 1), run_for),
        }}},
    }


def tfjob(ws: Workspace, name: str) -> dict[str, Any]:
    """The seed's TFJob: one CPU parameter server and one GPU worker."""
    return {
        "apiVersion": "kubeflow.org/v1", "kind": "TFJob",
        "metadata": {"name": name, "namespace": ws.name},
        "spec": {"tfReplicaSpecs": {
            "PS": {"replicas": 1, "restartPolicy": "Never",
                   "template": _template(_container("tensorflow", 0, "2"), None)},
            "Worker": {"replicas": 1, "restartPolicy": "Never",
                       "template": _template(_container("tensorflow", 1), None)},
        }},
    }


def mpijob(ws: Workspace, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
        "metadata": {"name": name, "namespace": ws.name},
        "spec": {"slotsPerWorker": 1, "mpiReplicaSpecs": {
            "Launcher": {"replicas": 1, "template": _template(_container("launcher", 0), None)},
            "Worker": {"replicas": 2, "template": _template(_container("worker", 1), None)},
        }},
    }


def job_pods(ws: Workspace, job: str) -> list[dict[str, Any]]:
    return [p for name, p in ws.pods().items() if name.startswith(f"{job}-")]


def running_whole(ws: Workspace, job: str, size: int) -> bool:
    pods = job_pods(ws, job)
    return len(pods) == size and all(phase_of(p) == "Running" for p in pods)


def job_exists(ws: Workspace, manifest: dict[str, Any]) -> bool:
    cls = pykube.object_factory(ws.api, manifest["apiVersion"], manifest["kind"])
    name = manifest["metadata"]["name"]
    return cls.objects(ws.api, namespace=ws.name).get_or_none(name=name) is not None


def delete_job(ws: Workspace, manifest: dict[str, Any]) -> None:
    cls = pykube.object_factory(ws.api, manifest["apiVersion"], manifest["kind"])
    obj = cls.objects(ws.api, namespace=ws.name).get_or_none(name=manifest["metadata"]["name"])
    if obj is not None:
        obj.delete(propagation_policy="Foreground")


# ---- the tests --------------------------------------------------------------------------------


@pytest.mark.usefixtures("training", "eight_gpus")
def test_seed_tfjob_with_a_parameter_server_runs_whole(
    ws: Workspace, groups: GroupWatch
) -> None:
    ws.create(tfjob(ws, "seed"))
    wait_for(lambda: running_whole(ws, "seed", 2), timeout=60,
             what="the TFJob's PS and worker to run")
    wait_for(lambda: (groups.groups().get("seed") or {}).get("status", {}).get("phase")
             == "Running", timeout=30, what="its PodGroup to be Running")


@pytest.mark.usefixtures("training", "eight_gpus")
def test_three_pytorchjobs_of_four_gpus_on_eight_run_two_at_a_time_and_all_finish(
    ws: Workspace, cluster: LocalCluster, groups: GroupWatch
) -> None:
    names = ("ddp-a", "ddp-b", "ddp-c")
    for name in names:
        ws.create(pytorchjob(ws, name, run_for="4s"))
    most = 0
    worst: dict[str, Any] = {}
    split_since: dict[str, float] = {}

    def all_done() -> bool:
        nonlocal most
        pods = ws.pods()
        worst.update(overcommitted(cluster, pods.values()))
        live_jobs = {n for n in names
                     if any(live(p) for k, p in pods.items() if k.startswith(f"{n}-"))}
        most = max(most, len(live_jobs))
        now = time.monotonic()
        for name in names:
            waiting = [p for k, p in pods.items() if k.startswith(f"{name}-") and not node_of(p)]
            if name in live_jobs and waiting:
                # The binds of one gang are concurrent: a poll may fall between them,
                # but a job must never stay part running, part waiting.
                since = split_since.setdefault(name, now)
                assert now - since < 2.0, f"{name} split: {len(waiting)} pods left waiting"
            else:
                split_since.pop(name, None)
        finished = [p for p in pods.values() if phase_of(p) == "Succeeded"]
        return len(finished) == 12

    wait_for(all_done, timeout=120, interval=0.2, what="all three jobs to finish")
    assert worst == {}, f"GPUs overcommitted: {worst}"
    assert most == 2, f"{most} jobs ran at once on 8 GPUs"


@pytest.mark.usefixtures("training")
def test_a_pytorchjob_with_one_worker_per_node_waits_whole_then_runs_across_four_nodes(
    ws: Workspace, cluster: LocalCluster, groups: GroupWatch
) -> None:
    only_nodes(cluster, 3, GPU_NODES)
    manifest = pytorchjob(ws, "apart")
    template = manifest["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]
    template["metadata"]["labels"] = {"job": "apart"}
    template["spec"]["affinity"] = {"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {"job": "apart"}},
            "topologyKey": "kubernetes.io/hostname"}]}}
    ws.create(manifest)

    def names_anti_affinity(pod: dict[str, Any]) -> bool:
        return any(c.get("type") == "PodScheduled" and "anti-affinity" in str(c.get("message"))
                   for c in (pod.get("status") or {}).get("conditions") or [])

    def refused() -> bool:
        pods = job_pods(ws, "apart")
        return len(pods) == 4 and all(names_anti_affinity(p) for p in pods)
    wait_for(refused, timeout=60, what="four workers waiting, naming anti-affinity")
    assert bound(job_pods(ws, "apart")) == [], "workers bound onto three nodes"

    only_nodes(cluster, 4, GPU_NODES)
    wait_for(lambda: running_whole(ws, "apart", 4), timeout=60,
             what="the four workers to run once a fourth node exists")
    assert len({node_of(p) for p in job_pods(ws, "apart")}) == 4


@pytest.mark.usefixtures("training", "eight_gpus")
def test_a_running_pytorchjob_that_loses_a_worker_gets_it_back_before_a_waiting_job_starts(
    ws: Workspace, groups: GroupWatch
) -> None:
    for name in ("keep-a", "keep-b"):
        ws.create(pytorchjob(ws, name))
    wait_for(lambda: running_whole(ws, "keep-a", 4) and running_whole(ws, "keep-b", 4),
             timeout=60, what="two jobs to fill the eight GPUs")
    ws.create(pytorchjob(ws, "waiter"))
    time.sleep(2.0)
    old_uid = ws.pods()["keep-a-worker-1"]["metadata"]["uid"]
    ws.delete_pod("keep-a-worker-1")
    wait_for(lambda: (p := ws.pods().get("keep-a-worker-1")) is not None
             and p["metadata"]["uid"] != old_uid and node_of(p), timeout=30,
             what="the operator's replacement worker to bind")
    time.sleep(1.0)
    assert bound(job_pods(ws, "waiter")) == [], "the waiting job took the lost worker's GPU"
    assert running_whole(ws, "keep-a", 4)


@pytest.mark.usefixtures("training", "eight_gpus")
def test_a_pytorchjob_deleted_and_submitted_again_under_the_same_name_runs(
    ws: Workspace, groups: GroupWatch
) -> None:
    manifest = pytorchjob(ws, "again")
    ws.create(manifest)
    wait_for(lambda: running_whole(ws, "again", 4), timeout=60, what="the job to run")
    delete_job(ws, manifest)
    wait_for(lambda: not job_pods(ws, "again") and "again" not in groups.groups()
             and not job_exists(ws, manifest), timeout=60,
             what="the job, its pods and its PodGroup to go")
    ws.create(pytorchjob(ws, "again"))
    wait_for(lambda: running_whole(ws, "again", 4), timeout=60,
             what="the job submitted again to run")


@pytest.mark.usefixtures("mpi", "eight_gpus")
def test_an_mpijob_with_a_launcher_and_two_workers_runs_whole(
    ws: Workspace, groups: GroupWatch, mode: str
) -> None:
    ws.create(mpijob(ws, "pi"))
    wait_for(lambda: len(bound(job_pods(ws, "pi"))) == 3, timeout=90,
             what="the launcher and both workers to bind")
    pods = job_pods(ws, "pi")
    assert {p["spec"]["schedulerName"] for p in pods} == {MODES[mode][0]}, "as the operator wrote"
    times = sorted(bound_at(p) for p in pods)
    assert times[-1] - times[0] <= 2.0, f"bound apart: {times}"
    wait_for(lambda: (groups.groups().get("pi") or {}).get("status", {}).get("phase")
             == "Running", timeout=30, what="the MPIJob's PodGroup to be Running")


@pytest.mark.usefixtures("mpi", "eight_gpus")
def test_an_mpijob_whose_workers_have_volumes_runs_whole_once_they_are_provisioned(
    ws: Workspace, groups: GroupWatch, cluster: LocalCluster
) -> None:
    job = mpijob(ws, "disk")
    worker = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]
    worker["volumes"] = [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {
        "accessModes": ["ReadWriteOnce"], "storageClassName": "local-path",
        "resources": {"requests": {"storage": "1Gi"}}}}}}]
    ws.create(job)
    wait_for(lambda: len(bound(job_pods(ws, "disk"))) == 3, timeout=90,
             what="the launcher and both workers to bind once the workers' claims are bound")
    claims = {c.name: c.obj for c in pykube.PersistentVolumeClaim.objects(ws.api,
                                                                        namespace=ws.name)}
    for pod in job_pods(ws, "disk"):
        name = pod["metadata"]["name"]
        if "worker" not in name:
            continue
        claim = claims[f"{name}-scratch"]
        assert claim["status"]["phase"] == "Bound", claim
        assert claim["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == \
            pod["spec"]["nodeName"]
    times = sorted(bound_at(p) for p in job_pods(ws, "disk"))
    assert times[-1] - times[0] <= 2.0, f"bound apart: {times}"
