"""Nodes and namespaces: where pods run, with what nodes offer and namespaces' labels.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gangsched.core.kubeobjects.fields import (
    RawObject,
    fail,
    kind_of,
    list_at,
    mapping_at,
    metadata_of,
    object_name,
    resources_at,
    str_at,
    str_map_at,
    timestamp,
)
from gangsched.core.model.objects import (
    Namespace,
    Node,
    NodeName,
    Taint,
)

__all__ = [
    "namespace_from_api",
    "node_from_api",
]


def node_from_api(obj: Mapping[str, Any]) -> Node:
    """A node as the core sees it: what it offers and who may land on it.

    A node reports Ready only through its Ready condition; a node with no
    such condition has never been seen healthy and is treated as not ready
    (by queue shares; fit reads only taints, as kube-scheduler does).
    """
    _, _, name = metadata_of(obj, "node")
    where = f"node {name}"
    meta = mapping_at(obj.get("metadata"), where, "metadata")
    spec = mapping_at(obj.get("spec"), where, "spec")
    status = mapping_at(obj.get("status"), where, "status")

    unschedulable = spec.get("unschedulable")
    if unschedulable is None:
        unschedulable = False
    if not isinstance(unschedulable, bool):
        fail(where, f"spec.unschedulable must be a boolean, not {kind_of(unschedulable)}")

    taints = []
    for index, item in enumerate(list_at(spec.get("taints"), where, "spec.taints")):
        path = f"spec.taints[{index}]"
        entry = mapping_at(item, where, path)
        taints.append(
            Taint(
                key=str_at(entry.get("key"), where, f"{path}.key"),
                value=str_at(entry.get("value"), where, f"{path}.value", ""),
                effect=str_at(entry.get("effect"), where, f"{path}.effect"),
            )
        )

    features = frozenset(str_at(item, where, f"status.declaredFeatures[{index}]")
                         for index, item in enumerate(
                             list_at(status.get("declaredFeatures"), where,
                                   "status.declaredFeatures")))
    ready = False
    for index, item in enumerate(list_at(status.get("conditions"), where, "status.conditions")):
        condition = mapping_at(item, where, f"status.conditions[{index}]")
        if condition.get("type") == "Ready":
            ready = condition.get("status") == "True"

    return Node(
        name=NodeName(name),
        allocatable=resources_at(status.get("allocatable"), where, "status.allocatable"),
        labels=str_map_at(meta.get("labels"), where, "metadata.labels"),
        taints=tuple(taints),
        unschedulable=unschedulable,
        ready=ready,
        features=features,
        created=timestamp(meta.get("creationTimestamp"), where, "metadata.creationTimestamp"),
    )


def namespace_from_api(obj: RawObject) -> Namespace:
    """A Namespace's name and labels: what inter-pod terms select namespaces by."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    name = object_name(obj)
    return Namespace(name, str_map_at(meta.get("labels"), f"namespace {name}", "metadata.labels"))
