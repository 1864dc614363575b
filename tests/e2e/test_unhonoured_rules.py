"""A pod whose placement rules gangsched does not evaluate yet is never bound silently.

An inter-pod term that picks namespaces by their labels (a non-empty
``namespaceSelector``) depends on labels gangsched does not read yet: a gang
carrying one waits whole, and its pods, its PodGroup, an Event and the log
say which rule, while the gangs without such rules bind as before.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from devcluster.controlplane import LocalCluster, NodeShape
from tests.e2e.conftest import SchedulerProcess
from tests.e2e.scenario import only_nodes
from tests.e2e.workspace import Workspace, bound, scheduled_condition, wait_for

RULE = "required pod anti-affinity"
EXISTING_RULE = "anti-affinity with a namespaceSelector selects"


@pytest.fixture
def six_cpus(cluster: LocalCluster) -> list[str]:
    return only_nodes(cluster, 3, NodeShape(cpu="2", memory="8Gi"))


def one_per_node(ws: Workspace, name: str, group: str) -> dict[str, Any]:
    manifest = ws.pod(name, cpu="1", group=group, labels={"job": group})
    manifest["spec"]["affinity"] = {"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {"job": group}},
            "topologyKey": "kubernetes.io/hostname",
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ws.name}},
        }],
    }}
    return manifest


def members(ws: Workspace, prefix: str) -> list[dict[str, Any]]:
    return [p for name, p in ws.pods().items() if name.startswith(prefix)]


def naming_the_rule(ws: Workspace, name: str, rule: str = RULE) -> dict[str, Any] | None:
    """The pod's ``PodScheduled=False`` condition once its message names the rule."""
    condition = dict(scheduled_condition(ws.pods()[name]) or {})
    if condition.get("status") == "False" and rule in str(condition.get("message", "")):
        return condition
    return None


@pytest.mark.usefixtures("six_cpus")
def test_a_worker_with_pod_anti_affinity_waits_naming_the_rule_and_other_gangs_bind(
    ws: Workspace, gangsched: SchedulerProcess
) -> None:
    ws.create(ws.podgroup("workers", min_member=2), ws.podgroup("plain", min_member=2))
    ws.create(one_per_node(ws, "workers-0", "workers"), ws.pod("workers-1", cpu="1",
                                                               group="workers"))
    ws.create(ws.pod("plain-0", cpu="1", group="plain"), ws.pod("plain-1", cpu="1",
                                                                group="plain"))

    wait_for(lambda: len(bound(members(ws, "plain-"))) == 2, timeout=20,
             what="the gang without such rules to bind")

    for name in ("workers-0", "workers-1"):
        condition = wait_for(lambda: naming_the_rule(ws, name), timeout=20,  # noqa: B023
                             what=f"{name}'s PodScheduled condition to name the rule")
        assert condition["reason"] == "Unschedulable", condition
        assert "workers-0" in condition["message"], condition
    wait_for(lambda: any(RULE in str(e.get("message")) for e in ws.events("workers-0")),
             timeout=20, what="an Event naming the rule")
    wait_for(lambda: any("gang_waiting" in line and RULE in line and ws.name in line
                         for line in gangsched.logs().splitlines()),
             timeout=20, what="a log line naming the rule")

    time.sleep(1.0)
    assert bound(members(ws, "workers-")) == []


def test_a_pod_that_a_running_pods_anti_affinity_selects_waits_naming_it(
    ws: Workspace, gangsched: SchedulerProcess, six_cpus: list[str]
) -> None:
    keeper = ws.pod("keeper", cpu="1", scheduler="kube", labels={"app": "keeper"})
    keeper["spec"]["nodeName"] = six_cpus[0]
    keeper["spec"]["affinity"] = {"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {"role": "noisy"}},
            "topologyKey": "kubernetes.io/hostname",
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ws.name}},
        }],
    }}
    ws.create(keeper)
    ws.create(ws.pod("noisy", cpu="1", labels={"role": "noisy"}),
              ws.pod("quiet", cpu="1", labels={"role": "quiet"}))
    wait_for(lambda: len(bound(members(ws, "quiet"))) == 1, timeout=20,
             what="the pod the keeper does not select to bind")
    condition = wait_for(lambda: naming_the_rule(ws, "noisy", EXISTING_RULE), timeout=20,
                         what="the selected pod's condition to name the keeper's rule")
    assert condition["reason"] == "Unschedulable", condition
    assert bound(members(ws, "noisy")) == []
