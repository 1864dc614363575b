"""The fit oracle (``tests/e2e/oracle.py``) with claims: kube-scheduler's VolumeBinding,
VolumeZone and VolumeRestrictions against gangsched's own reading of the same claims.

Beside the oracle's random nodes and pods, a seeded generator makes claims of
every kind a filter decides on without provisioning anything: claims bound
(by the persistent-volume controller) to volumes whose node affinity names a
node or a zone, or that carry a zone label; a claim whose class binds
immediately and that nothing will bind; a ``ReadWriteOncePod`` claim an
existing pod uses; and names of claims that do not exist. Each probe pod
uses a random few of them. gangsched's verdict comes from
:func:`gangsched.core.volumes.resolve_pod` over the claims, volumes and
classes parsed from the API server, then its node filter and room.
"""

from __future__ import annotations

import random
import time
from collections.abc import Mapping, Sequence
from typing import Any

import pykube

from devcluster.controlplane import LocalCluster
from gangsched.core.kubeobjects import (
    claim_from_api,
    node_from_api,
    pod_from_api,
    storage_class_from_api,
    volume_from_api,
)
from gangsched.core.nodefit import node_excluded_reason
from gangsched.core.volumes import Storage, claims_in_use, resolve_pod
from tests.e2e import oracle

ZONE = "topology.kubernetes.io/zone"
PLAIN = {"containers": [{"name": "main", "image": "busybox",
                         "resources": {"requests": {"cpu": "100m"}}}],
         "tolerations": [{"operator": "Exists"}]}
"""A pod only its volumes keep off nodes (and a full node's pod count)."""
IMMEDIATE_CLASS = "oracle-immediate"
"""An Immediate class whose provisioner nobody runs: its claims stay unbound."""


def _volume(namespace: str, name: str, claim: str, rng: random.Random,
            nodes: Sequence[str], mode: str = "ReadWriteOnce") -> dict[str, Any]:
    """A volume pre-bound to ``claim``, reachable from one node, one zone, or anywhere."""
    spec: dict[str, Any] = {
        "capacity": {"storage": "1Gi"}, "accessModes": [mode],
        "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "",
        "hostPath": {"path": f"/data/{name}"},
        "claimRef": {"namespace": namespace, "name": claim},
    }
    labels: dict[str, str] = {}
    shape = rng.choice(("node", "zone-affinity", "zone-label", "anywhere"))
    if shape == "node":
        key, values = "kubernetes.io/hostname", [rng.choice(nodes)]
    elif shape == "zone-affinity":
        key, values = ZONE, rng.sample(oracle.ZONES, rng.choice((1, 2)))
    else:
        key, values = "", []
    if key:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": key, "operator": "In", "values": values}]}]}}
    if shape == "zone-label":
        labels[ZONE] = "__".join(rng.sample(oracle.ZONES, rng.choice((1, 2))))
    return {"apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": name, "labels": labels}, "spec": spec}


def _claim(namespace: str, name: str, *, volume: str = "", storage_class: str = "",
           mode: str = "ReadWriteOnce") -> dict[str, Any]:
    spec: dict[str, Any] = {"accessModes": [mode], "storageClassName": storage_class,
                            "resources": {"requests": {"storage": "1Gi"}}}
    if volume:
        spec["volumeName"] = volume
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def make_claims(cluster: LocalCluster, namespace: str, rng: random.Random,
                nodes: Sequence[str], bound: int = 5) -> list[str]:
    """The claims probes may use, every one settled (bound or left unbound for good)."""
    api = cluster.client
    storage_class = pykube.object_factory(api, "storage.k8s.io/v1", "StorageClass")
    if not storage_class.objects(api).get_or_none(name=IMMEDIATE_CLASS):
        storage_class(api, {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                            "metadata": {"name": IMMEDIATE_CLASS},
                            "provisioner": "example.com/nobody",
                            "volumeBindingMode": "Immediate"}).create()
    names = []
    for i in range(bound):
        name, volume = f"bound-{i}", f"{namespace}-v{i}"
        pykube.PersistentVolume(api, _volume(namespace, volume, name, rng, nodes)).create()
        pykube.PersistentVolumeClaim(api, _claim(namespace, name, volume=volume)).create()
        names.append(name)
    # A ReadWriteOncePod claim, bound to a volume any node reaches, used by a pod on a node.
    volume = f"{namespace}-rwop"
    pv = _volume(namespace, volume, "rwop", random.Random(0), nodes, mode="ReadWriteOncePod")
    pv["spec"].pop("nodeAffinity", None)
    pv["metadata"]["labels"] = {}
    pykube.PersistentVolume(api, pv).create()
    pykube.PersistentVolumeClaim(api, _claim(namespace, "rwop", volume=volume,
                                             mode="ReadWriteOncePod")).create()
    pykube.PersistentVolumeClaim(api, _claim(namespace, "never-bound",
                                             storage_class=IMMEDIATE_CLASS)).create()
    _wait_bound(cluster, namespace, [*names, "rwop"])
    user = {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "rwop-user", "namespace": namespace},
            "spec": {"nodeName": rng.choice(nodes), "terminationGracePeriodSeconds": 0,
                     "tolerations": [{"operator": "Exists"}],
                     "containers": [{"name": "main", "image": "busybox"}],
                     "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "rwop"}}]}}
    pykube.Pod(api, user).create()
    return [*names, "rwop", "never-bound", "absent"]


def _wait_bound(cluster: LocalCluster, namespace: str, names: Sequence[str]) -> None:
    deadline = time.monotonic() + 60
    while True:
        claims = {c.name: c.obj for c in pykube.PersistentVolumeClaim.objects(
            cluster.client, namespace=namespace)}
        if all(claims.get(n, {}).get("status", {}).get("phase") == "Bound" for n in names):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"claims not bound: {names}")
        time.sleep(0.2)


def remove_volumes(cluster: LocalCluster, namespace: str) -> None:
    for volume in pykube.PersistentVolume.objects(cluster.client):
        if volume.name.startswith(f"{namespace}-"):
            volume.delete()


def with_claims(spec: Mapping[str, Any], rng: random.Random, claims: Sequence[str]
                ) -> dict[str, Any]:
    """The oracle's pod spec using one or two of the claims, bound ones most often."""
    bound = [c for c in claims if c.startswith("bound-")]
    chosen = sorted({rng.choice(bound if rng.random() < 0.8 else list(claims))
                     for _ in range(rng.choice((1, 1, 2)))})
    return {**spec, "volumes": [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}}
                                for i, c in enumerate(chosen)]}


def storage_of(cluster: LocalCluster, namespace: str) -> Storage:
    api = cluster.client
    claims = [claim_from_api(c.obj) for c in pykube.PersistentVolumeClaim.objects(
        api, namespace=namespace)]
    volumes = [volume_from_api(v.obj) for v in pykube.PersistentVolume.objects(api)]
    classes = [storage_class_from_api(s.obj) for s in pykube.object_factory(
        api, "storage.k8s.io/v1", "StorageClass").objects(api)]
    return Storage({c.key: c for c in claims}, {v.name: v for v in volumes},
                   {s.name: s for s in classes})


def our_verdict(cluster: LocalCluster, namespace: str, probe: Mapping[str, Any],
                node_obj: Mapping[str, Any], storage: Storage) -> tuple[bool, str]:
    """gangsched's verdict with the probe's claims resolved, and why."""
    existing = [pod_from_api(p.obj) for p in pykube.Pod.objects(cluster.client,
                                                                namespace=namespace)
                if "probe" not in p.labels]
    pod = resolve_pod(pod_from_api(probe), storage, "", claims_in_use(existing))
    if pod.volume_block is not None:
        return False, f"{pod.volume_block.claim} {pod.volume_block.problem.name}"
    node = node_from_api(node_obj)
    reason = node_excluded_reason(pod.rules, node)
    used = oracle.used_on(cluster, namespace, node.name)
    fits = pod.requests.fits(node.allocatable - used)
    return reason is None and fits, reason or ("room" if not fits else "fits")


def run(cluster: LocalCluster, namespace: str, rng: random.Random, *, nodes: int,
        pods: int) -> list[oracle.Verdict]:
    """Every (pod with claims, node) pair of a generated cluster, with both verdicts."""
    names = oracle.make_nodes(cluster, rng, nodes)
    try:
        oracle.place_existing(cluster, namespace, rng, names)
        claims = make_claims(cluster, namespace, rng, names)
        storage = storage_of(cluster, namespace)
        verdicts = []
        for index in range(pods):
            spec = with_claims(oracle.pod_spec(rng) if rng.random() < 0.4 else PLAIN, rng, claims)
            probes = {node: oracle._pod(namespace, f"p{index}-{node}", oracle.pinned(spec, node),
                                        probe="yes") for node in names}
            for manifest in probes.values():
                pykube.Pod(cluster.client, manifest).create()
            resolved = oracle.wait_resolved(cluster, namespace,
                                            [m["metadata"]["name"] for m in probes.values()])
            for node, manifest in probes.items():
                kube = oracle.kube_verdict(resolved[manifest["metadata"]["name"]])
                node_obj = pykube.Node.objects(cluster.client).get(name=node).obj
                ours, why = our_verdict(cluster, namespace, manifest, node_obj, storage)
                verdicts.append(oracle.Verdict(index, node, bool(kube), ours, why))
            oracle._clear_probes(cluster, namespace)
        return verdicts
    finally:
        oracle.remove_nodes(cluster)
        remove_volumes(cluster, namespace)
