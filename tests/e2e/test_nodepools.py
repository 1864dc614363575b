"""Karpenter's NodePools read on the real control plane, Karpenter itself not running: only a
gang some NodePool can launch whole asks for nodes (``PodScheduled=False/Unschedulable``),
and when the NodePool's limits bind only the first gang in gangsched's order asks.

The NodePool CRD is the pinned Karpenter's own (``cluster/build.sh karpenter``); each
NodePool's ``status.resources`` is written through its status subresource, as Karpenter
writes it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devcluster.controlplane import LocalCluster, NodeShape
from devcluster.karpenter import crd
from tests.e2e.conftest import SchedulerProcess, start_gangsched, stop_gangsched
from tests.e2e.scenario import only_nodes
from tests.e2e.test_explain_status import as_json
from tests.e2e.workspace import Workspace, scheduled_condition, wait_for

SCHEDULER = "gang-nodepools"
POOL = "burst"


@pytest.fixture(scope="module")
def nodepools_served(cluster: LocalCluster) -> None:
    cluster.kubectl("apply", "--server-side", "-f", str(crd("nodepools")))
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                    "crd/nodepools.karpenter.sh")


@pytest.fixture
def scheduler(cluster: LocalCluster, nodepools_served: None,
              tmp_path: Path) -> Iterator[SchedulerProcess]:
    """A scheduler started once the NodePool API is served: discovery finds it."""
    running = start_gangsched(cluster, tmp_path / "gangsched.log", f"--scheduler-name={SCHEDULER}")
    yield running
    stop_gangsched(running)


@pytest.fixture
def nodepool(cluster: LocalCluster, nodepools_served: None) -> Iterator[None]:
    """A NodePool limited to 10 cpu, 4 of which its nodes use already: 6 left."""
    body = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": POOL},
            "spec": {"limits": {"cpu": "10"}, "template": {"spec": {
                "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass",
                                 "name": "default"},
                "requirements": [{"key": "kubernetes.io/os", "operator": "In",
                                  "values": ["linux"]}]}}}}
    cluster.kubectl("apply", "-f", "-", input=json.dumps(body))
    cluster.kubectl("patch", "nodepool", POOL, "--subresource=status", "--type=merge",
                    "-p", json.dumps({"status": {"resources": {"cpu": "4", "nodes": "1"}}}))
    yield
    cluster.kubectl("delete", "nodepool", POOL, "--ignore-not-found")


def reasons(ws: Workspace, prefix: str) -> set[str]:
    return {str((scheduled_condition(pod) or {}).get("reason"))
            for name, pod in ws.pods().items() if name.startswith(prefix)}


def says(ws: Workspace, prefix: str, reason: str) -> bool:
    return reasons(ws, prefix) == {reason}


def group_message(ws: Workspace, name: str) -> str:
    conditions: list[dict[str, Any]] = (
        ws.podgroup_obj(name).get("status", {}).get("conditions") or [])
    return " ".join(str(c.get("message", "")) for c in conditions)


def gang(ws: Workspace, name: str, pods: int, cpu: str, min_member: int | None = None) -> None:
    ws.create(ws.podgroup(name, min_member=min_member or pods))
    ws.create(*(ws.pod(f"{name}-{i}", cpu=cpu, group=name, scheduler=SCHEDULER)
                for i in range(pods)))


@pytest.mark.usefixtures("nodepool")
def test_only_gangs_the_nodepool_can_launch_ask_and_only_the_first_while_its_limit_binds(
    cluster: LocalCluster, ws: Workspace, scheduler: SchedulerProcess
) -> None:
    only_nodes(cluster, 1, NodeShape(cpu="2", memory="8Gi"))
    gang(ws, "short", 2, "1", min_member=4)  # short of members: new nodes would sit idle
    gang(ws, "first", 2, "2")                # 4 cpu: the first in order asks
    time.sleep(1.1)
    gang(ws, "second", 2, "2")               # 4 more cpu: not while the first asks
    time.sleep(1.1)
    gang(ws, "huge", 4, "2")                 # 8 cpu, more than the 6 the NodePool has left

    wait_for(lambda: says(ws, "first-", "Unschedulable"), timeout=30,
             what="the first gang to ask for nodes")
    wait_for(lambda: says(ws, "second-", "GangWaiting"), timeout=30,
             what="the second gang to wait behind the first")
    wait_for(lambda: says(ws, "huge-", "GangWaiting"), timeout=30,
             what="the gang over the NodePool's limit to wait")
    wait_for(lambda: says(ws, "short-", "GangWaiting"), timeout=30,
             what="the short gang to wait")
    wait_for(lambda: "asking for nodes: 2 pods" in group_message(ws, "first"), timeout=30,
             what="the first PodGroup to say it asks for nodes")
    behind = wait_for(lambda: naming(ws, "second", "NodePool limit"), timeout=30,
                      what="the second PodGroup to name the limit")
    assert f"asking first: gang {ws.name}/first" in behind, behind
    # Its pods said GangWaiting while it was still short of members, too.
    wait_for(lambda: naming(ws, "huge", "NodePool limit"), timeout=30,
             what="the PodGroup over the limit to name it")
    assert says(ws, "huge-", "GangWaiting")
    # explain decides as the scheduler does, NodePools included.
    codes = {name: as_json(cluster, "explain", f"podgroup/{name}", "-n", ws.name,
                           f"--scheduler-name={SCHEDULER}", expect=3)["code"]
             for name in ("first", "second", "huge", "short")}
    assert codes == {"first": "AskingForNodes", "second": "NodePoolLimit",
                     "huge": "NodePoolLimit", "short": "ShortOfMembers"}

    # Room for both (9 cpu left): the second asks too; the 8 cpu of the third would not
    # be left once they have theirs, so it still does not.
    cluster.kubectl("patch", "nodepool", POOL, "--type=merge",
                    "-p", json.dumps({"spec": {"limits": {"cpu": "13"}}}))
    wait_for(lambda: says(ws, "second-", "Unschedulable"), timeout=30,
             what="the second gang to ask once the limit leaves room for it")
    assert says(ws, "huge-", "GangWaiting") and says(ws, "first-", "Unschedulable")
    assert wait_for(lambda: naming(ws, "huge", "asking first"), timeout=30,
                    what="the third PodGroup to wait behind both")


def naming(ws: Workspace, group: str, words: str) -> str | None:
    message = group_message(ws, group)
    return message if words in message else None
