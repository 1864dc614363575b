"""LeaderWorkerSet v0.7.0 with its Volcano gang option against gangsched.

With ``gangSchedulingManagement.schedulerProvider: volcano`` LWS writes a Volcano
PodGroup per group (minMember: the group's size, minResources: the whole group) and
its pod webhook puts the group's name on each pod; the pods name ``gang``, which the
session's gangsched serves. LWS scales a LeaderWorkerSet down by its highest group
index, while gangsched places the oldest group first, so room here is freed by a pod
beside the groups rather than by scaling one away.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pykube
import pytest

from devcluster.controlplane import LocalCluster, NodeShape
from tests.e2e.conftest import SchedulerProcess
from tests.e2e.operators import LWS_NAME_LABEL, install_crds, lws_controller, lws_dir
from tests.e2e.scenario import only_nodes
from tests.e2e.workspace import PODGROUP_API, Workspace, node_of, phase_of, wait_for

LWS_API = "leaderworkerset.x-k8s.io/v1"
GROUP_INDEX = "leaderworkerset.sigs.k8s.io/group-index"
SIZE = 4
"""Pods per group, of one CPU each: two nodes of four CPUs and a two-CPU blocker leave
room for one group and half of another."""


@pytest.fixture(scope="module")
def lws(
    cluster: LocalCluster, gangsched: SchedulerProcess, tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[None]:
    home = lws_dir()
    install_crds(cluster, home / "crds", ("leaderworkersets.leaderworkerset.x-k8s.io",))
    with lws_controller(cluster, home, tmp_path_factory.mktemp("lws")):
        yield


@pytest.fixture
def one_group_of_room(cluster: LocalCluster, ws: Workspace) -> Iterator[None]:
    """Two nodes of four CPUs; afterwards the LeaderWorkerSets go first, or pods come back."""
    only_nodes(cluster, 2, NodeShape(cpu="4"))
    yield
    ws.delete_all(LWS_API, "LeaderWorkerSet")


def leaderworkerset(ws: Workspace, name: str, replicas: int) -> dict[str, Any]:
    return {"apiVersion": LWS_API, "kind": "LeaderWorkerSet",
            "metadata": {"name": name, "namespace": ws.name},
            "spec": {"replicas": replicas, "leaderWorkerTemplate": {
                "size": SIZE,
                "workerTemplate": {"spec": {
                    "schedulerName": "gang", "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "server", "image": "vllm/vllm-openai:v0.11.0",
                                    "resources": {"requests": {"cpu": "1"}}}]}}}}}


def groups(ws: Workspace, name: str) -> dict[str, list[dict[str, Any]]]:
    """The LeaderWorkerSet's pods that are not going away, by group index."""
    found: dict[str, list[dict[str, Any]]] = {}
    for pod in ws.pods().values():
        labels = pod["metadata"].get("labels") or {}
        if labels.get(LWS_NAME_LABEL) == name and not pod["metadata"].get("deletionTimestamp"):
            found.setdefault(labels.get(GROUP_INDEX, ""), []).append(pod)
    return found


def running_whole(pods: list[dict[str, Any]]) -> bool:
    return len(pods) == SIZE and all(node_of(p) and phase_of(p) == "Running" for p in pods)


def waiting_unbound(pods: list[dict[str, Any]]) -> bool:
    """All the group's pods exist and say why they wait; none is bound."""
    return len(pods) == SIZE and not any(node_of(p) for p in pods) and all(
        any(c.get("type") == "PodScheduled" and c.get("status") == "False"
            for c in (p.get("status") or {}).get("conditions") or []) for p in pods)


def one_runs_one_waits(ws: Workspace, name: str) -> bool:
    found = groups(ws, name)
    return sorted(found) == ["0", "1"] and sorted(
        (running_whole(pods), waiting_unbound(pods)) for pods in found.values()
    ) == [(False, True), (True, False)]


def holds(check: Callable[[], bool], seconds: float) -> bool:
    """``check`` true at every look for ``seconds``: a waiting group stays waiting."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not check():
            return False
        time.sleep(0.2)
    return True


def volcano_groups(ws: Workspace) -> list[dict[str, Any]]:
    kind = pykube.object_factory(ws.api, PODGROUP_API["volcano"], "PodGroup")
    return [g.obj for g in kind.objects(ws.api, namespace=ws.name)]


def left(ws: Workspace) -> list[str]:
    """Pods, StatefulSets and PodGroups still in the namespace."""
    sets = pykube.StatefulSet.objects(ws.api, namespace=ws.name)
    return [*ws.pods(), *(s.name for s in sets),
            *(g["metadata"]["name"] for g in volcano_groups(ws))]


@pytest.mark.usefixtures("lws", "one_group_of_room")
def test_a_leaderworkerset_group_waits_whole_while_another_runs_and_runs_whole_once_room_frees(
    ws: Workspace,
) -> None:
    ws.create(ws.pod("blocker", cpu="2"))
    wait_for(lambda: bool(node_of(ws.pods()["blocker"])), timeout=20, what="the blocker to bind")

    ws.create(leaderworkerset(ws, "serve", replicas=2))
    wait_for(lambda: one_runs_one_waits(ws, "serve"), timeout=40,
             what="one group of four to run and the other's four pods to wait, none bound")
    assert holds(lambda: one_runs_one_waits(ws, "serve"), seconds=3), \
        "part of a group bound while two CPUs of the four it needs are free"
    assert sorted(g["spec"]["minMember"] for g in volcano_groups(ws)) == [SIZE, SIZE]

    ws.delete_pod("blocker")
    wait_for(lambda: [running_whole(pods) for pods in groups(ws, "serve").values()]
             == [True, True], timeout=30,
             what="the waiting group to run whole once the blocker's room is free")
    wait_for(lambda: sorted(g.get("status", {}).get("phase") for g in volcano_groups(ws))
             == ["Running", "Running"], timeout=15, what="both PodGroups to say Running")

    ws.delete_all(LWS_API, "LeaderWorkerSet")
    wait_for(lambda: not left(ws), timeout=60,
             what="no pod, StatefulSet or PodGroup left after the LeaderWorkerSet is deleted")
