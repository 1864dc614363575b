"""Promises the cycle keeps from one cycle to the next, on the real control plane.

Only a gang that more room would let run may hold room; and pods beyond
minMember of a running gang are ordinary work of their queue, not first in
line.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pykube
import pytest

from devcluster.controlplane import LocalCluster, NodeShape
from tests.e2e.conftest import SchedulerProcess, start_gangsched, stop_gangsched
from tests.e2e.scenario import only_nodes
from tests.e2e.workspace import Workspace, bound, node_of, scheduled_condition, wait_for

SCHEDULER = "gang-promises"
STARVATION_S = 2.0


@pytest.fixture
def scheduler(cluster: LocalCluster, tmp_path: Path) -> Iterator[SchedulerProcess]:
    running = start_gangsched(cluster, tmp_path / "gangsched.log", f"--scheduler-name={SCHEDULER}",
                              f"--starvation-seconds={STARVATION_S:g}")
    yield running
    stop_gangsched(running)


def _bound_named(ws: Workspace, prefix: str) -> int:
    return len(bound(p for name, p in ws.pods().items() if name.startswith(prefix)))


def test_a_gang_short_of_members_holds_no_room_however_long_it_waits(
    cluster: LocalCluster, ws: Workspace, scheduler: SchedulerProcess
) -> None:
    """A Job of parallelism 2 under a PodGroup of minMember 3 can never be whole: it says
    so, and a gang that arrives after its starvation threshold still gets all the room."""
    only_nodes(cluster, 2, NodeShape(cpu="2", memory="8Gi"))
    ws.create(ws.podgroup("short", min_member=3))
    ws.create(*(ws.pod(f"short-{i}", cpu="1", group="short", scheduler=SCHEDULER)
                for i in range(2)))

    def short_message() -> str | None:
        """A cycle between the two creations says "it has 1 pod", and a reason whose
        figures alone moved is said again only after the report plan's hold (60 s): the
        code is what counts here, not the figure."""
        condition = scheduled_condition(ws.pods().get("short-0", {}))
        message = str(condition.get("message")) if condition else ""
        return message if "is short of members: it has" in message else None

    wait_for(short_message, timeout=20, what="the short gang to say it is short of members")
    time.sleep(STARVATION_S + 1.0)  # past the threshold: today it would hold its 2 CPUs

    ws.create(ws.podgroup("whole", min_member=3))
    ws.create(*(ws.pod(f"whole-{i}", cpu="1", group="whole", scheduler=SCHEDULER)
                for i in range(3)))
    wait_for(lambda: _bound_named(ws, "whole-") == 3 or None, timeout=20,
             what="the later gang to bind whole in the room the short gang does not hold")
    assert _bound_named(ws, "short-") == 0


@pytest.fixture
def weighted_queues(cluster: LocalCluster, ws: Workspace) -> Iterator[tuple[str, str]]:
    light, heavy = f"light-{ws.name}", f"heavy-{ws.name}"
    for name, weight in ((light, 1), (heavy, 10)):
        ws.create({"apiVersion": "scheduling.gangsched.io/v1alpha1", "kind": "Queue",
                   "metadata": {"name": name}, "spec": {"weight": weight}})
    yield light, heavy
    queues = pykube.object_factory(cluster.client, "scheduling.gangsched.io/v1alpha1", "Queue")
    for name in (light, heavy):
        queues.objects(cluster.client).get(name=name).delete()


def test_extras_of_a_running_gang_wait_their_queue_turn(
    cluster: LocalCluster, ws: Workspace, scheduler: SchedulerProcess,
    weighted_queues: tuple[str, str],
) -> None:
    """A weight-1 queue's Spark app asks for three more executors while a weight-10 queue's
    gang of three waits for the same room: the gang goes first, the executors wait."""
    light, heavy = weighted_queues
    only_nodes(cluster, 1, NodeShape(cpu="4", memory="16Gi"))
    app = ws.podgroup("app", min_member=1, queue=light)
    gang = ws.podgroup("gang", min_member=3, queue=heavy)
    ws.create(app, gang)
    ws.create(ws.pod("app-driver", cpu="1", group="app", scheduler=SCHEDULER),
              ws.pod("blocker", cpu="3", scheduler=SCHEDULER))
    wait_for(lambda: _bound_named(ws, "app-driver") + _bound_named(ws, "blocker") == 2 or None,
             timeout=20, what="the driver and the blocker to run")

    # Both wait behind the blocker, then see its room free in the same cycle.
    ws.create(*(ws.pod(f"app-exec-{i}", cpu="1", group="app", scheduler=SCHEDULER)
                for i in range(3)))
    ws.create(*(ws.pod(f"gang-{i}", cpu="1", group="gang", scheduler=SCHEDULER)
                for i in range(3)))
    wait_for(lambda: all(scheduled_condition(p) for n, p in ws.pods().items()
                         if n.startswith("gang-")) or None,
             timeout=20, what="the gang to be told it waits")
    ws.delete_pod("blocker")
    wait_for(lambda: _bound_named(ws, "gang-") == 3 or None, timeout=20,
             what="the heavier queue's gang to take the freed room whole")
    pods = ws.pods()
    assert [n for n, p in pods.items() if n.startswith("app-exec-") and node_of(p)] == []


# ---- preemption inside one topology domain ------------------------------------------------

RACK_NODES = NodeShape(cpu="8", memory="32Gi", gpus=2)
URGENT, MID = "gangsched-test-rack-urgent", "gangsched-test-rack-mid"


@pytest.fixture
def racks_and_classes(cluster: LocalCluster) -> Iterator[None]:
    """Racks r1 and r2 of two nodes of two GPUs each, and two priority classes."""
    classes = pykube.object_factory(cluster.client, "scheduling.k8s.io/v1", "PriorityClass")
    for name, value in ((URGENT, 100000), (MID, 10)):
        classes(cluster.client, {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                 "metadata": {"name": name}, "value": value}).create()
    only_nodes(cluster, 0, RACK_NODES)
    cluster.ensure_nodes(2, RACK_NODES, prefix="r1", labels={"rack": "r1"})
    cluster.ensure_nodes(2, RACK_NODES, prefix="r2", labels={"rack": "r2"})
    yield
    only_nodes(cluster, 0, RACK_NODES)
    cluster.kubectl("delete", "priorityclass", URGENT, MID, "--ignore-not-found")


def _with_class(manifest: dict[str, Any], priority_class: str | None) -> dict[str, Any]:
    if priority_class:
        manifest["spec"]["priorityClassName"] = priority_class
    return manifest


@pytest.mark.usefixtures("racks_and_classes")
def test_a_rack_bound_gang_evicts_whole_gangs_of_one_rack_and_lands_there(
    ws: Workspace, scheduler: SchedulerProcess
) -> None:
    """The two lowest gangs run in different racks: evicting them would free four GPUs no
    rack-bound gang can use together. The two gangs of one rack go instead, whole."""
    for name, rack, priority_class in (("low-a", "r1", None), ("low-b", "r2", None),
                                       ("mid-a", "r1", MID), ("mid-b", "r2", MID)):
        ws.create(ws.podgroup(name, min_member=2))
        ws.create(*(_with_class(ws.pod(f"{name}-{k}", cpu="100m", gpus=1, group=name,
                                       scheduler=SCHEDULER, node_selector={"rack": rack},
                                       labels={"gang": name}), priority_class)
                    for k in range(2)))
    wait_for(lambda: len(bound(ws.pods().values())) == 8 or None, timeout=30,
             what="four gangs to fill both racks")

    ws.create(ws.native_podgroup("urgent", min_count=4, topology=("rack",),
                                 priority_class=URGENT))
    ws.create(*(_with_class(ws.pod(f"urgent-{k}", cpu="100m", gpus=1, group="urgent",
                                   marker="native", scheduler=SCHEDULER), URGENT)
                for k in range(4)))
    wait_for(lambda: _bound_named(ws, "urgent-") == 4 or None, timeout=60,
             what="the rack-bound gang to evict its way into one rack")
    pods = ws.pods()
    racks = {str(node_of(p)).split("-")[0] for n, p in pods.items() if n.startswith("urgent-")}
    assert len(racks) == 1, racks
    alive: dict[str, int] = {}
    for pod in pods.values():
        gang = pod["metadata"].get("labels", {}).get("gang")
        if gang and node_of(pod) and not pod["metadata"].get("deletionTimestamp"):
            alive[gang] = alive.get(gang, 0) + 1
    assert sorted(alive.values()) == [2, 2], f"two whole gangs stay, the rest go whole: {alive}"
    survivors = {name[-1] for name in alive}
    assert survivors == ({"b"} if racks == {"r1"} else {"a"}), (racks, alive)


def test_a_starving_gang_keeps_the_nodes_it_waits_for_from_small_gangs_that_spread(
    cluster: LocalCluster, ws: Workspace, scheduler: SchedulerProcess
) -> None:
    """Two 8-GPU pods need two nodes with 8 GPUs free, not 16 free across four nodes.

    Four nodes of 8 GPUs each run a 2-GPU pod of another scheduler for a few
    seconds. A gang of two 8-GPU pods starves; small gangs that spread, each
    one GPU for minutes, keep coming. They may use the room the big gang does
    not wait for, never the nodes it would land on first: when the short pods
    end, those nodes are whole and the big gang binds there.
    """
    nodes = only_nodes(cluster, 4, NodeShape(cpu="16", memory="64Gi", gpus=8))
    for node in nodes:
        blocker = ws.pod(f"blocker-{node}", gpus=2, scheduler="default-scheduler", run_for="8s")
        blocker["spec"]["nodeName"] = node
        ws.create(blocker)
    ws.create(ws.podgroup("big", min_member=2))
    ws.create(*(ws.pod(f"big-{i}", gpus=8, group="big", scheduler=SCHEDULER) for i in range(2)))
    time.sleep(STARVATION_S + 1.5)  # the big gang starves and keeps its nodes

    for i in range(8):
        group = ws.podgroup(f"small-{i}", min_member=1)
        group["metadata"]["annotations"] = {"scheduling.gangsched.io/policy": "spread"}
        ws.create(group, ws.pod(f"small-{i}-0", gpus=1, group=f"small-{i}",
                                scheduler=SCHEDULER, run_for="300s"))
    wait_for(lambda: _bound_named(ws, "big-") == 2 or None, timeout=60,
             what="the big gang to bind once the short pods end")
    big_nodes = {node_of(ws.pods()[f"big-{i}"]) for i in range(2)}
    smalls = {name: node_of(pod) for name, pod in ws.pods().items() if name.startswith("small-")}
    assert not big_nodes & set(smalls.values()), (big_nodes, smalls)
