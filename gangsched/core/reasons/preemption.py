"""Preemption and reclaim: a gang evicting others says whom, a gang being evicted says
for whom, and a gang that may evict nobody says what protects them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from gangsched.core.model.objects import GangKey, QueueName
from gangsched.core.model.resources import Resources
from gangsched.core.reasons.wording import queues_text

if TYPE_CHECKING:
    from gangsched.core.reasons import Reason


@dataclass(frozen=True, slots=True)
class BeingPreempted:
    """Its members are being evicted for ``preemptor``."""

    code: ClassVar[str] = "BeingPreempted"
    preemptor: GangKey

    def text(self) -> str:
        return f"preempted by gang {self.preemptor}: waiting for its members to go"


@dataclass(frozen=True, slots=True)
class Preempting:
    """A preemption starts for it this cycle; it holds its room while the victims go."""

    code: ClassVar[str] = "Preempting"
    victims: tuple[GangKey, ...]
    hold: Resources
    cause: Reason
    reclaim_for: QueueName | None = None
    """Set when the victims are evicted to reclaim room for this queue, below its deserved
    share, from queues above theirs, not for priority."""

    def text(self) -> str:
        victims = f"{len(self.victims)} gang(s)"
        if self.reclaim_for is not None:
            clause = (f"reclaiming room for queue {self.reclaim_for!r}, below its deserved "
                      f"share: evicting {victims} of queues above theirs "
                      f"({', '.join(self.victims)})")
        else:
            clause = f"preempting {victims} of lower priority ({', '.join(self.victims)})"
        return f"{clause}; holding {self.hold} for it; {self.cause.text()}"


@dataclass(frozen=True, slots=True)
class AwaitingVictims:
    """Its preemption is under way; it holds its room until the victims are gone."""

    code: ClassVar[str] = "AwaitingVictims"
    victims: tuple[GangKey, ...]
    hold: Resources
    cause: Reason

    def text(self) -> str:
        return (f"preempted {len(self.victims)} gang(s) ({', '.join(self.victims)}); "
                f"holding {self.hold} until they are gone; {self.cause.text()}")


@dataclass(frozen=True, slots=True)
class ProtectedByBudget:
    """It does not fit and preempts nobody: the gangs of lower priority that could go are
    protected by PodDisruptionBudgets, which evicting them whole would exceed."""

    code: ClassVar[str] = "ProtectedByBudget"
    gangs: tuple[GangKey, ...]
    budgets: tuple[str, ...]
    cause: Reason

    def text(self) -> str:
        return (f"no preemption: {len(self.gangs)} gang(s) of lower priority "
                f"({', '.join(self.gangs)}) are protected by PodDisruptionBudgets "
                f"({', '.join(self.budgets)}) that evicting them whole would exceed; "
                f"{self.cause.text()}")


@dataclass(frozen=True, slots=True)
class NotReclaimable:
    """Its queue is below its deserved share and evicting gangs of queues above theirs would
    make room, but those queues are not reclaimable (``reclaimable: false``)."""

    code: ClassVar[str] = "NotReclaimable"
    queues: tuple[QueueName, ...]
    cause: Reason

    def text(self) -> str:
        if len(self.queues) == 1:
            clause = (f"no reclaim: queue {self.queues[0]!r} borrows above its deserved share "
                      f"but is not reclaimable")
        else:
            clause = (f"no reclaim: queues {', '.join(repr(q) for q in self.queues)} borrow "
                      f"above their deserved shares but are not reclaimable")
        return f"{clause}; {self.cause.text()}"


@dataclass(frozen=True, slots=True)
class ProtectedByShare:
    """It does not fit and preempts nobody: with reclaim on, the gangs of lower priority
    that could make room are of other queues that would fall below their deserved
    share, and priority preemption takes from another queue only room it borrows."""

    code: ClassVar[str] = "ProtectedByShare"
    queues: tuple[QueueName, ...]
    cause: Reason

    def text(self) -> str:
        return (f"no preemption: the gangs of lower priority that could make room are of "
                f"{queues_text(self.queues)}, which would fall below "
                f"{'its' if len(self.queues) == 1 else 'their'} deserved share; "
                f"{self.cause.text()}")
