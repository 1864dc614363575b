"""Karpenter NodePools (``karpenter.sh/v1``): how much more each may launch, and what nodes
it makes, read for asking for nodes (core.asking).
"""

from __future__ import annotations

from gangsched.core.kubeobjects.fields import (
    RawObject,
    fail,
    kind_of,
    list_at,
    mapping_at,
    object_name,
    requirements_at,
    str_map_at,
)
from gangsched.core.model.objects import NodePool
from gangsched.core.model.quantity import QuantityError, canonical_amount

__all__ = ["nodepool_from_api"]


def nodepool_from_api(obj: RawObject) -> NodePool:
    """Its headroom (``spec.limits`` less ``status.resources``), template labels and
    requirements; raises ObjectError for a NodePool the API server would not have served."""
    name = object_name(obj)
    where = f"NodePool {name}"
    spec = mapping_at(obj.get("spec"), where, "spec")
    status = mapping_at(obj.get("status"), where, "status")
    template = mapping_at(spec.get("template"), where, "spec.template")
    template_spec = mapping_at(template.get("spec"), where, "spec.template.spec")
    used = _amounts(status.get("resources"), where, "status.resources")
    headroom = None if spec.get("limits") is None else tuple(sorted(
        (resource, max(0, limit - used.get(resource, 0)))
        for resource, limit in _amounts(spec.get("limits"), where, "spec.limits").items()))
    raw = [mapping_at(item, where, "spec.template.spec.requirements")
           for item in list_at(template_spec.get("requirements"), where,
                               "spec.template.spec.requirements")]
    # Only the operators a node selector has: Karpenter's minValues and others are no
    # constraint on which pods a NodePool can serve that we check.
    requirements = requirements_at(
        [{key: item.get(key) for key in ("key", "operator", "values") if key in item}
         for item in raw if item.get("operator") in ("In", "NotIn", "Exists", "DoesNotExist")],
        where, "spec.template.spec.requirements")
    labels = str_map_at(mapping_at(template.get("metadata"), where,
                                   "spec.template.metadata").get("labels"),
                        where, "spec.template.metadata.labels")
    return NodePool(name, headroom, labels, requirements)


def _amounts(value: object, where: str, path: str) -> dict[str, int]:
    """A map of quantities, strings or numbers as YAML gives them, in canonical units."""
    amounts: dict[str, int] = {}
    for resource, amount in mapping_at(value, where, path).items():
        if not isinstance(amount, str | int | float) or isinstance(amount, bool):
            fail(where, f"{path}.{resource} must be a quantity, not {kind_of(amount)}")
        try:
            amounts[resource] = canonical_amount(resource, amount)
        except QuantityError as error:
            fail(where, f"{path}.{resource}: {error}")
    return amounts
