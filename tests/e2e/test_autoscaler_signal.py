"""What cluster autoscalers read: ``PodScheduled=False/Unschedulable`` only on pods that more
nodes would let run, ``GangWaiting`` on every other waiting pod, on the real control plane."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from devcluster.controlplane import LocalCluster, NodeShape
from tests.e2e.conftest import SchedulerProcess
from tests.e2e.scenario import only_nodes
from tests.e2e.test_lone_pods import capped_default  # noqa: F401 (a fixture)
from tests.e2e.workspace import Workspace, scheduled_condition, wait_for


@pytest.fixture
def four_cpus(cluster: LocalCluster) -> None:
    only_nodes(cluster, 2, NodeShape(cpu="2", memory="8Gi"))


def reasons(ws: Workspace, prefix: str) -> dict[str, str]:
    """Each waiting pod named ``prefix*`` and its ``PodScheduled=False`` reason."""
    said: dict[str, str] = {}
    for name, pod in ws.pods().items():
        condition: Mapping[str, Any] = scheduled_condition(pod) or {}
        if name.startswith(prefix) and condition.get("status") == "False":
            said[name] = str(condition.get("reason"))
    return said


def settled_on(ws: Workspace, prefix: str, count: int, reason: str) -> dict[str, str]:
    def settled() -> dict[str, str] | None:
        said = reasons(ws, prefix)
        return said if len(said) == count and set(said.values()) == {reason} else None

    return wait_for(settled, timeout=30, what=f"{count} pods {prefix}* to say {reason}")


@pytest.mark.usefixtures("four_cpus")
def test_a_gang_short_of_members_says_gang_waiting_and_one_too_big_unschedulable(
    ws: Workspace, gangsched: SchedulerProcess
) -> None:
    ws.create(ws.podgroup("short", min_member=4), ws.podgroup("big", min_member=3))
    ws.create(*(ws.pod(f"short-{i}", cpu="1", group="short") for i in range(2)))
    ws.create(*(ws.pod(f"big-{i}", cpu="2", group="big") for i in range(3)))

    settled_on(ws, "short-", 2, "GangWaiting")
    settled_on(ws, "big-", 3, "Unschedulable")
    message = str((scheduled_condition(ws.pods()["short-0"]) or {}).get("message"))
    assert "short of members" in message, message


@pytest.mark.usefixtures("four_cpus", "gangsched")
def test_a_gang_over_its_queues_cap_says_gang_waiting(
    ws: Workspace, capped_default: str  # noqa: F811 (the fixture)
) -> None:
    ws.create(ws.podgroup("capped", min_member=3))
    ws.create(*(ws.pod(f"capped-{i}", cpu="1", group="capped") for i in range(3)))
    settled_on(ws, "capped-", 3, "GangWaiting")
