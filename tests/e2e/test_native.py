"""Kubernetes 1.37 native PodGroups (``scheduling.k8s.io/v1beta1``) scheduled by gangsched.

Pods name their group in ``spec.schedulingGroup.podGroupName`` and carry
``schedulerName: gang``; the group's ``schedulingPolicy`` says gang (with
``minCount``) or basic, its topology constraint keeps a gang in one domain.
gangsched writes the group's ``PodGroupInitiallyScheduled`` condition as
kube-scheduler does, and leaves alone the native groups of kube-scheduler's
pods, which runs beside it with native gang scheduling on.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from typing import Any

import pykube
import pytest

from devcluster.controlplane import LocalCluster, NodeShape
from tests.e2e.scenario import only_nodes
from tests.e2e.workspace import (
    Workspace,
    bound,
    node_of,
    scheduled_condition,
    wait_for,
)

GPU_NODES = NodeShape(cpu="8", memory="32Gi", gpus=2)
CONDITION = "PodGroupInitiallyScheduled"

pytestmark = pytest.mark.usefixtures("gangsched")


def initially_scheduled(ws: Workspace, name: str) -> Mapping[str, Any] | None:
    status = ws.podgroup_obj(name, "native").get("status") or {}
    return next((c for c in status.get("conditions") or [] if c["type"] == CONDITION), None)


def members(ws: Workspace, prefix: str) -> list[dict[str, Any]]:
    return [pod for name, pod in ws.pods().items() if name.startswith(prefix)]


@pytest.fixture
def two_nodes(cluster: LocalCluster) -> None:
    """Two nodes of two GPUs each: four GPUs in all."""
    only_nodes(cluster, 2, GPU_NODES)


@pytest.fixture
def racks(cluster: LocalCluster) -> Iterator[None]:
    """Rack r1 of two nodes and rack r2 of three, two GPUs a node; removed afterwards."""
    only_nodes(cluster, 0, GPU_NODES)
    cluster.ensure_nodes(2, GPU_NODES, prefix="r1", labels={"rack": "r1"})
    cluster.ensure_nodes(3, GPU_NODES, prefix="r2", labels={"rack": "r2"})
    yield
    only_nodes(cluster, 0, GPU_NODES)


@pytest.mark.usefixtures("two_nodes")
def test_native_gang_binds_whole_and_is_initially_scheduled(ws: Workspace) -> None:
    ws.create(ws.native_podgroup("train", min_count=3))
    ws.create(*(ws.pod(f"worker-{i}", gpus=1, group="train", marker="native")
                for i in range(3)))
    wait_for(lambda: len(bound(members(ws, "worker"))) == 3, timeout=30,
             what="the three workers to bind")
    condition = wait_for(lambda: initially_scheduled(ws, "train"), timeout=20,
                         what="PodGroupInitiallyScheduled")
    assert (condition["status"], condition["reason"]) == ("True", "Scheduled")


@pytest.mark.usefixtures("two_nodes")
def test_native_gang_too_big_waits_whole_saying_why(ws: Workspace) -> None:
    ws.create(ws.native_podgroup("big", min_count=5))
    ws.create(*(ws.pod(f"worker-{i}", gpus=1, group="big", marker="native") for i in range(5)))

    def reported() -> Mapping[str, Any] | None:
        condition = initially_scheduled(ws, "big")
        # While its pods are still being created the gang first waits for them.
        return condition if condition and condition["status"] == "False" and (
            "nvidia.com/gpu" in condition["message"]) else None

    condition = wait_for(reported, timeout=30,
                         what="PodGroupInitiallyScheduled=False naming the GPUs")
    assert condition["reason"] == "Unschedulable"
    time.sleep(1)
    pods = members(ws, "worker")
    assert bound(pods) == [], "no member of a gang that does not fit may be bound"
    pod_condition = scheduled_condition(pods[0])
    assert pod_condition is not None and pod_condition["reason"] == "Unschedulable"
    assert any(e["reason"] == "FailedScheduling" for e in ws.events("worker-0"))


@pytest.mark.usefixtures("two_nodes")
def test_basic_policy_places_each_pod_on_its_own(ws: Workspace) -> None:
    ws.create(ws.native_podgroup("web"))
    ws.create(*(ws.pod(f"replica-{i}", gpus=1, group="web", marker="native")
                for i in range(6)))
    wait_for(lambda: len(bound(members(ws, "replica"))) == 4, timeout=30,
             what="four of six basic pods to bind, one GPU each")
    time.sleep(1)
    assert len(bound(members(ws, "replica"))) == 4
    condition = initially_scheduled(ws, "web")
    assert condition is not None and condition["status"] == "True"


@pytest.mark.usefixtures("racks")
def test_topology_keeps_a_gang_in_one_rack_and_names_the_racks_when_none_fits(
    ws: Workspace,
) -> None:
    ws.create(ws.native_podgroup("fits", min_count=4, topology=("rack",)))
    ws.create(*(ws.pod(f"fits-{i}", gpus=1, group="fits", marker="native") for i in range(4)))
    wait_for(lambda: len(bound(members(ws, "fits"))) == 4, timeout=30,
             what="the 4-GPU gang to bind")
    racks_used = {str(node_of(p)).split("-")[0] for p in members(ws, "fits")}
    assert racks_used == {"r1"}, "the rack it fills exactly, not a piece of the bigger one"

    ws.create(ws.native_podgroup("huge", min_count=7, topology=("rack",)))
    ws.create(*(ws.pod(f"huge-{i}", gpus=1, group="huge", marker="native") for i in range(7)))

    def refused() -> Mapping[str, Any] | None:
        condition = initially_scheduled(ws, "huge")
        return condition if condition and condition["status"] == "False" and (
            "domain" in condition["message"]) else None

    message = wait_for(refused, timeout=30, what="the 7-GPU gang refused")["message"]
    assert "no single rack domain" in message and "rack=r2" in message, message
    assert bound(members(ws, "huge")) == [], "six free GPUs over two racks are not one rack"


def test_pod_naming_a_missing_native_group_waits_until_it_exists(
    ws: Workspace, two_nodes: None
) -> None:
    ws.create(*(ws.pod(f"early-{i}", cpu="1", group="late", marker="native") for i in range(2)))

    def waiting() -> str | None:
        condition = scheduled_condition(ws.pods()["early-0"])
        return condition["message"] if condition else None

    message = wait_for(waiting, timeout=30, what="the pod to say what it waits for")
    assert f"waiting for PodGroup {ws.name}/late to exist" in message
    ws.create(ws.native_podgroup("late", min_count=2))
    wait_for(lambda: len(bound(members(ws, "early"))) == 2, timeout=30,
             what="both pods to bind once the group exists")


@pytest.mark.usefixtures("two_nodes")
def test_workload_annotation_picks_the_queue(ws: Workspace, cluster: LocalCluster) -> None:
    queue = f"closed-{ws.name}"
    ws.create({"apiVersion": "scheduling.gangsched.io/v1alpha1", "kind": "Queue",
               "metadata": {"name": queue}, "spec": {"weight": 1, "state": "Closed"}})
    try:
        ws.create({
            "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "Workload",
            "metadata": {"name": "job", "namespace": ws.name,
                         "annotations": {"scheduling.gangsched.io/queue": queue}},
            "spec": {"podGroupTemplates": [
                {"name": "workers", "schedulingPolicy": {"gang": {"minCount": 2}}}]},
        })
        group = ws.native_podgroup("job-workers", min_count=2)
        group["spec"]["workloadRef"] = {"workloadName": "job", "templateName": "workers"}
        ws.create(group)
        ws.create(*(ws.pod(f"w-{i}", cpu="1", group="job-workers", marker="native")
                    for i in range(2)))

        def closed() -> bool:
            # the first reason may be "short of members", said before the second pod came
            condition = scheduled_condition(ws.pods()["w-0"]) or {}
            return f"queue {queue!r} is closed" in str(condition.get("message"))

        wait_for(closed, timeout=30, what="the gang to wait on its closed queue")
        assert bound(members(ws, "w-")) == []
    finally:
        pykube.object_factory(cluster.client, "scheduling.gangsched.io/v1alpha1", "Queue")\
            .objects(cluster.client).get(name=queue).delete()


@pytest.mark.usefixtures("two_nodes")
def test_job_of_the_native_workload_integration_binds_whole(ws: Workspace) -> None:
    """WorkloadWithJob: the Job controller makes the Workload, the PodGroup (gang of
    parallelism) and pods naming it; gangsched binds them all at once."""
    template = ws.pod("unused", gpus=1)["spec"]
    template.pop("terminationGracePeriodSeconds", None)
    ws.create({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "ddp", "namespace": ws.name},
        "spec": {
            "parallelism": 4, "completions": 4,
            "scheduling": {"schedulingPolicy": {"gang": {}}},
            "template": {"spec": {**template, "restartPolicy": "Never"}},
        },
    })
    groups = wait_for(
        lambda: list(pykube.object_factory(ws.api, "scheduling.k8s.io/v1beta1", "PodGroup")
                     .objects(ws.api, namespace=ws.name)),
        timeout=30, what="the Job controller's PodGroup",
    )
    assert groups[0].obj["spec"]["schedulingPolicy"] == {"gang": {"minCount": 4}}
    wait_for(lambda: len(bound(ws.pods().values())) == 4, timeout=30,
             what="the Job's four pods to bind")
    pods = list(ws.pods().values())
    assert {p["spec"]["schedulingGroup"]["podGroupName"] for p in pods} == {groups[0].name}
    times = [scheduled_condition(p) for p in pods]
    assert all(t is not None and t["status"] == "True" for t in times)
    condition = wait_for(lambda: initially_scheduled(ws, groups[0].name), timeout=20,
                         what="the Job's PodGroup scheduled")
    assert condition["status"] == "True"
