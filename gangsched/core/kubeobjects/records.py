"""Pods as the mirror holds them: a header read from any pod, readable or not, and
the record of a readable one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from gangsched.core.kubeobjects.fields import RawObject, list_at, mapping_at, str_map_at
from gangsched.core.kubeobjects.podgroups import group_name_of, native_group_name
from gangsched.core.kubeobjects.pods import pod_from_api
from gangsched.core.model.objects import (
    GangKey,
    Pod,
    PodKey,
    gang_key,
    solo_gang_key,
)

__all__ = [
    "PodHeader",
    "PodRecord",
    "pod_header",
    "pod_record_from_api",
]


@dataclass(frozen=True, slots=True)
class PodHeader:
    """Who a pod is and whose it is, read even from a pod too broken to parse, so a
    broken pod of ours is reported on and one of another scheduler is ignored."""

    key: PodKey
    namespace: str
    scheduler_name: str
    bound: bool
    """It names a node: a broken pod already bound is no longer ours to report on."""


@dataclass(frozen=True, slots=True)
class PodRecord:
    """A pod as the mirror holds it: the core's view of it and what reports need."""

    pod: Pod
    uid: str
    ours: bool
    group: GangKey | None
    phase: str
    scheduled_message: str | None
    """Message of a ``PodScheduled=False`` condition already on the pod, to skip rewriting it."""
    resource_version: str = ""
    scheduled_reason: str | None = None
    """Reason of that condition: one that changes kind (``Unschedulable`` to
    ``GangWaiting``) is written again even with the same message."""


def pod_header(obj: RawObject) -> PodHeader:
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    spec = obj.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    namespace = meta.get("namespace")
    namespace = namespace if isinstance(namespace, str) and namespace else "default"
    return PodHeader(
        key=PodKey(f"{namespace}/{meta.get('name')}"),
        namespace=namespace,
        scheduler_name=str(spec.get("schedulerName") or ""),
        bound=bool(spec.get("nodeName")),
    )


def pod_record_from_api(obj: RawObject, *, ours: bool) -> PodRecord:
    """The pod, the gang it will be gathered into (set once here, not every cycle),
    its phase and the ``PodScheduled=False`` message already on it."""
    pod = pod_from_api(obj)
    where = f"pod {pod.key}"
    meta = mapping_at(obj.get("metadata"), where, "metadata")
    namespace = pod.key.split("/", 1)[0]
    group_name = group_name_of(
        dict(str_map_at(meta.get("labels"), where, "metadata.labels")),
        dict(str_map_at(meta.get("annotations"), where, "metadata.annotations")),
    ) or native_group_name(mapping_at(obj.get("spec"), where, "spec"))
    group = gang_key(namespace, group_name) if group_name else None
    status = mapping_at(obj.get("status"), where, "status")
    scheduled_message = scheduled_reason = None
    for index, item in enumerate(list_at(status.get("conditions"), where, "status.conditions")):
        condition = mapping_at(item, where, f"status.conditions[{index}]")
        if condition.get("type") == "PodScheduled":
            if condition.get("status") == "False":
                scheduled_message = str(condition.get("message") or "") or None
                scheduled_reason = str(condition.get("reason") or "") or None
            break
    return PodRecord(
        pod=replace(pod, gang=group or solo_gang_key(pod.key)),
        uid=str(meta.get("uid") or ""),
        ours=ours,
        group=group,
        phase=str(status.get("phase") or "Pending"),
        scheduled_message=scheduled_message,
        resource_version=str(meta.get("resourceVersion") or ""),
        scheduled_reason=scheduled_reason,
    )
