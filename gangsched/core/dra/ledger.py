"""The devices of one placement pass: which claims are allocated, which devices taken.

A :class:`~gangsched.core.placement.capacity.Capacity` keeps one ledger for its pass:
it starts from the claims allocated before the pass (by gangsched or by
kube-scheduler) and grows with every gang placed with devices, so the next
gang of the pass never gets a device a previous one was given.
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from dataclasses import replace

from gangsched.core.dra.allocator import NodeAllocation, allocate_on_node
from gangsched.core.dra.devices import (
    AllocatedDevice,
    Allocation,
    Claim,
    ClaimKey,
    DeviceRef,
    Inventory,
)
from gangsched.core.dra.extended import extended_claim, served_by_devices
from gangsched.core.dra.placing import (
    ClaimWrite,
    DevicePlacement,
    MemberRules,
    NodeRoom,
    Refusal,
    least_devices,
)
from gangsched.core.dra.placing import place_with_devices as _place
from gangsched.core.model.objects import Gang, NodeName, Pod, Policy
from gangsched.core.model.resources import Resources

__all__ = ["DeviceLedger"]

class DeviceLedger:
    """Claims allocated and devices taken, before this pass and by its placements."""

    __slots__ = ("_free", "_now", "allocated", "inventory", "moves", "taken")

    def __init__(self, inventory: Inventory) -> None:
        self.inventory = inventory
        self.moves = 0
        """How many times allocations were recorded or forgotten: :meth:`now` is made again
        only when it moved."""
        self._now = (0, inventory)
        self.allocated: dict[ClaimKey, Allocation] = {
            key: claim.allocation for key, claim in inventory.claims.items()
            if claim.allocation is not None
        }
        self.taken: set[DeviceRef] = set(inventory.in_use)
        self._free: dict[NodeName, int] = {}
        """Devices of a node not taken, counted when first asked, dropped when it changes."""

    def free_devices(self, node: NodeName) -> int:
        count = self._free.get(node)
        if count is None:
            taken = self.taken
            count = self._free[node] = sum(
                1 for device in self.inventory.on_node(node) if device.ref not in taken)
        return count

    def place(self, gang: Gang, need: int, room: NodeRoom, policy: Policy,
              rules: MemberRules | None = None) -> DevicePlacement | Refusal:
        """Where the gang's members go with their devices; nothing is recorded yet
        (``rules`` count the members placed: see :func:`.placing.place_with_devices`)."""
        return _place(gang, need, self.inventory, room, policy, rules=rules,
                      allocated=self.allocated, taken=self.taken, free=self.free_devices)

    def least(self, pod: Pod) -> int:
        """The fewest devices the pod's claims not yet allocated may get (0: no bound is
        known, as with admin access or extended resources devices may serve)."""
        if pod.extended_requests:
            return 0
        claims = [claim for pod_claim in pod.resource_claims
                  if (claim := self.inventory.claims.get(pod_claim.claim)
                      if pod_claim.claim else None) is not None
                  and claim.key not in self.allocated]
        return least_devices(claims)

    def wanted(self, pod: Pod, node: NodeName, allocatable: Resources,
               besides: AbstractSet[DeviceRef]) -> tuple[DeviceRef, ...] | None:
        """The devices the pod's claims not yet allocated would get on the node: free ones
        where they can, else any but ``besides`` (devices in use now, to be kept as they
        free); () when it asks none, None when the node could not serve it even then."""
        claims: list[Claim] = []
        for pod_claim in pod.resource_claims:
            claim = self.inventory.claims.get(pod_claim.claim) if pod_claim.claim else None
            if claim is None:
                return None
            if claim.key not in self.allocated:
                claims.append(claim)
        served = served_by_devices(pod, self.inventory.extended, allocatable)
        if served and pod.uid not in self.inventory.extended_claims:
            claims.append(extended_claim(pod, served, self.inventory.extended)[0])
        if not claims:
            return ()
        for taken in (self.taken, besides):
            found = allocate_on_node(self.inventory, claims, node, taken)
            if isinstance(found, NodeAllocation):
                return tuple(allocated.device for _, allocation in found.allocations
                             for allocated in allocation.devices if not allocated.admin_access)
        return None

    def hold(self, key: ClaimKey, node: NodeName, devices: Iterable[DeviceRef]
             ) -> ClaimWrite | None:
        """Take those of ``devices`` no claim has, for a pod that is not placed (room held
        for a starving gang or a departed member), under ``key``, no claim's; None when
        none is free. :meth:`forget` of the write gives them back."""
        free = sorted(set(self.untaken(devices)))
        if not free:
            return None
        write = ClaimWrite(key, "", "", Allocation(
            tuple(AllocatedDevice("", ref) for ref in free), node), ())
        self.record((write,))
        return write

    def untaken(self, devices: Iterable[DeviceRef]) -> tuple[DeviceRef, ...]:
        """Those of the devices no claim has and no placement of this pass holds."""
        taken = self.taken
        return tuple(ref for ref in devices if ref not in taken)

    def now(self) -> Inventory:
        """The inventory with the claims allocated and the devices held so far in this pass:
        the devices taken as the pass has left them (a device held for no claim is one of
        a claim of its own)."""
        moves, inventory = self._now
        if moves == self.moves:
            return inventory
        claims = dict(self.inventory.claims)
        for key, allocation in self.allocated.items():
            claim = claims.get(key)
            if claim is None:
                claims[key] = Claim(key, allocation=allocation)
            elif claim.allocation != allocation:
                claims[key] = replace(claim, allocation=allocation)
        inventory = self.inventory.with_claims(claims)
        self._now = (self.moves, inventory)
        return inventory

    def record(self, writes: Iterable[ClaimWrite]) -> None:
        """The placement was kept: its allocations are the pass's from now on."""
        self.moves += 1
        for write in writes:
            if write.allocation is not None:
                self.allocated[write.claim] = write.allocation
                self.taken.update(d.device for d in write.allocation.devices
                                  if not d.admin_access)
                self._recount(write.allocation)

    def forget(self, writes: Iterable[ClaimWrite]) -> None:
        """The placement was released: its allocations are free again, but for devices
        another claim still holds. Admin access takes no device (:meth:`record`), so it
        frees none: the device it watched is its owner's still."""
        self.moves += 1
        freed: set[DeviceRef] = set()
        for write in writes:
            if write.allocation is not None:
                del self.allocated[write.claim]
                freed.update(d.device for d in write.allocation.devices if not d.admin_access)
                self._recount(write.allocation)
        if freed:
            freed.difference_update(d.device for allocation in self.allocated.values()
                                    for d in allocation.devices if not d.admin_access)
            self.taken.difference_update(freed)

    def _recount(self, allocation: Allocation) -> None:
        """Counts the allocation may have changed are made again when next asked: its
        node's, or every node's where it may hold devices every node shares."""
        if allocation.node is None or self.inventory.shared_devices:
            self._free.clear()
        else:
            self._free.pop(allocation.node, None)
