"""Inline disks, as kube-scheduler's VolumeRestrictions decides them: a disk a pod on the
node mounts keeps another pod mounting it off that node unless both only read it (EBS:
always), the gang's own members included.

Pods are read from API objects, as the scheduler reads them.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from gangsched.core.model.objects import Gang, GangKey, Node, NodeName, Pod, PodKey
from gangsched.core.model.resources import Resources
from gangsched.core.placement.capacity import Capacity, Placement, Snapshot, Unplaceable
from gangsched.core.reasons import PodRulesUnmet, RuleBlock
from tests.unit.clusters import pod_read_from_api

HOST = "kubernetes.io/hostname"


def node(name: str) -> Node:
    return Node(NodeName(name), Resources.of({"cpu": 8000, "pods": 110}),
                labels=((HOST, name),))


def gce(disk: str, read_only: bool = False) -> dict[str, Any]:
    return {"gcePersistentDisk": {"pdName": disk, "fsType": "ext4", "readOnly": read_only}}


def ebs(volume: str) -> dict[str, Any]:
    return {"awsElasticBlockStore": {"volumeID": volume}}


def iscsi(iqn: str, read_only: bool = False) -> dict[str, Any]:
    return {"iscsi": {"targetPortal": "10.0.0.1:3260", "iqn": iqn, "lun": 0,
                      "readOnly": read_only}}


def rbd(monitors: list[str], image: str = "img", read_only: bool = False) -> dict[str, Any]:
    return {"rbd": {"monitors": monitors, "pool": "rbd", "image": image, "readOnly": read_only}}


def api_pod(name: str, *sources: dict[str, Any], on: str | None = None,
            namespace: str = "ns") -> Pod:
    volumes = [{"name": f"v{i}", **source} for i, source in enumerate(sources)]
    return pod_read_from_api(name, {"volumes": volumes}, on, namespace)


def gang(job: str, *pods: Pod) -> Gang:
    key = GangKey(f"ns/{job}")
    return Gang(key, min_member=len(pods), pending=tuple(replace(p, gang=key) for p in pods))


def fits_on_n1(asking: Pod, *residents: Pod) -> bool:
    decision = Capacity(Snapshot.build([node("n1")], residents)).place(gang("job", asking))
    return isinstance(decision, Placement)


@pytest.mark.parametrize(("held", "asked", "fits"), [
    (gce("d1"), gce("d1"), False),
    (gce("d1"), gce("d1", read_only=True), False),
    (gce("d1", read_only=True), gce("d1"), False),
    (gce("d1", read_only=True), gce("d1", read_only=True), True),
    (gce("d1"), gce("d2"), True),
    (ebs("vol-1"), ebs("vol-1"), False),
    (ebs("vol-1"), ebs("vol-2"), True),
    (iscsi("iqn.a"), iscsi("iqn.a", read_only=True), False),
    (iscsi("iqn.a", read_only=True), iscsi("iqn.a", read_only=True), True),
    (rbd(["m1", "m2"]), rbd(["m2", "m3"]), False),
    (rbd(["m1"]), rbd(["m2"]), True),
    (rbd(["m1"]), rbd(["m1"], image="other"), True),
    (rbd(["m1"], read_only=True), rbd(["m1"], read_only=True), True),
    (gce("d1"), ebs("d1"), True),
])
def test_a_disk_conflicts_on_a_node_as_kube_scheduler_decides(
    held: dict[str, Any], asked: dict[str, Any], fits: bool
) -> None:
    resident = api_pod("holder", held, on="n1", namespace="other")
    assert fits_on_n1(api_pod("w", asked), resident) is fits


def test_two_members_mounting_one_disk_land_on_two_nodes_or_wait_whole_naming_the_disk(
) -> None:
    members = gang("job", api_pod("w-0", gce("data")), api_pod("w-1", gce("data")))
    spread = Capacity(Snapshot.build([node("n1"), node("n2")], ())).place(members)
    assert isinstance(spread, Placement)
    assert sorted(n for _, n in spread.assignments) == ["n1", "n2"]
    waiting = Capacity(Snapshot.build([node("n1")], ())).place(members)
    assert isinstance(waiting, Unplaceable) and isinstance(waiting.reason, PodRulesUnmet)
    assert waiting.reason.shown == (RuleBlock(NodeName("n1"), "disk", "gce-pd/data", "n1",
                                              other=PodKey("ns/w-0"), same_gang=True),)


def test_a_terminating_pod_still_holds_its_disk() -> None:
    leaving = replace(api_pod("old", ebs("vol-1"), on="n1"), terminating=True)
    assert not fits_on_n1(api_pod("w", ebs("vol-1")), leaving)


def test_a_pod_without_inline_disks_is_not_touched_by_them() -> None:
    plain = api_pod("w")
    assert not plain.anti_affinity and not plain.has_pod_rules
    assert fits_on_n1(plain, api_pod("holder", gce("d1"), on="n1"))
