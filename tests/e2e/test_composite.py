"""Native CompositePodGroups (Kubernetes 1.37, ``scheduling.k8s.io/v1alpha3``): two levels.

A CompositePodGroup requiring a block holds two child PodGroups, each
requiring a rack: four pods of 8 GPUs, two to a child. KWOK nodes of 8 GPUs,
two to a rack, two racks to a block. gangsched places each child in one rack
and both in one block, whole; while no block has two racks free it binds
nothing of the gang, though either child alone would fit, and once a block
frees up the gang lands there whole. The scheduler runs as the chart deploys
it, so its ClusterRole is what lets it read the composites.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from functools import partial
from typing import Any

import pytest

from devcluster.controlplane import COMPOSITE_API, LocalCluster, NodeShape
from gangsched.core.reasons import LevelHeld, SubGroupHeld
from tests.e2e.scenario import domains_of, named, take_gpus
from tests.e2e.scenario import fabric as topology_fabric
from tests.e2e.test_explain_status import as_json
from tests.e2e.workspace import Workspace, bound, wait_for

BLOCK, RACK = "topology.example.com/block", "topology.example.com/rack"
EIGHT_GPUS = NodeShape(cpu="32", memory="128Gi", gpus=8)
RACKS = {"r1": "b1", "r2": "b1", "r3": "b2", "r4": "b2"}
WORKLOAD = {"workloadName": "train", "templateName": "train"}

pytestmark = pytest.mark.usefixtures("gangsched")


@pytest.fixture
def blocks(cluster: LocalCluster) -> Iterator[None]:
    """Two blocks of two racks of two 8-GPU nodes, removed afterwards."""
    with topology_fabric(cluster, BLOCK, RACK, RACKS, EIGHT_GPUS, "racks"):
        yield


def composite_job(ws: Workspace, name: str) -> None:
    """A CompositePodGroup requiring a block, its two child PodGroups (``{name}-a`` and
    ``{name}-b``) each requiring a rack, and two 8-GPU pods for each."""
    ws.create({
        "apiVersion": COMPOSITE_API, "kind": "CompositePodGroup",
        "metadata": {"name": name, "namespace": ws.name},
        "spec": {"workloadRef": WORKLOAD,
                 "schedulingPolicy": {"gang": {"minGroupCount": 2}},
                 "schedulingConstraints": {"topology": [{"key": BLOCK}]}},
    })
    for child in ("a", "b"):
        group = ws.native_podgroup(f"{name}-{child}", min_count=2, topology=(RACK,))
        group["spec"] |= {"parentCompositePodGroupName": name, "workloadRef": WORKLOAD}
        ws.create(group, *(ws.pod(f"{name}-{child}-{i}", gpus=8, group=f"{name}-{child}",
                                  marker="native") for i in range(2)))


def initially_scheduled(ws: Workspace, name: str) -> Mapping[str, Any] | None:
    status = ws.podgroup_obj(name, "native").get("status") or {}
    return next((c for c in status.get("conditions") or []
                 if c["type"] == "PodGroupInitiallyScheduled"), None)


@pytest.mark.usefixtures("blocks")
def test_each_child_lands_in_one_rack_and_both_in_one_block(ws: Workspace) -> None:
    composite_job(ws, "train")
    wait_for(lambda: len(bound(named(ws, "train-"))) == 4, timeout=30,
             what="the four workers of the composite to bind")
    a, b = domains_of(ws, "train-a-"), domains_of(ws, "train-b-")
    assert len(a) == 1 and len(b) == 1 and a != b, (a, b)
    assert len({RACKS[rack] for rack in a | b}) == 1, (a, b)
    # The gang's Scheduled Event goes on the CompositePodGroup, naming where each child went.
    (rack_a,), (rack_b,) = a, b
    held = LevelHeld(BLOCK, RACKS[rack_a], "", (SubGroupHeld("train-a", RACK, rack_a),
                                                SubGroupHeld("train-b", RACK, rack_b)))
    said = wait_for(lambda: [e["message"] for e in ws.events("train")
                             if e["reason"] == "Scheduled"
                             and e["involvedObject"]["kind"] == "CompositePodGroup"],
                    timeout=20, what="the Scheduled Event on the CompositePodGroup")
    assert any(held.text() in message for message in said), (held.text(), said)
    for child in ("train-a", "train-b"):
        condition = wait_for(partial(initially_scheduled, ws, child), timeout=20,
                             what=f"{child} initially scheduled")
        assert (condition["status"], condition["reason"]) == ("True", "Scheduled")


@pytest.mark.usefixtures("blocks")
def test_a_block_with_room_for_one_child_binds_nothing_until_one_holds_both(
    cluster: LocalCluster, ws: Workspace,
) -> None:
    # One rack of each block half taken: 24 GPUs free in each block, room for one child
    # in a rack of its own but not for the 32-GPU gang in one block.
    take_gpus(ws, 8, "r2-0", "r4-0")
    composite_job(ws, "held")

    def refused() -> Mapping[str, Any] | None:
        condition = initially_scheduled(ws, "held-a")
        # While the pods are still being created the gang first waits for them.
        return condition if condition and condition["status"] == "False" and (
            BLOCK in condition["message"]) else None

    condition = wait_for(refused, timeout=30,
                         what="the children to say no block holds the gang")
    assert condition["reason"] == "Unschedulable"
    time.sleep(1)
    assert bound(named(ws, "held-")) == [], "no child binds while no block holds both"
    answer = as_json(cluster, "explain", "podgroup/held-a", "-n", ws.name, expect=3)
    closest = {(d["nodeLabel"], d["value"]): (d["free"], d["asked"])
               for d in answer["closestDomains"]}
    assert closest[(BLOCK, "b1")] == closest[(BLOCK, "b2")] == ("24", "32"), closest

    ws.delete_pod("fill-r2-0")  # block b1 now has both racks free
    wait_for(lambda: len(bound(named(ws, "held-"))) == 4, timeout=30,
             what="the gang to bind whole once block b1 holds it")
    assert domains_of(ws, "held-") == {"r1", "r2"}


def test_a_child_naming_a_missing_composite_waits_saying_so_until_it_exists(
    ws: Workspace, blocks: None,
) -> None:
    group = ws.native_podgroup("orphan", min_count=1)
    group["spec"] |= {"parentCompositePodGroupName": "nowhere", "workloadRef": WORKLOAD}
    ws.create(group, ws.pod("orphan-0", gpus=8, group="orphan", marker="native"))

    def said() -> Mapping[str, Any] | None:
        condition = initially_scheduled(ws, "orphan")
        return condition if condition and "nowhere" in condition["message"] else None

    condition = wait_for(said, timeout=30, what="the child to name its missing composite")
    assert (condition["status"], condition["reason"]) == ("False", "SchedulerError")
    wait_for(lambda: any(e["reason"] == "FailedScheduling" and "nowhere" in e["message"]
                         for e in ws.events("orphan-0")), timeout=30,
             what="an Event on the pod naming the missing composite")
    assert bound(named(ws, "orphan-")) == []

    ws.create({"apiVersion": COMPOSITE_API, "kind": "CompositePodGroup",
               "metadata": {"name": "nowhere", "namespace": ws.name},
               "spec": {"workloadRef": WORKLOAD,
                        "schedulingPolicy": {"gang": {"minGroupCount": 1}}}})
    wait_for(lambda: len(bound(named(ws, "orphan-"))) == 1, timeout=30,
             what="the child to bind once its composite exists")
