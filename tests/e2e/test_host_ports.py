"""Host ports on the real control plane: a port taken on a node keeps the next pod
asking for it off that node, and two members of a gang asking for one port land on
two nodes or wait whole, saying which port; per node object, whatever the nodes'
hostname labels."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from devcluster.controlplane import LocalCluster, NodeShape
from tests.e2e.conftest import SchedulerProcess
from tests.e2e.scenario import only_nodes
from tests.e2e.workspace import Workspace, bound, scheduled_condition, wait_for


@pytest.fixture
def two_nodes(cluster: LocalCluster) -> list[str]:
    return only_nodes(cluster, 2, NodeShape(cpu="4", memory="8Gi"))


def with_port(manifest: dict[str, Any], number: int) -> dict[str, Any]:
    manifest["spec"]["containers"][0]["ports"] = [{"containerPort": number, "hostPort": number}]
    return manifest


def node_of(ws: Workspace, name: str) -> str | None:
    node: str | None = ws.pods()[name]["spec"].get("nodeName")
    return node


@pytest.mark.usefixtures("gangsched")
def test_a_gang_of_two_with_one_host_port_lands_on_two_nodes(
    ws: Workspace, two_nodes: list[str]
) -> None:
    ws.create(ws.podgroup("web", min_member=2))
    ws.create(*(with_port(ws.pod(f"web-{i}", cpu="1", group="web"), 8080) for i in range(2)))
    wait_for(lambda: len(bound(list(ws.pods().values()))) == 2, timeout=30,
             what="both members bound")
    assert sorted(str(node_of(ws, f"web-{i}")) for i in range(2)) == sorted(two_nodes)


def test_a_port_taken_on_every_node_keeps_the_gang_waiting_whole_naming_the_port(
    ws: Workspace, two_nodes: list[str], gangsched: SchedulerProcess
) -> None:
    for node in two_nodes:  # another scheduler's pods, already holding the port everywhere
        holder = with_port(ws.pod(f"holder-{node}", cpu="1"), 9100)
        holder["spec"]["nodeName"] = node
        holder["spec"].pop("schedulerName", None)
        ws.create(holder)
    ws.create(ws.podgroup("agent", min_member=1), ws.podgroup("plain", min_member=1))
    ws.create(with_port(ws.pod("agent-0", cpu="1", group="agent"), 9100),
              ws.pod("plain-0", cpu="1", group="plain"))
    wait_for(lambda: node_of(ws, "plain-0") is not None, timeout=30,
             what="the gang without a host port to bind")

    def told() -> dict[str, Any] | None:
        condition = dict(scheduled_condition(ws.pods()["agent-0"]) or {})
        return condition if "host port TCP/9100 taken" in str(condition.get("message")) else None

    condition = wait_for(told, timeout=30, what="agent-0's condition to name the port")
    assert condition["status"] == "False", condition
    assert node_of(ws, "agent-0") is None


@pytest.fixture
def relabelled(request: pytest.FixtureRequest, cluster: LocalCluster,
               two_nodes: list[str]) -> Iterator[list[str]]:
    """The two nodes without a hostname label, or sharing one value (``request.param``);
    deleted afterwards, so no later test gets them back for nodes of their shape."""
    for node in two_nodes:
        change = ("kubernetes.io/hostname-" if request.param == "none"
                  else "kubernetes.io/hostname=shared")
        cluster.kubectl("label", "node", node, change, "--overwrite")
    yield two_nodes
    for node in two_nodes:
        cluster.kubectl("delete", "node", node, "--wait=false")


@pytest.mark.usefixtures("gangsched")
@pytest.mark.parametrize("relabelled", ["none", "shared"], indirect=True)
def test_host_ports_are_per_node_whatever_the_hostname_label(
    ws: Workspace, relabelled: list[str]
) -> None:
    """A gang of two asking one host port gets both nodes, whether they lack a hostname
    label or share one; a third member asking it too keeps the gang of three waiting."""
    ws.create(ws.podgroup("web", min_member=2), ws.podgroup("big", min_member=3))
    ws.create(*(with_port(ws.pod(f"web-{i}", cpu="1", group="web"), 8080) for i in range(2)))
    wait_for(lambda: len(bound(list(ws.pods().values()))) == 2, timeout=30,
             what="both members bound")
    assert sorted(str(node_of(ws, f"web-{i}")) for i in range(2)) == sorted(relabelled)
    ws.create(*(with_port(ws.pod(f"big-{i}", cpu="1", group="big"), 9100) for i in range(3)))

    def told() -> dict[str, Any] | None:
        condition = dict(scheduled_condition(ws.pods()["big-0"]) or {})
        return condition if "host port TCP/9100 taken" in str(condition.get("message")) else None

    wait_for(told, timeout=30, what="big-0's condition to name the port")
    assert [node_of(ws, f"big-{i}") for i in range(3)] == [None, None, None]
