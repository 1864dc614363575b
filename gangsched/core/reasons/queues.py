"""The gang's queue holds it back: missing, closed, invalid, not a leaf, or at its cap;
or admission finds no room for its minResources."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from gangsched.core.model.objects import GangKey, QueueName
from gangsched.core.model.resources import Capability, Resources
from gangsched.core.reasons.wording import some


@dataclass(frozen=True, slots=True)
class QueueMissing:
    code: ClassVar[str] = "QueueMissing"
    queue: QueueName

    def text(self) -> str:
        return f"queue {self.queue!r} does not exist"


@dataclass(frozen=True, slots=True)
class QueueClosed:
    """``queue`` is Closed: the gang's own queue or one above it, whose subtree admits no
    new gangs."""

    code: ClassVar[str] = "QueueClosed"
    queue: QueueName

    def text(self) -> str:
        return f"queue {self.queue!r} is closed: it admits no new gangs"


QUEUE_PROBLEMS = ("ParentMissing", "ParentCycle", "ParentInvalid", "WeightBelowOne")
"""What can make a queue invalid in the hierarchy: also the reason of its Invalid condition."""


@dataclass(frozen=True, slots=True)
class QueueInvalid:
    """The queue has no place in the hierarchy, so no share or cap can be worked out for it:
    its new gangs wait. ``problem`` is one of :data:`QUEUE_PROBLEMS`; ``queue`` is the queue
    the gang names, ``parent`` the queue the problem is about."""

    code: ClassVar[str] = "QueueInvalid"
    queue: QueueName
    problem: str
    parent: QueueName | None = None
    cycle: tuple[QueueName, ...] = ()
    """The queues of a parent cycle, in parent order from ``queue``."""
    weight: int = 1

    def text(self) -> str:
        parent = repr(self.parent)
        match self.problem:
            case "ParentMissing":
                why = f"its parent queue {parent} does not exist (deleted, or not created yet)"
            case "ParentCycle":
                why = f"its parents form a cycle: {' -> '.join([*self.cycle, self.cycle[0]])}"
            case "ParentInvalid":
                why = f"its parent queue {parent} is invalid"
            case _:
                why = f"its weight is {self.weight}, and a queue needs a weight of at least 1"
        return (f"queue {self.queue!r} is invalid: {why}; it admits no new gangs until "
                f"this is fixed")


@dataclass(frozen=True, slots=True)
class QueueNotLeaf:
    """The queue has child queues, and only leaf queues take gangs (as in Volcano and KAI):
    its new gangs wait; those already bound keep running."""

    code: ClassVar[str] = "QueueNotLeaf"
    queue: QueueName
    children: tuple[QueueName, ...]

    def text(self) -> str:
        return (f"queue {self.queue!r} has child queues ({some(self.children)}): "
                f"submit to a leaf queue")


@dataclass(frozen=True, slots=True)
class CapabilityExceeded:
    code: ClassVar[str] = "CapabilityExceeded"
    queue: QueueName
    capability: Capability
    allocated: Resources
    reserved: Resources
    placed: Resources

    def text(self) -> str:
        return (f"queue {self.queue!r} capability {self.capability} would be exceeded: "
                f"allocated {self.allocated}, reserved by admitted gangs "
                f"{self.reserved}, this gang {self.placed}")


@dataclass(frozen=True, slots=True)
class AdmissionOverCapability:
    code: ClassVar[str] = "AdmissionOverCapability"
    min_resources: Resources
    queue: QueueName
    capability: Capability
    allocated: Resources
    reserved: Resources

    def text(self) -> str:
        return (f"waiting for admission: minResources {self.min_resources} would exceed "
                f"queue {self.queue!r} capability {self.capability} "
                f"(allocated {self.allocated}, reserved {self.reserved})")


@dataclass(frozen=True, slots=True)
class AdmissionNoRoom:
    code: ClassVar[str] = "AdmissionNoRoom"
    min_resources: Resources
    free: Resources
    reserved: Resources
    short: Resources

    def text(self) -> str:
        return (f"waiting for admission: minResources {self.min_resources} do not fit: "
                f"{self.free} free on schedulable nodes, {self.reserved} of it reserved "
                f"by admitted gangs (short {self.short})")


@dataclass(frozen=True, slots=True)
class ReservedByAdmitted:
    """The gang fits on the nodes, but only in room promised to admitted gangs."""

    code: ClassVar[str] = "ReservedByAdmitted"
    reserved: Resources
    placed: Resources
    free_after: Resources
    starving: GangKey | None = None
    starving_held: Resources | None = None
    """Of ``reserved``, what the starving gang ``starving`` holds."""

    def text(self) -> str:
        starving = ""
        if self.starving is not None:
            starving = f" ({self.starving_held} of it held for starving gang {self.starving})"
        return (f"resources reserved by admitted gangs: {self.reserved}{starving}; "
                f"placing {self.placed} would leave {self.free_after} free")
