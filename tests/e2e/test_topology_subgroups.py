"""Sub-groups: each in its own NVLink domain, all inside one block, or the gang waits whole.

KWOK nodes of 4 GPUs, two to an NVLink domain, three NVLink domains to a
block; a ``Topology`` names block, NVLink domain and host. A gang of two
tensor-parallel sub-groups of 8 GPUs waits whole while no block has two NVLink
domains with 8 GPUs free (though either block has room for the whole gang),
``explain`` naming the closest blocks and NVLink domains with their free GPUs,
and once a second one in a block frees up, each sub-group lands in its own.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from devcluster.controlplane import REPO, LocalCluster, NodeShape
from gangsched.core.kubeobjects.podgroups import SUB_GROUP_LABEL
from gangsched.core.reasons import LevelHeld, SubGroupHeld
from tests.e2e.scenario import domains_of, named, take_gpus
from tests.e2e.scenario import fabric as topology_fabric
from tests.e2e.test_explain_status import as_json, gangsched_cli
from tests.e2e.workspace import Workspace, bound, wait_for

BLOCK, NVLINK = "topology.example.com/block", "topology.example.com/nvlink"
FOUR_GPUS = NodeShape(cpu="32", memory="128Gi", gpus=4)
DOMAINS = {"nv0": "b0", "nv1": "b0", "nv2": "b0", "nv3": "b1", "nv4": "b1", "nv5": "b1"}

pytestmark = pytest.mark.usefixtures("gangsched")


@pytest.fixture
def fabric(cluster: LocalCluster) -> Iterator[str]:
    """The NVLink domains and blocks, and a Topology of them; the Topology's name."""
    with topology_fabric(cluster, BLOCK, NVLINK, DOMAINS, FOUR_GPUS, "nvfabric") as name:
        yield name


def tensor_parallel(ws: Workspace, name: str, topology: str, *, labels: tuple[str, ...] = (
        "tp0",) * 4 + ("tp1",) * 4) -> None:
    """A PodGroup of two sub-groups of four 2-GPU workers, each in one NVLink domain, all in
    one block, and its pods, labelled in turn with ``labels``."""
    group = ws.podgroup(name, min_member=8)
    group["spec"]["topology"] = {"name": topology, "required": BLOCK, "subGroups": [
        {"name": sub, "minMember": 4, "required": NVLINK} for sub in ("tp0", "tp1")]}
    ws.create(group, *(ws.pod(f"{name}-{i}", gpus=2, group=name,
                              labels={SUB_GROUP_LABEL: label})
                       for i, label in enumerate(labels)))





def waiting_says(ws: Workspace, group: str, text: str) -> dict[str, Any] | None:
    status = ws.podgroup_obj(group).get("status") or {}
    return next((c for c in status.get("conditions") or []
                 if c["type"] == "Scheduled" and c["status"] == "False"
                 and text in c["message"]), None)


def test_sub_groups_each_land_in_their_own_nvlink_domain_inside_one_block(
    cluster: LocalCluster, ws: Workspace, fabric: str,
) -> None:
    # 6 GPUs free in nv0 to nv4, 8 in nv5: 18 free in block b0 and 20 in b1, room for the
    # 16-GPU gang in either, but one NVLink domain only that holds a sub-group of 8.
    take_gpus(ws, 2, "nv0-0", "nv1-0", "nv2-0", "nv3-0", "nv4-0")
    tensor_parallel(ws, "train", fabric)
    wait_for(lambda: waiting_says(ws, "train", "sub-group tp"), timeout=30,
             what="the gang to wait for a second NVLink domain")
    time.sleep(1)
    assert bound(named(ws, "train-")) == [], "no member binds while one sub-group fits"
    answer = as_json(cluster, "explain", "podgroup/train", "-n", ws.name, expect=3)
    closest = {(d["nodeLabel"], d["value"]): (d["free"], d["total"], d["asked"])
               for d in answer["closestDomains"]}
    assert closest[(BLOCK, "b0")] == ("18", "24", "16")
    assert closest[(BLOCK, "b1")] == ("20", "24", "16")
    assert closest[(NVLINK, "nv0")] == ("6", "8", "8")
    text = gangsched_cli(cluster, "explain", "podgroup/train", "-n", ws.name, expect=3)
    assert "closest domains:" in text and "nvlink nv0: 6 of 8 nvidia.com/gpu free, 8 asked" in text

    ws.delete_pod("fill-nv4-0")  # nv4 and nv5, both in block b1, have 8 GPUs free each
    wait_for(lambda: len(bound(named(ws, "train-"))) == 8, timeout=30,
             what="the gang to bind once block b1 holds both sub-groups")
    tp0, tp1 = domains_of(ws, "train-0"), domains_of(ws, "train-4")
    for i in range(4):
        assert domains_of(ws, f"train-{i}") == tp0 and domains_of(ws, f"train-{i + 4}") == tp1
    assert {*tp0, *tp1} == {"nv4", "nv5"}
    held = LevelHeld(BLOCK, "b1", "", (SubGroupHeld("tp0", NVLINK, tp0.pop()),
                                        SubGroupHeld("tp1", NVLINK, tp1.pop())))
    said = [e["message"] for e in ws.events("train") if e["reason"] == "Scheduled"]
    assert any(held.text() in message for message in said), (held.text(), said)


def test_a_pod_naming_an_unknown_sub_group_waits_with_its_gang_saying_so(
    ws: Workspace, fabric: str,
) -> None:
    tensor_parallel(ws, "stray", fabric, labels=("tp0",) * 4 + ("tp1",) * 3 + ("tp9",))
    wait_for(lambda: waiting_says(ws, "stray", "sub-group 'tp9'"), timeout=30,
             what="the gang to say which pod names an unknown sub-group")
    wait_for(lambda: any(e["reason"] == "FailedScheduling" and "tp9" in e["message"]
                         for e in ws.events("stray-7")), timeout=30,
             what="an Event on the pod")
    assert bound(named(ws, "stray-")) == []


def test_the_example_job_lands_each_group_in_its_own_nvlink_domain(
    cluster: LocalCluster, ws: Workspace, fabric: str,
) -> None:
    example = (REPO / "examples" / "subgroups.yaml").read_text()
    cluster.kubectl("apply", "-f", "-",
                    input=example.replace("namespace: default", f"namespace: {ws.name}"))
    try:
        wait_for(lambda: len(bound(named(ws, "tp"))) == 8, timeout=60,
                 what="the example's eight workers to bind")
        tp0, tp1 = domains_of(ws, "tp0-"), domains_of(ws, "tp1-")
        assert len(tp0) == 1 and len(tp1) == 1 and tp0 != tp1, (tp0, tp1)
        assert len({DOMAINS[domain] for domain in tp0 | tp1}) == 1
    finally:
        cluster.kubectl("delete", "topologies.scheduling.gangsched.io", "nvfabric",
                        "--ignore-not-found")
