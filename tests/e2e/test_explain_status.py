"""``gangsched status``, ``explain`` and ``simulate --from-cluster`` on real objects.

Run as users run them: the installed command, a kubeconfig, the scheduler
running beside them and writing its own status.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from devcluster.controlplane import LocalCluster, NodeShape
from tests.e2e.conftest import SchedulerProcess
from tests.e2e.scenario import only_nodes
from tests.e2e.workspace import Workspace, bound, phase_of, scheduled_condition, wait_for

GPU_NODES = NodeShape(cpu="8", memory="32Gi", gpus=1)


def gangsched_cli(cluster: LocalCluster, *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "gangsched", *args, f"--kubeconfig={cluster.kubeconfig}"],
        capture_output=True, text=True, timeout=60, check=False,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def as_json(cluster: LocalCluster, *args: str) -> Any:
    return json.loads(gangsched_cli(cluster, *args, "--output=json"))


@pytest.fixture
def blocked_gang(cluster: LocalCluster, ws: Workspace, gangsched: SchedulerProcess) -> None:
    """A blocker holds one of two GPUs; a 2-GPU gang waits whole."""
    only_nodes(cluster, 2, GPU_NODES)
    ws.create(ws.pod("blocker", gpus=1, scheduler="kube"))
    wait_for(lambda: phase_of(ws.pods()["blocker"]) == "Running", timeout=30, what="blocker")
    ws.create(ws.podgroup("train", min_member=2))
    ws.create(*(ws.pod(f"worker-{i}", gpus=1, group="train") for i in range(2)))
    wait_for(lambda: all((c := scheduled_condition(p)) and c["reason"] == "Unschedulable"
                         for n, p in ws.pods().items() if n.startswith("worker")),
             timeout=30, what="both workers Unschedulable")


@pytest.mark.usefixtures("blocked_gang")
def test_explain_names_the_node_that_lacks_a_gpu_and_what_would_let_it_run(
    cluster: LocalCluster, ws: Workspace
) -> None:
    answer = as_json(cluster, "explain", "podgroup/train", "-n", ws.name)
    assert answer["gang"] == f"{ws.name}/train"
    assert answer["verdict"] == "waiting"
    assert "nvidia.com/gpu" in answer["reason"]
    [pods] = answer["pods"]
    assert (pods["pending"], pods["room"]) == (2, 1)
    blocked = [n for n in pods["closestNodes"] if n["fits"] == 0]
    assert blocked and blocked[0]["lacks"] == {"nvidia.com/gpu": "1"}
    blocker_node = ws.pods()["blocker"]["spec"]["nodeName"]
    assert blocked[0]["node"] == blocker_node
    assert answer["wouldLetItRun"][0].startswith("room for 1 more pod(s) of")

    text = gangsched_cli(cluster, "explain", "worker-0", "-n", ws.name)
    assert f"Pod {ws.name}/worker-0" in text
    assert f"{blocker_node}: lacks" in text
    assert "what would let it run:" in text


@pytest.mark.usefixtures("blocked_gang")
def test_status_lists_the_waiting_group_with_its_reason_and_queue(
    cluster: LocalCluster, ws: Workspace
) -> None:
    answer = as_json(cluster, "status")
    [row] = [g for g in answer["podGroups"] if g["group"] == f"{ws.name}/train"]
    assert row["flavor"] == "gangsched"
    assert row["phase"] in ("Pending", "Inqueue")
    assert (row["bound"], row["minMember"], row["pending"]) == (0, 2, 2)
    assert "nvidia.com/gpu" in row["reason"]
    assert row["waitingSeconds"] is not None and row["waitingSeconds"] >= 0
    assert any(q["queue"] == "default" and q["pending"] >= 1 for q in answer["queues"])

    text = gangsched_cli(cluster, "status")
    assert "PodGroups" in text and f"{ws.name}/train" in text and "0/2" in text


@pytest.mark.usefixtures("blocked_gang")
def test_simulate_from_the_cluster_and_explain_after_the_blocker_goes(
    cluster: LocalCluster, ws: Workspace
) -> None:
    answer = as_json(cluster, "simulate", "--from-cluster")
    assert f"{ws.name}/train" in [n["gang"] for n in answer["never"]], \
        "a blocker that never ends keeps the gang out for good"

    ws.delete_pod("blocker")
    wait_for(lambda: len(bound(p for n, p in ws.pods().items() if n.startswith("worker"))) == 2,
             timeout=30, what="both workers to bind")
    node = ws.pods()["worker-0"]["spec"]["nodeName"]
    assert gangsched_cli(cluster, "explain", "pod/worker-0", "-n", ws.name).strip() == \
        f"Pod {ws.name}/worker-0 is bound to node {node}"
