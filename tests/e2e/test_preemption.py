"""Preemption on the real control plane: whole gangs of lower priority make room, never part
of one; ``preemptionPolicy: Never`` and PodDisruptionBudgets hold."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pykube
import pytest

from devcluster.controlplane import LocalCluster, NodeShape
from tests.e2e.conftest import SchedulerProcess
from tests.e2e.scenario import only_nodes, overcommitted
from tests.e2e.workspace import Workspace, node_of, wait_for

URGENT = "gangsched-test-preemptor"
URGENT_NEVER = "gangsched-test-never-preempts"


def priority_class(cluster: LocalCluster, name: str, **extra: Any) -> None:
    pykube.object_factory(cluster.client, "scheduling.k8s.io/v1", "PriorityClass")(
        cluster.client,
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
         "metadata": {"name": name}, "value": 100000, **extra},
    ).create()


@pytest.fixture(scope="module")
def classes(cluster: LocalCluster) -> Iterator[None]:
    priority_class(cluster, URGENT)
    priority_class(cluster, URGENT_NEVER, preemptionPolicy="Never")
    yield
    cluster.kubectl("delete", "priorityclass", URGENT, URGENT_NEVER, "--ignore-not-found")


def full_cluster(cluster: LocalCluster, ws: Workspace, nodes: int, gpus: int) -> None:
    """``nodes`` nodes of ``gpus`` GPUs, every GPU taken by a low-priority gang."""
    only_nodes(cluster, nodes, NodeShape(cpu="32", memory="128Gi", gpus=gpus))
    fill(ws, nodes * gpus // 2)
    wait_for(lambda: sum(gang_sizes(ws).values()) == nodes * gpus, timeout=60,
             what=f"two-GPU gangs to fill {nodes} x {gpus} GPUs")


def fill(ws: Workspace, gangs: int, *, labels: dict[str, str] | None = None,
         first: int = 0) -> None:
    """Low-priority gangs of two one-GPU pods each (minMember 2)."""
    for i in range(first, first + gangs):
        ws.create(ws.podgroup(f"low-{i}", min_member=2))
        ws.create(*(ws.pod(f"low-{i}-{k}", cpu="100m", gpus=1, group=f"low-{i}",
                           labels={"gang": f"low-{i}", **(labels or {})}) for k in range(2)))


def gang_sizes(ws: Workspace) -> Counter[str]:
    """Live (bound, not deleting) pods per low gang."""
    sizes: Counter[str] = Counter()
    for pod in ws.pods().values():
        gang = pod["metadata"].get("labels", {}).get("gang")
        if gang and node_of(pod) and not pod["metadata"].get("deletionTimestamp"):
            sizes[gang] += 1
    return sizes


def urgent_gang(ws: Workspace, pods: int, gpus: int, priority_class_name: str) -> None:
    """A gang whose pods and PodGroup name the class: the pods' admitted priority is the
    gang's, and a group naming another class than its pods is invalid."""
    group = ws.podgroup("urgent", min_member=pods)
    group["spec"]["priorityClassName"] = priority_class_name
    ws.create(group)
    for k in range(pods):
        manifest = ws.pod(f"urgent-{k}", cpu="100m", gpus=gpus, group="urgent")
        manifest["spec"]["priorityClassName"] = priority_class_name
        ws.create(manifest)


def urgent_bound(ws: Workspace, pods: int) -> bool:
    found = ws.pods()
    return all(node_of(found.get(f"urgent-{k}", {})) for k in range(pods))


def preempted_event(ws: Workspace, involved: str) -> bool:
    return any(e["reason"] == "Preempted" and "urgent" in e["message"]
               for e in ws.events(involved))


def reason_of(ws: Workspace, group: str) -> str:
    conditions = ws.podgroup_obj(group).get("status", {}).get("conditions") or []
    return " ".join(str(c.get("message", "")) for c in conditions)


@pytest.mark.usefixtures("gangsched", "classes")
def test_eight_gpu_gang_evicts_exactly_four_whole_two_gpu_gangs(
    cluster: LocalCluster, ws: Workspace
) -> None:
    full_cluster(cluster, ws, 4, 8)

    started = time.monotonic()
    urgent_gang(ws, 2, 4, URGENT)
    wait_for(lambda: urgent_bound(ws, 2), timeout=60, what="the 8-GPU gang to start")
    print(f"\n[preemption] 8-GPU gang bound {time.monotonic() - started:.1f}s after creation")

    sizes = gang_sizes(ws)
    whole = [g for g, n in sizes.items() if n == 2]
    assert len(whole) == 12, f"exactly 4 of 16 gangs should go: {dict(sizes)}"
    assert all(n in (0, 2) for n in sizes.values()), f"a gang left below minMember: {sizes}"
    assert overcommitted(cluster, ws.pods().values()) == {}
    evicted = sorted(f"low-{i}" for i in range(16) if f"low-{i}" not in whole)
    # Both sides are told, each naming the other.
    wait_for(lambda: any(e["reason"] == "Preempting" and all(v in e["message"] for v in evicted)
                         for e in ws.events("urgent")),
             timeout=20, what="a Preempting Event on the preemptor naming its victims")
    wait_for(lambda: all(preempted_event(ws, v) and preempted_event(ws, f"{v}-0")
                         for v in evicted),
             timeout=20, what="Preempted Events on every victim group and pod naming the preemptor")


@pytest.mark.usefixtures("gangsched", "classes")
def test_preemption_policy_never_waits_and_evicts_nothing(
    cluster: LocalCluster, ws: Workspace
) -> None:
    full_cluster(cluster, ws, 2, 4)
    urgent_gang(ws, 2, 2, URGENT_NEVER)
    wait_for(lambda: "nvidia.com/gpu" in reason_of(ws, "urgent"), timeout=30,
             what="the Never gang to be told why it waits")
    time.sleep(3)  # a few cycles: nothing may be evicted meanwhile
    assert sum(gang_sizes(ws).values()) == 8
    assert not urgent_bound(ws, 2)
    assert "preempt" not in reason_of(ws, "urgent")


@pytest.mark.usefixtures("classes")
def test_a_disruption_budget_protects_its_gangs_and_others_go_instead(
    cluster: LocalCluster, ws: Workspace, gangsched: SchedulerProcess
) -> None:
    only_nodes(cluster, 2, NodeShape(cpu="32", memory="128Gi", gpus=4))
    # The protected gangs are the youngest, so they are the first choice of victims.
    fill(ws, 2, first=2)
    time.sleep(1.1)
    fill(ws, 2, labels={"protected": "yes"})
    pdb = pykube.object_factory(ws.api, "policy/v1", "PodDisruptionBudget")(ws.api, {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "protect", "namespace": ws.name},
        "spec": {"minAvailable": 4, "selector": {"matchLabels": {"protected": "yes"}}},
    })
    pdb.create()
    wait_for(lambda: sum(gang_sizes(ws).values()) == 8, timeout=60, what="4 gangs to run")
    wait_for(lambda: pdb.reload() or pdb.obj.get("status", {}).get("currentHealthy") == 4,
             timeout=30, what="the disruption controller to count the protected pods")

    urgent_gang(ws, 2, 2, URGENT)
    wait_for(lambda: urgent_bound(ws, 2), timeout=60, what="the preemptor to start")
    sizes = gang_sizes(ws)
    assert sizes["low-0"] == 2 and sizes["low-1"] == 2, f"protected gangs evicted: {sizes}"
    assert sizes["low-2"] == 0 and sizes["low-3"] == 0, sizes
    # The budget was read before choosing: no eviction of a protected pod was even tried.
    assert "preemption_refused" not in gangsched.logs()


def disruption_budget(ws: Workspace, name: str, **spec: Any) -> Any:
    budget = pykube.object_factory(ws.api, "policy/v1", "PodDisruptionBudget")(ws.api, {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": ws.name}, "spec": spec,
    })
    budget.create()
    return budget


@pytest.mark.usefixtures("gangsched", "classes")
def test_a_budget_allowing_one_disruption_never_lets_a_gang_of_four_be_half_evicted(
    cluster: LocalCluster, ws: Workspace
) -> None:
    only_nodes(cluster, 1, NodeShape(cpu="32", memory="128Gi", gpus=4))
    ws.create(ws.podgroup("low", min_member=4))
    # A ReplicaSet's pods: maxUnavailable needs a controller the disruption controller
    # can read the expected count from, and it replaces what is evicted.
    template = ws.pod("low", cpu="100m", gpus=1, group="low", labels={"gang": "low"})
    ws.create({"apiVersion": "apps/v1", "kind": "ReplicaSet",
               "metadata": {"name": "low", "namespace": ws.name},
               "spec": {"replicas": 4, "selector": {"matchLabels": {"gang": "low"}},
                        "template": {"metadata": {"labels": template["metadata"]["labels"]},
                                     "spec": template["spec"]}}})
    try:
        wait_for(lambda: gang_sizes(ws)["low"] == 4, timeout=60, what="the gang of 4 to run")
        budget = disruption_budget(ws, "one-at-a-time", maxUnavailable=1,
                                   selector={"matchLabels": {"gang": "low"}})
        wait_for(lambda: budget.reload() or budget.obj.get("status", {}).get(
            "disruptionsAllowed") == 1, timeout=30, what="the budget to allow one disruption")

        # The preemptor needs all 4 GPUs: only the whole gang could make room, and the
        # budget lets one pod go.
        urgent_gang(ws, 2, 2, URGENT)
        wait_for(lambda: "PodDisruptionBudget" in reason_of(ws, "urgent"), timeout=30,
                 what="the preemptor to say a budget protects the gang")
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:  # several cycles: never one pod of the four goes
            assert gang_sizes(ws)["low"] == 4, f"the gang was half-evicted: {dict(gang_sizes(ws))}"
            time.sleep(0.25)
        assert not urgent_bound(ws, 2)

        # Without the budget the same gang is evicted whole and the preemptor runs.
        budget.delete()
        wait_for(lambda: urgent_bound(ws, 2), timeout=60, what="the preemptor to start")
        assert gang_sizes(ws)["low"] == 0
        assert overcommitted(cluster, ws.pods().values()) == {}
    finally:  # no replacements while the namespace is emptied
        cluster.kubectl("delete", "replicaset", "low", "-n", ws.name, "--ignore-not-found")
