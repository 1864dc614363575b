"""The devices, classes and claims the watches report, and the allocations we assumed.

Part of the mirror: ResourceSlices, DeviceClasses and ResourceClaims come in
parsed (through :mod:`gangsched.feed`), and each cycle's snapshot gets one
frozen :class:`~gangsched.core.dra.devices.Inventory` of them. As pods are
assumed bound before the API confirms, claims are assumed allocated and
reserved from the moment we decide to write them until the watch shows the
write (or it failed and is forgotten), so the next cycle never hands the same
devices out twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from gangsched.core.dra.devices import (
    Allocation,
    Claim,
    ClaimKey,
    Device,
    DeviceClassSpec,
    DeviceRef,
    Inventory,
)
from gangsched.core.dra.placing import ClaimWrite
from gangsched.core.model.objects import NodeName
from gangsched.core.model.resources import Resources

__all__ = ["DeviceCache"]


@dataclass(frozen=True, slots=True)
class _Assumed:
    allocation: Allocation | None
    reserved: tuple[str, ...]
    made_for: str = ""
    """The pod whose extended resource claim is being created: until the watch shows
    the claim, it is counted under its placeholder key."""


@dataclass
class DeviceCache:
    slices: dict[str, tuple[NodeName | None, tuple[Device, ...]]] = field(default_factory=dict)
    bad_slices: dict[str, tuple[NodeName | None, str]] = field(default_factory=dict)
    """Slices that could not be read: their node (if known) and why."""
    classes: dict[str, DeviceClassSpec] = field(default_factory=dict)
    claims: dict[ClaimKey, Claim] = field(default_factory=dict)
    assumed: dict[ClaimKey, _Assumed] = field(default_factory=dict)
    unserved: str | None = None
    """The devices API, when the API server does not serve it (see :mod:`gangsched.discovery`)."""
    _inventory: Inventory | None = None
    _matches: dict[tuple[str, DeviceRef], bool | str] = field(default_factory=dict)
    """What CEL selectors said of the devices, kept from one inventory to the next while
    those devices stay as they were."""
    _totals: dict[frozenset[NodeName], Resources] = field(default_factory=dict)
    """The devices of each class, kept while no slice or class changes."""

    def _changed(self, changed: bool = True) -> bool:
        if changed:
            self._inventory = None
        return changed

    def _devices_changed(self, *slices: tuple[Device, ...]) -> None:
        """Forget what was cached of the devices of these slices (as they were and are)."""
        refs = {device.ref for devices in slices for device in devices}
        if refs:
            self._matches = {key: answer for key, answer in self._matches.items()
                             if key[1] not in refs}
        self._totals = {}

    # ---- slices -------------------------------------------------------------------
    def set_slice(self, name: str, node: NodeName | None, devices: tuple[Device, ...]) -> bool:
        self.bad_slices.pop(name, None)
        before = self.slices.get(name)
        changed = before != (node, devices)
        if changed:
            self._devices_changed(before[1] if before else (), devices)
        self.slices[name] = (node, devices)
        return self._changed(changed)

    def set_bad_slice(self, name: str, node: NodeName | None, error: str) -> bool:
        before = self.slices.pop(name, None)
        self._devices_changed(before[1] if before else ())
        self.bad_slices[name] = (node, error)
        return self._changed()

    def remove_slice(self, name: str) -> bool:
        before = self.slices.pop(name, None)
        if before is not None:
            self._devices_changed(before[1])
        return self._changed(self.bad_slices.pop(name, None) is not None or before is not None)

    def keep_slices(self, names: set[str]) -> None:
        for name in [n for n in (*self.slices, *self.bad_slices) if n not in names]:
            self.remove_slice(name)

    # ---- classes ------------------------------------------------------------------
    def set_class(self, spec: DeviceClassSpec) -> bool:
        changed = self.classes.get(spec.name) != spec
        self.classes[spec.name] = spec
        if changed:
            self._totals = {}
        return self._changed(changed)

    def remove_class(self, name: str) -> bool:
        gone = self.classes.pop(name, None) is not None
        if gone:
            self._totals = {}
        return self._changed(gone)

    def keep_classes(self, names: set[str]) -> None:
        for name in [n for n in self.classes if n not in names]:
            self.remove_class(name)

    # ---- claims -------------------------------------------------------------------
    def set_claim(self, claim: Claim) -> bool:
        """A claim as the watch reports it; an assumption it now shows is done. A claim
        made for a pod takes over what was assumed under its placeholder."""
        changed = self.claims.get(claim.key) != claim
        self.claims[claim.key] = claim
        if claim.extended_for:
            self._adopt(claim)
        assumed = self.assumed.get(claim.key)
        if assumed is not None and _shows(claim, assumed):
            del self.assumed[claim.key]
        return self._changed(changed)

    def _adopt(self, claim: Claim) -> None:
        for key, assumed in list(self.assumed.items()):
            if assumed.made_for == claim.extended_for and key != claim.key:
                del self.assumed[key]
                self.assumed[claim.key] = replace(assumed, made_for="")

    def remove_claim(self, key: ClaimKey) -> bool:
        self.assumed.pop(key, None)
        return self._changed(self.claims.pop(key, None) is not None)

    def keep_claims(self, keys: set[str]) -> None:
        for key in [k for k in self.claims if k not in keys]:
            self.remove_claim(key)

    def assume(self, writes: tuple[ClaimWrite, ...]) -> None:
        """Count the claims allocated and reserved as decided, before the writes go out."""
        for write in writes:
            before = self.assumed.get(write.claim)
            allocation = write.allocation or (before.allocation if before else None)
            reserved = (*(before.reserved if before else ()),
                        *(consumer.uid for consumer in write.consumers))
            made_for = write.create.pod_uid if write.create is not None and not write.uid \
                else ""
            self.assumed[write.claim] = _Assumed(allocation, reserved, made_for)
        self._changed(bool(writes))

    def forget(self, claims: tuple[ClaimKey, ...]) -> None:
        """The writes failed or were undone: the claims are what the watch says again."""
        for key in claims:
            self.assumed.pop(key, None)
        self._changed(bool(claims))

    # ---- the per-cycle inventory --------------------------------------------------
    def inventory(self) -> Inventory:
        """Built again only after a change; shared by the cycles in between."""
        if self._inventory is None:
            self._inventory = self._build()
        return self._inventory

    def _build(self) -> Inventory:
        devices: dict[NodeName, tuple[Device, ...]] = {}
        shared: list[Device] = []
        for name in sorted(self.slices):
            node, found = self.slices[name]
            if node is None:
                shared.extend(found)
            else:
                devices[node] = devices.get(node, ()) + found
        bad = {node: f"{error} (its devices are not offered)"
               for _, (node, error) in sorted(self.bad_slices.items()) if node is not None}
        claims = dict(self.claims)
        for key, assumed in self.assumed.items():
            claim = claims.get(key)
            if claim is None and assumed.made_for:
                claim = Claim(key, extended_for=assumed.made_for)
            if claim is not None:
                claims[key] = claim.reserved(assumed.allocation, assumed.reserved)
        return Inventory.build(devices, dict(self.classes), claims,
                               shared_devices=tuple(shared), bad_slices=bad,
                               matches=self._matches, totals=self._totals,
                               unserved=self.unserved)


def _shows(claim: Claim, assumed: _Assumed) -> bool:
    """Whether the claim as reported holds what we assumed of it (or moved past it)."""
    allocated = assumed.allocation is None or claim.allocation is not None
    return allocated and all(uid in claim.reserved_for for uid in assumed.reserved)
