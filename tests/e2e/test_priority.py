"""A PodGroup's priorityClassName orders its gang ahead of older gangs of lower priority, as
long as its pods were admitted with that class: a group cannot raise its gang above them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pykube
import pytest

from devcluster.controlplane import LocalCluster, NodeShape
from tests.e2e.scenario import only_nodes
from tests.e2e.workspace import Workspace, bound, node_of, wait_for


@pytest.fixture
def high_priority(cluster: LocalCluster) -> Iterator[str]:
    name = "gangsched-test-high"
    pykube.object_factory(cluster.client, "scheduling.k8s.io/v1", "PriorityClass")(
        cluster.client,
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
         "metadata": {"name": name}, "value": 100000},
    ).create()
    yield name
    cluster.kubectl("delete", "priorityclass", name, "--ignore-not-found")


def with_class(pod: dict[str, Any], priority_class: str) -> dict[str, Any]:
    pod["spec"]["priorityClassName"] = priority_class
    return pod


def conditions_of(ws: Workspace, group: str) -> list[dict[str, Any]]:
    return list(ws.podgroup_obj(group).get("status", {}).get("conditions") or [])


def older_gang_behind_a_blocker(cluster: LocalCluster, ws: Workspace) -> None:
    """One 2-cpu node taken by a pod of kube-scheduler, and an older gang of 2 x 1 cpu."""
    only_nodes(cluster, 1, NodeShape(cpu="2", memory="8Gi"))
    ws.create(ws.pod("blocker", cpu="2", scheduler="kube"))
    wait_for(lambda: node_of(ws.pods()["blocker"]), timeout=30, what="the blocker to run")
    ws.create(ws.podgroup("older", min_member=2))
    ws.create(*(ws.pod(f"older-{i}", cpu="1", group="older") for i in range(2)))


def bound_once_the_blocker_goes(ws: Workspace) -> list[str]:
    """The pods bound into the room the blocker frees: one gang's."""
    ws.delete_pod("blocker")
    wait_for(lambda: len(bound(ws.pods().values())) == 2, timeout=30,
             what="one gang to bind into the freed room")
    return sorted(name for name, pod in ws.pods().items() if node_of(pod))


@pytest.mark.usefixtures("gangsched")
def test_higher_priority_group_goes_first_when_room_appears(
    cluster: LocalCluster, ws: Workspace, high_priority: str
) -> None:
    older_gang_behind_a_blocker(cluster, ws)
    urgent = ws.podgroup("urgent", min_member=2)
    urgent["spec"]["priorityClassName"] = high_priority
    ws.create(urgent)
    ws.create(*(with_class(ws.pod(f"urgent-{i}", cpu="1", group="urgent"), high_priority)
                for i in range(2)))
    wait_for(lambda: ws.podgroup_obj("urgent").get("status", {}).get("conditions"),
             timeout=30, what="the urgent group to be told why it waits")

    names = bound_once_the_blocker_goes(ws)
    assert names == ["urgent-0", "urgent-1"], "the older, lower-priority gang went first"


@pytest.mark.usefixtures("gangsched")
def test_a_podgroup_naming_a_class_its_pods_lack_is_invalid_and_never_goes_first(
    cluster: LocalCluster, ws: Workspace, high_priority: str
) -> None:
    older_gang_behind_a_blocker(cluster, ws)
    # The pods were admitted at priority 0; only the PodGroup names the high class.
    raised = ws.podgroup("raised", min_member=2)
    raised["spec"]["priorityClassName"] = high_priority
    ws.create(raised)
    ws.create(*(ws.pod(f"raised-{i}", cpu="1", group="raised") for i in range(2)))
    wait_for(lambda: any(c.get("reason") == "InvalidSpec"
                         and "does not match the priority its pods were admitted with"
                         in c.get("message", "") for c in conditions_of(ws, "raised")),
             timeout=30, what="the group to be reported invalid, saying why")
    wait_for(lambda: any(e["reason"] == "InvalidSpec" for e in ws.events("raised")),
             timeout=30, what="an InvalidSpec Event on the group")

    names = bound_once_the_blocker_goes(ws)
    assert names == ["older-0", "older-1"], "the group's class raised its gang above its pods"
