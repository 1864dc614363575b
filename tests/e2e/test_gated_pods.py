"""Pods held back by ``schedulingGates``, as Kueue and other admission controllers hold them.

The API server refuses to bind a gated pod. A gang with a gated member must
therefore wait whole, say which gate it waits for, and try nothing until the
gate is lifted; then bind whole.
"""

from __future__ import annotations

import random
import time
from typing import Any

import pytest

from devcluster.controlplane import LocalCluster, NodeShape
from tests.e2e.conftest import SchedulerProcess
from tests.e2e.scenario import only_nodes
from tests.e2e.workspace import Workspace, bound, bound_at, scheduled_condition, wait_for

KUEUE_GATE = "kueue.x-k8s.io/admission"
OTHER_GATE = "example.com/quota-check"


@pytest.fixture
def six_cpus(cluster: LocalCluster) -> None:
    only_nodes(cluster, 3, NodeShape(cpu="2", memory="8Gi"))


def gated_pod(ws: Workspace, name: str, group: str, *gates: str) -> dict[str, Any]:
    manifest = ws.pod(name, cpu="1", group=group)
    manifest["spec"]["schedulingGates"] = [{"name": gate} for gate in gates]
    return manifest


def set_gates(ws: Workspace, name: str, *gates: str) -> None:
    ws.api.raise_for_status(ws.api.patch(
        url=f"pods/{name}", namespace=ws.name, version="v1",
        json={"spec": {"schedulingGates": [{"name": gate} for gate in gates]}},
        headers={"Content-Type": "application/merge-patch+json"},
    ))


def members(ws: Workspace, prefix: str) -> list[dict[str, Any]]:
    return [p for name, p in ws.pods().items() if name.startswith(prefix)]


def bind_failures(gangsched: SchedulerProcess, ws: Workspace) -> int:
    return sum(1 for line in gangsched.logs().splitlines()
               if "bind_failed" in line and ws.name in line)


def reason_of(pod: dict[str, Any]) -> tuple[str, str] | None:
    condition = scheduled_condition(pod)
    if condition and condition.get("status") == "False":
        return str(condition.get("reason")), str(condition.get("message"))
    return None


@pytest.mark.usefixtures("six_cpus")
def test_a_gated_member_keeps_its_gang_waiting_whole_until_the_gate_is_lifted(
    ws: Workspace, gangsched: SchedulerProcess
) -> None:
    ws.create(ws.podgroup("trio", min_member=3))
    ws.create(ws.pod("trio-0", cpu="1", group="trio"), ws.pod("trio-1", cpu="1", group="trio"),
              gated_pod(ws, "trio-2", "trio", KUEUE_GATE))

    # The first words may be of a gang still arriving; it settles on the gate.
    def group_says() -> str | None:
        conditions = ws.podgroup_obj("trio").get("status", {}).get("conditions") or [{}]
        message = str(conditions[0].get("message", ""))
        return message if KUEUE_GATE in message else None

    message = wait_for(group_says, timeout=20, what="the PodGroup to name the gate")
    assert "trio-2" in message, message

    def pod_says(name: str) -> tuple[str, str] | None:
        reason = reason_of(ws.pods()[name])
        return reason if reason and KUEUE_GATE in reason[1] else None

    gated = wait_for(lambda: pod_says("trio-2"), timeout=20,
                     what="the gated pod's PodScheduled condition naming the gate")
    assert gated[0] == "SchedulingGated", gated
    ungated = wait_for(lambda: pod_says("trio-0"), timeout=20,
                       what="an ungated member's PodScheduled condition naming the gate")
    assert ungated[0] == "GangWaiting", "autoscalers must add no node for a gated gang"

    # Waiting, not retrying: over two seconds and the resyncs in them nothing
    # of the gang is bound and no bind is even tried.
    time.sleep(2.0)
    assert bound(members(ws, "trio-")) == []
    assert bind_failures(gangsched, ws) == 0

    set_gates(ws, "trio-2")
    wait_for(lambda: len(bound(members(ws, "trio-"))) == 3, timeout=20,
             what="the whole gang to bind once the gate is lifted")
    wait_for(lambda: ws.podgroup_obj("trio").get("status", {}).get("phase") == "Running",
             timeout=20, what="the PodGroup to be Running")
    assert bind_failures(gangsched, ws) == 0


@pytest.mark.usefixtures("six_cpus")
def test_pods_created_gated_bind_whole_only_after_every_gate_is_lifted_in_any_order(
    ws: Workspace, gangsched: SchedulerProcess
) -> None:
    """Kueue's flow on plain pods: every pod created with gates, lifted one at a time."""
    size = 4
    ws.create(ws.podgroup("queued", min_member=size))
    ws.create(*(gated_pod(ws, f"queued-{i}", "queued", KUEUE_GATE, OTHER_GATE)
                for i in range(size)))
    wait_for(lambda: all(reason_of(p) for p in members(ws, "queued-")), timeout=20,
             what="every gated pod to say it is gated")

    lifts = [(f"queued-{i}", gate) for i in range(size) for gate in (KUEUE_GATE, OTHER_GATE)]
    random.Random(8).shuffle(lifts)
    remaining = {f"queued-{i}": [KUEUE_GATE, OTHER_GATE] for i in range(size)}
    for name, gate in lifts[:-1]:
        remaining[name].remove(gate)
        set_gates(ws, name, *remaining[name])
        time.sleep(0.3)
        assert bound(members(ws, "queued-")) == [], f"bound before every gate was lifted ({name})"

    name, gate = lifts[-1]
    remaining[name].remove(gate)
    set_gates(ws, name, *remaining[name])
    wait_for(lambda: len(bound(members(ws, "queued-"))) == size, timeout=20,
             what="the gang to bind once the last gate is lifted")
    pods = members(ws, "queued-")
    times = [bound_at(p) for p in pods]
    assert max(times) - min(times) <= 2.0, times
    assert bind_failures(gangsched, ws) == 0
