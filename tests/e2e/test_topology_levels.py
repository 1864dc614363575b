"""Topology in levels: a gang in the tightest rack or block that holds it, or waiting whole.

KWOK nodes of 8 GPUs, two to a rack, two racks to a block; a ``Topology``
names block, rack and host. A gang preferring a rack lands in one rack while
one holds it and in one block otherwise (where the fullest nodes, which a
plain binpack takes first, lie in both blocks); a gang requiring a rack waits
whole rather than spread, though the cluster's free GPUs would hold it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from devcluster.controlplane import REPO, LocalCluster, NodeShape
from gangsched.core.reasons import LevelHeld
from tests.e2e.scenario import domains_of, named, take_gpus
from tests.e2e.scenario import fabric as topology_fabric
from tests.e2e.workspace import Workspace, bound, wait_for

BLOCK, RACK = "topology.example.com/block", "topology.example.com/rack"
EIGHT_GPUS = NodeShape(cpu="64", memory="256Gi", gpus=8)
RACKS = {"r0": "b0", "r1": "b0", "r2": "b1", "r3": "b1"}

pytestmark = pytest.mark.usefixtures("gangsched")


@pytest.fixture
def fabric(cluster: LocalCluster) -> Iterator[str]:
    """The racks and blocks, and a Topology of them; the Topology's name."""
    with topology_fabric(cluster, BLOCK, RACK, RACKS, EIGHT_GPUS, "fabric") as name:
        yield name


def gang(ws: Workspace, name: str, topology: dict[str, Any]) -> None:
    """A PodGroup of four 4-GPU workers (16 GPUs) with ``topology``, and its pods."""
    group = ws.podgroup(name, min_member=4)
    group["spec"]["topology"] = topology
    ws.create(group, *(ws.pod(f"{name}-{i}", gpus=4, group=name) for i in range(4)))





def rack_of(ws: Workspace, prefix: str) -> str:
    return sorted(domains_of(ws, prefix))[0]


def test_a_gang_preferring_a_rack_lands_in_one_rack_then_in_one_block(
    ws: Workspace, fabric: str,
) -> None:
    take_gpus(ws, 4, "r0-0", "r2-0")
    gang(ws, "first", {"name": fabric, "preferred": RACK})
    wait_for(lambda: len(bound(named(ws, "first-"))) == 4, timeout=30,
             what="the first gang to bind")
    assert len(domains_of(ws, "first-")) == 1, "one rack holds it: r1 or r3, not the fullest nodes"

    take_gpus(ws, 4, "r3-0" if domains_of(ws, "first-") == {"r1"} else "r1-0")
    # No rack has 16 GPUs free now; one block does, across its two racks.
    gang(ws, "second", {"name": fabric, "preferred": RACK})
    wait_for(lambda: len(bound(named(ws, "second-"))) == 4, timeout=30,
             what="the second gang to bind")
    assert len({RACKS[rack] for rack in domains_of(ws, "second-")}) == 1, domains_of(ws, "second-")
    assert len(domains_of(ws, "second-")) == 2
    for name, held in (("first", LevelHeld(RACK, rack_of(ws, "first-"), RACK)),
                       ("second", LevelHeld(BLOCK, RACKS[rack_of(ws, "second-")], RACK))):
        said = [e["message"] for e in ws.events(name) if e["reason"] == "Scheduled"]
        assert any(held.text() in message for message in said), (held, said)


def test_a_gang_requiring_a_rack_waits_whole_rather_than_spread(
    ws: Workspace, fabric: str,
) -> None:
    take_gpus(ws, 4, "r0-0", "r1-0", "r2-0", "r3-0")  # 12 GPUs free a rack, 48 in all
    gang(ws, "tight", {"name": fabric, "required": RACK})

    def refused() -> dict[str, Any] | None:
        status = ws.podgroup_obj("tight").get("status") or {}
        return next((c for c in status.get("conditions") or []
                     if c["type"] == "Scheduled" and c["status"] == "False"
                     and RACK in c["message"]), None)

    wait_for(refused, timeout=30, what="the required-rack gang to wait")
    time.sleep(1)
    assert bound(named(ws, "tight-")) == [], "no member binds while no rack holds the gang"

    ws.delete_pod("fill-r2-0")
    wait_for(lambda: len(bound(named(ws, "tight-"))) == 4, timeout=30,
             what="the gang to bind once rack r2 holds it")
    assert domains_of(ws, "tight-") == {"r2"}


def test_a_gang_patient_for_a_rack_waits_for_one_and_lands_in_it(
    ws: Workspace, fabric: str,
) -> None:
    # 12 GPUs free in each rack, 24 in each block: no rack holds the 16-GPU gang, a block does.
    take_gpus(ws, 4, "r0-0", "r1-0", "r2-0", "r3-0")
    gang(ws, "patient", {"name": fabric, "preferred": RACK, "preferredWaitSeconds": 600})

    def waiting() -> dict[str, Any] | None:
        status = ws.podgroup_obj("patient").get("status") or {}
        return next((c for c in status.get("conditions") or []
                     if c["type"] == "Scheduled" and c["status"] == "False"
                     and "before taking one block" in c["message"]), None)

    wait_for(waiting, timeout=30, what="the gang to wait for a rack")
    time.sleep(1)
    assert bound(named(ws, "patient-")) == [], "nothing binds while it waits for a rack"
    reasons = {c.get("reason") for p in named(ws, "patient-")
               for c in (p.get("status") or {}).get("conditions") or []
               if c["type"] == "PodScheduled"}
    assert reasons == {"GangWaiting"}, reasons

    ws.delete_pod("fill-r3-0")
    wait_for(lambda: len(bound(named(ws, "patient-"))) == 4, timeout=30,
             what="the gang to bind once rack r3 holds it")
    assert domains_of(ws, "patient-") == {"r3"}


def test_a_gang_naming_a_missing_topology_waits_saying_so(ws: Workspace, fabric: str) -> None:
    gang(ws, "lost", {"name": f"{fabric}-missing", "preferred": RACK})

    def refused() -> dict[str, Any] | None:
        status = ws.podgroup_obj("lost").get("status") or {}
        return next((c for c in status.get("conditions") or []
                     if c["type"] == "Scheduled" and c["status"] == "False"
                     and f"{fabric}-missing" in c["message"]), None)

    wait_for(refused, timeout=30, what="the gang to wait for its Topology")
    assert bound(named(ws, "lost-")) == []


def test_the_example_job_lands_in_one_rack(
    cluster: LocalCluster, ws: Workspace, fabric: str,
) -> None:
    example = (REPO / "examples" / "topology.yaml").read_text()
    cluster.kubectl("apply", "-f", "-",
                    input=example.replace("namespace: default", f"namespace: {ws.name}"))
    try:
        wait_for(lambda: len(bound(named(ws, "llm-"))) == 4, timeout=60,
                 what="the example Job's four workers to bind")
        assert len(domains_of(ws, "llm-")) == 1
    finally:
        cluster.kubectl("delete", "topologies.scheduling.gangsched.io", "fabric",
                        "--ignore-not-found")


@pytest.mark.parametrize(("body", "refusal"), [
    ({"kind": "Topology", "metadata": {"name": "flat"}, "spec": {"levels": []}},
     "spec.levels: Invalid value"),
    ({"kind": "Topology", "metadata": {"name": "twice"},
      "spec": {"levels": [{"nodeLabel": RACK}, {"nodeLabel": RACK}]}},
     "Duplicate value"),
    ({"kind": "PodGroup", "metadata": {"name": "aimless"},
      "spec": {"topology": {"name": "fabric"}}},
     "topology names a required level, a preferred level or sub-groups"),
    ({"kind": "PodGroup", "metadata": {"name": "impatient"},
      "spec": {"topology": {"name": "fabric", "required": RACK, "preferredWaitSeconds": 30}}},
     "preferredWaitSeconds needs a preferred level to wait for"),
])
def test_the_api_server_refuses_a_topology_request_that_says_nothing(
    cluster: LocalCluster, ws: Workspace, body: dict[str, Any], refusal: str,
) -> None:
    manifest = {"apiVersion": "scheduling.gangsched.io/v1alpha1", **body}
    result = cluster.kubectl("create", "-n", ws.name, "-f", "-", input=json.dumps(manifest),
                             check=False)
    assert result.returncode != 0 and refusal in result.stderr, result.stderr
