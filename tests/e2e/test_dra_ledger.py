"""Devices held through ResourceClaims count in a queue's ledger: a Queue capped at 2
``nvidia.com/gpu`` caps GPUs asked through claims of a DeviceClass that maps that name, as
it caps them asked as an extended resource."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pykube
import pytest

from devcluster import fakedriver
from devcluster.controlplane import LocalCluster
from devcluster.fakedriver import claiming
from tests.e2e.test_dra import condition_message, gpu_nodes
from tests.e2e.test_explain_status import as_json
from tests.e2e.test_queue_tree import Queues, queues
from tests.e2e.workspace import Workspace, bound, wait_for

__all__ = ["gpu_nodes", "queues"]  # the fixtures

GPU = "nvidia.com/gpu"
CLASS = "mapped-gpu.example.com"


@pytest.fixture
def mapped_class(cluster: LocalCluster, gpu_nodes: list[str]) -> Iterator[str]:
    """A DeviceClass of the fake driver's GPUs whose extended resource name is
    ``nvidia.com/gpu``."""
    manifest = fakedriver.device_class_manifest()
    manifest["metadata"] = {"name": CLASS}
    manifest["spec"] = {**manifest["spec"], "extendedResourceName": GPU}
    cls = pykube.object_factory(cluster.client, fakedriver.API_VERSION, "DeviceClass")
    if cls.objects(cluster.client).get_or_none(name=CLASS) is None:
        cls(cluster.client, manifest).create()
    yield CLASS
    cls(cluster.client, manifest).delete()


def template(ws: Workspace, name: str, count: int) -> dict[str, Any]:
    """A ResourceClaimTemplate asking ``count`` GPUs of the mapped class."""
    manifest = fakedriver.claim_template(ws.name, name, count)
    manifest["spec"]["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = CLASS
    return manifest


@pytest.mark.usefixtures("mapped_class", "gangsched")
def test_a_queue_capped_at_two_gpus_keeps_an_eight_gpu_claim_waiting_and_binds_a_two_gpu_one(
    ws: Workspace, cluster: LocalCluster, queues: Queues,
) -> None:
    queue = queues.make("gpus", capability={GPU: "2"})
    ws.create(template(ws, "eight", 8), template(ws, "two", 2))
    ws.create(ws.podgroup("big", min_member=1, queue=queue),
              claiming(ws.pod("big-0", cpu="100m", group="big"), "eight"))
    wait_for(lambda: condition_message(ws.pods()["big-0"]), timeout=30,
             what="the 8-GPU pod to be told why it waits")
    ws.create(ws.podgroup("small", min_member=1, queue=queue),
              claiming(ws.pod("small-0", cpu="100m", group="small"), "two"))
    wait_for(lambda: bound([ws.pods()["small-0"]]), timeout=30, what="the 2-GPU pod bound")

    def allocated() -> Any:
        return ((queues.get("gpus").get("status") or {}).get("allocated") or {}).get(GPU)

    wait_for(lambda: allocated() == "2", timeout=30, what="the queue's status to show 2 GPUs")
    assert bound([ws.pods()["big-0"]]) == []
    said = as_json(cluster, "explain", "podgroup/big", "-n", ws.name, expect=3)
    assert said["code"] == "CapabilityExceeded", said
    assert said["queueCapability"] == {GPU: "2"}, said
    assert said["queueAllocated"].get(GPU) == "2", said
