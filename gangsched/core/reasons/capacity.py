"""The nodes lack room: none at all, or too little for the gang's pods at once."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from gangsched.core.model.objects import Gang, GangKey, NodeName, PodPlacementRules
from gangsched.core.model.resources import Resources, resource_words
from gangsched.core.reasons.wording import (
    TIMES,
    describe_request,
    excluded_text,
    plural,
)


@dataclass(frozen=True, slots=True)
class VolumeLimitBound:
    """A CSI driver's per-node volume limit, where it holds a kind of pod's room below
    what the node's other resources allow: on how many nodes, and on the nearest of them
    to taking one more pod, its limit and the volumes attached there."""

    driver: str
    nodes: int
    node: NodeName
    limit: int
    attached: int
    wanted: int
    """Volumes of the driver one pod of the kind attaches."""

    @property
    def over(self) -> int:
        """Volumes one more pod would attach beyond the nearest node's limit (0: it fits)."""
        return max(0, self.attached + self.wanted - self.limit)

    def text(self) -> str:
        head = (f"the volume limit of CSI driver {self.driver} holds down the room of "
                f"{plural(self.nodes, 'node')}")
        if self.over:
            return (f"{head}: {plural(self.over, 'more volume')} of CSI driver {self.driver} "
                    f"than {self.node}'s limit of {self.limit} allows")
        return (f"{head}: {self.node} has {self.attached} of its {self.limit} attached and "
                f"a pod attaches {self.wanted}")


@dataclass(frozen=True, slots=True)
class ShapeFigures:
    """What the nodes offer to one kind of pod in the gang, counted in nodes."""

    requests: Resources
    rules: PodPlacementRules
    wanted: int
    room: Mapping[int, int]
    """Room (pods of this shape that fit) to number of eligible nodes with that room."""
    short: Mapping[str, int]
    """Resource to number of eligible nodes that lack it for even one pod."""
    excluded: Mapping[str, int]
    """Exclusion reason (taint, cordoned...) to number of nodes."""
    volume_limits: tuple[VolumeLimitBound, ...] = ()
    """The CSI drivers whose node volume limits hold the kind's room down."""

    @property
    def fits_alone(self) -> bool:
        return sum(room * nodes for room, nodes in self.room.items()) >= self.wanted

    def room_text(self) -> str:
        room: dict[int, int] = {}
        for fits, nodes in self.room.items():
            shown = min(fits, self.wanted)
            room[shown] = room.get(shown, 0) + nodes
        parts = [
            f"{plural(nodes, 'node')} can take {fits}{' each' if nodes > 1 else ''}"
            for fits, nodes in sorted(room.items(), reverse=True)
        ] or ["no node can take one"]
        if self.short:
            ordered = sorted(self.short.items(), key=lambda item: (-item[1], item[0]))
            parts.append(
                ", ".join(
                    f"{plural(nodes, 'node') if position == 0 else nodes} short of "
                    f"{resource_words(name)}"
                    for position, (name, nodes) in enumerate(ordered)
                )
            )
        parts.extend(limit.text() for limit in self.volume_limits)
        return "; ".join(parts)


@dataclass(frozen=True, slots=True)
class NoNodes:
    """The cluster has no node at all."""

    code: ClassVar[str] = "NoNodes"
    gang: GangKey

    def text(self) -> str:
        return f"gang {self.gang}: the cluster has no nodes"


@dataclass(frozen=True, slots=True)
class DoesNotFit:
    """The nodes lack room for the gang's pods at once: per kind of pod, what they offer."""

    code: ClassVar[str] = "DoesNotFit"
    gang: GangKey
    need: int
    """Pods that must fit at once (``min_member - bound``); 0 when only extras wait."""
    bound: int
    min_member: int
    shapes: tuple[ShapeFigures, ...]
    search_stopped_after: int | None = None
    """The exhaustive search gave up after examining this many node groups."""
    search_skipped_over: int | None = None
    """The exhaustive search was skipped: the gang has more pods than this."""

    @property
    def pending(self) -> int:
        return sum(shape.wanted for shape in self.shapes)

    def text(self) -> str:
        """E.g. ``gang ns/train needs 4 pods \u00d7 2 nvidia.com/gpu; 3 nodes can take 1
        each; nodes excluded: 2 by taint gpu=busy:NoSchedule, 1 cordoned``."""
        return "; ".join([self._head(), *self._offers()])

    def _head(self) -> str:
        shapes = self.shapes
        if self.need == 0:
            head = f"gang {self.gang} has {plural(self.pending, 'pending pod')}"
        else:
            head = f"gang {self.gang} needs {plural(self.need, 'pod')}"
            if self.need < self.pending:
                head += f" of {self.pending} pending"
        if len(shapes) == 1:
            head += f" {TIMES} {describe_request(shapes[0].requests)}"
        else:
            head += " (" + ", ".join(
                f"{shape.wanted} {TIMES} {describe_request(shape.requests)}" for shape in shapes
            ) + ")"
        if self.bound:
            head += f", {self.bound} of minMember {self.min_member} already bound"
        return head

    def _offers(self) -> list[str]:
        shapes = self.shapes
        parts: list[str] = []
        same_rules = all(shape.rules == shapes[0].rules for shape in shapes)
        for shape in shapes:
            label = "" if len(shapes) == 1 else f"for {describe_request(shape.requests)}: "
            parts.append(label + shape.room_text())
            if not same_rules and shape.excluded:
                parts.append(label + excluded_text(shape.excluded))
        if same_rules and shapes[0].excluded:
            parts.append(excluded_text(shapes[0].excluded))
        if len(shapes) > 1 and all(shape.fits_alone for shape in shapes):
            parts.append("each kind of pod fits on its own but not all together")
        if self.search_stopped_after is not None:
            parts.append(f"search stopped after examining {self.search_stopped_after} node groups")
        if self.search_skipped_over is not None:
            parts.append(f"exhaustive search skipped for more than {self.search_skipped_over} pods")
        return parts


def unplaceable_reason(
    gang: Gang,
    shapes: Sequence[ShapeFigures],
    need: int,
    cluster_nodes: int,
    *,
    search_stopped_after: int | None = None,
    search_skipped_over: int | None = None,
) -> NoNodes | DoesNotFit:
    """The reason for an Unplaceable decision of the placement core."""
    if not cluster_nodes:
        return NoNodes(gang.key)
    return DoesNotFit(gang.key, need, gang.bound, gang.min_member, tuple(shapes),
                      search_stopped_after, search_skipped_over)
