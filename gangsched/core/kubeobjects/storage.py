"""Claims, volumes, storage classes and CSI objects: what a pod's volumes ask of
nodes.
"""

from __future__ import annotations

from collections.abc import Mapping

from gangsched.core.fit.intree import from_source
from gangsched.core.kubeobjects.fields import (
    RawObject,
    fail,
    kind_of,
    list_at,
    mapping_at,
    metadata_of,
    owner_uids,
    requirements_at,
    resources_at,
    selector_terms_at,
    str_at,
    str_map_at,
)
from gangsched.core.model.objects import (
    AttachedVolume,
    Claim,
    CsiDriver,
    CsiNode,
    NodeName,
    SelectorRequirement,
    SelectorTerm,
    StorageCapacity,
    StorageClassSpec,
    Volume,
    VolumeAttachmentSpec,
)

__all__ = [
    "BIND_COMPLETED_ANNOTATION",
    "SELECTED_NODE_ANNOTATION",
    "claim_from_api",
    "csi_driver_from_api",
    "csi_node_from_api",
    "storage_capacity_from_api",
    "storage_class_from_api",
    "volume_attachment_from_api",
    "volume_from_api",
]


BIND_COMPLETED_ANNOTATION = "pv.kubernetes.io/bind-completed"
SELECTED_NODE_ANNOTATION = "volume.kubernetes.io/selected-node"
_BETA_CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class"
_ZONE_LABELS = frozenset({
    "failure-domain.beta.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region",
    "topology.kubernetes.io/zone", "topology.kubernetes.io/region",
})
_ZONE_DELIMITER = "__"


def claim_from_api(obj: RawObject) -> Claim:
    """A PersistentVolumeClaim; its class as kube-scheduler reads it (the beta annotation
    first), bound only once the PV controller completed the bind."""
    meta, namespace, name = metadata_of(obj, "PersistentVolumeClaim")
    where = f"PersistentVolumeClaim {namespace}/{name}"
    spec = mapping_at(obj.get("spec"), where, "spec")
    status = mapping_at(obj.get("status"), where, "status")
    annotations = str_map_at(meta.get("annotations"), where, "metadata.annotations")
    notes = dict(annotations)
    storage_class = notes.get(_BETA_CLASS_ANNOTATION)
    if storage_class is None:
        storage_class = str_at(spec.get("storageClassName"), where, "spec.storageClassName", "")
    volume_name = str_at(spec.get("volumeName"), where, "spec.volumeName", "")
    selected = notes.get(SELECTED_NODE_ANNOTATION)
    return Claim(
        key=f"{namespace}/{name}",
        storage_class=storage_class,
        volume_name=volume_name,
        bound=bool(volume_name) and BIND_COMPLETED_ANNOTATION in notes,
        selected_node=NodeName(selected) if selected else None,
        access_modes=tuple(str_at(m, where, "spec.accessModes[]")
                           for m in list_at(spec.get("accessModes"), where, "spec.accessModes")),
        lost=status.get("phase") == "Lost",
        deleting=meta.get("deletionTimestamp") is not None,
        owners=owner_uids(meta, where, controller=True),
        storage=_storage_request(spec, where),
    )


def _storage_request(spec: Mapping[str, object], where: str) -> int | None:
    requests = mapping_at(mapping_at(spec.get("resources"), where, "spec.resources").get(
        "requests"), where, "spec.resources.requests")
    if "storage" not in requests:
        return None
    return resources_at({"storage": requests["storage"]}, where, "spec.resources.requests").get(
        "storage")


def _cluster_object(obj: RawObject, kind: str) -> tuple[Mapping[str, object], str, str,
                                                        Mapping[str, object]]:
    """A cluster-scoped object's metadata, name, how messages name it, and spec."""
    meta = mapping_at(obj.get("metadata"), kind, "metadata")
    name = str_at(meta.get("name"), kind, "metadata.name")
    where = f"{kind} {name}"
    return meta, name, where, mapping_at(obj.get("spec"), where, "spec")


def volume_from_api(obj: RawObject) -> Volume:
    """A PersistentVolume: its required node affinity and its zone labels."""
    meta, name, where, spec = _cluster_object(obj, "PersistentVolume")
    affinity = mapping_at(spec.get("nodeAffinity"), where, "spec.nodeAffinity")
    required = affinity.get("required")
    terms = None
    if required is not None:
        items = list_at(mapping_at(required, where, "spec.nodeAffinity.required").get(
            "nodeSelectorTerms"), where, "spec.nodeAffinity.required.nodeSelectorTerms")
        terms = selector_terms_at(items, where, "spec.nodeAffinity.required.nodeSelectorTerms")
    labels = str_map_at(meta.get("labels"), where, "metadata.labels")
    zones = tuple((key, tuple(value.split(_ZONE_DELIMITER)))
                  for key, value in labels if key in _ZONE_LABELS)
    return Volume(name=name, node_affinity=terms, zones=zones,
                  attached=_attached(spec, dict(labels), where), csi="csi" in spec)


def _attached(spec: Mapping[str, object], labels: Mapping[str, str], where: str
              ) -> AttachedVolume | None:
    """The CSI driver and handle a volume is counted under against node limits."""
    csi = spec.get("csi")
    if csi is not None:
        source = mapping_at(csi, where, "spec.csi")
        driver = str_at(source.get("driver"), where, "spec.csi.driver", "")
        handle = str_at(source.get("volumeHandle"), where, "spec.csi.volumeHandle", "")
        return AttachedVolume(driver, handle) if driver and handle else None
    zone = labels.get("failure-domain.beta.kubernetes.io/zone") or labels.get(
        "topology.kubernetes.io/zone", "")
    return from_source(spec, zone.split(_ZONE_DELIMITER))


def csi_node_from_api(obj: RawObject) -> CsiNode:
    """A CSINode (named after its node): its drivers, with their volume limits."""
    _, name, where, spec = _cluster_object(obj, "CSINode")
    drivers: list[str] = []
    limits: list[tuple[str, int]] = []
    for index, item in enumerate(list_at(spec.get("drivers"), where, "spec.drivers")):
        path = f"spec.drivers[{index}]"
        driver = mapping_at(item, where, path)
        driver_name = str_at(driver.get("name"), where, f"{path}.name")
        drivers.append(driver_name)
        count = mapping_at(driver.get("allocatable"), where, f"{path}.allocatable").get("count")
        if count is not None:
            if isinstance(count, bool) or not isinstance(count, int):
                fail(where, f"{path}.allocatable.count must be an integer, not {kind_of(count)}")
            limits.append((driver_name, count))
    return CsiNode(NodeName(name), tuple(drivers), tuple(limits))


def volume_attachment_from_api(obj: RawObject) -> VolumeAttachmentSpec:
    """A VolumeAttachment: the attacher, node and PersistentVolume it names."""
    _, name, where, spec = _cluster_object(obj, "VolumeAttachment")
    source = mapping_at(spec.get("source"), where, "spec.source")
    return VolumeAttachmentSpec(
        name=name,
        node=NodeName(str_at(spec.get("nodeName"), where, "spec.nodeName", "")),
        attacher=str_at(spec.get("attacher"), where, "spec.attacher", ""),
        volume=str_at(source.get("persistentVolumeName"), where,
                    "spec.source.persistentVolumeName", ""),
    )


def csi_driver_from_api(obj: RawObject) -> CsiDriver:
    """A CSIDriver: whether pods using it need it registered on their node."""
    _, name, _, spec = _cluster_object(obj, "CSIDriver")
    return CsiDriver(name, required_on_node=spec.get("preventPodSchedulingIfMissing") is True,
                     storage_capacity=spec.get("storageCapacity") is True)


def storage_capacity_from_api(obj: RawObject) -> StorageCapacity:
    """A CSIStorageCapacity: its fields sit at the top level, not under a spec."""
    _, namespace, name = metadata_of(obj, "CSIStorageCapacity")
    where = f"CSIStorageCapacity {namespace}/{name}"
    topology = None
    if obj.get("nodeTopology") is not None:
        selector = mapping_at(obj.get("nodeTopology"), where, "nodeTopology")
        labels = str_map_at(selector.get("matchLabels"), where, "nodeTopology.matchLabels")
        topology = SelectorTerm(match_expressions=(
            *(SelectorRequirement(key, "In", (value,)) for key, value in labels),
            *requirements_at(selector.get("matchExpressions"), where,
                           "nodeTopology.matchExpressions")))
    field = next((f for f in ("maximumVolumeSize", "capacity") if obj.get(f) is not None), None)
    size = None if field is None else resources_at({"storage": obj[field]}, where, field).get(
        "storage")
    return StorageCapacity(f"{namespace}/{name}",
                           str_at(obj.get("storageClassName"), where, "storageClassName"),
                           topology, size)


def storage_class_from_api(obj: RawObject) -> StorageClassSpec:
    meta = mapping_at(obj.get("metadata"), "StorageClass", "metadata")
    name = str_at(meta.get("name"), "StorageClass", "metadata.name")
    where = f"StorageClass {name}"
    topologies = []
    for index, item in enumerate(list_at(obj.get("allowedTopologies"), where, "allowedTopologies")):
        path = f"allowedTopologies[{index}].matchLabelExpressions"
        expressions = list_at(mapping_at(item, where, f"allowedTopologies[{index}]").get(
            "matchLabelExpressions"), where, path)
        topologies.append(SelectorTerm(match_expressions=tuple(
            SelectorRequirement(
                str_at(mapping_at(e, where, path).get("key"), where, f"{path}.key"), "In",
                tuple(str_at(v, where, f"{path}.values[]")
                      for v in list_at(mapping_at(e, where, path).get("values"), where, path)))
            for e in expressions)))
    return StorageClassSpec(
        name=name,
        provisioner=str_at(obj.get("provisioner"), where, "provisioner", ""),
        wait_for_first_consumer=obj.get("volumeBindingMode") == "WaitForFirstConsumer",
        allowed_topologies=tuple(topologies),
    )
