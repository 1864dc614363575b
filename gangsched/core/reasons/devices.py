"""A member's ResourceClaim holds the gang back: it cannot be allocated, is not there yet,
or too few devices are free where the pod could go."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from gangsched.core.model.objects import GangKey, PodKey
from gangsched.core.reasons.wording import plural


@dataclass(frozen=True, slots=True)
class ClaimInvalid:
    """A claim of a pending member can be allocated on no node whatever the devices (a
    selector that fails, a DeviceClass that does not exist, a request of an unknown kind);
    the gang waits whole and nothing is allocated."""

    code: ClassVar[str] = "ClaimInvalid"
    pod: PodKey
    claim: str
    request: str
    problem: str

    def text(self) -> str:
        request = f" request {self.request}" if self.request else ""
        return (f"pod {self.pod}: ResourceClaim {self.claim}{request} cannot be "
                f"allocated: {self.problem}")


@dataclass(frozen=True, slots=True)
class ClaimNotReady:
    """A pending member's claim is not there to allocate: not yet made from its template,
    gone, or being deleted."""

    code: ClassVar[str] = "ClaimNotReady"
    pod: PodKey
    claim: str
    state: str
    """"not created yet from template X", "does not exist", "is being deleted"."""

    def text(self) -> str:
        return f"pod {self.pod}: ResourceClaim {self.claim} {self.state}"


@dataclass(frozen=True, slots=True)
class DevicesNotServed:
    """A pending member has ResourceClaims, and the API server does not serve the devices
    API gangsched allocates them through: dynamic resource allocation is off here."""

    code: ClassVar[str] = "DevicesNotServed"
    pod: PodKey
    claims: int
    api: str

    def text(self) -> str:
        return (f"pod {self.pod} has {self.claims} ResourceClaim(s), and the API "
                f"server does not serve {self.api}: dynamic resource allocation is "
                f"off on this cluster")


@dataclass(frozen=True, slots=True)
class DevicesShort:
    """Too few devices for a member's claim on every node its other rules and room allow,
    with the best offer seen: a figure per node of the kind "2 of 8 free in clique b"."""

    code: ClassVar[str] = "DevicesShort"
    gang: GangKey
    pod: PodKey
    claim: str
    request: str
    device_class: str
    need: int
    """Devices the request asks (all matching ones, for allocationMode All)."""
    nodes: int
    """Nodes the pod's other rules and free room allow."""
    placed: int = 0
    """Members that found their devices before this one, and the gang's minimum."""
    minimum: int = 0
    attribute: str | None = None
    """The attribute a matchAttribute constraint makes the devices share, if any."""
    best_node: str | None = None
    best_free: int = 0
    """Free matching devices on the best node (in its best group, with ``attribute``)."""
    best_total: int = 0
    """Matching devices the best node has, free or not."""
    best_group: str | None = None
    unreadable: str | None = None
    """A slice of one of those nodes that could not be read, and why: its devices are
    not offered until its driver publishes it readable."""
    resource: str = ""
    """The extended resource the request serves, when it is of the claim made for the
    pod's extended resources (``claim`` is then empty: it is not created yet)."""

    def text(self) -> str:
        text = self._offer_text()
        return f"{text}; {self.unreadable}" if self.unreadable else text

    def _offer_text(self) -> str:
        if self.resource:
            # An extended resource served by devices is said in its own terms: the pod asks
            # ``example.com/gpu: 2``, not a claim it never named.
            head = (f"pod {self.pod} asks {self.resource}: {self.need}, which no node "
                    f"lists and devices of class {self.device_class} serve")
        else:
            where = f" in one {self.attribute}" if self.attribute else ""
            head = (f"pod {self.pod}: ResourceClaim {self.claim} request {self.request} "
                    f"needs {plural(self.need, 'device')} of class {self.device_class}{where}")
        if self.minimum:
            head = (f"gang {self.gang} found devices for {self.placed} of the "
                    f"{self.minimum} members it needs at once; {head}")
        if not self.nodes:
            return f"{head}, and no node has room for the pod otherwise"
        if self.best_node is None:
            return f"{head}: none of the {plural(self.nodes, 'node')} with room for the pod has one"
        offer = f"of {plural(self.nodes, 'node')} with room for the pod, the best"
        if self.resource:
            return (f"{head}: {offer} has {self.resource}: {self.best_free} of "
                    f"{self.best_total} devices free on {self.best_node}")
        group = f" in {self.best_group}" if self.best_group else ""
        return (f"{head}: {offer}, {self.best_node}, has {self.best_free} of "
                f"{self.best_total} free{group}")
