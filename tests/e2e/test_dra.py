"""Dynamic Resource Allocation: gangs placed whole with their devices, on fake GPUs
published as ResourceSlices the way a real driver publishes them."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pykube
import pytest

from devcluster import fakedriver
from devcluster.controlplane import LocalCluster, NodeShape
from tests.e2e.workspace import Workspace, bound, node_of, wait_for

DRA_NODES = NodeShape(cpu="16", memory="64Gi")
RESOURCE_API = "resource.k8s.io/v1"


@pytest.fixture
def gpu_nodes(cluster: LocalCluster) -> Iterator[list[str]]:
    """Two nodes of 8 fake GPUs each, two NVLink cliques of 4 per node."""
    nodes = cluster.ensure_nodes(2, DRA_NODES, prefix="dra")
    fakedriver.publish(cluster.client, nodes)
    yield nodes
    fakedriver.remove(cluster.client)


def claim_template(ws: Workspace, name: str, count: int, *,
                   one_clique: bool = False, selector: str | None = None) -> dict[str, Any]:
    """A ResourceClaimTemplate asking ``count`` GPUs, in one clique if asked."""
    request: dict[str, Any] = {"deviceClassName": fakedriver.DEVICE_CLASS, "count": count}
    if selector:
        request["selectors"] = [{"cel": {"expression": selector}}]
    devices: dict[str, Any] = {"requests": [{"name": "gpus", "exactly": request}]}
    if one_clique:
        devices["constraints"] = [{"matchAttribute": f"{fakedriver.DRIVER}/clique"}]
    return {"apiVersion": RESOURCE_API, "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": ws.name},
            "spec": {"spec": {"devices": devices}}}


def claiming(pod: dict[str, Any], template: str) -> dict[str, Any]:
    """The pod with one claim made from the template."""
    pod["spec"]["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": template}]
    pod["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpus"}]
    return pod


def claims(ws: Workspace) -> list[dict[str, Any]]:
    cls = pykube.object_factory(ws.api, RESOURCE_API, "ResourceClaim")
    return [c.obj for c in cls.objects(ws.api, namespace=ws.name)]


def devices_of(claim: Mapping[str, Any]) -> list[tuple[str, str]]:
    allocation = (claim.get("status") or {}).get("allocation") or {}
    results = (allocation.get("devices") or {}).get("results") or []
    return [(r["pool"], r["device"]) for r in results]


@pytest.mark.usefixtures("gpu_nodes")
def test_kube_scheduler_allocates_fake_gpus(ws: Workspace) -> None:
    """The harness: claims made from templates, allocated by kube-scheduler from the slices."""
    ws.create(claim_template(ws, "two", 2))
    ws.create(claiming(ws.pod("solo", scheduler="kube"), "two"))
    wait_for(lambda: bound(ws.pods().values()), timeout=30, what="kube-scheduler to bind")
    [claim] = claims(ws)
    devices = devices_of(claim)
    assert len(devices) == 2
    assert {pool for pool, _ in devices} == {node_of(ws.pods()["solo"])}
