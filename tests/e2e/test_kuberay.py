"""KubeRay's ray-operator v1.5.0 against gangsched, in both of its gang modes.

With ``--batch-scheduler=volcano`` the operator writes ``schedulerName: volcano``
and a Volcano PodGroup (minMember: head + workers, minResources: all of them),
which the session's gangsched serves. With ``--batch-scheduler=scheduler-plugins``
it writes ``schedulerName: scheduler-plugins-scheduler`` and a scheduler-plugins
PodGroup on RayClusters labelled ``ray.io/gang-scheduling-enabled``: a gangsched
given that name serves it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pykube
import pytest

from devcluster.controlplane import LocalCluster, NodeShape
from tests.e2e.conftest import SchedulerProcess, start_gangsched, stop_gangsched
from tests.e2e.operators import install_crds, kuberay_dir, kuberay_operator
from tests.e2e.scenario import only_nodes
from tests.e2e.workspace import PODGROUP_API, Workspace, node_of, phase_of, wait_for

MODES = {"volcano": "volcano", "scheduler-plugins": "coscheduling"}
"""``--batch-scheduler`` → the PodGroup flavour the operator creates."""
PLUGINS_SCHEDULER = "scheduler-plugins-scheduler"
GPU_NODES = NodeShape(cpu="16", memory="64Gi", gpus=4)
RAY_API = "ray.io/v1"


@pytest.fixture(scope="module", params=sorted(MODES))
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def ray(
    mode: str, cluster: LocalCluster, gangsched: SchedulerProcess,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[None]:
    home = kuberay_dir()
    install_crds(cluster, home / "crds", ("rayclusters.ray.io", "rayjobs.ray.io"))
    workdir = tmp_path_factory.mktemp(f"kuberay-{mode}")
    extra = None
    if mode == "scheduler-plugins":
        extra = start_gangsched(cluster, workdir / "gangsched.log",
                                f"--scheduler-name={PLUGINS_SCHEDULER}")
    try:
        with kuberay_operator(cluster, home, workdir, mode):
            yield
    finally:
        if extra is not None:
            assert stop_gangsched(extra) == 0, extra.logs()[-3000:]


@pytest.fixture
def eight_gpus(cluster: LocalCluster, ws: Workspace) -> Iterator[None]:
    """Two nodes of four GPUs; afterwards the RayClusters go first, or pods come back."""
    only_nodes(cluster, 2, GPU_NODES)
    yield
    for kind in ("RayJob", "RayCluster"):
        cls = pykube.object_factory(ws.api, RAY_API, kind)
        for obj in cls.objects(ws.api, namespace=ws.name):
            obj.delete()


def raycluster(ws: Workspace, name: str, workers: int) -> dict[str, Any]:
    """A head of one CPU and ``workers`` workers of two GPUs each, gang scheduled."""
    def template(container: str, gpus: int) -> dict[str, Any]:
        requests = {"cpu": "1", "memory": "1Gi", **({"nvidia.com/gpu": str(gpus)} if gpus else {})}
        return {"spec": {"terminationGracePeriodSeconds": 0, "containers": [{
            "name": container, "image": "rayproject/ray:2.46.0",
            "resources": {"requests": requests,
                          "limits": {"nvidia.com/gpu": str(gpus)} if gpus else {}}}]}}
    return {
        "apiVersion": RAY_API, "kind": "RayCluster",
        "metadata": {"name": name, "namespace": ws.name,
                     "labels": {"ray.io/gang-scheduling-enabled": "true"}},
        "spec": {
            "rayVersion": "2.46.0",
            "headGroupSpec": {"rayStartParams": {}, "template": template("ray-head", 0)},
            "workerGroupSpecs": [{
                "groupName": "gpu", "replicas": workers, "minReplicas": 0, "maxReplicas": 8,
                "rayStartParams": {}, "template": template("ray-worker", 2)}],
        },
    }


def cluster_pods(ws: Workspace, name: str) -> list[dict[str, Any]]:
    return [p for p in ws.pods().values()
            if (p["metadata"].get("labels") or {}).get("ray.io/cluster") == name
            and not p["metadata"].get("deletionTimestamp")]


def running_whole(ws: Workspace, name: str, size: int) -> bool:
    pods = cluster_pods(ws, name)
    return len(pods) == size and all(node_of(p) and phase_of(p) == "Running" for p in pods)


def scale(ws: Workspace, name: str, workers: int) -> None:
    """Set the worker group's replicas, reading the RayCluster again when the operator
    wrote it between our read and our update (409 Conflict), as ``kubectl scale`` does."""
    cls = pykube.object_factory(ws.api, RAY_API, "RayCluster")
    for _ in range(10):
        found = cls.objects(ws.api, namespace=ws.name).get(name=name)
        found.obj["spec"]["workerGroupSpecs"][0]["replicas"] = workers
        try:
            found.update()
            return
        except pykube.exceptions.HTTPError as error:
            if error.code != 409:
                raise
    raise AssertionError(f"RayCluster {name} kept changing under the scale to {workers}")


def delete(ws: Workspace, name: str) -> None:
    pykube.object_factory(ws.api, RAY_API, "RayCluster").objects(
        ws.api, namespace=ws.name).get(name=name).delete()


def podgroups(ws: Workspace, mode: str) -> list[str]:
    cls = pykube.object_factory(ws.api, PODGROUP_API[MODES[mode]], "PodGroup")
    return [g.name for g in cls.objects(ws.api, namespace=ws.name)]


@pytest.mark.usefixtures("ray", "eight_gpus")
def test_a_raycluster_waits_whole_runs_whole_scales_and_leaves_nothing(
    ws: Workspace, mode: str
) -> None:
    ws.create(raycluster(ws, "rc-a", workers=3))
    wait_for(lambda: running_whole(ws, "rc-a", 4), timeout=60,
             what="the first RayCluster's head and three workers to run")

    ws.create(raycluster(ws, "rc-b", workers=3))
    wait_for(lambda: len(cluster_pods(ws, "rc-b")) == 4, timeout=30,
             what="the second RayCluster's four pods to exist")
    wait_for(lambda: all(any(c.get("type") == "PodScheduled" and c.get("status") == "False"
                             for c in (p.get("status") or {}).get("conditions") or [])
                         for p in cluster_pods(ws, "rc-b")), timeout=30,
             what="the second RayCluster's pods to say why they wait")
    assert [p for p in cluster_pods(ws, "rc-b") if node_of(p)] == [], \
        "part of a RayCluster bound while its workers' GPUs are taken (its head fits alone)"

    delete(ws, "rc-a")
    wait_for(lambda: running_whole(ws, "rc-b", 4), timeout=60,
             what="the second RayCluster to run whole once the first is deleted")

    scale(ws, "rc-b", 4)
    wait_for(lambda: running_whole(ws, "rc-b", 5), timeout=60, what="a fourth worker to run")
    scale(ws, "rc-b", 2)
    wait_for(lambda: running_whole(ws, "rc-b", 3), timeout=60, what="two workers to go")

    delete(ws, "rc-b")
    wait_for(lambda: not cluster_pods(ws, "rc-b") and not podgroups(ws, mode), timeout=60,
             what="no pod and no PodGroup left after delete")


@pytest.mark.usefixtures("ray", "eight_gpus")
def test_a_rayjob_runs_its_cluster_whole_and_its_submitter_beside_it_and_leaves_nothing(
    ws: Workspace, mode: str
) -> None:
    if mode != "volcano":
        pytest.skip("KubeRay gang schedules RayJobs in its Volcano mode only")
    spec = raycluster(ws, "unused", workers=3)["spec"]
    ws.create({"apiVersion": RAY_API, "kind": "RayJob",
               "metadata": {"name": "rj", "namespace": ws.name},
               "spec": {"entrypoint": "python -c 'print(1)'", "rayClusterSpec": spec}})
    cls = pykube.object_factory(ws.api, RAY_API, "RayJob")

    def deployment_status() -> str:
        found = cls.objects(ws.api, namespace=ws.name).get_or_none(name="rj")
        return str(((found.obj.get("status") or {}) if found else {}).get("jobDeploymentStatus"))

    def running() -> bool:
        pods = [p for p in ws.pods().values()
                if (p["metadata"].get("labels") or {}).get("ray.io/cluster", "").startswith("rj-")]
        return (len(pods) == 4 and all(node_of(p) and phase_of(p) == "Running" for p in pods)
                and deployment_status() not in ("None", "Initializing", "New"))

    wait_for(running, timeout=60, what="the RayJob's cluster to run whole and the job to start")
    wait_for(lambda: any(k.startswith("rj-") and k.count("-") == 1 and node_of(p)
                         for k, p in ws.pods().items()), timeout=30,
             what="the RayJob's submitter pod to bind beside its cluster")

    cls.objects(ws.api, namespace=ws.name).get(name="rj").delete()
    wait_for(lambda: not ws.pods() and not podgroups(ws, mode), timeout=60,
             what="no pod and no PodGroup left after the RayJob is deleted")
