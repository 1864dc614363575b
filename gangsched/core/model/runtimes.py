"""How long a gang is expected to run once started, and so when it is expected to end.

A waiting gang's estimated start (:mod:`gangsched.core.forecast`) and whether
a gang may backfill into a starving gang's reserved room both rest on this,
so a runtime is only ever what its author stated: a pod's
``activeDeadlineSeconds`` (the kubelet ends it then, so it ends no later) or
the ``scheduling.gangsched.io/expected-runtime`` annotation on the pod or its
PodGroup. Nothing is guessed: a gang with a member of no stated runtime has
an unknown end, and what depends on it is unknown too.

Pure: annotations are read at the edge (:mod:`gangsched.core.kubeobjects`)
with :func:`read_runtime`; the clock is a parameter.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime

from gangsched.core.model.objects import Gang, Pod

RUNTIME_ANNOTATION = "scheduling.gangsched.io/expected-runtime"
"""A duration such as ``90s``, ``15m``, ``2h`` or ``1h30m``: how long the pod (or every
member of the PodGroup) runs once started."""

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def moment_text(at: float) -> str:
    """A moment as RFC 3339 in UTC, to the second: how estimates and reservations read."""
    return datetime.fromtimestamp(round(at), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_duration(text: str) -> float | None:
    """A Go duration such as ``90s`` or ``1m30s``; None when it is not one.

    A sign is not part of it: ``-5m`` is not a duration here, so a negative
    runtime is refused rather than read as zero.
    """
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text.strip():
        return None
    return sum(float(number) * _UNIT[unit] for number, unit in parts)


def read_runtime(annotations: Mapping[str, object]) -> tuple[float | None, str | None]:
    """The expected runtime an object's annotations state, and why it was refused if it was.

    A value that is not a duration, or is negative, is refused with a reason
    the object's status and an Event show; the object is then scheduled as if
    it had stated none (its runtime unknown), nothing else about it changes.
    """
    raw = annotations.get(RUNTIME_ANNOTATION)
    if raw is None:
        return None, None
    text = str(raw).strip()
    seconds = parse_duration(text)
    if seconds is not None:
        return seconds, None
    if text.startswith("-") and parse_duration(text[1:]) is not None:
        return None, f"annotation {RUNTIME_ANNOTATION}={text!r} is negative; runtime unknown"
    return None, (f"annotation {RUNTIME_ANNOTATION}={text!r} is not a duration such as "
                  "90s, 15m or 2h; runtime unknown")


def pod_runtime(pod: Pod, group_runtime: float | None) -> float | None:
    """How long the pod runs once started: what it or its group states, but never past
    its deadline; None when neither states anything."""
    stated = pod.expected_runtime if pod.expected_runtime is not None else group_runtime
    known = [value for value in (stated, pod.active_deadline) if value is not None]
    return min(known) if known else None


def gang_runtime(gang: Gang) -> float | None:
    """How long the gang runs once its pending pods start: its longest member's runtime,
    None when any member's is unknown."""
    return _longest(pod_runtime(pod, gang.expected_runtime) for pod in gang.pending)


def expected_end(pods: Iterable[Pod], group_runtime: float | None, now: float) -> float | None:
    """When the last of these running pods is expected to end; None when any end is unknown.

    A pod not started yet starts now; one past its expected end ends now (it
    may end any moment, and an end in the past would move nothing).
    """
    ends = []
    for pod in pods:
        runtime = pod_runtime(pod, group_runtime)
        if runtime is None:
            return None
        ends.append(max(now, (pod.started if pod.started is not None else now) + runtime))
    return max(ends, default=None)


def backfills(gang: Gang, now: float, reservation: float | None) -> bool:
    """Whether the gang, started now, is expected to end by ``reservation``: then it may
    use the room reserved for the starving gang (EASY backfill). A gang of unknown
    runtime never may: nothing says it gives the room back in time."""
    if reservation is None:
        return False
    runtime = gang_runtime(gang)
    return runtime is not None and now + runtime <= reservation


def _longest(runtimes: Iterable[float | None]) -> float | None:
    longest: float | None = None
    for runtime in runtimes:
        if runtime is None:
            return None
        longest = runtime if longest is None else max(longest, runtime)
    return longest
