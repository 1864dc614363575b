"""In-tree volume sources as the CSI drivers they migrated to, as NodeVolumeLimits reads them.

kube-scheduler counts a volume against a node's CSI limit by ``driver/handle``.
Volumes of five in-tree plugins (AWS EBS, GCE PD, Azure Disk, Cinder,
Portworx) are counted as their CSI driver's, under the handle
csi-translation-lib gives them, so the same disk named inline by one pod and
through a PersistentVolume by another is one volume. Azure File and vSphere
migrated too, but kube-scheduler 1.37 does not count them, and neither does
this. A source whose ID the translation refuses (an EBS ID that is no
``vol-...``, GCE zones of no single region) is not counted either: kube-scheduler
skips such a PersistentVolume.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gangsched.core.model.objects import AttachedVolume

__all__ = ["MIGRATED_PROVISIONERS", "from_source"]

MIGRATED_PROVISIONERS = {
    "kubernetes.io/aws-ebs": "ebs.csi.aws.com",
    "kubernetes.io/gce-pd": "pd.csi.storage.gke.io",
    "kubernetes.io/azure-disk": "disk.csi.azure.com",
    "kubernetes.io/cinder": "cinder.csi.openstack.org",
    "kubernetes.io/portworx-volume": "pxd.portworx.com",
}
"""In-tree provisioners whose volumes count as their CSI driver's (a claim not bound
yet counts under its class's provisioner)."""

_UNSPECIFIED = "UNSPECIFIED"


def from_source(source: Mapping[str, object], zones: Sequence[str] = ()) -> AttachedVolume | None:
    """The CSI volume an in-tree source (of a pod's volume or a PersistentVolume's spec)
    is counted as; ``zones`` are a PersistentVolume's zone label values (GCE PD only)."""
    handle: str | None = None
    driver = ""
    if isinstance(ebs := source.get("awsElasticBlockStore"), Mapping):
        driver, handle = "ebs.csi.aws.com", _ebs_handle(_text(ebs.get("volumeID")))
    elif isinstance(pd := source.get("gcePersistentDisk"), Mapping):
        driver, handle = "pd.csi.storage.gke.io", _pd_handle(_text(pd.get("pdName")), zones)
    elif isinstance(disk := source.get("azureDisk"), Mapping):
        driver, handle = "disk.csi.azure.com", _text(disk.get("diskURI"))
    elif isinstance(cinder := source.get("cinder"), Mapping):
        driver, handle = "cinder.csi.openstack.org", _text(cinder.get("volumeID"))
    elif isinstance(portworx := source.get("portworxVolume"), Mapping):
        driver, handle = "pxd.portworx.com", _text(portworx.get("volumeID"))
    if not driver or not handle:
        return None
    return AttachedVolume(driver, handle, migrated=True)


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _ebs_handle(volume_id: str) -> str | None:
    """``aws://<zone>/vol-1`` or ``vol-1`` as ``vol-1``; None for an ID it refuses."""
    if not volume_id.startswith("aws://"):
        return volume_id
    path = volume_id[len("aws://"):].partition("/")[2].strip("/")
    return path if path.startswith("vol-") and "/" not in path else None


def _pd_handle(name: str, zones: Sequence[str]) -> str | None:
    """``projects/UNSPECIFIED/zones/<zone>/disks/<name>``, regional when the volume names
    several zones of one region; an inline disk's zone is unspecified."""
    zones = [zone for zone in zones if zone]
    if len(zones) <= 1:
        zone = zones[0] if zones else _UNSPECIFIED
        return f"projects/{_UNSPECIFIED}/zones/{zone}/disks/{name}"
    regions = set()
    for zone in zones:
        parts = zone.split("-")
        if len(parts) != 3:
            return None
        regions.add(f"{parts[0]}-{parts[1]}")
    if len(regions) != 1:
        return None
    return f"projects/{_UNSPECIFIED}/regions/{regions.pop()}/disks/{name}"
