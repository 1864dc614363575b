"""Queues, and what else orders or protects gangs: PriorityClasses, the queues of
native Workloads, PodDisruptionBudgets.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gangsched.core.kubeobjects.fields import (
    RawObject,
    mapping_at,
    object_name,
    object_ref,
    requirements_at,
    str_map_at,
)
from gangsched.core.kubeobjects.podgroups import QUEUE_ANNOTATION, annotations_of
from gangsched.core.model.objects import (
    DisruptionBudget,
    QueueName,
    QueueSpec,
)
from gangsched.core.model.quantity import QuantityError
from gangsched.core.model.resources import Capability

__all__ = [
    "FieldProblem",
    "PriorityClass",
    "QueueObject",
    "WorkloadQueue",
    "disruption_budget_from_api",
    "priority_class_from_api",
    "queue_from_api",
    "topology_levels_from_api",
    "workload_queue_from_api",
]


@dataclass(frozen=True, slots=True)
class FieldProblem:
    """A part of an object the schema should have rejected, left out rather than fatal."""

    field: str
    error: str


@dataclass(frozen=True, slots=True)
class QueueObject:
    """A Queue as read: the spec a cycle uses, and the parts of it left out."""

    spec: QueueSpec
    problems: tuple[FieldProblem, ...] = ()
    conditions: tuple[Mapping[str, Any], ...] = ()
    """The status conditions last written: their transition times are kept while they hold."""
    allocated: frozenset[str] = frozenset()
    """The resource names its ``status.allocated`` last showed: a rewrite removes those it
    no longer holds."""


def queue_from_api(body: RawObject) -> QueueObject:
    """A Queue; a part the schema should have rejected is left out, and said so.

    The CRD schema rejects bad weights and quantities, so this only meets
    objects written around it; an unreadable cap then caps nothing rather
    than stopping the scheduler.
    """
    spec = body.get("spec") or {}
    status = body.get("status") or {}
    problems: list[FieldProblem] = []
    capability: Capability | None = None
    try:
        if spec.get("capability") is not None:
            capability = Capability.parse(spec["capability"])
    except (QuantityError, AttributeError) as error:
        problems.append(FieldProblem("capability", str(error)))
    weight = spec.get("weight", 1)
    if isinstance(weight, bool) or not isinstance(weight, int):
        problems.append(FieldProblem("weight", repr(weight)))
        weight = 1
    elif weight < 1:
        # Kept as given: a queue with no weight has no share, and the hierarchy says so
        # on it (core.queues.hierarchy) rather than scheduling it as if it had weight 1.
        problems.append(FieldProblem("weight", repr(weight)))
    parent = spec.get("parent")
    if parent is not None and not isinstance(parent, str):
        problems.append(FieldProblem("parent", repr(parent)))
        parent = None
    reclaimable = spec.get("reclaimable", True)
    if not isinstance(reclaimable, bool):
        problems.append(FieldProblem("reclaimable", repr(reclaimable)))
        reclaimable = True
    left_out = "; ".join(f"{p.field}: {p.error}" for p in problems) or None
    return QueueObject(
        QueueSpec(name=QueueName(object_name(body)), weight=weight, capability=capability,
                  open=spec.get("state", "Open") != "Closed", error=left_out,
                  parent=QueueName(parent) if parent else None, reclaimable=reclaimable),
        tuple(problems),
        tuple(status.get("conditions") or ()),
        frozenset(status.get("allocated") or {}) if isinstance(status.get("allocated"), dict)
        else frozenset(),
    )


@dataclass(frozen=True, slots=True)
class PriorityClass:
    name: str
    value: int
    never_preempts: bool
    """``preemptionPolicy: Never``: gangs of this class wait, never evict."""


def priority_class_from_api(obj: RawObject) -> PriorityClass | None:
    """None for a class without an integer value, which the API server never serves."""
    value = obj.get("value")
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return PriorityClass(object_name(obj), value, obj.get("preemptionPolicy") == "Never")


def disruption_budget_from_api(obj: RawObject) -> DisruptionBudget:
    """A ``policy/v1`` PodDisruptionBudget; raises ObjectError for a selector the API
    server would not serve. A budget the disruption controller has not counted since
    its last change allows nothing, as the Eviction API then refuses every pod."""
    ref = object_ref(obj)
    where = f"PodDisruptionBudget {ref.key}"
    spec = mapping_at(obj.get("spec"), where, "spec")
    status = mapping_at(obj.get("status"), where, "status")
    raw_selector = spec.get("selector")
    selector = mapping_at(raw_selector, where, "spec.selector")
    allowed = status.get("disruptionsAllowed")
    observed = status.get("observedGeneration")
    generation = mapping_at(obj.get("metadata"), where, "metadata").get("generation")
    current = not isinstance(generation, int) or (
        isinstance(observed, int) and observed >= generation)
    return DisruptionBudget(
        key=ref.key,
        namespace=ref.namespace,
        match_labels=str_map_at(selector.get("matchLabels"), where, "spec.selector.matchLabels"),
        match_expressions=requirements_at(selector.get("matchExpressions"), where,
                                        "spec.selector.matchExpressions"),
        selects_pods=raw_selector is not None,
        disruptions_allowed=(allowed if isinstance(allowed, int) and not isinstance(allowed, bool)
                             and current else 0),
        group_uid=_podgroup_owner(obj),
    )


def _podgroup_owner(obj: RawObject) -> str:
    """The UID of the PodGroup (of any API) among the budget's owners, else ``""``."""
    owners = (obj.get("metadata") or {}).get("ownerReferences") or ()
    return next((str(owner.get("uid") or "") for owner in owners
                 if isinstance(owner, Mapping) and owner.get("kind") == "PodGroup"), "")


@dataclass(frozen=True, slots=True)
class WorkloadQueue:
    """A native Workload's queue annotation, which its PodGroups inherit."""

    key: str
    """``namespace/name``."""
    queue: QueueName | None


def workload_queue_from_api(body: RawObject) -> WorkloadQueue:
    queue = annotations_of(body.get("metadata") or {}).get(QUEUE_ANNOTATION)
    return WorkloadQueue(object_ref(body).key, QueueName(str(queue)) if queue else None)


def topology_levels_from_api(body: RawObject) -> tuple[str, ...]:
    """A Topology's levels, widest first, by node label; an entry the schema should have
    rejected is left out."""
    levels = (body.get("spec") or {}).get("levels") or ()
    return tuple(level["nodeLabel"] for level in levels
                 if isinstance(level, Mapping) and isinstance(level.get("nodeLabel"), str))
