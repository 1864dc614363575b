"""Asking Karpenter for nodes: a gang that more nodes would let run asks, says so, and says
why it does not when no NodePool can launch what it needs or it asked long enough."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from gangsched.core.model.objects import GangKey
from gangsched.core.model.resources import Resources
from gangsched.core.model.runtimes import moment_text
from gangsched.core.reasons.wording import plural, some

if TYPE_CHECKING:
    from gangsched.core.reasons import Reason


@dataclass(frozen=True, slots=True)
class AskingForNodes:
    """The gang would be placed if nodes were added and a NodePool can launch them: its
    pods say ``Unschedulable``, which Karpenter acts on."""

    code: ClassVar[str] = "AskingForNodes"
    pods: int
    need: Resources
    cause: Reason

    def text(self) -> str:
        return f"asking for nodes: {plural(self.pods, 'pod')}, {self.need}; {self.cause.text()}"


@dataclass(frozen=True, slots=True)
class NodesComing:
    """Nodes an autoscaler made since the gang asked are held for it, and it still asks
    for what they lack (nothing: they are all here, not yet usable); its pods keep saying
    ``Unschedulable``, so the signal does not flip while its nodes come."""

    code: ClassVar[str] = "NodesComing"
    nodes: tuple[str, ...]
    missing: Resources
    cause: Reason

    def text(self) -> str:
        still = f"still asking for {self.missing}" if not self.missing.is_zero \
            else "waiting for them to take pods"
        return (f"nodes coming for this gang: {some(self.nodes)} held for it, {still}; "
                f"{self.cause.text()}")


@dataclass(frozen=True, slots=True)
class NodePoolLimit:
    """No NodePool whose nodes its pods may use can launch what the gang needs under its
    limits, or the room left goes first to the gangs ahead of it in order, one batch at
    a time: it does not ask, so no node is bought for a gang that cannot start."""

    code: ClassVar[str] = "NodePoolLimit"
    need: Resources
    headroom: tuple[tuple[str, Resources], ...]
    """Each NodePool its pods may use, with what its limits leave."""
    ahead: tuple[GangKey, ...]
    """The gangs asking first for that room (none: no NodePool could hold it at all)."""
    cause: Reason

    def text(self) -> str:
        if not self.headroom:
            why = f"needs {self.need} and no NodePool makes nodes its pods may use"
        else:
            left = ", ".join(f"{pool} has {room or 'nothing'} left"
                             for pool, room in self.headroom)
            why = f"needs {self.need}; {left}"
            if self.ahead:
                why += f"; asking first: gang {some(self.ahead)}"
        return f"waiting: NodePool limit: {why}; {self.cause.text()}"


@dataclass(frozen=True, slots=True)
class AskingPaused:
    """It asked for nodes this long without being placed: it stops asking until ``until``,
    so the nodes bought for it go back to consolidation, and then asks again."""

    code: ClassVar[str] = "AskingPaused"
    asked_s: float
    until: float
    cause: Reason

    def text(self) -> str:
        return (f"asked for nodes for {self.asked_s:g}s without being placed: asking again "
                f"from {moment_text(self.until)}; {self.cause.text()}")
