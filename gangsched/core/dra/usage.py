"""Devices held through ResourceClaims as resources of the one ledger every queue policy reads.

A device allocated through a claim counts for its DeviceClass, under the name
kube-scheduler serves that class by: the class's ``extendedResourceName`` when
it has one, else ``deviceclass.resource.kubernetes.io/<class>``. So a Queue
capability of ``nvidia.com/gpu: 2`` caps GPUs asked as an extended resource
and GPUs asked through claims of a class mapping that name alike. One device
counts once in a vector, under that one name; a capability or a vector naming
the implicit name of a class that has an extended resource name is read as
that name (:func:`in_ledger`, :func:`capability_in_ledger`).

A pod's extended resource claim (:mod:`.extended`) is not counted here: the
pod's own requests already name the resource its devices serve. Devices held
for admin access take nothing and count nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet

from gangsched.core.dra.allocator import candidates
from gangsched.core.dra.devices import Allocation, Claim, ClaimKey, DeviceRef, Inventory, Request
from gangsched.core.dra.selectors import SelectorError
from gangsched.core.model.objects import NodeName, Pod
from gangsched.core.model.resources import DEVICE_CLASS_PREFIX, Capability, Resources

__all__ = [
    "capability_in_ledger",
    "claim_devices",
    "claims_of",
    "device_totals",
    "in_ledger",
    "ledger_name",
    "renames",
]


def ledger_name(inventory: Inventory, device_class: str) -> str:
    """The resource name a device of the class counts under."""
    spec = inventory.classes.get(device_class)
    if spec is not None and spec.extended_resource:
        return spec.extended_resource
    return DEVICE_CLASS_PREFIX + device_class


def renames(inventory: Inventory) -> dict[str, str]:
    """The implicit names of the classes that have an extended resource name, to that name."""
    return {DEVICE_CLASS_PREFIX + name: spec.extended_resource
            for name, spec in inventory.classes.items() if spec.extended_resource}


def in_ledger(amount: Resources, names: Mapping[str, str]) -> Resources:
    """The amount with every implicit class name read as the class's extended resource name."""
    if not names or not any(name in names for name in amount.amounts):
        return amount
    out: dict[str, int] = {}
    for name, value in amount.amounts.items():
        key = names.get(name, name)
        out[key] = out.get(key, 0) + value
    return Resources.of(out)


def capability_in_ledger(capability: Capability, names: Mapping[str, str]) -> Capability:
    """The cap with every implicit class name read as the class's extended resource name;
    a cap naming both keeps the lower limit."""
    if not names or not any(name in names for name, _ in capability.limits):
        return capability
    limits: dict[str, int] = {}
    for name, limit in capability.limits:
        key = names.get(name, name)
        limits[key] = min(limit, limits.get(key, limit))
    return Capability(tuple(sorted(limits.items())))


def claims_of(pods: Iterable[Pod], inventory: Inventory) -> dict[ClaimKey, Claim]:
    """The claims the pods name that exist, each once (a claim pods share is one claim)."""
    found: dict[ClaimKey, Claim] = {}
    for pod in pods:
        for pod_claim in pod.resource_claims:
            key = pod_claim.claim
            if key is not None and key not in found:
                claim = inventory.claims.get(key)
                if claim is not None:
                    found[key] = claim
    return found


def claim_devices(
    claims: Iterable[Claim], inventory: Inventory,
    allocations: Mapping[ClaimKey, Allocation] | None = None,
) -> Resources:
    """What the claims take, by the ledger's names.

    An allocated claim (in ``allocations``, else as the inventory has it)
    counts the devices of its allocation but those held for admin access. A
    claim not allocated yet counts what it will take: each ``ExactCount``
    request its count, a ``firstAvailable`` request its first alternative, an
    ``All`` request the devices of its class (and selectors) on the node that
    has the most of them, the most it can get.
    """
    counts: dict[str, int] = {}
    for claim in claims:
        allocation = (allocations or {}).get(claim.key) or claim.allocation
        if allocation is not None:
            classes = {request.name: request.device_class for claim_request in claim.requests
                       for request in claim_request.alternatives}
            for device in allocation.devices:
                device_class = classes.get(device.request)
                if device.admin_access or device_class is None:
                    continue
                name = ledger_name(inventory, device_class)
                counts[name] = counts.get(name, 0) + 1
            continue
        for claim_request in claim.requests:
            if not claim_request.alternatives:
                continue
            request = claim_request.alternatives[0]
            if request.admin_access:
                continue
            count = _most_on_a_node(inventory, request) if request.all_devices else request.count
            name = ledger_name(inventory, request.device_class)
            counts[name] = counts.get(name, 0) + count
    return Resources.of(counts)


def _most_on_a_node(inventory: Inventory, request: Request) -> int:
    if request.device_class not in inventory.classes:
        return 0
    nodes = tuple(inventory.devices) or (NodeName(""),)
    try:
        return max(len(candidates(inventory, request, node, frozenset())) for node in nodes)
    except SelectorError:
        return 0


def device_totals(inventory: Inventory, nodes: AbstractSet[NodeName]) -> Resources:
    """The devices the ResourceSlices publish on ``nodes`` (and for every node) that each
    class may hand out, by the ledger's names: the whole a queue's device share is a
    part of. A device two classes select counts once under each of their names."""
    if not inventory.classes or (not inventory.devices and not inventory.shared_devices):
        return Resources.zero()
    key = frozenset(nodes)
    cached = inventory.totals.get(key)
    if cached is None:
        cached = inventory.totals[key] = _device_totals(inventory, key)
    return cached


def _device_totals(inventory: Inventory, nodes: AbstractSet[NodeName]) -> Resources:
    found: dict[str, set[DeviceRef]] = {}
    listed = [node for node in inventory.devices if node in nodes]
    if inventory.shared_devices and not listed:
        listed = [NodeName("")]
    for device_class in sorted(inventory.classes):
        request = Request("", device_class)
        refs = found.setdefault(ledger_name(inventory, device_class), set())
        for node in listed:
            try:
                refs.update(device.ref for device in candidates(inventory, request, node,
                                                                frozenset()))
            except SelectorError:
                break
    return Resources.of({name: len(refs) for name, refs in found.items()})
