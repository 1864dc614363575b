"""The gang must land inside one topology domain, and no domain can take it."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, ClassVar

from gangsched.core.model.objects import GangKey, PodKey
from gangsched.core.model.resources import format_amount, resource_words
from gangsched.core.reasons.wording import more_pods

if TYPE_CHECKING:
    from gangsched.core.reasons import Reason


@dataclass(frozen=True, slots=True)
class NoDomainLabel:
    code: ClassVar[str] = "NoDomainLabel"
    gang: GangKey
    label: str

    def text(self) -> str:
        return (f"gang {self.gang} must land in one {self.label} domain, "
                f"but no node carries the label {self.label}")


@dataclass(frozen=True, slots=True)
class BoundAcrossDomains:
    code: ClassVar[str] = "BoundAcrossDomains"
    gang: GangKey
    label: str

    def text(self) -> str:
        return (f"gang {self.gang} must land in one {self.label} domain, "
                f"but its bound members span more than one")


@dataclass(frozen=True, slots=True)
class InDomain:
    """Why the gang does not fit inside one domain (described as its label values)."""

    code: ClassVar[str] = "InDomain"
    domain: str
    cause: Reason

    def text(self) -> str:
        return f"in {self.domain}: {self.cause.text()}"


@dataclass(frozen=True, slots=True)
class DomainRoom:
    """How near one domain came to holding the gang: of the resource it is shortest of
    (else the scarcest the gang asks), ``free`` of the ``total`` its nodes have, where the
    gang's pending pods ask ``asked``; in canonical units."""

    code: ClassVar[str] = "DomainRoom"
    level: str
    """The node label of the domain's level."""
    value: str
    resource: str
    free: int
    total: int
    asked: int

    def text(self) -> str:
        amount = partial(format_amount, self.resource)
        return (f"{_level_word(self.level)} {self.value}: {amount(self.free)} of "
                f"{amount(self.total)} {resource_words(self.resource)} free, "
                f"{amount(self.asked)} asked")


@dataclass(frozen=True, slots=True)
class NoDomainHolds:
    code: ClassVar[str] = "NoDomainHolds"
    label: str
    domains: int
    """Domains tried."""
    shown: tuple[InDomain, ...]
    """The first domains' refusals; the others are only counted."""
    closest: tuple[DomainRoom, ...] = ()
    """The domains that came closest at each level tried, tightest level first, most free
    room first within one: what ``explain`` names."""

    def text(self) -> str:
        shown = "; ".join(domain.text() for domain in self.shown)
        hidden = self.domains - len(self.shown)
        more = f"; {hidden} more domains too small" if hidden > 0 else ""
        return (f"no single {self.label} domain of {self.domains} holds the whole gang: "
                f"{shown}{more}")


@dataclass(frozen=True, slots=True)
class WaitsForPreferred:
    """No domain of the gang's preferred level holds it (``cause`` says why) and a wider
    level's would (``wider``, the node label; empty: spread across domains), but the gang
    has waited less than its ``preferredWaitSeconds`` (``wait_s``): it keeps waiting for
    one domain of its preferred level to free."""

    code: ClassVar[str] = "WaitsForPreferred"
    preferred: str
    wait_s: int
    wider: str
    cause: Reason

    def text(self) -> str:
        wider = f"one {_level_word(self.wider)}" if self.wider else "spread across domains"
        return (f"waiting up to {self.wait_s}s for one {_level_word(self.preferred)} to hold "
                f"the whole gang before taking {wider}, which holds it now: "
                f"{self.cause.text()}")


@dataclass(frozen=True, slots=True)
class TopologyUnknown:
    """The PodGroup's ``spec.topology`` names a Topology that does not exist (``levels``
    empty), or a level, by node label, that the Topology does not have."""

    code: ClassVar[str] = "TopologyUnknown"
    topology: str
    level: str = ""
    levels: tuple[str, ...] = ()

    def text(self) -> str:
        if not self.levels:
            return f"topology {self.topology!r} does not exist"
        return (f"topology {self.topology!r} has no level {self.level!r}; its levels: "
                f"{', '.join(self.levels)}")


@dataclass(frozen=True, slots=True)
class SubGroupUnknown:
    """A pending pod names, by the sub-group label, a sub-group its PodGroup does not list
    (``known``, empty when it lists none): where it belongs is unknown, so its gang waits."""

    code: ClassVar[str] = "SubGroupUnknown"
    pod: PodKey
    sub_group: str
    known: tuple[str, ...] = ()
    others: int = 0
    """Other pending pods of the gang naming an unknown sub-group."""

    def text(self) -> str:
        listed = (f"which its PodGroup does not list (its sub-groups: {', '.join(self.known)})"
                  if self.known else "but its PodGroup lists no sub-groups")
        return (f"pod {self.pod} names sub-group {self.sub_group!r}, {listed}"
                f"{more_pods(self.others)}")


@dataclass(frozen=True, slots=True)
class InSubGroup:
    """Why one sub-group of the gang does not fit (inside the domain the gang was tried in)."""

    code: ClassVar[str] = "InSubGroup"
    sub_group: str
    cause: Reason

    def text(self) -> str:
        return f"sub-group {self.sub_group}: {self.cause.text()}"


@dataclass(frozen=True, slots=True)
class SubGroupHeld:
    """Where one sub-group landed: inside one domain of ``level`` (the node label's
    ``value``), or anywhere in the gang's domain when ``level`` is empty."""

    sub_group: str
    level: str = ""
    value: str = ""

    def text(self) -> str:
        where = (f"in {_level_word(self.level)} {self.value}" if self.level
                 else "across domains")
        return f"{self.sub_group} {where}"


@dataclass(frozen=True, slots=True)
class LevelHeld:
    """Where a gang with Topology levels landed: inside one domain of ``level`` (the node
    label's ``value``), or spread when ``level`` is empty; ``preferred`` is the level it
    asked for, empty when it asked only for a required one; ``sub_groups``, where each of
    its sub-groups landed."""

    level: str
    value: str = ""
    preferred: str = ""
    sub_groups: tuple[SubGroupHeld, ...] = ()

    def text(self) -> str:
        """The placement's level, as the gang's Scheduled Event says it."""
        where = f"in {_level_word(self.level)} {self.value}" if self.level else "across domains"
        if self.preferred and self.preferred != self.level:
            where = f"{where}: no {_level_word(self.preferred)} held it"
        if self.sub_groups:
            where = f"{where}; sub-groups {', '.join(sub.text() for sub in self.sub_groups)}"
        return where


def _level_word(label: str) -> str:
    """``topology.example.com/rack`` as ``rack``."""
    return label.rsplit("/", 1)[-1]
