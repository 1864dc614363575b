"""Preemption: a gang that does not fit may evict whole gangs of lower priority.

One preemption is under way at a time: while its victims go, the preemptor
holds the room it evicted for, and no victim is chosen twice
(:mod:`.victims`, which reclaim shares).

With reclaim on, priority and deserved shares obey one order: a gang evicts by
priority the gangs of its own queue, and of another queue only room that queue
borrows (it holds more than its deserved share, and keeps it once its victims
go, at every level where the two queues part: the check reclaim makes of its
victims, :mod:`.shares`). Room a queue holds within its share is never taken by
priority, so a queue that reclaimed is not preempted back, and a queue preempted
by priority, still above its share, has nothing to reclaim.
"""

from __future__ import annotations

from gangsched.core.model.objects import Gang, GangKey, QueueName
from gangsched.core.placement.preemption import Candidate, Preemption, protected_by_budgets
from gangsched.core.reasons import (
    AwaitingVictims,
    Preempting,
    ProtectedByBudget,
    ProtectedByShare,
    Reason,
)
from gangsched.core.stages.session import Session, Waits
from gangsched.core.stages.shares import borrows, keeps_shares
from gangsched.core.stages.victims import (
    hold_for_preemptor,
    may_preempt,
    placement_after,
    victims_for,
)


def preempt(session: Session, gang: Gang, reason: Reason) -> bool | Waits:
    """Hold room for a preemptor whose victims are going, or start a preemption.

    True when the gang's wait is accounted for here (held, with its
    reason); Waits when it waits because PodDisruptionBudgets protect the gangs it
    could evict; False when it just waits like any other gang.
    """
    victims = session.inp.preempting.get(gang.key)
    if victims is not None:
        hold = hold_for_preemptor(session, gang, victims, placement_after(session, gang, victims))
        session.tell(gang, AwaitingVictims(tuple(sorted(victims)), hold, reason))
        return True
    if not may_preempt(session, gang):
        return False
    candidates = _borrowed_only(session, gang, _candidates(session, gang))
    if not candidates:
        return False
    chosen = _keeping_shares(session, gang, victims_for(session, gang, candidates))
    if chosen is None:
        protected = protected_by_budgets(candidates, session.inp.budgets)
        if not protected:
            return False
        names = tuple(sorted({key for keys in protected.values() for key in keys}))
        return Waits(ProtectedByBudget(tuple(sorted(protected)), names, reason))
    session.preemptions.append(chosen)
    hold = hold_for_preemptor(session, gang, chosen.victims, chosen.placement)
    session.tell(gang, Preempting(chosen.victims, hold, reason))
    return True


def _candidates(session: Session, gang: Gang) -> list[Candidate]:
    """Running gangs of lower priority that may be evicted now, whole."""
    if session.lowest_evictable is None or session.lowest_evictable >= gang.priority:
        return []
    placed = {placement.gang for placement in session.placements}
    return [
        Candidate(other.key, other.priority, other.created,
                  tuple(session.inp.bound_pods[other.key]))
        for other in session.evictable
        if other.preemptible and other.priority < gang.priority and other.key not in placed
    ]


def protected_by_shares(session: Session, gang: Gang, reason: Reason) -> Reason:
    """The reason a gang that neither preempts nor reclaims waits with: its own, or, when
    gangs of lower priority would make room but only by taking other queues below their
    deserved shares, a reason naming those queues."""
    if not (session.inp.reclaim and may_preempt(session, gang)):
        return reason
    candidates = _candidates(session, gang)
    allowed = {candidate.gang for candidate in _borrowed_only(session, gang, candidates)}
    if len(allowed) == len(candidates):
        return reason  # no share kept a candidate out: the search has nothing more to find
    chosen = victims_for(session, gang, candidates)
    if chosen is None:
        return reason
    queues = _queues(session)
    refusing = {queues[victim] for victim in chosen.victims if victim not in allowed}
    return ProtectedByShare(tuple(sorted(refusing)), reason) if refusing else reason


def _borrowed_only(session: Session, gang: Gang, candidates: list[Candidate]) -> list[Candidate]:
    """With reclaim on, the candidates of the gang's own queue, and of other queues each
    above its deserved share that keeps it without the candidate; else all of them."""
    if not session.inp.reclaim:
        return candidates
    deserved = session.deserved()
    queues = _queues(session)

    def may_take(candidate: Candidate) -> bool:
        queue = queues[candidate.gang]
        return (queue == gang.queue or queue not in deserved
                or (borrows(session, queue, deserved)
                    and keeps_shares(session, [(queue, session.bound[candidate.gang])],
                                     gang.queue, deserved)))

    return [candidate for candidate in candidates if may_take(candidate)]


def _keeping_shares(session: Session, gang: Gang, chosen: Preemption | None) -> Preemption | None:
    """The chosen victims, if with reclaim on the other queues they are taken from keep their
    deserved shares once all of them go (each alone may, several together not)."""
    if chosen is None or not session.inp.reclaim:
        return chosen
    deserved = session.deserved()
    queues = _queues(session)
    freed = [(queues[key], session.bound[key]) for key in chosen.victims
             if queues[key] != gang.queue and queues[key] in deserved]
    return chosen if keeps_shares(session, freed, gang.queue, deserved) else None


def _queues(session: Session) -> dict[GangKey, QueueName]:
    return {other.key: other.queue for other in session.evictable}

