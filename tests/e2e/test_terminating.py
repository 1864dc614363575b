"""Terminating pods hold their node's room, but are no members of their gang any more.

A job restarted whole (an operator deleting every worker and creating a new
generation) meets its old pods still terminating: a finalizer or a long
grace period keeps them on their node. kube-scheduler counts them there, and
so must we; but the new generation must be placed whole or not at all, never
a part of it into the room each old pod leaves as it goes.

The node here is one no fake kubelet manages, so nothing but the test ends
the old pods: their finalizer stays until the test removes it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pykube
import pytest

from devcluster.controlplane import LocalCluster, NodeShape
from tests.e2e.conftest import start_gangsched, stop_gangsched
from tests.e2e.scenario import only_nodes, overcommitted
from tests.e2e.workspace import Workspace, bound, node_of, wait_for

NAME = "gang-terminating"
NODE = "unmanaged-0"
FINALIZER = "gangsched.io/test-hold"
MERGE = {"Content-Type": "application/merge-patch+json"}


@pytest.fixture
def four_cpus_no_kubelet(cluster: LocalCluster) -> Iterator[str]:
    """The cluster's only node: 4 cpus, Ready, and no kubelet to end its pods."""
    only_nodes(cluster, 0, NodeShape(cpu="4", memory="8Gi"))
    api = cluster.client
    pykube.Node(api, {"apiVersion": "v1", "kind": "Node",
                      "metadata": {"name": NODE, "labels": {"kubernetes.io/hostname": NODE}}}
                ).create()
    allocatable = {"cpu": "4", "memory": "8Gi", "pods": "110"}
    api.raise_for_status(api.patch(
        url=f"nodes/{NODE}/status", version="v1", headers=MERGE,
        json={"status": {"allocatable": allocatable, "capacity": allocatable,
                         "conditions": [{"type": "Ready", "status": "True",
                                         "reason": "KubeletReady", "message": "test node"}]}},
    ))
    yield NODE
    node = pykube.Node.objects(api).get_or_none(name=NODE)
    if node is not None:
        node.delete()


def release(ws: Workspace, name: str) -> None:
    """Drop the pod's finalizer: a pod already deleted then goes at once."""
    ws.api.raise_for_status(ws.api.patch(
        url=f"pods/{name}", namespace=ws.name, version="v1", headers=MERGE,
        json={"metadata": {"finalizers": None}},
    ))


def gone(ws: Workspace, name: str) -> Callable[[], bool]:
    return lambda: name not in ws.pods()


def generation(ws: Workspace, prefix: str) -> list[dict[str, Any]]:
    return [p for name, p in ws.pods().items() if name.startswith(prefix)]


def test_a_new_generation_binds_whole_only_once_the_terminating_one_has_gone(
    ws: Workspace, cluster: LocalCluster, four_cpus_no_kubelet: str, tmp_path: Path
) -> None:
    own = start_gangsched(cluster, tmp_path / "gangsched.log", f"--scheduler-name={NAME}",
                          f"--namespace={ws.name}")
    old = [f"old-{i}" for i in range(4)]
    try:
        ws.create(ws.podgroup("job", min_member=4))
        for name in old:
            manifest = ws.pod(name, cpu="1", group="job", scheduler=NAME)
            manifest["metadata"]["finalizers"] = [FINALIZER]
            ws.create(manifest)
        wait_for(lambda: len(bound(generation(ws, "old-"))) == 4, timeout=30,
                 what="the first generation to be bound")

        # The job restarts whole: the old workers are deleted (they stay, terminating)
        # and a new generation of four is created for the room the old one holds.
        for name in old:
            ws.delete_pod(name)
        wait_for(lambda: all(p["metadata"].get("deletionTimestamp")
                             for p in generation(ws, "old-")),
                 timeout=10, what="the old pods to be terminating")
        ws.create(*(ws.pod(f"new-{i}", cpu="1", group="job", scheduler=NAME)
                    for i in range(4)))

        # Each old pod that goes frees room for one more: never enough for four.
        for name in old[:-1]:
            time.sleep(2.0)
            pods = list(ws.pods().values())
            assert bound(generation(ws, "new-")) == [], (
                f"part of the new generation was bound while {name} and later old pods "
                f"were still terminating:\n{own.logs()[-3000:]}")
            assert overcommitted(cluster, pods) == {}
            release(ws, name)
            wait_for(gone(ws, name), timeout=10, what=f"{name} to go")
        time.sleep(2.0)
        assert bound(generation(ws, "new-")) == [], own.logs()[-3000:]

        release(ws, old[-1])
        wait_for(lambda: len(bound(generation(ws, "new-"))) == 4, timeout=30,
                 what="the whole new generation to be bound")
        assert {node_of(p) for p in generation(ws, "new-")} == {four_cpus_no_kubelet}
        assert overcommitted(cluster, ws.pods().values()) == {}
    finally:
        for name in old:
            if name in ws.pods():
                release(ws, name)
        assert stop_gangsched(own) == 0, own.logs()[-3000:]
