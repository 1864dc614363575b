"""CSI volume limits, as kube-scheduler's NodeVolumeLimits decides them, through resources.

A CSI driver that publishes ``allocatable.count`` in a node's CSINode (EBS,
PD, Azure Disk: 25 to 127 volumes a node) attaches no more volumes there.
kube-scheduler counts, per driver, the unique volumes (``driver/handle``) of
every pod on the node and of the node's VolumeAttachments, and refuses a pod
whose new volumes would take the count past the limit ("node(s) exceed max
volume count"). A pod's volumes are its claims' (a bound claim's
PersistentVolume gives driver and handle, an in-tree one translated by
:mod:`gangsched.core.fit.intree`; a claim not bound yet is a volume of its own
under its class's provisioner) and its inline in-tree volumes of migrated
plugins.

Here each driver that some node limits and some pending pod uses becomes a
resource of the cycle's model (:data:`~gangsched.core.model.resources.VOLUME_LIMIT_PREFIX`):
a node's allocatable is its limit (a node without one for the driver is not
limited, so it offers :data:`NO_LIMIT`), its requested the unique volumes
attached there, and a pending pod requests its own unique volumes. The
placement search, which keeps a gang's own members' use as it places them,
then honours the limits for whole gangs, and a cycle with no pending pod
using such a driver reads nothing here.

Where this is stricter than kube-scheduler: a pending pod's volume already
used by a pod on the node is counted again (kube-scheduler counts it once),
and two members of a gang sharing one volume (ReadWriteMany) count it twice
when they land on one node. A node may refuse such a pod at its limit that
kube-scheduler would take; no node is ever overcommitted. Evicting victims
frees none of their volumes here either (their attachments outlive them).

With ``VolumeLimitScaling`` (beta, on in 1.37) a CSIDriver with
``preventPodSchedulingIfMissing`` keeps pods using it off nodes whose
CSINode does not list it: a node term on model-only labels
(:data:`~gangsched.core.fit.nodefit.CSI_DRIVER_LABEL_PREFIX`), so the reason says
"missing CSI driver" where it rules nodes out.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

from gangsched.core.fit.intree import MIGRATED_PROVISIONERS
from gangsched.core.fit.nodefit import CSI_DRIVER_LABEL_PREFIX, CSI_NODE_LABEL
from gangsched.core.fit.volumes import Storage
from gangsched.core.model.objects import (
    AttachedVolume,
    Gang,
    NodeName,
    Pod,
    SelectorRequirement,
    SelectorTerm,
    VolumeLimits,
)
from gangsched.core.model.resources import VOLUME_LIMIT_PREFIX, Resources
from gangsched.core.placement.snapshot import NodeUsage, Snapshot

__all__ = [
    "NO_LIMIT",
    "limit_volumes",
    "limited_snapshot",
    "pod_volumes",
]

NO_LIMIT = 1 << 40
"""What a node without a limit for a driver offers of it: more than any pod could use."""
_UNTRANSLATED = frozenset({"kubernetes.io/azure-file", "kubernetes.io/vsphere-volume"})
"""In-tree provisioners kube-scheduler counts under no driver at all."""


def pod_volumes(pod: Pod, storage: Storage) -> dict[str, AttachedVolume]:
    """The pod's volumes a CSI driver attaches, by ``driver/handle``.

    A claim that does not exist, or an ephemeral one not made for the pod, is
    not counted (kube-scheduler skips it for pods on nodes; a pending pod
    with one waits on core.fit.volumes' reason before this counts anything).
    """
    found: dict[str, AttachedVolume] = {}
    namespace = pod.namespace
    for ref in pod.claims:
        name = f"{pod.key.split('/', 1)[1]}-{ref.name}" if ref.ephemeral else ref.name
        claim = storage.claims.get(f"{namespace}/{name}")
        if claim is None or (ref.ephemeral and pod.uid not in claim.owners):
            continue
        volume = storage.volumes.get(claim.volume_name) if claim.volume_name else None
        if volume is not None:
            attached = volume.attached
        else:  # not bound yet, or its volume unknown: a volume of its own, by its class
            attached = _provisioned(claim.key, storage, claim.storage_class)
        if attached is not None:
            _add(found, attached)
    for attached in pod.inline_volumes:
        _add(found, attached)
    return found


def _add(found: dict[str, AttachedVolume], volume: AttachedVolume) -> None:
    """One volume per ``driver/handle``; a disk named both through CSI and in-tree is a
    CSI volume (it counts on nodes without a CSINode too)."""
    name = f"{volume.driver}/{volume.handle}"
    if name not in found or found[name].migrated:
        found[name] = volume


def _provisioned(claim: str, storage: Storage, class_name: str) -> AttachedVolume | None:
    storage_class = storage.classes.get(class_name) if class_name else None
    if storage_class is None or not storage_class.provisioner \
            or storage_class.provisioner in _UNTRANSLATED:
        return None
    provisioner = storage_class.provisioner
    driver = MIGRATED_PROVISIONERS.get(provisioner)
    # A handle no real volume has: the claim is counted as one volume, apart from all.
    return AttachedVolume(driver or provisioner, f"\x00claim {claim}", migrated=bool(driver))


def _limited(storage: Storage) -> frozenset[str]:
    return frozenset(driver for node in storage.csi_nodes.values() for driver, _ in node.limits)


def limit_volumes(gangs: Sequence[Gang], storage: Storage) -> tuple[tuple[Gang, ...],
                                                                        VolumeLimits]:
    """The gangs, each pending pod asking for its volumes of limited drivers and for the
    drivers it needs registered on its node; with what that asks of the nodes."""
    required = frozenset(d.name for d in storage.csi_drivers.values() if d.required_on_node)
    limited = _limited(storage) if storage.csi_nodes else frozenset()
    if not limited and not required:
        return tuple(gangs), VolumeLimits()
    drivers: set[str] = set()
    labelled: set[str] = set()
    result = []
    for gang in gangs:
        pending = []
        for pod in gang.pending:
            if pod.volume_block is None and (pod.claims or pod.inline_volumes):
                pod = _with_volumes(pod, pod_volumes(pod, storage).values(), limited, required,
                                    drivers, labelled)
            pending.append(pod)
        result.append(replace(gang, pending=tuple(pending)))
    return tuple(result), VolumeLimits(frozenset(drivers), frozenset(labelled))


def _with_volumes(pod: Pod, volumes: Iterable[AttachedVolume], limited: frozenset[str],
                  required: frozenset[str], drivers: set[str], labelled: set[str]) -> Pod:
    counts: dict[str, int] = {}
    only_migrated: dict[str, bool] = {}
    for volume in volumes:
        if volume.driver in limited:
            name = VOLUME_LIMIT_PREFIX + volume.driver
            counts[name] = counts.get(name, 0) + 1
            drivers.add(volume.driver)
        if volume.driver in required:
            only_migrated[volume.driver] = only_migrated.get(volume.driver, True) \
                and volume.migrated
    if not counts and not only_migrated:
        return pod
    terms = tuple(_driver_terms(driver, migrated) for driver, migrated
                  in sorted(only_migrated.items()))
    labelled.update(only_migrated)
    return replace(
        pod, requests=pod.requests + Resources.of(counts),
        rules=replace(pod.rules, volume_affinity=(*pod.rules.volume_affinity, *terms)))


def _driver_terms(driver: str, migrated: bool) -> tuple[SelectorTerm, ...]:
    """Where a pod needing ``driver`` may go: nodes whose CSINode lists it; for in-tree
    volumes alone also nodes without a CSINode, where they count under no driver."""
    listed = SelectorTerm(match_expressions=(
        SelectorRequirement(CSI_DRIVER_LABEL_PREFIX + driver, "Exists", ()),))
    if not migrated:
        return (listed,)
    return (listed, SelectorTerm(match_expressions=(
        SelectorRequirement(CSI_NODE_LABEL, "DoesNotExist", ()),)))


def limited_snapshot(snapshot: Snapshot, limits: VolumeLimits, storage: Storage) -> Snapshot:
    """The snapshot with each limited driver's volumes as a resource of its nodes, and the
    labels of the drivers pods need registered; the snapshot itself when none is asked."""
    if not limits:
        return snapshot
    attached = _attached(snapshot, storage, limits.drivers) if limits.drivers else {}
    nodes: dict[NodeName, NodeUsage] = {}
    for name, usage in snapshot.nodes.items():
        csi_node = storage.csi_nodes.get(name)
        node_limits = dict(csi_node.limits) if csi_node is not None else {}
        offered: dict[str, int] = {}
        used: dict[str, int] = {}
        for driver in limits.drivers:
            resource = VOLUME_LIMIT_PREFIX + driver
            limit = node_limits.get(driver)
            offered[resource] = NO_LIMIT if limit is None else limit
            if limit is not None:
                used[resource] = attached.get(name, {}).get(driver, 0)
        node = replace(usage.node, allocatable=usage.node.allocatable + Resources.of(offered))
        if limits.labelled and csi_node is not None:
            node = replace(node, labels=(*node.labels, *_driver_labels(csi_node.drivers,
                                                                       limits.labelled)))
        nodes[name] = NodeUsage(node, usage.requested + Resources.of(used))
    return Snapshot(nodes, snapshot.seated, devices=snapshot.devices,
                    anti_affinity_terms=snapshot.anti_affinity_terms)


def _driver_labels(drivers: Iterable[str], wanted: frozenset[str]) -> tuple[tuple[str, str], ...]:
    return ((CSI_NODE_LABEL, ""), *sorted(
        (CSI_DRIVER_LABEL_PREFIX + driver, "") for driver in set(drivers) if driver in wanted))


def _attached(snapshot: Snapshot, storage: Storage, drivers: frozenset[str]
              ) -> dict[NodeName, dict[str, int]]:
    """Per node and limited driver, the unique volumes its pods and its VolumeAttachments
    hold. An in-tree volume counts only on a node with a CSINode, as kube-scheduler
    translates it only there (a node without one has no limit anyway)."""
    unique: dict[NodeName, dict[str, str]] = {}
    for pod in snapshot.pods:
        if pod.node_name is None or not (pod.claims or pod.inline_volumes):
            continue
        held = unique.setdefault(pod.node_name, {})
        for name, volume in pod_volumes(pod, storage).items():
            if volume.driver in drivers:
                held[name] = volume.driver
    for attachment in storage.attachments.values():
        source = storage.volumes.get(attachment.volume) if attachment.volume else None
        if (attachment.attacher in drivers and source is not None and source.csi
                and source.attached is not None):
            held = unique.setdefault(attachment.node, {})
            held.setdefault(f"{attachment.attacher}/{source.attached.handle}", attachment.attacher)
    counts: dict[NodeName, dict[str, int]] = {}
    for node, held in unique.items():
        per_driver = counts.setdefault(node, {})
        for driver in held.values():
            per_driver[driver] = per_driver.get(driver, 0) + 1
    return counts

