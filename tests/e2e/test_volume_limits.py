"""CSI volume limits on the real control plane: a gang never takes a node past the number
of volumes its CSINode says a driver may attach there.

KWOK nodes have no kubelet to register drivers, so each test writes the CSINode a
node's EBS driver would publish (``allocatable.count``), and PersistentVolumes
with a CSI source that the persistent-volume controller binds to the claims.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pykube
import pytest

from devcluster.controlplane import LocalCluster, NodeShape
from tests.e2e.conftest import SchedulerProcess
from tests.e2e.scenario import PREFIX, only_nodes
from tests.e2e.test_explain_status import run_cli
from tests.e2e.test_volumes import claim, claims, members, saying
from tests.e2e.workspace import Workspace, bound, node_of, wait_for

DRIVER = "ebs.csi.aws.com"
LIMIT = 3
CSINode = "CSINode"


def csi_node(cluster: LocalCluster, node: str, limit: int) -> None:
    """The CSINode the node's driver would register, with its volume limit."""
    kind = pykube.object_factory(cluster.client, "storage.k8s.io/v1", CSINode)
    body = {"apiVersion": "storage.k8s.io/v1", "kind": CSINode, "metadata": {"name": node},
            "spec": {"drivers": [{"name": DRIVER, "nodeID": node,
                                  "allocatable": {"count": limit}}]}}
    existing = kind.objects(cluster.client).get_or_none(name=node)
    if existing is not None:
        existing.delete()
        wait_for(lambda: kind.objects(cluster.client).get_or_none(name=node) is None,
                 timeout=10, what="the old CSINode to go")
    kind(cluster.client, body).create()


@pytest.fixture
def csi_nodes(cluster: LocalCluster) -> Iterator[list[str]]:
    names = only_nodes(cluster, 3, NodeShape(cpu="4", memory="8Gi"))
    for name in names:
        csi_node(cluster, name, LIMIT)
    yield names
    kind = pykube.object_factory(cluster.client, "storage.k8s.io/v1", CSINode)
    for found in kind.objects(cluster.client):
        found.delete()


def volumes(cluster: LocalCluster, ws: Workspace, names: list[str]) -> Iterator[str]:
    """CSI volumes, each pre-bound to the claim of its name; the claims made too."""
    for name in names:
        pv = f"{ws.name}-{name}"
        pykube.PersistentVolume(cluster.client, {
            "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": pv},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                     "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "",
                     "csi": {"driver": DRIVER, "volumeHandle": f"vol-{pv}"},
                     "claimRef": {"namespace": ws.name, "name": name}},
        }).create()
        ws.create(claim(ws, name, storage_class="", volume=pv))
        yield pv


def with_claims(pod: dict[str, Any], *names: str) -> dict[str, Any]:
    pod["spec"]["volumes"] = [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": name}}
                              for i, name in enumerate(names)]
    return pod


def test_a_gang_needing_more_volumes_than_the_nodes_attach_waits_whole_then_spreads(
    ws: Workspace, gangsched: SchedulerProcess, cluster: LocalCluster, csi_nodes: list[str]
) -> None:
    wanted = [f"w{i}-{side}" for i in range(4) for side in "ab"]
    made = list(volumes(cluster, ws, wanted))
    try:
        wait_for(lambda: all(c.get("status", {}).get("phase") == "Bound"
                             for c in claims(ws).values()) and len(claims(ws)) == 8,
                 timeout=60, what="the persistent-volume controller to bind the claims")
        ws.create(ws.podgroup("train", min_member=4))
        # Four workers of two volumes each; each node attaches three: one worker a node.
        ws.create(*(with_claims(ws.pod(f"train-{i}", cpu="100m", group="train"),
                                f"w{i}-a", f"w{i}-b") for i in range(4)))
        words = f"the volume limit of CSI driver {DRIVER} holds down the room of 3 nodes"
        condition = wait_for(lambda: saying(ws, "train-0", words), timeout=30,
                             what="the gang to wait naming the volume limit")
        assert "3 nodes can take 1 each" in condition["message"], condition
        assert bound(members(ws, "train-")) == []
        why = run_cli("explain", "podgroup/train", "-n", ws.name, kubeconfig=cluster.kubeconfig,
                      expect=3)
        assert words in " ".join(why.stdout.split()), why.stdout

        # A fourth node whose driver attaches three volumes too: the gang binds, spread.
        # Its CSINode comes first: a node without one has no limit at all.
        fourth = f"{PREFIX}-3"
        csi_node(cluster, fourth, LIMIT)
        assert cluster.ensure_nodes(4, NodeShape(cpu="4", memory="8Gi"), prefix=PREFIX)[3] \
            == fourth
        wait_for(lambda: len(bound(members(ws, "train-"))) == 4, timeout=60,
                 what="the gang to bind once a fourth node can attach its volumes")
        nodes = [str(node_of(pod)) for pod in members(ws, "train-")]
        assert sorted(nodes) == sorted([*csi_nodes, fourth]), nodes
    finally:
        for i in range(4):
            ws.delete_pod(f"train-{i}")
        for pv in made:
            pykube.PersistentVolume.objects(cluster.client).get(name=pv).delete()


def test_volumes_already_attached_count_against_the_limit(
    ws: Workspace, gangsched: SchedulerProcess, cluster: LocalCluster, csi_nodes: list[str]
) -> None:
    made = list(volumes(cluster, ws, ["old-0", "old-1", "new-0", "new-1"]))
    try:
        wait_for(lambda: len(claims(ws)) == 4 and all(
            c.get("status", {}).get("phase") == "Bound" for c in claims(ws).values()),
            timeout=60, what="the persistent-volume controller to bind the claims")
        full, other, last = csi_nodes
        # Two volumes held on the first node: one by a running pod, one by an attachment
        # whose pod is gone.
        runner = ws.pod("runner", cpu="100m", scheduler="kube")
        runner["spec"]["nodeName"] = full
        ws.create(with_claims(runner, "old-0"))
        attachment = pykube.object_factory(cluster.client, "storage.k8s.io/v1",
                                           "VolumeAttachment")
        held = attachment(cluster.client, {
            "apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment",
            "metadata": {"name": f"{ws.name}-old-1"},
            "spec": {"attacher": DRIVER, "nodeName": full,
                     "source": {"persistentVolumeName": made[1]}}})
        held.create()
        # Every node but the first is cordoned: only it could take the pod, and it may
        # attach one more volume where the pod needs two.
        for name in (other, last):
            node = pykube.Node.objects(cluster.client).get(name=name)
            node.obj["spec"]["unschedulable"] = True
            node.update()
        try:
            ws.create(with_claims(ws.pod("user", cpu="100m"), "new-0", "new-1"))
            words = f"1 more volume of CSI driver {DRIVER} than {full}'s limit of {LIMIT} allows"
            wait_for(lambda: saying(ws, "user", words), timeout=30,
                     what="the pod to wait naming the node's limit")
            held.delete()
            wait_for(lambda: len(bound(members(ws, "user"))) == 1, timeout=30,
                     what="the pod to bind once the attachment is gone")
            assert node_of(ws.pods()["user"]) == full
        finally:
            for name in (other, last):
                node = pykube.Node.objects(cluster.client).get(name=name)
                node.obj["spec"]["unschedulable"] = False
                node.update()
    finally:
        for pod in ("runner", "user"):
            ws.delete_pod(pod)
        for pv in made:
            pykube.PersistentVolume.objects(cluster.client).get(name=pv).delete()
