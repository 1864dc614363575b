"""Kubeflow Trainer v2.3.0 on JobSet v0.12.0 against gangsched.

A ClusterTrainingRuntime whose ``podGroupPolicy`` asks for coscheduling makes Trainer
write a scheduler-plugins PodGroup per TrainJob (minMember: its nodes, minResources:
all of them) and label each pod with it; the runtime's pods name ``gang``, which the
session's gangsched serves. JobSet's failure policy restarts a TrainJob whose worker
fails: it deletes every Job and creates them again.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pykube
import pytest

from devcluster.controlplane import LocalCluster, NodeShape
from tests.e2e.conftest import SchedulerProcess
from tests.e2e.operators import install_crds, jobset_controller, trainer_controller, trainer_dir
from tests.e2e.scenario import only_nodes
from tests.e2e.workspace import PODGROUP_API, Workspace, node_of, phase_of, wait_for

TRAINER_API = "trainer.kubeflow.org/v1alpha1"
JOBSET_API = "jobset.x-k8s.io/v1alpha2"
GPU_NODES = NodeShape(cpu="16", memory="64Gi", gpus=4)
RUNTIME = "gang-two-gpus"
RESTART_ATTEMPT = "jobset.sigs.k8s.io/restart-attempt"
NODES = 3
"""Each TrainJob's nodes, of two GPUs each: two TrainJobs do not fit eight GPUs at once."""

RUNTIME_SPEC: dict[str, Any] = {
    "mlPolicy": {"numNodes": NODES, "torch": {}},
    "podGroupPolicy": {"coscheduling": {"scheduleTimeoutSeconds": 60}},
    "template": {"spec": {
        # What JobSet's webhook defaults, written here as it is not registered.
        "successPolicy": {"operator": "All"},
        "startupPolicy": {"startupPolicyOrder": "AnyOrder"},
        "network": {"enableDNSHostnames": True, "publishNotReadyAddresses": True},
        "failurePolicy": {"maxRestarts": 1},
        "replicatedJobs": [{"name": "node", "template": {
            "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
            "spec": {"completionMode": "Indexed", "backoffLimit": 0, "template": {
                # KWOK's pods of a Job succeed at once unless told to run longer.
                "metadata": {"annotations": {"kwok.gangsched.io/run-for": "1h"}},
                "spec": {
                    "schedulerName": "gang", "restartPolicy": "Never",
                    "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "node", "image": "pytorch/pytorch:2.13.0",
                                    "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "2"},
                                                  "limits": {"nvidia.com/gpu": "2"}}}]}}}}}],
    }},
}


@pytest.fixture(scope="module")
def trainer(
    cluster: LocalCluster, gangsched: SchedulerProcess, tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[None]:
    home = trainer_dir()
    install_crds(cluster, home / "crds", ("jobsets.jobset.x-k8s.io",
                                          "trainjobs.trainer.kubeflow.org",
                                          "clustertrainingruntimes.trainer.kubeflow.org"))
    workdir = tmp_path_factory.mktemp("trainer")
    runtime = pykube.object_factory(cluster.client, TRAINER_API, "ClusterTrainingRuntime")
    runtime(cluster.client, {"apiVersion": TRAINER_API, "kind": "ClusterTrainingRuntime",
                             "metadata": {"name": RUNTIME},
                             "spec": copy.deepcopy(RUNTIME_SPEC)}).create()
    try:
        with jobset_controller(cluster, home, workdir), trainer_controller(cluster, home, workdir):
            yield
    finally:
        runtime.objects(cluster.client).get(name=RUNTIME).delete()


@pytest.fixture
def eight_gpus(cluster: LocalCluster, ws: Workspace) -> Iterator[None]:
    """Two nodes of four GPUs; afterwards the TrainJobs go first, or pods come back."""
    only_nodes(cluster, 2, GPU_NODES)
    yield
    ws.delete_all(TRAINER_API, "TrainJob")


def trainjob(ws: Workspace, name: str) -> dict[str, Any]:
    return {"apiVersion": TRAINER_API, "kind": "TrainJob",
            "metadata": {"name": name, "namespace": ws.name},
            "spec": {"runtimeRef": {"name": RUNTIME, "kind": "ClusterTrainingRuntime"}}}


def pods_of(ws: Workspace, name: str) -> list[dict[str, Any]]:
    """The TrainJob's pods that are not going away."""
    return [p for p in ws.pods().values()
            if (p["metadata"].get("labels") or {}).get("jobset.sigs.k8s.io/jobset-name") == name
            and not p["metadata"].get("deletionTimestamp")]


def running_whole(ws: Workspace, name: str) -> bool:
    pods = pods_of(ws, name)
    return len(pods) == NODES and all(node_of(p) and phase_of(p) == "Running" for p in pods)


def waiting_unbound(ws: Workspace, name: str) -> bool:
    """All the TrainJob's pods exist and say why they wait; none is bound."""
    pods = pods_of(ws, name)
    return len(pods) == NODES and not any(node_of(p) for p in pods) and all(
        any(c.get("type") == "PodScheduled" and c.get("status") == "False"
            for c in (p.get("status") or {}).get("conditions") or []) for p in pods)


def condition(ws: Workspace, name: str, kind: str) -> bool:
    found = pykube.object_factory(ws.api, TRAINER_API, "TrainJob").objects(
        ws.api, namespace=ws.name).get_or_none(name=name)
    conditions = (found.obj.get("status") or {}).get("conditions") or [] if found else []
    return any(c["type"] == kind and c["status"] == "True" for c in conditions)


def group_says(ws: Workspace, name: str, **expected: object) -> bool:
    """The TrainJob's PodGroup status holds ``expected`` (scheduler-plugins' terms)."""
    status = ws.podgroup_obj(name, "coscheduling").get("status") or {}
    return all(status.get(key) == value for key, value in expected.items())


def left(ws: Workspace) -> list[str]:
    """Pods, JobSets and PodGroups still in the namespace."""
    jobsets = pykube.object_factory(ws.api, JOBSET_API, "JobSet")
    groups = pykube.object_factory(ws.api, PODGROUP_API["coscheduling"], "PodGroup")
    return [*ws.pods(), *(j.name for j in jobsets.objects(ws.api, namespace=ws.name)),
            *(g.name for g in groups.objects(ws.api, namespace=ws.name))]


@pytest.mark.usefixtures("trainer", "eight_gpus")
def test_a_trainjob_waits_whole_while_another_runs_and_runs_whole_once_it_ends(
    ws: Workspace,
) -> None:
    ws.create(trainjob(ws, "first"))
    wait_for(lambda: running_whole(ws, "first"), timeout=60,
             what="the first TrainJob's three nodes to run")

    ws.create(trainjob(ws, "second"))
    wait_for(lambda: waiting_unbound(ws, "second"), timeout=30,
             what="the second TrainJob's three pods to exist and say why they wait")
    assert [p["metadata"]["name"] for p in pods_of(ws, "second") if node_of(p)] == [], \
        "part of a TrainJob bound while two GPUs of the six it needs are free"

    for pod in pods_of(ws, "first"):
        ws.finish_pod(pod["metadata"]["name"])
    wait_for(lambda: condition(ws, "first", "Complete"), timeout=30,
             what="the first TrainJob to complete")
    wait_for(lambda: running_whole(ws, "second"), timeout=60,
             what="the second TrainJob to run whole once the first has ended")
    wait_for(lambda: group_says(ws, "first", phase="Finished", succeeded=NODES)
             and group_says(ws, "second", phase="Running", running=NODES), timeout=15,
             what="the PodGroups to say the first finished and the second runs")

    ws.delete_all(TRAINER_API, "TrainJob")
    wait_for(lambda: not left(ws), timeout=60,
             what="no pod, JobSet or PodGroup left after the TrainJobs are deleted")


@pytest.mark.usefixtures("trainer", "eight_gpus")
def test_a_trainjob_whose_node_fails_is_restarted_whole(ws: Workspace) -> None:
    ws.create(trainjob(ws, "job"))
    wait_for(lambda: running_whole(ws, "job"), timeout=60, what="the TrainJob's three nodes to run")
    before = {p["metadata"]["uid"] for p in pods_of(ws, "job")}

    ws.finish_pod(sorted(p["metadata"]["name"] for p in pods_of(ws, "job"))[0], "Failed")

    def restarted_whole() -> bool:
        pods = pods_of(ws, "job")
        return (running_whole(ws, "job") and not before & {p["metadata"]["uid"] for p in pods}
                and all((p["metadata"].get("labels") or {}).get(RESTART_ATTEMPT) == "1"
                        for p in pods))
    wait_for(restarted_whole, timeout=60,
             what="three new pods of the TrainJob's first restart to run, none of the old")
    wait_for(lambda: group_says(ws, "job", phase="Running", running=NODES, failed=0),
             timeout=15, what="the PodGroup to count the restarted pods alone, running")

    ws.delete_all(TRAINER_API, "TrainJob")
    wait_for(lambda: not left(ws), timeout=60,
             what="no pod, JobSet or PodGroup left after the TrainJob is deleted")
