"""Refused binds back off per pod, and the gang says why it waits.

The API server may refuse a binding for reasons no other placement cures: an
admission policy, a revoked permission, a webhook that is down. Retrying at
once turns one refusal into hundreds of requests a second. A pod whose bind
was refused is therefore not tried again before its backoff ends; the delay
doubles with every refusal in a row, from ``INITIAL_S`` up to ``MAX_S``
(kube-scheduler's pod backoff has the same shape), and a bind that succeeds
forgets it.

While a member backs off its gang waits whole (placing the others would split
it), holds no room, and its reason quotes the API server's answer, in words
that stay the same until the next refusal, so the reason is written once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gangsched.core.model.objects import Gang, PodKey
from gangsched.core.reasons import BindBackoff

INITIAL_S = 1.0
MAX_S = 10.0
MESSAGE_CHARS = 200


@dataclass(frozen=True, slots=True)
class BindRefusal:
    """The last refusal of a pod's bind: how many in a row, and until when it waits."""

    refusals: int
    until: float
    status: int
    """HTTP status of the refusal; 0 when the request got no answer."""
    message: str

    def delay(self) -> float:
        return delay_after(self.refusals)


def delay_after(refusals: int) -> float:
    """Seconds to wait after ``refusals`` refusals in a row (at least one)."""
    doublings = min(max(0, refusals - 1), 16)
    return min(MAX_S, INITIAL_S * float(1 << doublings))


def refused(
    previous: BindRefusal | None, *, now: float, status: int, message: str
) -> BindRefusal:
    """The pod's backoff after one more refusal."""
    refusals = 1 if previous is None else previous.refusals + 1
    return BindRefusal(refusals, now + delay_after(refusals), status,
                       _one_line(message)[:MESSAGE_CHARS])


def backoff_reason(
    gang: Gang, refusals: Mapping[PodKey, BindRefusal], now: float
) -> BindBackoff | None:
    """Why ``gang`` is not tried now, or None when none of its pending pods backs off."""
    backing_off = [
        (pod.key, refusal) for pod in gang.pending
        if (refusal := refusals.get(pod.key)) is not None and refusal.until > now
    ]
    if not backing_off:
        return None
    pod, refusal = backing_off[0]
    return BindBackoff(pod, refusal.status, refusal.message, len(backing_off) - 1,
                       refusal.refusals)


def _one_line(text: str) -> str:
    return " ".join(text.split())
