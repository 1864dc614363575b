"""The words every family of reasons shares: counts, lists of names, what a pod asks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gangsched.core.model.resources import (
    PODS,
    Resources,
    devices_first,
    format_amount,
    resource_words,
)

TIMES = "\u00d7"  # the multiplication sign


def describe_request(requests: Resources) -> str:
    """``2 nvidia.com/gpu`` or ``(4 cpu + 16Gi memory)``; the pod slot goes unsaid."""
    parts = [
        f"{format_amount(name, requests.get(name))} {resource_words(name)}"
        for name in sorted(requests.amounts, key=devices_first)
        if name != PODS
    ]
    if not parts:
        return "no resources"
    if len(parts) == 1:
        return parts[0]
    return "(" + " + ".join(parts) + ")"


def plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def some(names: Sequence[str], shown: int = 3) -> str:
    """A few names, and how many more: a reason stays one readable line."""
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" and {more} more" if more > 0 else "")


def more_pods(others: int) -> str:
    return f" (and {others} more pods of the gang)" if others else ""


def excluded_text(excluded: Mapping[str, int]) -> str:
    if not excluded:
        return ""
    ordered = sorted(excluded.items(), key=lambda item: (-item[1], item[0]))
    return "nodes excluded: " + ", ".join(
        f"{nodes} {reason}" if reason in ("cordoned", "not ready") else f"{nodes} by {reason}"
        for reason, nodes in ordered
    )


def queues_text(queues: Sequence[str]) -> str:
    if len(queues) == 1:
        return f"queue {queues[0]!r}"
    return f"queues {', '.join(repr(q) for q in queues)}"
