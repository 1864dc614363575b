"""Where a bound gang says where its pods went: one Event on its PodGroup by default,
or one per pod (``--scheduled-events=pod``) as kube-scheduler writes them."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import pytest

from devcluster.controlplane import LocalCluster, NodeShape
from tests.e2e.conftest import SchedulerProcess, start_gangsched, stop_gangsched
from tests.e2e.scenario import only_nodes
from tests.e2e.workspace import Workspace, bound, node_of, wait_for


@pytest.fixture
def six_cpus(cluster: LocalCluster) -> None:
    only_nodes(cluster, 3, NodeShape(cpu="2", memory="8Gi"))


def scheduled(ws: Workspace, involved: str) -> list[dict[str, Any]]:
    return [e for e in ws.events(involved) if e["reason"] == "Scheduled"]


def three_bound(ws: Workspace, scheduler: str) -> dict[str, str]:
    ws.create(ws.podgroup("trio", min_member=3))
    ws.create(*(ws.pod(f"trio-{i}", cpu="1", scheduler=scheduler, group="trio")
                for i in range(3)))
    wait_for(lambda: len(bound(ws.pods().values())) == 3, timeout=30, what="the trio to bind")
    return {name: str(node_of(pod)) for name, pod in ws.pods().items()}


@pytest.mark.usefixtures("six_cpus")
def test_a_gang_gets_one_scheduled_event_on_its_podgroup_naming_each_pods_node(
    ws: Workspace, gangsched: SchedulerProcess
) -> None:
    nodes = three_bound(ws, "gang")
    events = wait_for(lambda: scheduled(ws, "trio"), timeout=30,
                      what="a Scheduled Event on the PodGroup")
    assert len(events) == 1, events
    message = events[0]["message"]
    assert message.startswith("Successfully assigned 3 pods: "), message
    for name, node in nodes.items():
        assert f"{node}: " in message and name in message, message
    assert events[0]["involvedObject"]["kind"] == "PodGroup"
    assert all(not scheduled(ws, name) for name in nodes)

    # A pod in no PodGroup is a gang of its own: its Event is its own.
    ws.create(ws.pod("solo", cpu="1"))
    solo = wait_for(lambda: scheduled(ws, "solo"), timeout=30, what="the solo pod's Event")
    assert node_of(ws.pods()["solo"]) in solo[0]["message"]


@pytest.mark.usefixtures("six_cpus")
def test_scheduled_events_per_pod_as_kube_scheduler_writes_them(
    ws: Workspace, cluster: LocalCluster, tmp_path: Path
) -> None:
    own = start_gangsched(cluster, tmp_path / "gangsched.log", f"--namespace={ws.name}",
                          "--scheduler-name=gang-per-pod", "--scheduled-events=pod")
    try:
        nodes = three_bound(ws, "gang-per-pod")
        for name, node in nodes.items():
            events = wait_for(partial(scheduled, ws, name), timeout=30,
                              what=f"a Scheduled Event on {name}")
            assert f"Successfully assigned {ws.name}/{name} to {node}" in events[0]["message"]
        assert not scheduled(ws, "trio")
    finally:
        assert stop_gangsched(own) == 0, own.logs()[-3000:]
