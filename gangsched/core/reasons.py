"""Why a gang could not be placed, in one line with figures.

The line becomes a PodGroup condition message, an Event and the
``PodScheduled=False`` message on each pod, so it is written for the person
running ``kubectl describe``: what the gang asks, how much room the nodes
have for it, and which nodes were ruled out and why. Cluster autoscalers and
people both act on it; neither can act on "does not fit".
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from gangsched.core.model import Gang, NodeName
from gangsched.core.packing import PodType, capacity
from gangsched.core.resources import CPU, EPHEMERAL, MEMORY, PODS, Resources, format_amount
from gangsched.core.snapshot import NodeIndex

__all__ = ["describe_request", "unplaceable_reason"]

_TIMES = "\u00d7"  # the multiplication sign
_BLAME_LAST = {CPU: 1, MEMORY: 2, EPHEMERAL: 3, PODS: 4}


def describe_request(requests: Resources) -> str:
    """``2 nvidia.com/gpu`` or ``(4 cpu + 16Gi memory)``; the pod slot goes unsaid."""
    parts = [
        f"{format_amount(name, amount)} {name}"
        for name, amount in sorted(requests.amounts.items(), key=_blame_order)
        if name != PODS
    ]
    if not parts:
        return "no resources"
    if len(parts) == 1:
        return parts[0]
    return "(" + " + ".join(parts) + ")"


def _blame_order(item: tuple[str, int]) -> tuple[int, str]:
    # Devices first: when a GPU node is short of both GPUs and CPU, the GPUs
    # are what the reader needs to hear about.
    return (_BLAME_LAST.get(item[0], 0), item[0])


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _type_summary(
    kind: PodType,
    index: NodeIndex,
    classes: Sequence[Mapping[Resources, Collection[NodeName]]],
) -> tuple[str, str, bool]:
    """(room on eligible nodes, exclusions, whether the type fits on its own)."""
    wanted = len(kind.pods)
    room: dict[int, int] = {}
    short: dict[str, int] = {}
    excluded: dict[str, int] = {}
    kind_reasons = index.kind_reasons(kind.rules)
    by_name = index.name_reasons(kind.rules) if _by_name(kind) else None
    for kind_id, kind_classes in enumerate(classes):
        for free, members in kind_classes.items():
            if by_name is None and kind_reasons[kind_id] is not None:
                reason = kind_reasons[kind_id]
                assert reason is not None
                excluded[reason] = excluded.get(reason, 0) + len(members)
                continue
            eligible = len(members)
            if by_name is not None:
                eligible = 0
                for name in members:
                    reason = by_name[name]
                    if reason is None:
                        eligible += 1
                    else:
                        excluded[reason] = excluded.get(reason, 0) + 1
                if not eligible:
                    continue
            fits = capacity(free, kind.items)
            if fits:
                taken = min(fits, wanted)
                room[taken] = room.get(taken, 0) + eligible
            else:
                missing = kind.requests.short_of(free)
                blamed = min(missing.amounts.items(), key=_blame_order)[0]
                short[blamed] = short.get(blamed, 0) + eligible

    total_room = sum(taken * count for taken, count in room.items())
    parts = []
    if room:
        for taken, count in sorted(room.items(), reverse=True):
            each = " each" if count > 1 else ""
            parts.append(f"{_plural(count, 'node')} can take {taken}{each}")
    else:
        parts.append("no node can take one")
    if short:
        ordered = sorted(short.items(), key=lambda item: (-item[1], item[0]))
        parts.append(
            ", ".join(
                f"{_plural(count, 'node')} short of {name}" if position == 0
                else f"{count} short of {name}"
                for position, (name, count) in enumerate(ordered)
            )
        )
    exclusions = ""
    if excluded:
        ordered = sorted(excluded.items(), key=lambda item: (-item[1], item[0]))
        exclusions = "nodes excluded: " + ", ".join(
            f"{count} {reason}" if reason in ("cordoned", "not ready") else f"{count} by {reason}"
            for reason, count in ordered
        )
    return "; ".join(parts), exclusions, total_room >= wanted


def _by_name(kind: PodType) -> bool:
    return any(term.match_fields for term in kind.rules.required_affinity)


def unplaceable_reason(
    gang: Gang,
    types: Sequence[PodType],
    need: int,
    index: NodeIndex,
    classes: Sequence[Mapping[Resources, Collection[NodeName]]],
    cut_short: str | None = None,
) -> str:
    """The one-line reason for an Unplaceable decision.

    Example: ``gang ns/train needs 4 pods \u00d7 2 nvidia.com/gpu; 3 nodes can
    take 1 each; nodes excluded: 2 by taint gpu=busy:NoSchedule, 1 cordoned``.
    """
    pending = sum(len(kind.pods) for kind in types)
    if not index.nodes:
        return f"gang {gang.key}: the cluster has no nodes"
    if need == 0:
        head = f"gang {gang.key} has {_plural(pending, 'pending pod')}"
    else:
        head = f"gang {gang.key} needs {_plural(need, 'pod')}"
        if need < pending:
            head += f" of {pending} pending"
    if len(types) == 1:
        head += f" {_TIMES} {describe_request(types[0].requests)}"
    else:
        head += " (" + ", ".join(
            f"{len(kind.pods)} {_TIMES} {describe_request(kind.requests)}" for kind in types
        ) + ")"
    if gang.bound:
        head += f", {gang.bound} of minMember {gang.min_member} already bound"

    summaries = [_type_summary(kind, index, classes) for kind in types]
    parts = [head]
    same_rules = all(kind.rules == types[0].rules for kind in types)
    for kind, (room, exclusions, _) in zip(types, summaries, strict=True):
        label = "" if len(types) == 1 else f"for {describe_request(kind.requests)}: "
        parts.append(label + room)
        if exclusions and not same_rules:
            parts.append(f"{label}{exclusions}")
    if same_rules and summaries[0][1]:
        parts.append(summaries[0][1])
    if len(types) > 1 and all(fits for _, _, fits in summaries):
        parts.append("each kind of pod fits on its own but not all together")
    if cut_short:
        parts.append(cut_short)
    return "; ".join(parts)
