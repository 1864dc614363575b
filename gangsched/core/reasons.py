"""Why a gang could not be placed, in one line with figures.

The line becomes a PodGroup condition message, an Event and the
``PodScheduled=False`` message on each pod, so it is written for the person
running ``kubectl describe``: what the gang asks, how much room the nodes
have for it, and which nodes were ruled out and why. Cluster autoscalers and
people both act on it; neither can act on "does not fit".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gangsched.core.model import Gang, GangKey, PodPlacementRules
from gangsched.core.resources import PODS, Resources, devices_first, format_amount

__all__ = [
    "Reported",
    "ShapeFigures",
    "describe_request",
    "render",
    "reported_reasons",
    "unplaceable_reason",
]

_TIMES = "\u00d7"  # the multiplication sign


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

    @property
    def fits_alone(self) -> bool:
        return sum(room * nodes for room, nodes in self.room.items()) >= self.wanted


def render(reason: str) -> str:
    """The one place a reason becomes the text of a condition, an Event, a log line or
    ``explain``: every writer goes through here, so a reason is worded once."""
    return reason


def describe_request(requests: Resources) -> str:
    """``2 nvidia.com/gpu`` or ``(4 cpu + 16Gi memory)``; the pod slot goes unsaid."""
    parts = [
        f"{format_amount(name, requests.get(name))} {name}"
        for name in sorted(requests.amounts, key=devices_first)
        if name != PODS
    ]
    if not parts:
        return "no resources"
    if len(parts) == 1:
        return parts[0]
    return "(" + " + ".join(parts) + ")"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _room_text(figures: ShapeFigures) -> str:
    room: dict[int, int] = {}
    for fits, nodes in figures.room.items():
        shown = min(fits, figures.wanted)
        room[shown] = room.get(shown, 0) + nodes
    parts = [
        f"{_plural(nodes, 'node')} can take {fits}{' each' if nodes > 1 else ''}"
        for fits, nodes in sorted(room.items(), reverse=True)
    ] or ["no node can take one"]
    if figures.short:
        ordered = sorted(figures.short.items(), key=lambda item: (-item[1], item[0]))
        parts.append(
            ", ".join(
                f"{_plural(nodes, 'node') if position == 0 else nodes} short of {name}"
                for position, (name, nodes) in enumerate(ordered)
            )
        )
    return "; ".join(parts)


def _excluded_text(excluded: Mapping[str, int]) -> str:
    if not excluded:
        return ""
    ordered = sorted(excluded.items(), key=lambda item: (-item[1], item[0]))
    return "nodes excluded: " + ", ".join(
        f"{nodes} {reason}" if reason in ("cordoned", "not ready") else f"{nodes} by {reason}"
        for reason, nodes in ordered
    )


def unplaceable_reason(
    gang: Gang,
    shapes: Sequence[ShapeFigures],
    need: int,
    cluster_nodes: int,
    cut_short: str | None = None,
) -> str:
    """The one-line reason for an Unplaceable decision.

    Example: ``gang ns/train needs 4 pods \u00d7 2 nvidia.com/gpu; 3 nodes can
    take 1 each; nodes excluded: 2 by taint gpu=busy:NoSchedule, 1 cordoned``.
    """
    if not cluster_nodes:
        return f"gang {gang.key}: the cluster has no nodes"
    pending = sum(shape.wanted for shape in shapes)
    if need == 0:
        head = f"gang {gang.key} has {_plural(pending, 'pending pod')}"
    else:
        head = f"gang {gang.key} needs {_plural(need, 'pod')}"
        if need < pending:
            head += f" of {pending} pending"
    if len(shapes) == 1:
        head += f" {_TIMES} {describe_request(shapes[0].requests)}"
    else:
        head += " (" + ", ".join(
            f"{shape.wanted} {_TIMES} {describe_request(shape.requests)}" for shape in shapes
        ) + ")"
    if gang.bound:
        head += f", {gang.bound} of minMember {gang.min_member} already bound"

    parts = [head]
    same_rules = all(shape.rules == shapes[0].rules for shape in shapes)
    for shape in shapes:
        label = "" if len(shapes) == 1 else f"for {describe_request(shape.requests)}: "
        parts.append(label + _room_text(shape))
        if not same_rules and shape.excluded:
            parts.append(label + _excluded_text(shape.excluded))
    if same_rules and shapes[0].excluded:
        parts.append(_excluded_text(shapes[0].excluded))
    if len(shapes) > 1 and all(shape.fits_alone for shape in shapes):
        parts.append("each kind of pod fits on its own but not all together")
    if cut_short:
        parts.append(cut_short)
    return "; ".join(parts)


@dataclass(frozen=True, slots=True)
class Reported:
    """The reason last reported for a waiting gang, and since when."""

    text: str
    since: float


def reported_reasons(
    reported: Mapping[GangKey, Reported],
    reasons: Mapping[GangKey, str],
    now: float,
    hold_s: float,
) -> dict[GangKey, Reported]:
    """The reasons to report now: a new reason, unless only its figures moved.

    While other gangs come and go, the room a waiting gang is told about
    ("3 nodes can take 1 each") changes nearly every cycle, and each change
    would rewrite the condition of every waiting pod, send Events and log a
    line: thousands of writes a minute on a busy cluster for nothing anyone
    acts on. So a reason whose first clause (up to the first ``"; "``) is
    unchanged, and that differs only after it, keeps the text reported
    before until that text is ``hold_s`` old. Any other change is reported at
    once.
    """
    settled: dict[GangKey, Reported] = {}
    for gang, reason in reasons.items():
        before = reported.get(gang)
        if before is not None and (before.text == reason or (
            now - before.since < hold_s and _same_clause(before.text, reason)
        )):
            settled[gang] = before
        else:
            settled[gang] = Reported(reason, now)
    return settled


def _same_clause(old: str, new: str) -> bool:
    head, separator, _ = new.partition("; ")
    return bool(separator) and old.startswith(head + separator)
