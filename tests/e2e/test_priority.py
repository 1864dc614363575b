"""A PodGroup's priorityClassName orders its gang ahead of older gangs of lower priority."""

from __future__ import annotations

from collections.abc import Iterator

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


@pytest.mark.usefixtures("gangsched")
def test_higher_priority_group_goes_first_when_room_appears(
    cluster: LocalCluster, ws: Workspace, high_priority: str
) -> None:
    only_nodes(cluster, 1, NodeShape(cpu="2", memory="8Gi"))
    ws.create(ws.pod("blocker", cpu="2", scheduler="kube"))
    wait_for(lambda: node_of(ws.pods()["blocker"]), timeout=30, what="the blocker to run")

    ws.create(ws.podgroup("older", min_member=2))
    ws.create(*(ws.pod(f"older-{i}", cpu="1", group="older") for i in range(2)))
    urgent = ws.podgroup("urgent", min_member=2)
    urgent["spec"]["priorityClassName"] = high_priority
    ws.create(urgent)
    ws.create(*(ws.pod(f"urgent-{i}", cpu="1", group="urgent") for i in range(2)))
    wait_for(lambda: ws.podgroup_obj("urgent").get("status", {}).get("conditions"),
             timeout=30, what="the urgent group to be told why it waits")

    ws.delete_pod("blocker")
    wait_for(lambda: len(bound(ws.pods().values())) == 2, timeout=30,
             what="one gang to bind into the freed room")
    names = sorted(name for name, pod in ws.pods().items() if node_of(pod))
    assert names == ["urgent-0", "urgent-1"], "the older, lower-priority gang went first"
