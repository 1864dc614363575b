"""Deserved shares as reclaim and priority preemption weigh them: who borrows, how much a
queue may take, and what a queue that gives keeps.

A queue's deserved share (:func:`gangsched.core.queues.hierarchy.deserved_shares`) is a
floor: reclaim takes room back only from queues above theirs and never past the
reclaiming queue's own, and with reclaim on, priority preemption across queues
takes only room a queue borrows. Both ask the same questions here, so room one of
them moves is never moved back by the other.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction

from gangsched.core.model.objects import QueueName
from gangsched.core.model.resources import Resources
from gangsched.core.queues.fairness import dominant_share
from gangsched.core.queues.hierarchy import subtree_total
from gangsched.core.stages.session import Session


def borrows(session: Session, queue: QueueName, deserved: Mapping[QueueName, Fraction]) -> bool:
    """Whether the queue holds more than its deserved share now."""
    return _share(session, _held(session, queue)) > deserved[queue]


def within_share(
    session: Session, queue: QueueName, victim_queue: QueueName, need: Resources,
    deserved: Mapping[QueueName, Fraction],
) -> bool:
    """Whether ``queue`` holding ``need`` more stays within its deserved share at every
    level where it parts from ``victim_queue``: room taken back from another team may
    not put the taking team past its share."""
    return all(_share(session, _held(session, name) + need) <= deserved[name]
               for name in _apart(session, queue, victim_queue))


def keeps_shares(
    session: Session, freed: Iterable[tuple[QueueName, Resources]], queue: QueueName,
    deserved: Mapping[QueueName, Fraction],
) -> bool:
    """Whether each queue giving up what ``freed`` pairs with it, and each of its ancestors
    apart from ``queue``'s, still holds its deserved share once all of it goes: each
    victim alone may, several together not."""
    given: dict[QueueName, Resources] = {}
    for victim_queue, amount in freed:
        for name in _apart(session, victim_queue, queue):
            given[name] = given.get(name, Resources.zero()) + amount
    return all(_share(session, _held(session, name) - amount) >= deserved[name]
               for name, amount in given.items())


def _apart(session: Session, queue: QueueName, other: QueueName) -> tuple[QueueName, ...]:
    """The queue and its ancestors that are not ``other``'s too: the levels at which the
    two part, where shares are weighed."""
    shared = set(session.tree.path(other))
    return (*(name for name in session.tree.path(queue) if name not in shared and name != queue),
            queue)


def _share(session: Session, held: Resources) -> Fraction:
    return dominant_share(held, session.cluster_total, 1)


def _held(session: Session, queue: QueueName) -> Resources:
    return subtree_total(session.tree, session.allocated, queue)
