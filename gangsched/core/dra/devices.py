"""The devices drivers publish, the classes and claims that ask for them: plain frozen data.

Built once at the edge (:mod:`.parse`) from ResourceSlices, DeviceClasses and
ResourceClaims, and held by the cycle's snapshot (:class:`Inventory`), so a
cycle allocates against one picture of which devices are free.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction
from types import MappingProxyType
from typing import TypeVar

from gangsched.core.model.objects import (
    ClaimKey,
    NodeName,
    PodClaim,
    SelectorTerm,
    Taint,
    Toleration,
)
from gangsched.core.model.resources import DEVICE_CLASS_PREFIX, Resources

__all__ = [
    "AllocatedDevice", "Allocation", "AttributeValue", "Claim",
    "ClaimKey", "ClaimRequest",
    "Device", "DeviceClassSpec", "DeviceConfig", "DeviceRef", "Inventory", "MatchAttribute",
    "PodClaim", "Request", "SemVer", "classes_by_resource",
]



@dataclass(frozen=True, slots=True, order=True)
class DeviceRef:
    """A device as an allocation names it: driver, pool and device name."""

    driver: str
    pool: str
    name: str

    def __str__(self) -> str:
        return f"{self.driver}/{self.pool}/{self.name}"


@dataclass(frozen=True, slots=True)
class SemVer:
    """A ``version`` attribute: kept as text, compared as semantic versions in CEL."""

    text: str


AttributeValue = bool | int | str | SemVer


@dataclass(frozen=True, slots=True)
class Device:
    """One device of a ResourceSlice, with its attributes and capacities fully qualified
    (``domain/name``: a name without a domain belongs to the driver)."""

    ref: DeviceRef
    node: NodeName | None
    """The node whose slice lists it; None for a slice of every node (``allNodes``)."""
    attributes: tuple[tuple[str, AttributeValue], ...] = ()
    capacity: tuple[tuple[str, Fraction], ...] = ()
    taints: tuple[Taint, ...] = ()

    def attribute(self, name: str) -> AttributeValue | None:
        for key, value in self.attributes:
            if key == name:
                return value
        return None


@dataclass(frozen=True, slots=True)
class DeviceConfig:
    """Opaque configuration for a driver, from a DeviceClass or a claim, as an allocation
    carries it to the driver (the parameters are JSON, kept as their text)."""

    driver: str
    parameters: str
    requests: tuple[str, ...] = ()
    """The requests it applies to; empty: every request."""
    source: str = "FromClaim"
    """``FromClass`` or ``FromClaim``, as the allocation result names where it came from."""


@dataclass(frozen=True, slots=True)
class DeviceClassSpec:
    """A DeviceClass: the CEL selectors every device of the class must pass, and the
    configuration its devices get."""

    name: str
    selectors: tuple[str, ...] = ()
    extended_resource: str | None = None
    config: tuple[DeviceConfig, ...] = ()
    created: str = ""
    """``metadata.creationTimestamp`` as written (RFC 3339, so it sorts as time does):
    of two classes naming one extended resource, the newer serves it."""


@dataclass(frozen=True, slots=True)
class Request:
    """One ``exactly`` request, or one ``firstAvailable`` alternative (``name`` is then
    ``request/alternative``, as the allocation result names it)."""

    name: str
    device_class: str
    selectors: tuple[str, ...] = ()
    all_devices: bool = False
    """``allocationMode: All``: every matching device of the node, none may be taken."""
    count: int = 1
    admin_access: bool = False
    """Monitoring access: the device may be in use by others, and stays free for them."""
    tolerations: tuple[Toleration, ...] = ()


@dataclass(frozen=True, slots=True)
class ClaimRequest:
    """A request of a claim: exactly one way, or the first of its alternatives that fits."""

    name: str
    alternatives: tuple[Request, ...]


@dataclass(frozen=True, slots=True)
class MatchAttribute:
    """Devices of the named requests (all when empty) share one value of the attribute."""

    attribute: str
    requests: tuple[str, ...] = ()

    def covers(self, request: str) -> bool:
        """Whether a device allocated for ``request`` (``name`` or ``name/alternative``)
        is bound by the constraint."""
        return not self.requests or request in self.requests or (
            request.split("/", 1)[0] in self.requests)


@dataclass(frozen=True, slots=True)
class AllocatedDevice:
    request: str
    device: DeviceRef
    admin_access: bool = False


@dataclass(frozen=True, slots=True)
class Allocation:
    """A claim's ``status.allocation``: its devices and where pods using it may run."""

    devices: tuple[AllocatedDevice, ...]
    node: NodeName | None = None
    """The one node its devices are on (a node selector on ``metadata.name``)."""
    node_terms: tuple[SelectorTerm, ...] = ()
    """Any other node selector, whose terms a pod's node must match; empty: none."""
    config: tuple[DeviceConfig, ...] = ()
    """The classes' configuration, then the claim's, for the requests allocated."""


@dataclass(frozen=True, slots=True)
class Claim:
    """A ResourceClaim: what it asks for, what it got, and which pods hold it."""

    key: ClaimKey
    uid: str = ""
    resource_version: str = ""
    requests: tuple[ClaimRequest, ...] = ()
    constraints: tuple[MatchAttribute, ...] = ()
    allocation: Allocation | None = None
    reserved_for: tuple[str, ...] = ()
    """UIDs of the consumers holding it (pods, or a PodGroup)."""
    error: str | None = None
    """Why the claim cannot be allocated whatever the devices (a constraint or a request of
    a kind this version does not know)."""
    deleting: bool = False
    config: tuple[DeviceConfig, ...] = ()
    """``spec.devices.config``, copied into the allocation for the requests it names."""
    extended_for: str = ""
    """The UID of the pod it was made for, when it is a pod's extended resource claim
    (see :mod:`.extended`)."""

    def reserved(self, allocation: Allocation | None, consumers: Iterable[str]) -> Claim:
        """The claim once ``allocation`` is written to it (the one it has stands) and
        ``consumers`` (UIDs) hold it too."""
        held = (*self.reserved_for, *(uid for uid in consumers if uid not in self.reserved_for))
        return replace(self, allocation=self.allocation or allocation, reserved_for=held)

    def released(self, consumer: str) -> Claim:
        """The claim once ``consumer`` no longer holds it: deallocated when no consumer is
        left, as the resource-claim controller does on that transition."""
        left = tuple(uid for uid in self.reserved_for if uid != consumer)
        return replace(self, reserved_for=left, allocation=self.allocation if left else None)


def classes_by_resource(classes: Iterable[DeviceClassSpec]) -> dict[str, str]:
    """Which class serves each extended resource name. Two classes naming the same one:
    the newest wins, then the first by name, as kube-scheduler's cache keeps them."""
    chosen = {DEVICE_CLASS_PREFIX + spec.name: spec.name for spec in classes}
    explicit: dict[str, DeviceClassSpec] = {}
    for spec in classes:
        name = spec.extended_resource
        if name is None:
            continue
        held = explicit.get(name)
        if held is None or (spec.created, held.name) > (held.created, spec.name):
            explicit[name] = spec
    chosen.update((name, spec.name) for name, spec in explicit.items())
    return chosen


def _in_use(claims: Mapping[ClaimKey, Claim]) -> frozenset[DeviceRef]:
    """The devices allocated to claims, but those held only for admin access."""
    return frozenset(
        allocated.device
        for claim in claims.values() if claim.allocation is not None
        for allocated in claim.allocation.devices if not allocated.admin_access
    )


def _extended_claims(claims: Mapping[ClaimKey, Claim]) -> dict[str, ClaimKey]:
    return {claim.extended_for: claim.key for claim in claims.values() if claim.extended_for}


K = TypeVar("K")
V = TypeVar("V")


def _frozen(mapping: Mapping[K, V]) -> Mapping[K, V]:
    """A private read-only copy: a caller changing its dict later must not change us."""
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True, slots=True)
class Inventory:
    """Every device, class and claim the cluster has, frozen for one cycle.

    ``in_use`` are the devices allocated to any claim without admin access,
    by us or by kube-scheduler: they are taken for everyone else. The caches
    at the end are filled as selectors are evaluated (the answer for a
    device and an expression never changes within one inventory).
    """

    devices: Mapping[NodeName, tuple[Device, ...]] = field(default_factory=dict)
    shared_devices: tuple[Device, ...] = ()
    """Devices of slices for every node (``allNodes``): any node may use them."""
    classes: Mapping[str, DeviceClassSpec] = field(default_factory=dict)
    claims: Mapping[ClaimKey, Claim] = field(default_factory=dict)
    bad_slices: Mapping[NodeName, str] = field(default_factory=dict)
    """Nodes whose slices could not be read, and why: their devices are not offered."""
    in_use: frozenset[DeviceRef] = frozenset()
    packing_attributes: tuple[str, ...] = ()
    """Attributes claims' constraints group devices by (an NVLink clique): devices are
    taken from the groups already partly used first, so whole groups stay whole."""
    extended: Mapping[str, str] = field(default_factory=dict)
    """Extended resource name -> the DeviceClass whose devices serve it."""
    extended_claims: Mapping[str, ClaimKey] = field(default_factory=dict)
    """Pod UID -> the claim made for that pod's extended resources."""
    unserved: str | None = None
    """The devices API, when the API server does not serve it: no claim can be allocated."""
    matches: dict[tuple[str, DeviceRef], bool | str] = field(
        default_factory=dict, compare=False, repr=False)
    """Cache: whether a device passes an expression, or the CEL error it raised. It
    depends on the devices alone, so an inventory of the same devices may share it."""
    totals: dict[frozenset[NodeName], Resources] = field(
        default_factory=dict, compare=False, repr=False)
    """Cache: the devices each class may hand out on a set of nodes (core.dra.usage),
    valid as long as the devices and classes stay."""
    _held_by: dict[str, tuple[ClaimKey, ...]] | None = field(
        default=None, init=False, compare=False, repr=False)
    """Cache: the claims each consumer (a pod's or a PodGroup's UID) holds."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "devices", _frozen(self.devices))
        object.__setattr__(self, "classes", _frozen(self.classes))
        object.__setattr__(self, "claims", _frozen(self.claims))
        object.__setattr__(self, "bad_slices", _frozen(self.bad_slices))
        object.__setattr__(self, "extended", _frozen(self.extended))
        object.__setattr__(self, "extended_claims", _frozen(self.extended_claims))

    @staticmethod
    def build(
        devices: Mapping[NodeName, tuple[Device, ...]],
        classes: Mapping[str, DeviceClassSpec],
        claims: Mapping[ClaimKey, Claim],
        *,
        shared_devices: tuple[Device, ...] = (),
        bad_slices: Mapping[NodeName, str] | None = None,
        matches: dict[tuple[str, DeviceRef], bool | str] | None = None,
        totals: dict[frozenset[NodeName], Resources] | None = None,
        unserved: str | None = None,
    ) -> Inventory:
        """The inventory, with the devices in use and the packing attributes derived;
        ``matches`` and ``totals``, caches an earlier inventory of the same devices (and
        classes, for ``totals``) filled, are shared with it."""
        in_use = _in_use(claims)
        packing = sorted({constraint.attribute for claim in claims.values()
                          for constraint in claim.constraints})
        return Inventory(devices, shared_devices, classes, claims, bad_slices or {}, in_use,
                         tuple(packing), classes_by_resource(classes.values()),
                         _extended_claims(claims), unserved, {} if matches is None else matches,
                         {} if totals is None else totals)

    def with_claims(self, claims: Mapping[ClaimKey, Claim]) -> Inventory:
        """The same devices and classes with these claims, allocated as they say: the
        cluster at a later moment, once some claims were allocated or let go."""
        return replace(self, claims=claims, in_use=_in_use(claims),
                       extended_claims=_extended_claims(claims))

    def released(self, consumers: Iterable[str]) -> Inventory:
        """The inventory once ``consumers`` (UIDs) hold no claim any more: each claim left
        with no consumer is deallocated (:meth:`Claim.released`), its devices free again,
        as when evicted pods are gone."""
        held_by = self._holders()
        claims: dict[ClaimKey, Claim] = {}
        for uid in consumers:
            for key in held_by.get(uid, ()):
                claims[key] = claims.get(key, self.claims[key]).released(uid)
        if not claims:
            return self
        return self.with_claims({**self.claims, **claims})

    def devices_held_by(self, consumer: str) -> tuple[DeviceRef, ...]:
        """The devices allocated to the claims ``consumer`` (a UID) holds, but those held
        only for admin access: what it leaves free when it goes."""
        return tuple(
            allocated.device
            for key in self._holders().get(consumer, ())
            if (allocation := self.claims[key].allocation) is not None
            for allocated in allocation.devices if not allocated.admin_access
        )

    def _holders(self) -> dict[str, tuple[ClaimKey, ...]]:
        held_by = self._held_by
        if held_by is None:
            held_by = {}
            for claim in self.claims.values():
                for uid in claim.reserved_for:
                    held_by[uid] = (*held_by.get(uid, ()), claim.key)
            object.__setattr__(self, "_held_by", held_by)
        return held_by

    def on_node(self, node: NodeName) -> tuple[Device, ...]:
        local = self.devices.get(node, ())
        return local + self.shared_devices if self.shared_devices else local

    @property
    def empty(self) -> bool:
        return not self.devices and not self.shared_devices and not self.claims
