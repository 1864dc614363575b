"""Pods in no PodGroup on the real control plane: each is a gang of one of the ``default``
queue while it waits and while it runs, so the queue's cap holds them, its status counts
them, and priority preemption takes and gives room between them."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pykube
import pytest

from devcluster.controlplane import LocalCluster, NodeShape
from tests.e2e.scenario import only_nodes
from tests.e2e.test_preemption import URGENT, classes  # noqa: F401 (a fixture)
from tests.e2e.workspace import Workspace, node_of, scheduled_condition, wait_for

API = "scheduling.gangsched.io/v1alpha1"


@pytest.fixture
def capped_default(cluster: LocalCluster) -> Iterator[str]:
    """The ``default`` Queue capped at 2 cpu; as it was before, after."""
    factory = pykube.object_factory(cluster.client, API, "Queue")
    before = factory.objects(cluster.client).get_or_none(name="default")
    spec = {"weight": 1, "capability": {"cpu": "2"}}
    if before is None:
        factory(cluster.client, {"apiVersion": API, "kind": "Queue",
                                 "metadata": {"name": "default"}, "spec": spec}).create()
    else:
        cluster.kubectl("patch", "queue", "default", "--type=merge",
                        "-p", json.dumps({"spec": spec}))
    yield "default"
    if before is None:
        cluster.kubectl("delete", "queue", "default", "--ignore-not-found")
    else:
        cluster.kubectl("patch", "queue", "default", "--type=merge", "-p",
                        json.dumps({"spec": {"capability": before.obj["spec"].get("capability")}}))


@pytest.mark.usefixtures("gangsched")
def test_running_pods_in_no_podgroup_stay_under_the_default_queues_cap(
    cluster: LocalCluster, ws: Workspace, capped_default: str
) -> None:
    only_nodes(cluster, 1, NodeShape(cpu="8", memory="32Gi"))
    names = [f"lone-{i}" for i in range(4)]
    ws.create(*(ws.pod(name, cpu="1") for name in names))
    wait_for(lambda: sum(bool(node_of(p)) for p in ws.pods().values()) == 2, timeout=30,
             what="two of the four pods to run")
    capped = f"queue '{capped_default}' capability cpu=2 would be exceeded: allocated cpu=2"

    def waiting() -> list[str]:
        return [name for name, pod in ws.pods().items() if not node_of(pod)
                and capped in str((scheduled_condition(pod) or {}).get("message"))]

    wait_for(lambda: len(waiting()) == 2, timeout=30,
             what="the other two to wait, naming the default queue's cap")
    time.sleep(5)  # many cycles: the running two still count
    pods = ws.pods()
    assert sum(bool(node_of(p)) for p in pods.values()) == 2, "the cap let more run"
    assert len(waiting()) == 2

    def allocated_cpu() -> object:
        queue = pykube.object_factory(cluster.client, API, "Queue").objects(
            cluster.client).get(name=capped_default).obj
        return ((queue.get("status") or {}).get("allocated") or {}).get("cpu")

    wait_for(lambda: allocated_cpu() == "2", timeout=30,
             what="the default queue's status to count the running pods")

    for name in names:
        ws.delete_pod(name)
    wait_for(lambda: allocated_cpu() is None, timeout=30,
             what="the queue's status to drop cpu once nothing holds any")


@pytest.mark.usefixtures("gangsched", "classes")
def test_a_pod_in_no_podgroup_preempts_a_running_one_of_lower_priority(
    cluster: LocalCluster, ws: Workspace
) -> None:
    only_nodes(cluster, 1, NodeShape(cpu="1", memory="8Gi"))
    ws.create(ws.pod("low", cpu="1"))
    wait_for(lambda: node_of(ws.pods()["low"]), timeout=30, what="the low-priority pod to run")
    urgent = ws.pod("urgent", cpu="1")
    urgent["spec"]["priorityClassName"] = URGENT
    ws.create(urgent)
    wait_for(lambda: node_of(ws.pods().get("urgent", {})), timeout=60,
             what="the high-priority pod to take the low one's room")
    assert "low" not in ws.pods() or ws.pods()["low"]["metadata"].get("deletionTimestamp")
    wait_for(lambda: any(e["reason"] == "Preempted" for e in ws.events("low")), timeout=30,
             what="a Preempted Event on the evicted pod")
