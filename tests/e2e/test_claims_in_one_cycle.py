"""Claims that pods of two gangs share, both gangs placed in one cycle: a ResourceClaim is
allocated once and reserved for every pod that names it.

Each test starts a scheduler of its own once every object exists, so that its first cycle
sees both gangs at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from devcluster import fakedriver
from devcluster.controlplane import LocalCluster
from tests.e2e.conftest import SchedulerProcess, start_gangsched, stop_gangsched
from tests.e2e.test_dra import claims, devices_of, gpu_nodes
from tests.e2e.workspace import Workspace, bound, node_of, wait_for

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
