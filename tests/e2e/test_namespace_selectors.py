"""Inter-pod terms that pick namespaces by their labels (a non-empty
``namespaceSelector``), honoured on a real cluster: gangsched watches the
namespaces' labels, so such a term keeps a gang off the nodes of the pods it
selects, and a namespace labelled or unlabelled later changes where it may go.
"""

from __future__ import annotations

from typing import Any

import pytest

from devcluster.controlplane import LocalCluster, NodeShape
from tests.e2e.conftest import SchedulerProcess
from tests.e2e.scenario import only_nodes
from tests.e2e.workspace import Workspace, bound, node_of, scheduled_condition, wait_for

TEAM = "gangsched-test/team"


@pytest.fixture
def six_cpus(cluster: LocalCluster) -> list[str]:
    return only_nodes(cluster, 3, NodeShape(cpu="2", memory="8Gi"))


def label(cluster: LocalCluster, ws: Workspace, team: str | None) -> None:
    """Give the workspace's namespace a team label, or take it away (None)."""
    change = f"{TEAM}={team}" if team is not None else f"{TEAM}-"
    cluster.kubectl("label", "namespace", ws.name, change, "--overwrite")


def away_from(role: str, team: str) -> dict[str, Any]:
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": {"matchLabels": {"role": role}},
        "topologyKey": "kubernetes.io/hostname",
        "namespaceSelector": {"matchLabels": {TEAM: team}},
    }]}}


def pinned(ws: Workspace, name: str, node: str, labels: dict[str, str]) -> dict[str, Any]:
    """A pod of another scheduler, already on ``node``, holding one of its CPUs."""
    manifest = ws.pod(name, cpu="1", scheduler="kube", labels=labels)
    manifest["spec"]["nodeName"] = node
    return manifest


def members(ws: Workspace, prefix: str) -> list[dict[str, Any]]:
    return [p for name, p in ws.pods().items() if name.startswith(prefix)]


def waiting_message(ws: Workspace, name: str) -> str | None:
    condition = dict(scheduled_condition(ws.pods()[name]) or {})
    if condition.get("status") == "False" and condition.get("reason") == "Unschedulable":
        return str(condition.get("message", ""))
    return None


def test_a_gang_keeps_off_the_node_of_pods_in_a_namespace_its_selector_picks(
    ws: Workspace, cluster: LocalCluster, gangsched: SchedulerProcess, six_cpus: list[str]
) -> None:
    """Four 1-CPU workers fit in the five free CPUs only if one joins the database's
    node; the selector picks the database's namespace by label, so they take the other
    two nodes whole instead of waiting (as they did while such terms were unhonoured)."""
    team = ws.name
    label(cluster, ws, team)
    ws.create(pinned(ws, "db", six_cpus[0], {"role": "db"}))
    ws.create(ws.podgroup("workers", min_member=4))
    for i in range(4):
        worker = ws.pod(f"workers-{i}", cpu="1", group="workers")
        worker["spec"]["affinity"] = away_from("db", team)
        ws.create(worker)

    placed = wait_for(lambda: (lambda found: found if len(found) == 4 else None)(
        bound(members(ws, "workers-"))), timeout=30, what="the four workers to bind")
    assert sorted(node_of(p) or "" for p in placed) == sorted(six_cpus[1:] * 2)


def test_a_running_pods_selector_follows_the_namespaces_labels(
    ws: Workspace, cluster: LocalCluster, gangsched: SchedulerProcess, six_cpus: list[str]
) -> None:
    """A keeper's anti-affinity selects noisy pods of namespaces labelled with its team:
    a gang of five noisy pods, which needs the keeper's node, waits while the namespace
    carries the label, naming the keeper's rule, and binds once the label is taken away."""
    team = ws.name
    label(cluster, ws, team)
    keeper = pinned(ws, "keeper", six_cpus[0], {"app": "keeper"})
    keeper["spec"]["affinity"] = away_from("noisy", team)
    ws.create(keeper, ws.podgroup("noisy", min_member=5))
    ws.create(*(ws.pod(f"noisy-{i}", cpu="1", group="noisy", labels={"role": "noisy"})
                for i in range(5)))

    message = wait_for(lambda: waiting_message(ws, "noisy-0"), timeout=20,
                       what="the gang to wait, saying why")
    assert "anti-affinity" in message, message
    assert bound(members(ws, "noisy-")) == []

    label(cluster, ws, None)
    wait_for(lambda: len(bound(members(ws, "noisy-"))) == 5, timeout=30,
             what="the gang to bind once the namespace is no longer selected")
