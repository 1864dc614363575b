"""The devices of one placement pass: which claims are allocated, which devices taken.

A :class:`~gangsched.core.placement.Capacity` keeps one ledger for its pass:
it starts from the claims allocated before the pass (by gangsched or by
kube-scheduler) and grows with every gang placed with devices, so the next
gang of the pass never gets a device a previous one was given.
"""

from __future__ import annotations

from collections.abc import Iterable

from gangsched.core.dra.devices import Allocation, ClaimKey, DeviceRef, Inventory
from gangsched.core.dra.placing import (
    ClaimWrite,
    DevicePlacement,
    MemberRules,
    NodeRoom,
    Refusal,
)
from gangsched.core.dra.placing import place_with_devices as _place
from gangsched.core.model import Gang, NodeName, Policy

__all__ = ["DeviceLedger"]

class DeviceLedger:
    """Claims allocated and devices taken, before this pass and by its placements."""

    __slots__ = ("_free", "allocated", "inventory", "taken")

    def __init__(self, inventory: Inventory) -> None:
        self.inventory = inventory
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

    def record(self, writes: Iterable[ClaimWrite]) -> None:
        """The placement was kept: its allocations are the pass's from now on."""
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
