"""Allocating a pod's claims on one node: which devices, or why none will do.

As the structured allocator kube-scheduler uses: claim after claim, request
after request, device after device, a depth-first search that backs out of a
choice when a later device cannot be found, and stops at the first whole
answer. The candidates of a request are the node's devices its DeviceClass
and its own selectors accept, whose taints it tolerates, and that no claim
holds yet (unless the request asks admin access). ``matchAttribute``
constraints make the devices they cover share one value of the attribute.

Two differences of order, never of what is allowed: the devices of a request
are tried as combinations, not permutations (the same set is never tried
twice), and devices of a group already partly used (the inventory's packing
attributes, an NVLink clique) are tried first, so a one-GPU job does not
take a device from the only clique left whole.

A request for all devices whose devices a constraint of its claim rules out
is the claim's error on that node, as the structured allocator makes it:
nothing else is tried there, not even the request's other alternatives.
"""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, replace

from gangsched.core.dra.devices import (
    AllocatedDevice,
    Allocation,
    AttributeValue,
    Claim,
    ClaimKey,
    Device,
    DeviceConfig,
    DeviceRef,
    Inventory,
    MatchAttribute,
    Request,
)
from gangsched.core.dra.selectors import SelectorError, matches
from gangsched.core.fit.nodefit import tolerates
from gangsched.core.model.objects import NodeName

__all__ = ["ClaimBroken", "NodeAllocation", "allocate_on_node", "candidates"]

STEP_BUDGET = 20_000
"""Devices tried per node before the search gives up (it says so)."""

_EXCLUDING = frozenset({"NoSchedule", "NoExecute"})


@dataclass(frozen=True, slots=True)
class ClaimBroken:
    """The claim cannot be allocated on any node: bad input, named."""

    claim: ClaimKey
    request: str
    problem: str


@dataclass(frozen=True, slots=True)
class NodeAllocation:
    """Each claim's allocation on the node, in the order the claims were given."""

    node: NodeName
    allocations: tuple[tuple[ClaimKey, Allocation], ...]


def _usable(inventory: Inventory, request: Request, device: Device) -> bool:
    """Whether the request may have the device at all, taken or not (raises SelectorError)."""
    device_class = inventory.classes[request.device_class]
    for expression in (*device_class.selectors, *request.selectors):
        if not matches(inventory, expression, device):
            return False
    return all(taint.effect not in _EXCLUDING or tolerates(request.tolerations, taint)
               for taint in device.taints)


def _group(inventory: Inventory, device: Device) -> tuple[AttributeValue | None, ...]:
    return tuple(device.attribute(name) for name in inventory.packing_attributes)


def candidates(
    inventory: Inventory, request: Request, node: NodeName, taken: AbstractSet[DeviceRef]
) -> list[Device]:
    """The node's devices the request may have, fullest group first (raises SelectorError).

    Taken devices are left out unless the request asks admin access.
    """
    usable = [device for device in inventory.on_node(node)
              if (request.admin_access or device.ref not in taken)
              and _usable(inventory, request, device)]
    if not inventory.packing_attributes or len(usable) < 2:
        return usable
    free: dict[tuple[AttributeValue | None, ...], int] = {}
    for device in usable:
        group = _group(inventory, device)
        free[group] = free.get(group, 0) + 1
    return sorted(usable, key=lambda device: free[_group(inventory, device)])


def check_claim(inventory: Inventory, claim: Claim) -> ClaimBroken | None:
    """What makes the claim unallocatable on every node, before any device is looked at."""
    if claim.error is not None:
        return ClaimBroken(claim.key, "", claim.error)
    for claim_request in claim.requests:
        for request in claim_request.alternatives:
            if request.device_class not in inventory.classes:
                return ClaimBroken(claim.key, request.name,
                                   f"DeviceClass {request.device_class!r} does not exist")
    return None


@dataclass(slots=True)
class _Slot:
    """One device to find: for a request of a claim, among its candidates."""

    claim: int
    request: Request
    candidates: list[Device]
    first: bool
    """The first device of its request: later ones start after the one chosen before."""


class _Search:
    """The depth-first search over the slots of one choice of alternatives."""

    def __init__(self, slots: list[_Slot], constraints: list[tuple[MatchAttribute, ...]],
                 budget: int) -> None:
        self.slots = slots
        self.constraints = constraints
        self.steps = budget
        self.chosen: list[tuple[int, Device]] = []
        self.values: dict[tuple[int, int], tuple[AttributeValue, int]] = {}
        self.using: set[tuple[int, DeviceRef]] = set()
        self.held: dict[DeviceRef, int] = {}
        self.refused = False
        """A request for all devices met a device its claim's constraints rule out: the
        structured allocator calls that claim an error on the node, and tries nothing
        else there (no other alternative either)."""

    def run(self, index: int = 0) -> bool:
        if index == len(self.slots):
            return True
        slot = self.slots[index]
        start = 0 if slot.first else self.chosen[-1][0] + 1
        fixed_tried: set[AttributeValue] = set()
        for position in range(start, len(slot.candidates)):
            self.steps -= 1
            if self.steps < 0:
                return False
            device = slot.candidates[position]
            if not self._free(slot, device):
                continue
            fixing = self._fixing(slot, device)
            if fixing is None:
                if slot.request.all_devices:
                    self.refused = True
                    return False
                continue
            if fixing:
                value = fixing[0]
                if value in fixed_tried:
                    continue  # this value already failed at this depth
                fixed_tried.add(value)
            self._take(slot, position, device)
            if self.run(index + 1):
                return True
            self._give_back(slot, device)
            if self.refused:
                return False
        return False

    def _free(self, slot: _Slot, device: Device) -> bool:
        if (slot.claim, device.ref) in self.using:
            return False  # one device serves one request of a claim once
        return slot.request.admin_access or device.ref not in self.held

    def _fixing(self, slot: _Slot, device: Device) -> tuple[AttributeValue, ...] | None:
        """None if a constraint rules the device out; else the values it would fix."""
        fixing: list[AttributeValue] = []
        for number, constraint in enumerate(self.constraints[slot.claim]):
            if not constraint.covers(slot.request.name):
                continue
            value = device.attribute(constraint.attribute)
            if value is None:
                return None
            held = self.values.get((slot.claim, number))
            if held is None:
                fixing.append(value)
            elif held[0] != value:
                return None
        return tuple(fixing)

    def _take(self, slot: _Slot, position: int, device: Device) -> None:
        self.chosen.append((position, device))
        self.using.add((slot.claim, device.ref))
        self.held[device.ref] = self.held.get(device.ref, 0) + 1
        for number, constraint in enumerate(self.constraints[slot.claim]):
            if constraint.covers(slot.request.name):
                value = device.attribute(constraint.attribute)
                assert value is not None
                held = self.values.get((slot.claim, number))
                self.values[(slot.claim, number)] = (value, 1 + (held[1] if held else 0))

    def _give_back(self, slot: _Slot, device: Device) -> None:
        self.chosen.pop()
        self.using.discard((slot.claim, device.ref))
        left = self.held.pop(device.ref) - 1
        if left:
            self.held[device.ref] = left
        for number, constraint in enumerate(self.constraints[slot.claim]):
            if constraint.covers(slot.request.name):
                value, count = self.values.pop((slot.claim, number))
                if count > 1:
                    self.values[(slot.claim, number)] = (value, count - 1)


def _choices(claims: Sequence[Claim]) -> list[tuple[int, ...]]:
    """Every choice of one alternative per request, first alternatives first (as
    ``firstAvailable`` orders them), across the claims' requests in order."""
    choices: list[tuple[int, ...]] = [()]
    for claim in claims:
        for claim_request in claim.requests:
            choices = [(*choice, i) for choice in choices
                       for i in range(len(claim_request.alternatives))]
    return sorted(choices, key=lambda choice: (sum(choice), choice))


def _slots(
    inventory: Inventory, claims: Sequence[Claim], choice: tuple[int, ...], node: NodeName,
    taken: AbstractSet[DeviceRef],
) -> list[_Slot] | None:
    """The devices to find for one choice of alternatives; None when a request for all
    devices meets one that is taken. Raises SelectorError."""
    slots: list[_Slot] = []
    picks = iter(choice)
    for number, claim in enumerate(claims):
        for claim_request in claim.requests:
            request = claim_request.alternatives[next(picks)]
            found = candidates(inventory, request, node, taken)
            count = request.count
            if request.all_devices:
                # Every matching device, none taken, and at least one (as the
                # structured allocator: "all" of nothing is no allocation).
                every = candidates(inventory, request, node, frozenset())
                if not every or len(every) != len(found):
                    return None
                count = len(found)
            if count > len(found):
                return None
            slots.extend(_Slot(number, request, found, first=i == 0) for i in range(count))
    return slots


def allocate_on_node(
    inventory: Inventory, claims: Sequence[Claim], node: NodeName,
    taken: AbstractSet[DeviceRef], budget: int = STEP_BUDGET,
) -> NodeAllocation | ClaimBroken | None:
    """Devices on the node for every claim at once, or None when they are not there.

    ``taken``: devices no claim may have here (in use, or chosen this cycle
    for other claims). A selector that fails is the claim's problem, on this
    node as on every other: ClaimBroken, naming it.
    """
    constraints = [claim.constraints for claim in claims]
    for choice in _choices(claims):
        try:
            slots = _slots(inventory, claims, choice, node, taken)
        except SelectorError as error:
            return _broken(claims, choice, str(error))
        if slots is None:
            continue
        search = _Search(slots, constraints, budget)
        if search.run():
            return _result(inventory, claims, node, slots,
                           [device for _, device in search.chosen])
        if search.refused:
            return None
        budget = search.steps
        if budget <= 0:
            return None
    return None


def _broken(claims: Sequence[Claim], choice: tuple[int, ...], problem: str) -> ClaimBroken:
    """The claim whose selector failed: the one named in the error's expression."""
    picks = iter(choice)
    for claim in claims:
        for claim_request in claim.requests:
            request = claim_request.alternatives[next(picks)]
            if any(expression in problem for expression in request.selectors):
                return ClaimBroken(claim.key, request.name, problem)
    first = claims[0]
    return ClaimBroken(first.key, first.requests[0].name if first.requests else "", problem)


def _config(inventory: Inventory, claim: Claim, requests: list[Request]
            ) -> tuple[DeviceConfig, ...]:
    """What the allocation carries to the driver, as the structured allocator builds it:
    each class's configuration once, for the requests of that class, then the claim's
    entries that name a request allocated (or none); an entry that covers every request
    names none."""
    by_class: dict[str, list[str]] = {}
    for request in requests:
        names = by_class.setdefault(request.device_class, [])
        if request.name not in names:
            names.append(request.name)
    found: list[DeviceConfig] = [
        replace(config, requests=tuple(names), source="FromClass")
        for class_name, names in by_class.items()
        for config in inventory.classes[class_name].config
    ]
    chosen = {request.name for request in requests}
    parents = {name.split("/", 1)[0] for name in chosen}
    found += [config for config in claim.config
              if not config.requests or set(config.requests) & (chosen | parents)]
    every = {claim_request.name for claim_request in claim.requests}
    return tuple(
        replace(config, requests=()) if config.requests and every <= {
            name.split("/", 1)[0] for name in config.requests} else config
        for config in found
    )


def _result(
    inventory: Inventory, claims: Sequence[Claim], node: NodeName, slots: list[_Slot],
    devices: list[Device],
) -> NodeAllocation:
    per_claim: list[list[AllocatedDevice]] = [[] for _ in claims]
    local = [True for _ in claims]
    for slot, device in zip(slots, devices, strict=True):
        per_claim[slot.claim].append(AllocatedDevice(
            slot.request.name, device.ref, slot.request.admin_access))
        local[slot.claim] = local[slot.claim] and device.node is not None
    requests: list[list[Request]] = [[] for _ in claims]
    for slot in slots:
        if slot.request not in requests[slot.claim]:
            requests[slot.claim].append(slot.request)
    return NodeAllocation(node, tuple(
        (claim.key, Allocation(tuple(found), node if is_local else None,
                               config=_config(inventory, claim, asked)))
        for claim, found, is_local, asked in zip(claims, per_claim, local, requests,
                                                 strict=True)
    ))
