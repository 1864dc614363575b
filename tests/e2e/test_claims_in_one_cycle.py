"""Claims that pods of two gangs share, both gangs placed in one cycle: a ResourceClaim is
allocated once and reserved for every pod that names it, and a ReadWriteOncePod volume
claim goes to one pod only.

Each test starts a scheduler of its own once every object exists, so that its first cycle
sees both gangs at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pykube
import pytest

from devcluster import fakedriver
from devcluster.controlplane import LocalCluster, NodeShape
from tests.e2e.conftest import SchedulerProcess, start_gangsched, stop_gangsched
from tests.e2e.scenario import only_nodes
from tests.e2e.test_dra import claims, devices_of, gpu_nodes
from tests.e2e.workspace import Workspace, bound, node_of, scheduled_condition, wait_for

__all__ = ["gpu_nodes"]  # the fixture, shared with the claims' tests

SCHEDULER = "gang-one-cycle"


@pytest.fixture
def scheduler(ws: Workspace, cluster: LocalCluster,
              tmp_path: Path) -> Iterator[Callable[[], SchedulerProcess]]:
    """Starts, when called, a scheduler of this namespace alone; stops it at the end."""
    running: list[SchedulerProcess] = []

    def start() -> SchedulerProcess:
        running.append(start_gangsched(cluster, tmp_path / "gangsched.log",
                                       f"--scheduler-name={SCHEDULER}",
                                       f"--namespace={ws.name}"))
        return running[-1]

    yield start
    for process in running:
        stop_gangsched(process)


def sharing(pod: dict[str, Any], claim: str) -> dict[str, Any]:
    """The pod, its container using the ResourceClaim ``claim`` (made beforehand)."""
    pod["spec"]["resourceClaims"] = [{"name": "gpus", "resourceClaimName": claim}]
    pod["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpus"}]
    return pod


@pytest.mark.usefixtures("gpu_nodes")
@pytest.mark.parametrize("grouping", ["lone pods", "one gang"])
def test_two_pods_sharing_one_resource_claim_both_bind_on_its_devices(
    ws: Workspace, scheduler: Callable[[], SchedulerProcess], grouping: str,
) -> None:
    ws.create({"apiVersion": fakedriver.RESOURCE_API, "kind": "ResourceClaim",
               "metadata": {"name": "shared", "namespace": ws.name},
               "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {
                   "deviceClassName": fakedriver.DEVICE_CLASS, "count": 2}}]}}})
    group = "pair" if grouping == "one gang" else None
    if group:
        ws.create(ws.podgroup(group, min_member=2))
    ws.create(*(sharing(ws.pod(f"user-{i}", scheduler=SCHEDULER, group=group), "shared")
                for i in range(2)))
    scheduler()
    wait_for(lambda: len(bound(ws.pods().values())) == 2, timeout=30,
             what="both pods sharing the claim to bind")
    [claim] = claims(ws)
    devices = devices_of(claim)
    assert len(devices) == 2, claim["status"]
    pods = ws.pods().values()
    reserved = sorted(entry["uid"] for entry in claim["status"]["reservedFor"])
    assert reserved == sorted(pod["metadata"]["uid"] for pod in pods)
    assert {node_of(pod) for pod in pods} == {pool for pool, _ in devices}


@pytest.fixture
def once_pod_claim(cluster: LocalCluster, ws: Workspace) -> Iterator[str]:
    """A volume claim bound to a ReadWriteOncePod volume, on three nodes of 2 cpu."""
    only_nodes(cluster, 3, NodeShape(cpu="2", memory="8Gi"))
    name = f"{ws.name}-solo"
    volume = pykube.PersistentVolume(cluster.client, {
        "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOncePod"],
                 "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "",
                 "hostPath": {"path": f"/data/{name}"},
                 "claimRef": {"namespace": ws.name, "name": "solo"}},
    })
    volume.create()
    ws.create({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
               "metadata": {"name": "solo", "namespace": ws.name},
               "spec": {"accessModes": ["ReadWriteOncePod"], "storageClassName": "",
                        "volumeName": name, "resources": {"requests": {"storage": "1Gi"}}}})

    def phase() -> str | None:
        found = pykube.PersistentVolumeClaim.objects(ws.api, namespace=ws.name).get(
            name="solo")
        return found.obj.get("status", {}).get("phase")  # type: ignore[no-any-return]

    wait_for(lambda: phase() == "Bound", timeout=30,
             what="the PV controller to bind the claim to its volume")
    yield "solo"
    for pod in list(ws.pods()):
        ws.delete_pod(pod)
    volume.delete()


def test_of_two_gangs_using_one_read_write_once_pod_claim_exactly_one_binds(
    ws: Workspace, scheduler: Callable[[], SchedulerProcess], once_pod_claim: str,
) -> None:
    for gang in ("a", "b"):
        ws.create(ws.podgroup(gang, min_member=2))
        user = ws.pod(f"{gang}-1", cpu="1", group=gang, scheduler=SCHEDULER)
        user["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {
            "claimName": once_pod_claim}}]
        ws.create(ws.pod(f"{gang}-0", cpu="1", group=gang, scheduler=SCHEDULER), user)
    scheduler()

    def waiting() -> str | None:
        for name, pod in ws.pods().items():
            condition = scheduled_condition(pod) or {}
            if condition.get("status") == "False" and \
                    "is ReadWriteOncePod and already in use" in str(condition.get("message")):
                return name
        return None

    blocked = wait_for(waiting, timeout=30, what="one gang to wait for the claim")
    time.sleep(3)  # a few more cycles: the waiting gang stays unbound
    pods = ws.pods()
    placed = sorted(name for name, pod in pods.items() if node_of(pod))
    other = "b" if blocked.startswith("a") else "a"
    assert placed == [f"{other}-0", f"{other}-1"], placed
    message = str((scheduled_condition(pods[blocked]) or {}).get("message"))
    assert f"{ws.name}/{once_pod_claim}" in message and f"{other}-1" in message, message
