"""A gang bound whole gets a PodDisruptionBudget owned by its PodGroup, on the real control
plane: voluntary disruptions (consolidation, drains) cannot take its members one by one,
and the budget goes with the PodGroup."""

from __future__ import annotations

from typing import Any

import pykube
import pytest

from devcluster.controlplane import LocalCluster, NodeShape
from tests.e2e.conftest import SchedulerProcess
from tests.e2e.scenario import only_nodes
from tests.e2e.workspace import Workspace, bound, wait_for

GROUP_LABEL = "scheduling.gangsched.io/pod-group"


@pytest.fixture
def four_cpus(cluster: LocalCluster) -> None:
    only_nodes(cluster, 2, NodeShape(cpu="2", memory="8Gi"))


@pytest.fixture
def collector_watches_podgroups(ws: Workspace) -> None:
    """The garbage collector watches a kind only once its discovery (every 30 s) found it:
    the PodGroup CRD applied as the session starts is not watched at first, and a PodGroup
    deleted before then never takes its dependents with it. A probe PodGroup owning a
    ConfigMap is deleted until the ConfigMap goes with it."""
    configmaps = pykube.object_factory(ws.api, "v1", "ConfigMap")

    def probe(attempt: int) -> bool:
        name = f"gc-probe-{attempt}"
        ws.create(ws.podgroup(name, min_member=1))
        uid = ws.podgroup_obj(name)["metadata"]["uid"]
        ws.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
            "name": name, "namespace": ws.name, "ownerReferences": [{
                "apiVersion": "scheduling.gangsched.io/v1alpha1", "kind": "PodGroup",
                "name": name, "uid": uid}]}})
        ws.delete_podgroup(name)
        try:
            wait_for(lambda: configmaps.objects(ws.api, namespace=ws.name).get_or_none(
                name=name) is None, timeout=12, what="the probe's dependent to go")
        except AssertionError:
            return False
        return True

    assert any(probe(attempt) for attempt in range(6)), "the garbage collector never woke"


def budget(ws: Workspace, name: str) -> dict[str, Any] | None:
    found = pykube.object_factory(ws.api, "policy/v1", "PodDisruptionBudget").objects(
        ws.api, namespace=ws.name).get_or_none(name=name)
    return None if found is None else dict(found.obj)


def eviction_refused(ws: Workspace, pod: str) -> int:
    """The status the Eviction API answers for ``pod`` (a dry run: nothing is evicted)."""
    response = ws.api.post(
        url=f"pods/{pod}/eviction", namespace=ws.name, version="v1", params={"dryRun": "All"},
        json={"apiVersion": "policy/v1", "kind": "Eviction",
              "metadata": {"name": pod, "namespace": ws.name}})
    return int(response.status_code)


@pytest.mark.usefixtures("four_cpus", "collector_watches_podgroups")
def test_a_gang_bound_whole_gets_its_own_budget_which_goes_with_its_podgroup(
    ws: Workspace, gangsched: SchedulerProcess
) -> None:
    ws.create(ws.podgroup("train", min_member=3))
    ws.create(*(ws.pod(f"train-{i}", cpu="1", group="train") for i in range(3)))
    wait_for(lambda: len(bound(p for n, p in ws.pods().items() if n.startswith("train"))) == 3,
             timeout=30, what="the gang to bind whole")

    made = wait_for(lambda: budget(ws, "train"), timeout=30, what="the gang's budget")
    uid = ws.podgroup_obj("train")["metadata"]["uid"]
    assert made["spec"]["minAvailable"] == 3
    assert made["spec"]["selector"] == {"matchLabels": {GROUP_LABEL: "train"}}
    (owner,) = made["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("PodGroup", "train", uid)
    # The disruption controller counts it: one member alone may not be evicted.
    wait_for(lambda: (budget(ws, "train") or {}).get("status", {}).get("currentHealthy") == 3,
             timeout=30, what="the disruption controller to count the gang")
    assert eviction_refused(ws, "train-0") == 429

    ws.delete_podgroup("train")
    wait_for(lambda: budget(ws, "train") is None, timeout=30,
             what="the budget to be deleted with its PodGroup")


@pytest.mark.usefixtures("four_cpus")
def test_a_gang_short_of_minmember_bound_gets_no_budget(
    ws: Workspace, gangsched: SchedulerProcess
) -> None:
    """Three members of a gang of four exist: none is bound, and no budget is made."""
    ws.create(ws.podgroup("short", min_member=4))
    ws.create(*(ws.pod(f"short-{i}", cpu="1", group="short") for i in range(3)))
    ws.create(ws.podgroup("whole", min_member=1))
    ws.create(ws.pod("whole-0", cpu="1", group="whole"))
    wait_for(lambda: budget(ws, "whole"), timeout=30, what="the whole gang's budget")
    assert budget(ws, "short") is None
