"""Room held for an urgent gang: the gang that holds it says so before its own cause,
and a gang that would fit but for it is told whose it is."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from gangsched.core.model.objects import GangKey, NodeName
from gangsched.core.model.resources import Resources
from gangsched.core.model.runtimes import moment_text
from gangsched.core.reasons.wording import some

if TYPE_CHECKING:
    from gangsched.core.reasons import Reason


@dataclass(frozen=True, slots=True)
class HeldForStarving:
    """The gang would fit but for the room a starving gang keeps on the nodes it chose."""

    code: ClassVar[str] = "HeldForStarving"
    starving: GangKey
    held: Resources
    nodes: tuple[NodeName, ...]

    def text(self) -> str:
        return (f"it would fit but for {self.held} held on {some(self.nodes)} "
                f"for starving gang {self.starving}")


@dataclass(frozen=True, slots=True)
class PartlyBound:
    """Urgent because some members are bound and stranded until the rest is placed."""

    bound: int
    min_member: int

    def text(self) -> str:
        return f"partly bound ({self.bound} of {self.min_member})"


@dataclass(frozen=True, slots=True)
class Starved:
    """Urgent because it has waited past the starvation threshold (named, not the seconds
    waited, so the words do not change every second)."""

    threshold_s: float

    def text(self) -> str:
        return f"starving (unplaced over {self.threshold_s:g}s)"


Urgency = PartlyBound | Starved


@dataclass(frozen=True, slots=True)
class Starving:
    """The first urgent gang in order holds its room against the gangs after it."""

    code: ClassVar[str] = "Starving"
    urgency: Urgency
    hold: Resources
    cause: Reason
    nodes: tuple[NodeName, ...] = ()
    """The nodes whose free room is kept for it: where it would land first as they free."""
    at: float | None = None
    """Its reservation: the earliest it is expected to start (core.forecast). Gangs expected to
    end before then may use the room kept for it (EASY backfill)."""

    def text(self) -> str:
        where = f" on {some(self.nodes)}" if self.nodes else ""
        when = (f", reserved from {moment_text(self.at)} (gangs ending before may use it)"
                if self.at is not None else "")
        return (f"{self.urgency.text()}: holding {self.hold} for it{where}{when}; "
                f"{self.cause.text()}")


@dataclass(frozen=True, slots=True)
class TooBigToHold:
    """Urgent, but it needs more than the schedulable nodes have: holding cannot help."""

    code: ClassVar[str] = "TooBigToHold"
    urgency: Urgency
    need: Resources
    cluster_total: Resources
    cause: Reason

    def text(self) -> str:
        return (f"{self.urgency.text()} but needs {self.need}, more than the "
                f"schedulable nodes have ({self.cluster_total}); {self.cause.text()}")
