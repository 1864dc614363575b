"""Gangs on a cluster that Karpenter grows and shrinks: it buys whole gangs' nodes, or none.

Karpenter (its KWOK provider, :mod:`devcluster.karpenter`) runs beside a gangsched of
this module and acts on the NodePools each test applies, on a cluster of no node of
its own: every node a gang runs on is one Karpenter bought for it. What each test
measures is what a user pays for: NodeClaims launched and node-seconds idle.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any

import pytest

from devcluster.controlplane import LocalCluster, NodeShape
from devcluster.karpenter import GPU, ZONE_LABEL, Karpenter, Ledger, nodepool, running_karpenter
from tests.e2e.conftest import SchedulerProcess, start_gangsched, stop_gangsched
from tests.e2e.scenario import only_nodes, timed
from tests.e2e.workspace import (
    Workspace,
    bound,
    bound_at,
    node_of,
    phase_of,
    scheduled_condition,
    wait_for,
)

SCHEDULER = "gang-autoscaled"
CONSOLIDATE_AFTER_S = 5
"""A NodePool's ``disruption.consolidateAfter``: short, so a test sees consolidation."""
QUIET_S = 20
"""How long a gang that should buy nothing is watched: a dozen of Karpenter's batches."""


@pytest.fixture(scope="module")
def karpenter(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory
              ) -> Iterator[Karpenter]:
    with running_karpenter(cluster, tmp_path_factory.mktemp("karpenter"),
                           batch_idle="1s", batch_max="3s") as running:
        yield running


@pytest.fixture(scope="module")
def gangsched(cluster: LocalCluster, karpenter: Karpenter,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[SchedulerProcess]:
    """gangsched started once Karpenter's APIs are served (it asks which are at start),
    under a scheduler name of its own: the session's may run already, without NodePools."""
    running = start_gangsched(cluster, tmp_path_factory.mktemp("gangsched") / "gangsched.log",
                              f"--scheduler-name={SCHEDULER}")
    yield running
    assert stop_gangsched(running) == 0, running.logs()[-3000:]


@pytest.fixture
def autoscaled(cluster: LocalCluster, karpenter: Karpenter, ws: Workspace,
               gangsched: SchedulerProcess) -> Iterator[Karpenter]:
    """An empty cluster before the test; after it, the test's pods and every node
    Karpenter bought are gone (pods first: a PodDisruptionBudget would hold a drain)."""
    only_nodes(cluster, 0, NodeShape())
    yield karpenter
    for pod in ws.pods():
        ws.delete_pod(pod)
    wait_for(lambda: not ws.pods(), timeout=30, what="the test's pods to go")
    karpenter.clear()


def _member(ws: Workspace, name: str, group: str, **spec: Any) -> dict[str, Any]:
    return ws.pod(name, scheduler=SCHEDULER, group=group, **spec)


def _waiting(ws: Workspace, count: int) -> bool:
    pods = ws.pods().values()
    return sum(1 for pod in pods if (scheduled_condition(pod) or {}).get("status") == "False"
               ) >= count


def _ready_at(node: Mapping[str, Any]) -> float:
    for condition in node["status"]["conditions"]:
        if condition["type"] == "Ready" and condition["status"] == "True":
            return datetime.fromisoformat(condition["lastTransitionTime"]).timestamp()
    raise AssertionError(f"node {node['metadata']['name']} is not Ready")


def _record(record: dict[str, Any], ledger: Ledger) -> None:
    record["nodeclaims_launched"] = len(ledger.launched)
    record["idle_node_s"] = round(ledger.idle_s, 1)


def test_a_gang_short_of_members_buys_nothing(autoscaled: Karpenter, ws: Workspace) -> None:
    """Three of a gang of four exist: no node is bought until the fourth arrives."""
    autoscaled.apply(nodepool("cpu", limits={"cpu": "100"}))
    ws.create(ws.podgroup("short", min_member=4))
    with Ledger(autoscaled, ws.name) as ledger, timed("autoscaling", "gangsched",
                                                      case="short of members") as record:
        ws.create(*(_member(ws, f"short-{i}", "short", cpu="1") for i in range(3)))
        wait_for(lambda: _waiting(ws, 3), timeout=30, what="the three members to wait")
        time.sleep(QUIET_S)
        assert list(ledger.launched) == [], "a gang short of members buys no node"
        ws.create(_member(ws, "short-3", "short", cpu="1"))
        wait_for(lambda: len(bound(ws.pods().values())) == 4, timeout=60,
                 what="the whole gang bound on the nodes bought for it")
        _record(record, ledger)
    assert len(ledger.launched) >= 1


def test_a_gang_larger_than_the_nodepool_limit_buys_nothing(
    autoscaled: Karpenter, ws: Workspace
) -> None:
    """Four pods of 3 cpu, one per 4-cpu node, under a limit of 8 cpu: no node is bought,
    or what was bought goes back within consolidateAfter + 45 s and is not bought again."""
    autoscaled.apply(nodepool("cpu", limits={"cpu": "8"}, instance_types=("c-4x",),
                              consolidate_after=f"{CONSOLIDATE_AFTER_S}s"))
    ws.create(ws.podgroup("big", min_member=4))
    with Ledger(autoscaled, ws.name) as ledger, timed("autoscaling", "gangsched",
                                                      case="larger than the limit") as record:
        ws.create(*(_member(ws, f"big-{i}", "big", cpu="3") for i in range(4)))
        wait_for(lambda: _waiting(ws, 4), timeout=30, what="the gang to wait")
        time.sleep(QUIET_S)
        if ledger.launched:
            wait_for(lambda: not autoscaled.nodeclaims(), timeout=CONSOLIDATE_AFTER_S + 45,
                     what="the nodes bought for a gang that cannot fit to be released")
            released = time.monotonic()
            time.sleep(120)
            assert ledger.launched_since(released) == [], "released nodes are not bought again"
        assert bound(ws.pods().values()) == []
        _record(record, ledger)


def test_two_zone_bound_gangs_under_a_limit_for_one_finish_in_turn(
    autoscaled: Karpenter, ws: Workspace
) -> None:
    """Two 2-GPU gangs, one per zone, under a NodePool limit of 2 GPUs: Karpenter is never
    asked for half of each (a deadlock); one gang runs, its nodes go, then the other."""
    autoscaled.apply(nodepool("gpu", limits={GPU: "2", "cpu": "100"},
                              instance_types=("g-1gpu",),
                              consolidate_after=f"{CONSOLIDATE_AFTER_S}s"))
    zones = {"east": "zone-a", "west": "zone-b"}
    for gang in zones:
        ws.create(ws.podgroup(gang, min_member=2))
    # Karpenter orders a batch by cpu, largest first: one larger pod of each gang comes
    # first, so Karpenter alone buys one node in each zone.
    with Ledger(autoscaled, ws.name) as ledger, timed("autoscaling", "gangsched",
                                                      case="two zones, one limit") as record:
        ws.create(*(_member(ws, f"{gang}-{i}", gang, cpu=("2" if i == 0 else "1"), gpus=1,
                            run_for="10s", node_selector={ZONE_LABEL: zone})
                    for i in range(2) for gang, zone in zones.items()))
        wait_for(lambda: all(phase_of(pod) == "Succeeded" for pod in ws.pods().values()),
                 timeout=150, what="both gangs to finish")
        _record(record, ledger)
    pods = ws.pods()
    first, second = sorted(zones, key=lambda gang: bound_at(pods[f"{gang}-0"]))
    assert max(bound_at(pods[f"{first}-{i}"]) for i in range(2)) <= min(
        bound_at(pods[f"{second}-{i}"]) for i in range(2)), "one gang after the other"
    assert len(ledger.launched) == 4, "two nodes bought for each gang, none for half of one"


def test_consolidation_does_not_disrupt_a_running_gang(
    cluster: LocalCluster, autoscaled: Karpenter, ws: Workspace
) -> None:
    """A gang bound on two bought nodes; then a node that could hold both members joins:
    each bought node is a consolidation candidate, and no member is evicted."""
    autoscaled.apply(nodepool("small", limits={"cpu": "100"}, instance_types=("c-2x",),
                              consolidate_after=f"{CONSOLIDATE_AFTER_S}s"))
    ws.create(ws.podgroup("train", min_member=2))
    ws.create(*(_member(ws, f"train-{i}", "train", cpu="1500m") for i in range(2)))
    wait_for(lambda: len(bound(ws.pods().values())) == 2, timeout=60,
             what="the gang bound on the nodes bought for it")
    placed = {name: (pod["metadata"]["uid"], node_of(pod)) for name, pod in ws.pods().items()}
    assert len({node for _, node in placed.values()}) == 2
    cluster.ensure_nodes(1, NodeShape(cpu="8", memory="32Gi"), prefix="node")
    deadline = time.monotonic() + CONSOLIDATE_AFTER_S + 40
    while time.monotonic() < deadline:
        pods = ws.pods()
        now = {name: (pod["metadata"]["uid"], node_of(pod)) for name, pod in pods.items()
               if not pod["metadata"].get("deletionTimestamp")}
        assert now == placed, "no member of a running gang is evicted by consolidation"
        time.sleep(0.5)


def test_a_gang_on_an_empty_cluster_binds_within_10s_of_its_nodes_ready(
    autoscaled: Karpenter, ws: Workspace
) -> None:
    autoscaled.apply(nodepool("cpu", limits={"cpu": "100"}))
    ws.create(ws.podgroup("fresh", min_member=4))
    with Ledger(autoscaled, ws.name) as ledger, timed("autoscaling", "gangsched",
                                                      case="empty cluster") as record:
        ws.create(*(_member(ws, f"fresh-{i}", "fresh", cpu="2") for i in range(4)))
        wait_for(lambda: len(bound(ws.pods().values())) == 4, timeout=60,
                 what="the whole gang bound on the nodes bought for it")
        pods = list(ws.pods().values())
        nodes = {node["metadata"]["name"]: node for node in autoscaled.nodes()}
        ready = max(_ready_at(nodes[str(node_of(pod))]) for pod in pods)
        binds = [bound_at(pod) for pod in pods]
        record["bound_after_ready_s"] = max(binds) - ready
        _record(record, ledger)
    assert max(binds) - ready <= 10, "bound whole within 10 s of its last node Ready"
    assert max(binds) - min(binds) <= 2, "bound whole, not one pod at a time"


WARMING = "example.com/warming"


def test_a_node_bought_for_a_gang_is_not_taken_by_a_gang_arriving_while_it_comes(
    cluster: LocalCluster, autoscaled: Karpenter, ws: Workspace
) -> None:
    """A gang of two 3-cpu pods buys two 4-cpu nodes, the whole NodePool limit. The nodes
    come with a startup taint their node agent removes when it is ready; one is ready
    first, and a 2-cpu gang arriving then would fit there. It waits: the node was bought
    for the first gang, which binds whole once its second node is ready."""
    autoscaled.apply(nodepool("pair", limits={"cpu": "8"}, instance_types=("c-4x",),
                              consolidate_after="60s", startup_taints=(f"{WARMING}=x:NoSchedule",)))
    ws.create(ws.podgroup("train", min_member=2), ws.podgroup("late", min_member=1))
    ws.create(*(_member(ws, f"train-{i}", "train", cpu="3") for i in range(2)))
    wait_for(lambda: len([node for node in autoscaled.nodes() if any(
        taint["key"] == WARMING for taint in node["spec"].get("taints", ()))]) == 2,
             timeout=60, what="the two bought nodes, warming")
    first, second = sorted(node["metadata"]["name"] for node in autoscaled.nodes())
    cluster.kubectl("taint", "node", first, f"{WARMING}-")
    ws.create(_member(ws, "late-0", "late", cpu="2"))
    wait_for(lambda: "nodes coming for this gang" in (
        scheduled_condition(ws.pods()["train-0"]) or {}).get("message", ""), timeout=30,
        what="the gang to say its nodes are coming")
    time.sleep(5)  # cycles enough for a gang to be bound where it fits
    pods = ws.pods()
    assert node_of(pods["late-0"]) is None, "the late gang took a node bought for another"
    assert (scheduled_condition(pods["train-0"]) or {}).get("reason") == "Unschedulable"
    cluster.kubectl("taint", "node", second, f"{WARMING}-")
    wait_for(lambda: len(bound([ws.pods()[f"train-{i}"] for i in range(2)])) == 2,
             timeout=30, what="the gang bound whole on the nodes bought for it")
    assert {node_of(ws.pods()[f"train-{i}"]) for i in range(2)} == {first, second}
