"""Inline disks two pods may not share on a node, as kube-scheduler's VolumeRestrictions decides.

A pod's inline GCE persistent disk, AWS EBS volume, iSCSI target or Ceph RBD
image conflicts with the same disk of a pod already on the node: always for
EBS; for the others unless both mount it read-only (an RBD image is the same
when pool and image match and the monitor lists overlap). Each such disk is a
thing the pod holds on its node (core.fit.nodelocal): held read-write it excludes
every holder, read-only it excludes read-write holders. An RBD image is held
once per monitor, so overlapping monitor lists meet on one of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from gangsched.core.fit.nodelocal import Held, held_labels, held_terms
from gangsched.core.model.objects import PodAffinityTerm

__all__ = ["disk_labels", "disk_terms", "inline_disks"]

KIND = "disk"
READ_WRITE, READ_ONLY = "rw", "ro"


def _held(name: str, read_only: bool) -> Held:
    if read_only:
        return Held(KIND, name, READ_ONLY, (READ_WRITE,))
    return Held(KIND, name, READ_WRITE)


def _disk(volume: Mapping[str, object]) -> list[Held]:
    """What one volume of a pod holds; ``[]`` for a volume of another kind."""
    def source(field: str) -> Mapping[str, object] | None:
        found = volume.get(field)
        return found if isinstance(found, Mapping) else None

    def text(entry: Mapping[str, object], field: str, default: str = "") -> str:
        found = entry.get(field)
        return found if isinstance(found, str) and found else default

    if (gce := source("gcePersistentDisk")) is not None:
        return [_held(f"gce-pd/{text(gce, 'pdName')}", gce.get("readOnly") is True)]
    if (ebs := source("awsElasticBlockStore")) is not None:
        return [_held(f"aws-ebs/{text(ebs, 'volumeID')}", False)]
    if (iscsi := source("iscsi")) is not None:
        return [_held(f"iscsi/{text(iscsi, 'iqn')}", iscsi.get("readOnly") is True)]
    if (rbd := source("rbd")) is not None:
        monitors = rbd.get("monitors")
        image = f"rbd/{text(rbd, 'pool', 'rbd')}/{text(rbd, 'image')}"
        return [_held(f"{image}@{monitor}", rbd.get("readOnly") is True)
                for monitor in (monitors if isinstance(monitors, list) else [])
                if isinstance(monitor, str)]
    return []


def inline_disks(volumes: Iterable[Mapping[str, object]]) -> tuple[Held, ...]:
    """The inline disks a pod's volumes hold (already checked to be objects)."""
    return tuple(sorted({held for volume in volumes for held in _disk(volume)}))


def disk_labels(disks: Iterable[Held]) -> tuple[tuple[str, str], ...]:
    """The labels that stand for the disks a pod holds."""
    return held_labels(disks)


def disk_terms(disks: Iterable[Held]) -> tuple[PodAffinityTerm, ...]:
    """The anti-affinity terms that keep the pod off a node where its disks are taken."""
    return held_terms(disks)
