"""Scenario 2: a blocker holds one of two GPUs; a 2-GPU gang waits whole, then binds at once."""

from __future__ import annotations

import time
from typing import Any

import pytest

from devcluster.controlplane import LocalCluster, NodeShape
from tests.e2e.conftest import SchedulerProcess
from tests.e2e.scenario import timed
from tests.e2e.workspace import (
    Workspace,
    bound,
    bound_at,
    node_of,
    phase_of,
    scheduled_condition,
    wait_for,
)

GPU_NODES = NodeShape(cpu="8", memory="32Gi", gpus=1)


@pytest.fixture
def gpu_nodes(cluster: LocalCluster) -> None:
    cluster.ensure_nodes(2, GPU_NODES, prefix="node")


def _spread(workers: list[dict[str, Any]]) -> float:
    times = [bound_at(p) for p in workers]
    return round(max(times) - min(times), 2)


@pytest.mark.usefixtures("gpu_nodes")
def test_kube_scheduler_binds_part_of_the_gang(ws: Workspace) -> None:
    ws.create(ws.pod("blocker", gpus=1, scheduler="kube"))
    wait_for(lambda: phase_of(ws.pods()["blocker"]) == "Running", timeout=30, what="blocker")
    ws.create(*(ws.pod(f"worker-{i}", gpus=1, scheduler="kube") for i in range(2)))
    wait_for(lambda: len(bound(ws.pods().values())) == 2, timeout=30,
             what="kube-scheduler to bind one worker")
    time.sleep(2)
    workers = [p for n, p in ws.pods().items() if n.startswith("worker")]
    assert len(bound(workers)) == 1, "kube-scheduler leaves the job half placed"


@pytest.mark.usefixtures("gpu_nodes")
def test_native_gang_scheduler_waits_whole_then_binds_both(ws: Workspace) -> None:
    """kube-scheduler 1.37 with a native gang PodGroup of the two workers."""
    ws.create(ws.pod("blocker", gpus=1, scheduler="kube"))
    wait_for(lambda: phase_of(ws.pods()["blocker"]) == "Running", timeout=30, what="blocker")
    ws.create(ws.native_podgroup("train", min_count=2))
    ws.create(*(ws.pod(f"worker-{i}", gpus=1, scheduler="kube", group="train",
                       marker="native") for i in range(2)))
    time.sleep(3)
    workers = [p for n, p in ws.pods().items() if n.startswith("worker")]
    assert bound(workers) == [], "the native gang keeps the two workers together"
    conditions = (ws.podgroup_obj("train", "native").get("status") or {}).get("conditions") or []
    said = next((c["message"] for c in conditions if c["status"] == "False"), None)
    with timed("gpu-blocker", "kube-scheduler 1.37 native gang",
               outcome="0 of 2 bound while blocked; both bound once the blocker goes",
               podgroup_message=said) as record:
        ws.delete_pod("blocker")
        wait_for(lambda: len(bound(p for n, p in ws.pods().items()
                                   if n.startswith("worker"))) == 2,
                 timeout=60, what="both workers to bind")
        record["bind_spread_s"] = _spread([p for n, p in ws.pods().items()
                                           if n.startswith("worker")])


@pytest.mark.usefixtures("gpu_nodes")
def test_gang_waits_whole_until_the_blocker_goes(
    ws: Workspace, gangsched: SchedulerProcess
) -> None:
    ws.create(ws.pod("blocker", gpus=1, scheduler="kube"))
    wait_for(lambda: phase_of(ws.pods()["blocker"]) == "Running", timeout=30, what="blocker")
    ws.create(ws.podgroup("train", min_member=2))
    ws.create(*(ws.pod(f"worker-{i}", gpus=1, group="train") for i in range(2)))

    def both_unschedulable() -> bool:
        workers = [p for n, p in ws.pods().items() if n.startswith("worker")]
        conditions = [scheduled_condition(p) for p in workers]
        return all(c and c["reason"] == "Unschedulable" for c in conditions)

    wait_for(both_unschedulable, timeout=30, what="PodScheduled=False on both workers")
    time.sleep(2)
    workers = [p for n, p in ws.pods().items() if n.startswith("worker")]
    assert bound(workers) == [], "no member of a gang that does not fit may be bound"
    wait_for(lambda: "nvidia.com/gpu" in (scheduled_condition(ws.pods()["worker-0"]) or {})
             .get("message", ""), timeout=20, what="the worker's condition naming the GPU")
    events = ws.events("worker-0")
    assert any(e["reason"] == "FailedScheduling" for e in events)

    def group_says() -> str | None:
        status = ws.podgroup_obj("train")["status"]
        message = str((status.get("conditions") or [{}])[0].get("message", ""))
        return message if "nvidia.com/gpu" in message else None

    said = wait_for(group_says, timeout=20, what="the PodGroup's condition naming the GPU")
    assert ws.podgroup_obj("train")["status"]["phase"] in ("Pending", "Inqueue")

    with timed("gpu-blocker", "gangsched", outcome="0 of 2 bound while blocked; "
               "both bound once the blocker goes", podgroup_message=said) as record:
        ws.delete_pod("blocker")
        wait_for(lambda: len(bound(p for n, p in ws.pods().items()
                                   if n.startswith("worker"))) == 2,
                 timeout=30, what="both workers to bind")
        workers = [p for n, p in ws.pods().items() if n.startswith("worker")]
        record["bind_spread_s"] = _spread(workers)
    assert {node_of(p) for p in workers} == {"node-0", "node-1"}
    wait_for(lambda: all(phase_of(p) == "Running" for n, p in ws.pods().items()
                         if n.startswith("worker")), timeout=30, what="workers running")
    workers = [p for n, p in ws.pods().items() if n.startswith("worker")]
    times = [bound_at(p) for p in workers]
    assert max(times) - min(times) <= 2.0
    wait_for(lambda: ws.podgroup_obj("train")["status"].get("phase") == "Running",
             timeout=20, what="PodGroup Running")
    wait_for(lambda: any(e["reason"] == "Scheduled" and "worker-0" in e["message"]
                         and "node-" in e["message"] for e in ws.events("train")),
             timeout=20, what="the PodGroup's Scheduled Event naming worker-0's node")
