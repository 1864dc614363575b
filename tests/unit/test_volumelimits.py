"""CSI volume limits as NodeVolumeLimits decides them: which volumes of a pod count, how
many are attached on a node, and whole gangs placed under the limits.

The objects are written as a user would apply them and read as the CLI and the
scheduler read them (``tests.unit.test_decisions``), so parsing, the mirror,
the view and the cycle are all on the path.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gangsched.core.fit.intree import from_source
from gangsched.core.fit.volumes import Storage
from gangsched.core.kubeobjects.pods import pod_from_api
from gangsched.core.model.objects import (
    DEFAULT_QUEUE,
    AttachedVolume,
    Claim,
    ClaimRef,
    CsiNode,
    Gang,
    GangKey,
    Node,
    NodeName,
    Pod,
    PodKey,
    Policy,
    QueueSpec,
    StorageClassSpec,
    Volume,
    VolumeAttachmentSpec,
)
from gangsched.core.model.resources import VOLUME_LIMIT_PREFIX, Resources
from gangsched.core.placement.capacity import Placement
from gangsched.core.placement.snapshot import Snapshot
from gangsched.core.placement.volumelimits import limit_volumes, limited_snapshot, pod_volumes
from gangsched.core.reasons import DoesNotFit, VolumeLimitBound
from gangsched.core.stages.cycle import CycleInput, run_cycle
from tests.unit.test_cycle import node as plain_node
from tests.unit.test_decisions import assert_same, both, reasons
from tests.unit.test_simulate import nodes, pod, podgroup

EBS = "ebs.csi.aws.com"
LIMIT = VOLUME_LIMIT_PREFIX + EBS


def csi_node(node: str, *drivers: tuple[str, int | None]) -> dict[str, Any]:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": node},
            "spec": {"drivers": [
                {"name": name, "nodeID": node,
                 **({"allocatable": {"count": count}} if count is not None else {})}
                for name, count in drivers]}}


def volume(name: str, driver: str = EBS) -> list[dict[str, Any]]:
    """A CSI volume bound to the claim of the same name in ``default``."""
    return [
        {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
         "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                  "csi": {"driver": driver, "volumeHandle": f"vol-{name}"},
                  "claimRef": {"namespace": "default", "name": name}}},
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
         "metadata": {"name": name, "namespace": "default",
                      "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
         "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "",
                  "volumeName": name, "resources": {"requests": {"storage": "1Gi"}}}},
    ]


def attachment(name: str, node: str, pv: str, attacher: str = EBS) -> dict[str, Any]:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment",
            "metadata": {"name": name},
            "spec": {"attacher": attacher, "nodeName": node,
                     "source": {"persistentVolumeName": pv}}}


def using(body: dict[str, Any], *claims: str) -> dict[str, Any]:
    body["spec"]["volumes"] = [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}}
                               for i, c in enumerate(claims)]
    return body


def worker(index: int, *, group: str = "train") -> dict[str, Any]:
    """Worker ``index`` of the gang, with two volumes of its own."""
    return using(pod(f"{group}-{index}", group, cpu="100m", run_for=None),
                 f"{group}-{index}-a", f"{group}-{index}-b")


def gang_of_four(node_count: int, limit: int = 3) -> list[dict[str, Any]]:
    return [
        *nodes(node_count, "8"),
        *(csi_node(f"node-{i}", (EBS, limit)) for i in range(node_count)),
        podgroup("train", 4), *(worker(i) for i in range(4)),
        *(doc for i in range(4) for side in "ab" for doc in volume(f"train-{i}-{side}")),
    ]


def per_node(placement: Placement) -> dict[str, int]:
    counts: dict[str, int] = {}
    for _, node in placement.assignments:
        counts[node] = counts.get(node, 0) + 1
    return counts


def test_a_gang_whose_pods_need_two_volumes_each_spreads_over_nodes_limited_to_three(
    tmp_path: Path,
) -> None:
    cli, scheduler = both(tmp_path, gang_of_four(4))
    assert_same(cli.result, scheduler)
    (placement,) = cli.result.placements
    # Two pods on one node would attach four volumes where three may be.
    assert per_node(placement) == {f"node-{i}": 1 for i in range(4)}


def test_the_gang_waits_whole_naming_the_limit_when_the_nodes_cannot_hold_its_volumes(
    tmp_path: Path,
) -> None:
    cli, scheduler = both(tmp_path, gang_of_four(3))
    assert_same(cli.result, scheduler)
    assert not cli.result.placements
    reason = reasons(cli.result)[GangKey("default/train")]
    assert isinstance(reason, DoesNotFit)
    (shape,) = reason.shapes
    assert shape.room == {1: 3} and shape.requests.get(LIMIT) == 2
    assert shape.volume_limits == (VolumeLimitBound(EBS, nodes=3, node=NodeName("node-0"),
                                                    limit=3, attached=0, wanted=2),)


def test_volumes_attached_by_pods_and_attachments_count_once_each(tmp_path: Path) -> None:
    documents = [
        *nodes(2, "8"), csi_node("node-0", (EBS, 3)), csi_node("node-1", (EBS, 3)),
        *volume("old-a"), *volume("old-b"), *volume("new-a"), *volume("new-b"),
        # node-0 holds old-a through a pod and an attachment alike, and old-b by attachment:
        # two volumes, so a pod with two more does not fit there.
        using(pod("running", None, cpu="100m", node="node-0", run_for=None), "old-a"),
        attachment("va-old-a", "node-0", "old-a"), attachment("va-old-b", "node-0", "old-b"),
        using(pod("new", None, cpu="100m", run_for=None), "new-a", "new-b"),
    ]
    cli, scheduler = both(tmp_path, documents)
    assert_same(cli.result, scheduler)
    (placement,) = cli.result.placements
    assert placement.assignments[0][1] == "node-1"


def test_the_reason_names_the_nearest_node_and_its_limit(tmp_path: Path) -> None:
    documents = [
        *nodes(1, "8"), csi_node("node-0", (EBS, 2)), *volume("old-a"),
        *volume("new-a"), *volume("new-b"),
        using(pod("running", None, cpu="100m", node="node-0", run_for=None), "old-a"),
        using(pod("new", None, cpu="100m", run_for=None), "new-a", "new-b"),
    ]
    cli, _ = both(tmp_path, documents)
    reason = reasons(cli.result)[GangKey("default/pod:new")]
    assert isinstance(reason, DoesNotFit)
    (shape,) = reason.shapes
    (bound,) = shape.volume_limits
    assert bound == VolumeLimitBound(EBS, nodes=1, node=NodeName("node-0"), limit=2,
                                     attached=1, wanted=2)
    assert bound.over == 1


def test_nodes_without_a_limit_for_the_driver_take_any_number(tmp_path: Path) -> None:
    documents = [
        *nodes(2, "8"), csi_node("node-0", (EBS, 1)), csi_node("node-1", (EBS, None)),
        podgroup("train", 4), *(worker(i) for i in range(4)),
        *(doc for i in range(4) for side in "ab" for doc in volume(f"train-{i}-{side}")),
    ]
    cli, scheduler = both(tmp_path, documents)
    assert_same(cli.result, scheduler)
    (placement,) = cli.result.placements
    assert per_node(placement) == {"node-1": 4}


def test_a_driver_that_must_be_registered_keeps_pods_off_nodes_without_it(
    tmp_path: Path,
) -> None:
    driver = {"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver",
              "metadata": {"name": EBS}, "spec": {"preventPodSchedulingIfMissing": True}}
    documents = [
        *nodes(3, "8"), driver, csi_node("node-0", ("other.csi.io", None)),
        csi_node("node-2", (EBS, None)), *volume("data"),
        using(pod("user", None, cpu="100m", run_for=None), "data"),
    ]
    cli, scheduler = both(tmp_path, documents)
    assert_same(cli.result, scheduler)
    (placement,) = cli.result.placements
    assert placement.assignments[0][1] == "node-2"
    without = [d for d in documents if d["metadata"]["name"] != "node-2"]
    cli, _ = both(tmp_path, without)
    reason = reasons(cli.result)[GangKey("default/pod:user")]
    assert isinstance(reason, DoesNotFit)
    assert reason.shapes[0].excluded == {f"missing CSI driver {EBS}": 2}


def test_a_cycle_without_limited_drivers_leaves_the_nodes_as_they_are(tmp_path: Path) -> None:
    documents = [*nodes(1, "8"), *volume("data"),
                 using(pod("user", None, cpu="100m", run_for=None), "data")]
    cli, _ = both(tmp_path, documents)
    assert cli.input.snapshot.nodes[NodeName("node-0")].node.allocatable.get(LIMIT) == 0
    assert cli.result.placements


STORAGE = Storage(
    claims={"ns/bound": Claim("ns/bound", volume_name="pv", bound=True),
            "ns/unbound": Claim("ns/unbound", storage_class="gp2"),
            "ns/plain": Claim("ns/plain", storage_class="nfs")},
    volumes={"pv": Volume("pv", attached=AttachedVolume(EBS, "vol-1"), csi=True)},
    classes={"gp2": StorageClassSpec("gp2", "kubernetes.io/aws-ebs", True),
             "nfs": StorageClassSpec("nfs", "kubernetes.io/azure-file", True)},
)


def test_a_pods_volumes_are_counted_by_driver_and_handle() -> None:
    body = using(pod("p", None, run_for=None), "bound", "unbound", "plain", "missing")
    body["metadata"]["namespace"] = "ns"
    body["spec"]["volumes"].append(
        {"name": "inline", "awsElasticBlockStore": {"volumeID": "aws://us-east-1a/vol-1"}})
    found = pod_volumes(pod_from_api(body), STORAGE)
    # The inline disk is the bound volume's; the unbound claim counts under the driver its
    # in-tree class migrated to; Azure File and a missing claim count under none.
    assert sorted((v.driver, v.migrated) for v in found.values()) == [(EBS, False), (EBS, True)]


@pytest.mark.parametrize(("source", "zones", "handle"), [
    ({"awsElasticBlockStore": {"volumeID": "vol-9"}}, (), "vol-9"),
    ({"awsElasticBlockStore": {"volumeID": "aws:///vol-9"}}, (), "vol-9"),
    ({"awsElasticBlockStore": {"volumeID": "aws://a/b/c"}}, (), None),
    ({"gcePersistentDisk": {"pdName": "d"}}, (), "projects/UNSPECIFIED/zones/UNSPECIFIED/disks/d"),
    ({"gcePersistentDisk": {"pdName": "d"}}, ("us-central1-a", "us-central1-b"),
     "projects/UNSPECIFIED/regions/us-central1/disks/d"),
    ({"gcePersistentDisk": {"pdName": "d"}}, ("us-central1-a", "europe-west1-b"), None),
    ({"hostPath": {"path": "/x"}}, (), None),
])
def test_in_tree_sources_are_translated_as_csi_translation_lib_does(
    source: dict[str, Any], zones: tuple[str, ...], handle: str | None,
) -> None:
    found = from_source(source, zones)
    assert (found.handle if found is not None else None) == handle


@st.composite
def limited_clusters(draw: st.DrawFn) -> tuple[list[Node], list[Gang], Storage]:
    """Nodes whose CSINodes limit EBS (or not), some volumes already attached there, and
    gangs whose pods each mount a few volumes of their own."""
    nodes = [plain_node(f"n{i}", 8) for i in range(draw(st.integers(1, 4)))]
    csi_nodes = {}
    attachments = {}
    volumes: dict[str, Volume] = {}
    claims: dict[str, Claim] = {}

    def new_volume(name: str) -> str:
        volumes[name] = Volume(name, attached=AttachedVolume(EBS, f"vol-{name}"), csi=True)
        claims[f"ns/{name}"] = Claim(f"ns/{name}", volume_name=name, bound=True)
        return name

    for n in nodes:
        limit = draw(st.one_of(st.none(), st.integers(0, 4)))
        if limit is not None:
            csi_nodes[n.name] = CsiNode(n.name, (EBS,), ((EBS, limit),))
        for i in range(draw(st.integers(0, 2))):
            name = new_volume(f"{n.name}-held-{i}")
            attachments[name] = VolumeAttachmentSpec(name, n.name, EBS, name)
    gangs = []
    for g in range(draw(st.integers(1, 3))):
        pods = []
        for p in range(draw(st.integers(1, 4))):
            refs = tuple(ClaimRef(new_volume(f"g{g}-p{p}-{v}"))
                         for v in range(draw(st.integers(0, 3))))
            pods.append(Pod(PodKey(f"ns/g{g}-{p}"), Resources.of({"cpu": 100, "pods": 1}),
                            gang=GangKey(f"ns/g{g}"), claims=refs))
        gangs.append(Gang(GangKey(f"ns/g{g}"), min_member=len(pods), pending=tuple(pods)))
    return nodes, gangs, Storage(claims, volumes, csi_nodes=csi_nodes, attachments=attachments)


@settings(max_examples=150, deadline=None)
@given(limited_clusters())
def test_no_node_is_given_more_volumes_than_its_limit_and_gangs_go_whole(
    instance: tuple[list[Node], list[Gang], Storage],
) -> None:
    nodes, gangs, storage = instance
    limited, limits = limit_volumes(gangs, storage)
    snapshot = limited_snapshot(Snapshot.build(nodes, ()), limits, storage)
    result = run_cycle(CycleInput(
        snapshot=snapshot, gangs=limited, bound_requests={},
        queues={DEFAULT_QUEUE: QueueSpec(DEFAULT_QUEUE)}, admitted=frozenset(),
        waiting_since={}, now=1000.0, policy=Policy.BINPACK))
    volumes_of = {pod.key: len(pod.claims) for gang in gangs for pod in gang.pending}
    size = {gang.key: len(gang.pending) for gang in gangs}
    held = {n.name: sum(a.node == n.name for a in storage.attachments.values()) for n in nodes}
    given = dict.fromkeys(held, 0)
    for placement in result.placements:
        assert len(placement.assignments) == size[placement.gang]
        for member, name in placement.assignments:
            given[name] += volumes_of[member]
    for name, count in given.items():
        csi_node = storage.csi_nodes.get(name)
        if count and csi_node is not None:
            assert held[name] + count <= dict(csi_node.limits)[EBS], (name, held, given)
