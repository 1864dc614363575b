"""Inter-pod anti-affinity and topology spread, honoured for whole gangs on a real cluster.

kube-scheduler places one pod at a time and learns that a job's one-per-node
workers cannot all fit only after part of the job is bound; gangsched
counts the job's own members as it places them, so the job waits whole with
a reason naming the rule, and binds whole once the nodes it needs exist.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pykube
import pytest

from devcluster.controlplane import LocalCluster, NodeShape
from tests.e2e.conftest import SchedulerProcess
from tests.e2e.scenario import PREFIX, only_nodes
from tests.e2e.workspace import Workspace, bound, scheduled_condition, wait_for

ZONE = "topology.kubernetes.io/zone"
SHAPE = NodeShape(cpu="4", memory="16Gi")


def worker(ws: Workspace, name: str, job: str, *, cpu: str = "1",
           **spec: Any) -> dict[str, Any]:
    manifest = ws.pod(name, cpu=cpu, group=job, labels={"job": job})
    manifest["spec"].update(spec)
    return manifest


def one_per_node(job: str) -> dict[str, Any]:
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": {"matchLabels": {"job": job}},
        "topologyKey": "kubernetes.io/hostname",
    }]}}


def job_pods(ws: Workspace, job: str) -> list[dict[str, Any]]:
    return [p for name, p in ws.pods().items() if name.startswith(job + "-")]


def nodes_of(pods: list[dict[str, Any]]) -> list[str]:
    return [str(p["spec"]["nodeName"]) for p in pods]


def unschedulable_message(ws: Workspace, name: str, *words: str) -> str | None:
    condition = dict(scheduled_condition(ws.pods()[name]) or {})
    message = str(condition.get("message", ""))
    if condition.get("status") == "False" and all(word in message for word in words):
        return message
    return None


def zoned_nodes(cluster: LocalCluster, zones: str, per_zone: int) -> dict[str, str]:
    """Exactly ``per_zone`` nodes in each zone, no other node: node name to zone."""
    only_nodes(cluster, 0, SHAPE)
    found: dict[str, str] = {}
    for zone in zones:
        for name in cluster.ensure_nodes(per_zone, SHAPE, prefix=f"zone{zone}",
                                         labels={ZONE: zone}):
            found[name] = zone
    return found


def test_one_per_node_workers_wait_whole_on_three_nodes_and_bind_across_four(
    ws: Workspace, gangsched: SchedulerProcess, cluster: LocalCluster
) -> None:
    only_nodes(cluster, 3, SHAPE)
    ws.create(ws.podgroup("train", min_member=4))
    ws.create(*(worker(ws, f"train-{i}", "train", affinity=one_per_node("train"))
                for i in range(4)))
    ws.create(ws.podgroup("plain", min_member=2))
    ws.create(ws.pod("plain-0", cpu="1", group="plain"), ws.pod("plain-1", cpu="1", group="plain"))

    wait_for(lambda: len(bound(job_pods(ws, "plain"))) == 2, timeout=20,
             what="the gang without rules to bind")
    message = wait_for(
        lambda: unschedulable_message(ws, "train-0", "anti-affinity", "of this gang"),
        timeout=20, what="the workers' condition to name anti-affinity")
    assert "3 placed together" in message, message
    assert bound(job_pods(ws, "train")) == []

    cluster.ensure_nodes(4, SHAPE, prefix=PREFIX)
    wait_for(lambda: len(bound(job_pods(ws, "train"))) == 4, timeout=30,
             what="the workers to bind once a 4th node exists")
    assert len(set(nodes_of(job_pods(ws, "train")))) == 4


def test_workers_spread_evenly_over_three_zones(
    ws: Workspace, gangsched: SchedulerProcess, cluster: LocalCluster
) -> None:
    zones = zoned_nodes(cluster, "abc", 2)
    constraint = {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
                  "labelSelector": {"matchLabels": {"job": "spread"}}}
    ws.create(ws.podgroup("spread", min_member=6))
    ws.create(*(worker(ws, f"spread-{i}", "spread", topologySpreadConstraints=[constraint])
                for i in range(6)))
    wait_for(lambda: len(bound(job_pods(ws, "spread"))) == 6, timeout=30,
             what="the spread workers to bind")
    # Binpack alone would put all six on two 4-CPU nodes of one zone.
    assert Counter(zones[n] for n in nodes_of(job_pods(ws, "spread"))) == {"a": 2, "b": 2, "c": 2}


def test_a_spread_that_cannot_be_met_waits_whole_naming_the_zone(
    ws: Workspace, gangsched: SchedulerProcess, cluster: LocalCluster
) -> None:
    zoned_nodes(cluster, "abc", 1)
    # Zone b's only node is full: it still counts as a domain with none of the job's
    # pods, so zones a and c may take one worker each and no more at maxSkew 1.
    ws.create(ws.pod("blocker", cpu="4", scheduler="kube", node_selector={ZONE: "b"}))
    wait_for(lambda: bound([ws.pods()["blocker"]]) != [], timeout=20, what="the blocker")
    constraint = {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
                  "labelSelector": {"matchLabels": {"job": "even"}}}
    ws.create(ws.podgroup("even", min_member=3))
    ws.create(*(worker(ws, f"even-{i}", "even", cpu="2", topologySpreadConstraints=[constraint])
                for i in range(3)))
    message = wait_for(
        lambda: unschedulable_message(ws, "even-0", "would break maxSkew 1"), timeout=20,
        what="the workers' condition to name the skew")
    assert "zone a" in message or "zone c" in message, message
    assert bound(job_pods(ws, "even")) == []


def test_a_running_pods_anti_affinity_keeps_a_gang_off_its_node(
    ws: Workspace, gangsched: SchedulerProcess, cluster: LocalCluster
) -> None:
    names = only_nodes(cluster, 2, SHAPE)
    keeper = ws.pod("keeper", cpu="1", scheduler="kube", labels={"app": "keeper"})
    keeper["spec"]["nodeName"] = names[0]
    keeper["spec"]["affinity"] = {"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {"role": "noisy"}},
            "topologyKey": "kubernetes.io/hostname",
        }]}}
    ws.create(keeper)
    ws.create(ws.podgroup("noisy", min_member=2))
    ws.create(*(ws.pod(f"noisy-{i}", cpu="1", group="noisy", labels={"role": "noisy"})
                for i in range(2)))
    wait_for(lambda: len(bound(job_pods(ws, "noisy"))) == 2, timeout=20,
             what="the gang to bind beside the keeper")
    # Binpack would join the keeper's partly used node; its anti-affinity forbids it.
    assert set(nodes_of(job_pods(ws, "noisy"))) == {names[1]}


@pytest.mark.parametrize(("field", "value"), [
    ("maxSkew", 0),
    ("whenUnsatisfiable", "Sometimes"),
])
def test_the_api_rejects_a_malformed_spread(ws: Workspace, field: str, value: Any) -> None:
    constraint = {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
                  "labelSelector": {"matchLabels": {"job": "bad"}}, field: value}
    with pytest.raises(pykube.exceptions.HTTPError, match=field):
        ws.create(worker(ws, "bad-0", "bad", topologySpreadConstraints=[constraint]))


def test_the_api_rejects_an_unknown_selector_operator(ws: Workspace) -> None:
    affinity = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": {"matchExpressions": [
            {"key": "job", "operator": "Near", "values": ["x"]}]},
        "topologyKey": "kubernetes.io/hostname"}]}}
    with pytest.raises(pykube.exceptions.HTTPError, match="operator"):
        ws.create(worker(ws, "bad-0", "bad", affinity=affinity))


def test_a_topology_key_no_node_has_makes_the_gang_wait_and_others_bind(
    ws: Workspace, gangsched: SchedulerProcess, cluster: LocalCluster
) -> None:
    only_nodes(cluster, 2, SHAPE)
    constraint = {"maxSkew": 1, "topologyKey": "example.com/rack",
                  "whenUnsatisfiable": "DoNotSchedule",
                  "labelSelector": {"matchLabels": {"job": "racked"}}}
    ws.create(ws.podgroup("racked", min_member=2), ws.podgroup("plain", min_member=2))
    ws.create(*(worker(ws, f"racked-{i}", "racked", topologySpreadConstraints=[constraint])
                for i in range(2)))
    ws.create(ws.pod("plain-0", cpu="1", group="plain"), ws.pod("plain-1", cpu="1", group="plain"))
    wait_for(lambda: len(bound(job_pods(ws, "plain"))) == 2, timeout=20,
             what="the gang without rules to bind")
    message = wait_for(lambda: unschedulable_message(ws, "racked-0", "example.com/rack"),
                       timeout=20, what="the waiting gang's condition to name the key")
    assert "topology spread" in message, message
    assert bound(job_pods(ws, "racked")) == []
