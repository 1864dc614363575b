"""Who goes next: weighted dominant-resource share between queues, priority and age inside one.

Shares are exact ``Fraction``s, not floats, so two queues that are truly tied
compare equal on every machine and the tie falls to the queue name: the order
of a cycle must depend on its input alone.
"""

from __future__ import annotations

from fractions import Fraction

from gangsched.core.model.objects import Gang, GangKey
from gangsched.core.model.resources import Resources


def dominant_share(allocated: Resources, total: Resources, weight: int) -> Fraction:
    """The largest fraction of any cluster resource the queue holds, divided by its weight.

    Dominant resource fairness (Ghodsi et al.) rather than a single dimension,
    because a GPU queue and a CPU queue must be comparable: each is charged for
    the resource it uses most of. A resource the cluster does not have
    (total 0) is skipped: no queue can be charged a share of nothing. Dividing
    by the weight is what makes a weight-2 queue get twice the room of a
    weight-1 queue before it counts as ahead.
    """
    if weight < 1:
        raise ValueError(f"queue weight must be at least 1, got {weight}")
    share = Fraction(0)
    for name, amount in total.items():
        if amount <= 0:
            continue
        share = max(share, Fraction(allocated.get(name), amount))
    return share / weight


def gang_order(gang: Gang) -> tuple[int, float, GangKey]:
    """Sort key inside a queue: higher priority first, then older first, then by key.

    Age after priority is first come, first served among equals, which is what
    users expect of a queue; the key only makes equal priority and age
    deterministic.
    """
    return (-gang.priority, gang.created, gang.key)
