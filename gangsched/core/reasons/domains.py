"""The gang must land inside one topology domain, and no domain can take it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from gangsched.core.model import GangKey

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
class NoDomainHolds:
    code: ClassVar[str] = "NoDomainHolds"
    label: str
    domains: int
    """Domains tried."""
    shown: tuple[InDomain, ...]
    """The first domains' refusals; the others are only counted."""

    def text(self) -> str:
        shown = "; ".join(domain.text() for domain in self.shown)
        hidden = self.domains - len(self.shown)
        more = f"; {hidden} more domains too small" if hidden > 0 else ""
        return (f"no single {self.label} domain of {self.domains} holds the whole gang: "
                f"{shown}{more}")
