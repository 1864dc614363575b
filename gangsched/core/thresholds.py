"""When the clock alone changes a cycle's answer.

A cycle's answer depends on its inputs and on ``now`` only through fixed
thresholds: a gang starves once it has waited ``starvation_s``, a PodGroup
turns Unschedulable past its ``scheduleTimeoutSeconds``, a held room is
released when its grace ends, a preemption stops holding room after its
timeout, a refused victim may be chosen again, an assumed bind expires, a pod
whose bind was refused ends its backoff. Between
two thresholds the answer to the same inputs is the same, so a cycle whose
inputs did not change since the last one may reuse that answer until the
earliest threshold after the last one: :func:`next_threshold`.
"""

from __future__ import annotations

from collections.abc import Iterable

EPSILON_S = 1e-3
"""Thresholds are compared as ``now - since >= limit`` and computed here as
``since + limit``: rounding may tell them apart, so a threshold counts as
reached this much early, and as passed only this much after."""


def next_threshold(last_run: float, moments: Iterable[float]) -> float:
    """The earliest moment after ``last_run`` when a threshold is reached (``inf``: none).

    ``moments`` are the instants at which some threshold is reached, past ones
    included: those the cycle at ``last_run`` already saw are left out.
    """
    return min(
        (moment - EPSILON_S for moment in moments if moment + EPSILON_S > last_run),
        default=float("inf"),
    )
