"""Reclaim: a queue below its deserved share takes back room that queues above theirs borrowed.

In the spirit of Volcano's reclaim action. A queue's deserved share
(:func:`gangsched.core.queues.hierarchy.deserved_shares`) is a floor, not a cap:
while another queue is idle its room is lent to the queues that want it.
When a gang of a queue below its share then does not fit, and no gang of
lower priority may make room, it may evict whole gangs of queues that hold
more than their share, through the same victim search and the same eviction
as preemption (PodDisruptionBudgets hold, one preemption under way at a
time). Priority does not decide between queues here; among the borrowers'
gangs the lowest priority, then the youngest, still go first.

Never a gang of a queue at or under its share: every victim's queue keeps
at least its deserved share after the eviction, and the reclaiming queue
may not pass its own by the gang it places, so room taken back is never
taken back again the other way, nor by priority (:mod:`.preempt` takes from
another queue only room that queue borrows). In a tree this holds at every level where
the two part: between teams, the victim's team keeps its share and the
reclaiming queue's team may not pass its own, as between their queues; two
queues of one team settle it between themselves. A queue with ``reclaimable: false`` is
never reclaimed from; a gang that waits only because the queues that
borrowed opted out says so. How fast: a queue that reclaimed does not reclaim
again for ``--reclaim-interval-seconds`` (the step passes such queues as
``reclaim_paused``), so at most one reclaim decision per queue per interval.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from fractions import Fraction

from gangsched.core.model.objects import Gang, QueueName
from gangsched.core.model.resources import Resources
from gangsched.core.placement.preemption import Candidate, Preemption
from gangsched.core.reasons import NotReclaimable, Preempting, Reason
from gangsched.core.stages.session import Session, Waits, pending_need
from gangsched.core.stages.shares import keeps_shares, within_share
from gangsched.core.stages.victims import hold_for_preemptor, may_preempt, victims_for


def reclaim(session: Session, gang: Gang, reason: Reason) -> bool | Waits:
    """Start a reclaim for the gang when its queue is below its deserved share and queues
    above theirs hold gangs whose eviction makes it fit; True when one starts, Waits when
    the gang waits only because those queues are not reclaimable (its reason says so)."""
    if not _may_reclaim(session, gang):
        return False
    deserved = session.deserved()
    need = pending_need(gang, session.bound[gang.key])
    if not within_share(session, gang.queue, gang.queue, need, deserved):
        return False  # placed, it would hold more than its own queue deserves
    candidates, opted_out = _borrowed(session, gang, need, deserved)
    chosen = _victims(session, gang, candidates, deserved)  # every borrower's gang may go
    if chosen is None:
        if not opted_out:
            return False
        return _refused_by_opt_out(session, gang, reason, [*candidates, *opted_out], deserved)
    session.preemptions.append(replace(chosen, reclaim_for=gang.queue))
    hold = hold_for_preemptor(session, gang, chosen.victims, chosen.placement)
    session.tell(gang, Preempting(chosen.victims, hold, reason, reclaim_for=gang.queue))
    return True


def _victims(
    session: Session, gang: Gang, candidates: list[Candidate],
    deserved: Mapping[QueueName, Fraction],
) -> Preemption | None:
    """The fewest of ``candidates`` whose eviction makes the gang fit and leaves each of
    their queues its deserved share; None when there are none such."""
    if not candidates:
        return None
    chosen = victims_for(session, gang, candidates)
    if chosen is None:
        return None
    queues = {other.key: other.queue for other in session.evictable}
    freed = [(queues[victim], session.bound[victim]) for victim in chosen.victims]
    return chosen if keeps_shares(session, freed, gang.queue, deserved) else None


def _refused_by_opt_out(
    session: Session, gang: Gang, reason: Reason, candidates: list[Candidate],
    deserved: Mapping[QueueName, Fraction],
) -> bool | Waits:
    """Whether evicting gangs of queues that opted out would have made room; if so the
    gang waits with a reason naming them."""
    chosen = _victims(session, gang, candidates, deserved)
    if chosen is None:
        return False
    queues = {other.key: other.queue for other in session.evictable}
    refusing = tuple(sorted({queues[victim] for victim in chosen.victims
                             if not session.queues[queues[victim]].reclaimable}))
    if not refusing:
        return False
    return Waits(NotReclaimable(refusing, reason))


def _may_reclaim(session: Session, gang: Gang) -> bool:
    return (
        session.inp.reclaim
        and gang.queue not in session.inp.reclaim_paused
        and gang.queue in session.tree.paths
        and may_preempt(session, gang)
    )


def _borrowed(
    session: Session, gang: Gang, need: Resources, deserved: Mapping[QueueName, Fraction]
) -> tuple[list[Candidate], list[Candidate]]:
    """Running gangs of queues above their deserved share that each leave their queue, and
    its ancestors apart from the gang's, at or above it when evicted, from queues the gang
    may take from: those of reclaimable queues, and those of queues that opted out."""
    placed = {placement.gang for placement in session.placements}
    found: tuple[list[Candidate], list[Candidate]] = ([], [])
    may_take: dict[QueueName, bool] = {}
    for other in session.evictable:
        queue = other.queue
        if queue == gang.queue or queue not in deserved or other.key in placed:
            continue
        if queue not in may_take:
            may_take[queue] = within_share(session, gang.queue, queue, need, deserved)
        if not may_take[queue]:
            continue
        candidate = Candidate(other.key, other.priority, other.created,
                              tuple(session.inp.bound_pods[other.key]))
        if keeps_shares(session, [(queue, session.bound[other.key])], gang.queue, deserved):
            found[0 if session.queues[queue].reclaimable else 1].append(candidate)
    return found
