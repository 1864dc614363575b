"""The fit oracle (``tests/e2e/oracle.py``) with claims: kube-scheduler's VolumeBinding,
VolumeZone and VolumeRestrictions against gangsched's own reading of the same claims.

Beside the oracle's random nodes and pods, a seeded generator makes claims of
every kind a filter decides on without provisioning anything: claims bound
(by the persistent-volume controller) to volumes whose node affinity names a
node or a zone, or that carry a zone label; a claim whose class binds
immediately and that nothing will bind; a ``ReadWriteOncePod`` claim an
existing pod uses; and names of claims that do not exist. Each probe pod
uses a random few of them. gangsched's verdict comes from
:func:`gangsched.core.fit.volumes.resolve_pod` over the claims, volumes and
classes parsed from the API server, then its node filter and room.

CSI volume limits (NodeVolumeLimits) too: most nodes get a CSINode whose EBS
driver attaches one to three volumes (or has no limit, or the node has no
CSINode at all), some list a second driver whose CSIDriver prevents
scheduling where it is missing, pods on the nodes hold CSI volumes, and
VolumeAttachments hold more, some of them volumes no pod uses. Probes use
claims of CSI volumes of either driver. gangsched's side counts them through
:mod:`gangsched.core.placement.volumelimits`, as a cycle does. Probes never use a
volume a pod already on a node holds: gangsched counts such a volume again
where kube-scheduler does not (the module says why), which can refuse a node
at its limit that kube-scheduler takes.

Storage capacity (VolumeBinding's capacity check) too: a WaitForFirstConsumer
class whose CSIDriver publishes its capacity, and CSIStorageCapacity objects of
it for some zones, some nodes, every node or none, some in another namespace,
some too small or with a smaller largest volume size. A probe of such a pod has
a claim of its own, and kube-scheduler accepts it by giving that claim the
probe's node (nothing provisions it); gangsched reads the capacities as a cycle
does.
"""

from __future__ import annotations

import random
import time
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

import pykube

from devcluster.controlplane import LocalCluster
from gangsched.core.fit.nodefit import node_excluded_reason
from gangsched.core.fit.volumes import Storage, claims_in_use, resolve_pod
from gangsched.core.kubeobjects.nodes import node_from_api
from gangsched.core.kubeobjects.pods import pod_from_api
from gangsched.core.kubeobjects.storage import (
    claim_from_api,
    csi_driver_from_api,
    csi_node_from_api,
    storage_capacity_from_api,
    storage_class_from_api,
    volume_attachment_from_api,
    volume_from_api,
)
from gangsched.core.model.objects import Gang, GangKey
from gangsched.core.placement.snapshot import Snapshot
from gangsched.core.placement.volumelimits import limit_volumes, limited_snapshot
from tests.e2e import oracle

ZONE = "topology.kubernetes.io/zone"
SELECTED_NODE = "volume.kubernetes.io/selected-node"
PLAIN = {"containers": [{"name": "main", "image": "busybox",
                         "resources": {"requests": {"cpu": "100m"}}}],
         "tolerations": [{"operator": "Exists"}]}
"""A pod only its volumes keep off nodes (and a full node's pod count)."""
IMMEDIATE_CLASS = "oracle-immediate"
"""An Immediate class whose provisioner nobody runs: its claims stay unbound."""
EBS = "ebs.csi.aws.com"
REQUIRED = "required.csi.example.com"
"""A driver whose CSIDriver keeps pods using it off nodes whose CSINode does not list it."""
STORAGE_API = "storage.k8s.io/v1"
CSI_KINDS = ("VolumeAttachment", "CSINode", "CSIDriver", "CSIStorageCapacity")
CAPACITY_DRIVER = "capacity.csi.example.com"
"""A driver that publishes its storage capacity; nothing runs it."""
CAPACITY_CLASS = "oracle-capacity"
SIZES = ("1Gi", "4Gi", "16Gi")


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


def _csi_volume(namespace: str, name: str, driver: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": f"{namespace}-{name}"},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                     "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "",
                     "csi": {"driver": driver, "volumeHandle": f"h-{namespace}-{name}"},
                     "claimRef": {"namespace": namespace, "name": name}}}


def _csi_node(rng: random.Random, node: str) -> dict[str, Any] | None:
    """The CSINode a node's drivers would register: EBS with a limit of one to three
    volumes or none, the required driver or not; now and then no CSINode at all."""
    if rng.random() < 0.15:
        return None
    ebs: dict[str, Any] = {"name": EBS, "nodeID": node}
    if rng.random() < 0.8:
        ebs["allocatable"] = {"count": rng.choice((1, 2, 3))}
    drivers = [ebs]
    if rng.random() < 0.5:
        drivers.append({"name": REQUIRED, "nodeID": node})
    return {"apiVersion": STORAGE_API, "kind": "CSINode", "metadata": {"name": node},
            "spec": {"drivers": drivers}}


def make_csi(cluster: LocalCluster, namespace: str, rng: random.Random,
             nodes: Sequence[str]) -> list[str]:
    """CSINodes, the required driver's CSIDriver, CSI volumes held on nodes by pods and
    by VolumeAttachments; the claims of CSI volumes probes may use."""
    api = cluster.client
    create = {kind: pykube.object_factory(api, STORAGE_API, kind) for kind in CSI_KINDS}
    create["CSIDriver"](api, {"apiVersion": STORAGE_API, "kind": "CSIDriver",
                              "metadata": {"name": REQUIRED},
                              "spec": {"attachRequired": False,
                                       "preventPodSchedulingIfMissing": True}}).create()
    for found in create["CSINode"].objects(api):  # the fit oracle's own, made with the nodes
        found.delete()
    deadline = time.monotonic() + 30
    while create["CSINode"].objects(api):
        if time.monotonic() > deadline:
            raise AssertionError("CSINodes did not go")
        time.sleep(0.1)
    for node in nodes:
        if (manifest := _csi_node(rng, node)) is not None:
            create["CSINode"](api, manifest).create()
    usable = [*(f"csi-{i}" for i in range(5)), "req-0", "req-1"]
    held = [f"held-{i}" for i in range(4)]
    for name in (*usable, *held):
        driver = REQUIRED if name.startswith("req-") else EBS
        pykube.PersistentVolume(api, _csi_volume(namespace, name, driver)).create()
        pykube.PersistentVolumeClaim(api, _claim(namespace, name,
                                                 volume=f"{namespace}-{name}")).create()
    _wait_bound(cluster, namespace, [*usable, *held])
    for node in nodes:
        names = rng.sample(held, rng.choice((0, 1, 2)))
        if names:
            pod = {"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": f"holder-{node}", "namespace": namespace},
                   "spec": {"nodeName": node, "terminationGracePeriodSeconds": 0,
                            "tolerations": [{"operator": "Exists"}],
                            "containers": [{"name": "main", "image": "busybox"}],
                            "volumes": [{"name": f"v{i}", "persistentVolumeClaim": {
                                "claimName": name}} for i, name in enumerate(names)]}}
            pykube.Pod(api, pod).create()
        # Attachments of volumes a pod there holds, of others no pod holds, and of
        # volumes probes use: each counts once against the node's limit.
        for index, name in enumerate(rng.sample([*held, *usable[:5]], rng.choice((0, 1, 2)))):
            create["VolumeAttachment"](api, {
                "apiVersion": STORAGE_API, "kind": "VolumeAttachment",
                "metadata": {"name": f"{namespace}-{node}-{index}"},
                "spec": {"attacher": EBS, "nodeName": node,
                         "source": {"persistentVolumeName": f"{namespace}-{name}"}}}).create()
    return usable


def _capacity(namespace: str, name: str, rng: random.Random,
              topology: dict[str, Any] | None) -> dict[str, Any]:
    found: dict[str, Any] = {"apiVersion": STORAGE_API, "kind": "CSIStorageCapacity",
                             "metadata": {"name": name, "namespace": namespace},
                             "storageClassName": CAPACITY_CLASS,
                             "capacity": rng.choice(SIZES)}
    if topology is not None:
        found["nodeTopology"] = topology
    if rng.random() < 0.3:
        found["maximumVolumeSize"] = rng.choice(SIZES)
    return found


def make_capacity(cluster: LocalCluster, namespace: str, rng: random.Random,
                  nodes: Sequence[str]) -> None:
    """The class, its capacity-publishing driver, and what that driver publishes: per
    zone, per node, for every node or for none, now in the run's namespace, now in
    ``default`` (the namespace says nothing)."""
    api = cluster.client
    storage_class = pykube.object_factory(api, STORAGE_API, "StorageClass")
    if not storage_class.objects(api).get_or_none(name=CAPACITY_CLASS):
        storage_class(api, {"apiVersion": STORAGE_API, "kind": "StorageClass",
                            "metadata": {"name": CAPACITY_CLASS},
                            "provisioner": CAPACITY_DRIVER,
                            "volumeBindingMode": "WaitForFirstConsumer"}).create()
    create = {kind: pykube.object_factory(api, STORAGE_API, kind) for kind in CSI_KINDS}
    create["CSIDriver"](api, {"apiVersion": STORAGE_API, "kind": "CSIDriver",
                              "metadata": {"name": CAPACITY_DRIVER},
                              "spec": {"attachRequired": False,
                                       "storageCapacity": True}}).create()
    topologies: list[dict[str, Any] | None] = [
        {"matchLabels": {ZONE: zone}} for zone in oracle.ZONES if rng.random() < 0.7]
    topologies += [{"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In",
                                          "values": [node]}]}
                   for node in rng.sample(list(nodes), 2)]
    topologies += rng.choice(([{}], [None], []))
    for index, topology in enumerate(topologies):
        where = namespace if rng.random() < 0.7 else "default"
        create["CSIStorageCapacity"](
            api, _capacity(where, f"{namespace}-cap-{index}", rng, topology)).create()


def remove_csi(cluster: LocalCluster, namespace: str) -> None:
    """The run's CSI objects go: CSINodes and the CSIDriver would change what other tests'
    pods with volumes are allowed."""
    for kind in CSI_KINDS:
        for found in pykube.object_factory(cluster.client, STORAGE_API, kind).objects(
                cluster.client, namespace=pykube.all):
            if kind not in ("VolumeAttachment", "CSIStorageCapacity") \
                    or found.name.startswith(f"{namespace}-"):
                found.delete()


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


def with_claims(spec: Mapping[str, Any], rng: random.Random, claims: Sequence[str],
                csi: Sequence[str] = ()) -> dict[str, Any]:
    """The oracle's pod spec using one or two of the claims, bound ones most often; or,
    half the time when there are CSI claims, one to three of those (beside one other
    now and then)."""
    bound = [c for c in claims if c.startswith("bound-")]
    chosen = {rng.choice(bound if rng.random() < 0.8 else list(claims))
              for _ in range(rng.choice((1, 1, 2)))}
    if csi and rng.random() < 0.5:
        chosen = {*(chosen if rng.random() < 0.3 else ()),
                  *rng.sample(list(csi), rng.choice((1, 2, 3)))}
    return {**spec, "volumes": [*spec.get("volumes", []), *(
        {"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}}
        for i, c in enumerate(sorted(chosen)))]}


def storage_of(cluster: LocalCluster, namespace: str) -> Storage:
    api = cluster.client
    claims = [claim_from_api(c.obj) for c in pykube.PersistentVolumeClaim.objects(
        api, namespace=namespace)]
    volumes = [volume_from_api(v.obj) for v in pykube.PersistentVolume.objects(api)]
    classes = [storage_class_from_api(s.obj) for s in pykube.object_factory(
        api, "storage.k8s.io/v1", "StorageClass").objects(api)]

    def listed(kind: str) -> list[Any]:
        return [o.obj for o in pykube.object_factory(api, STORAGE_API, kind).objects(
            api, namespace=pykube.all)]

    csi_nodes = [csi_node_from_api(o) for o in listed("CSINode")]
    attachments = [volume_attachment_from_api(o) for o in listed("VolumeAttachment")]
    drivers = [csi_driver_from_api(o) for o in listed("CSIDriver")]
    capacities = [storage_capacity_from_api(o) for o in listed("CSIStorageCapacity")]
    return Storage({c.key: c for c in claims}, {v.name: v for v in volumes},
                   {s.name: s for s in classes},
                   csi_nodes={n.node: n for n in csi_nodes},
                   attachments={a.name: a for a in attachments},
                   csi_drivers={d.name: d for d in drivers},
                   capacities={c.key: c for c in capacities})


def our_verdict(cluster: LocalCluster, namespace: str, probe: Mapping[str, Any],
                node_obj: Mapping[str, Any], storage: Storage) -> tuple[bool, str]:
    """gangsched's verdict with the probe's claims resolved, and why."""
    existing = [pod_from_api(p.obj) for p in pykube.Pod.objects(cluster.client,
                                                                namespace=namespace)
                if "probe" not in p.labels]
    pod = resolve_pod(pod_from_api(probe), storage, "", claims_in_use(existing))
    if pod.volume_block is not None:
        return False, f"{pod.volume_block.claim} {pod.volume_block.problem.name}"
    # The cycle's own way: the pod's volumes of limited drivers become requests, and the
    # nodes offer their limits less what is attached there.
    (gang,), limits = limit_volumes((Gang(GangKey("probe"), 1, (pod,)),), storage)
    pod = gang.pending[0]
    nodes = [node_from_api(n.obj) for n in pykube.Node.objects(cluster.client)]
    snapshot = limited_snapshot(Snapshot.build(nodes, existing), limits, storage)
    usage = snapshot.nodes[node_from_api(node_obj).name]
    reason = node_excluded_reason(pod.rules, usage.node)
    fits = pod.requests.fits(usage.free)
    short = ", ".join(pod.requests.short_of(usage.free).names())
    return reason is None and fits, reason or (f"room: {short}" if not fits else "fits")


def _own_claims(cluster: LocalCluster, namespace: str, rng: random.Random, index: int,
                nodes: Sequence[str]) -> dict[str, dict[str, Any]]:
    """A pod whose probes each have a claim of the capacity class of their own, all of
    one size: a claim kube-scheduler gives one probe's node is no other probe's."""
    size = rng.choice(("2Gi", "8Gi"))
    specs = {}
    for node in nodes:
        name = f"cap-{index}-{node}"
        manifest = _claim(namespace, name, storage_class=CAPACITY_CLASS)
        manifest["spec"]["resources"]["requests"]["storage"] = size
        pykube.PersistentVolumeClaim(cluster.client, manifest).create()
        specs[node] = {**PLAIN, "volumes": [
            {"name": "data", "persistentVolumeClaim": {"claimName": name}}]}
    return specs


def _verdict(cluster: LocalCluster, namespace: str, pod: Mapping[str, Any]) -> bool | None:
    """kube-scheduler's verdict on a probe: bound, or its claim of the capacity class
    given the probe's node (it then waits for a volume nothing provisions), is True."""
    verdict = oracle.kube_verdict(pod)
    if verdict is not None:
        return verdict
    for volume in pod["spec"].get("volumes") or []:
        name = (volume.get("persistentVolumeClaim") or {}).get("claimName", "")
        if name.startswith("cap-"):
            claim = pykube.PersistentVolumeClaim.objects(
                cluster.client, namespace=namespace).get_or_none(name=name)
            selected = claim.annotations.get(SELECTED_NODE) if claim is not None else None
            node = pod["spec"]["affinity"]["nodeAffinity"][
                "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0][
                "matchFields"][0]["values"][0]
            return True if selected == node else None
    return None


def run(cluster: LocalCluster, namespace: str, rng: random.Random, *, nodes: int,
        pods: int) -> list[oracle.Verdict]:
    """Every (pod with claims, node) pair of a generated cluster, with both verdicts."""
    names = oracle.make_nodes(cluster, rng, nodes)
    try:
        oracle.place_existing(cluster, namespace, rng, names)
        claims = make_claims(cluster, namespace, rng, names)
        csi = make_csi(cluster, namespace, rng, names)
        make_capacity(cluster, namespace, rng, names)
        storage = storage_of(cluster, namespace)
        verdicts = []
        for index in range(pods):
            if rng.random() < 0.3:
                specs = _own_claims(cluster, namespace, rng, index, names)
                storage = storage_of(cluster, namespace)
            else:
                spec = with_claims(oracle.pod_spec(rng) if rng.random() < 0.4 else PLAIN, rng,
                                   claims, csi)
                specs = dict.fromkeys(names, spec)
            probes = {node: oracle._pod(namespace, f"p{index}-{node}",
                                        oracle.pinned(specs[node], node), probe="yes")
                      for node in names}
            for manifest in probes.values():
                pykube.Pod(cluster.client, manifest).create()
            resolved = oracle.wait_resolved(cluster, namespace,
                                            [m["metadata"]["name"] for m in probes.values()],
                                            verdict=partial(_verdict, cluster, namespace))
            for node, manifest in probes.items():
                kube = _verdict(cluster, namespace, resolved[manifest["metadata"]["name"]])
                node_obj = pykube.Node.objects(cluster.client).get(name=node).obj
                ours, why = our_verdict(cluster, namespace, manifest, node_obj, storage)
                verdicts.append(oracle.Verdict(index, node, bool(kube), ours, why))
            oracle._clear_probes(cluster, namespace)
        return verdicts
    finally:
        oracle.remove_nodes(cluster)
        remove_csi(cluster, namespace)
        remove_volumes(cluster, namespace)
