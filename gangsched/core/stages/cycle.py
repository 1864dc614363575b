"""One scheduling cycle: order gangs, admit PodGroups, keep reservations, place gangs in turn.

The cycle is a pure function of a ``CycleInput``: the shell takes a frozen
snapshot, passes the clock in, and gets back placements to bind and reasons to
report. Nothing here binds, logs or reads the time, so a cycle can be replayed
from its input in a test and gives the same answer every time.

The flow, in the spirit of Volcano's allocate action:

1. Replacements for gangs that already run go first, because a running gang
   that cannot get a dead worker back holds all its other workers idle.
2. Every other gang with pending pods is taken in fair order: the queue
   furthest below its weighted dominant share, then priority, then age.
3. A gang with ``min_resources`` is placed only once admitted, and while
   admitted the part of its ``min_resources`` its bound pods do not yet use is
   reserved: no other gang's placement may eat into it. This is what lets a
   Spark driver start and its executors, created later, still find room.
4. A gang that has waited past ``starvation_seconds`` holds its room against
   the gangs after it, so a stream of small gangs cannot starve a large one.
5. A running gang that lost members holds their room (``holds``) before any
   gang is placed, so its replacements, which operators create a moment after
   the old pods go, find it still free.
6. A gang that does not fit may evict whole gangs of lower priority
   (:mod:`gangsched.core.placement.preemption`). One preemption is under way at a time:
   while its victims go, the preemptor is placed before any other gang and
   holds its room, and no victim is chosen twice.
7. A gang of a queue below its deserved share that still does not fit may
   reclaim: evict whole gangs of queues above theirs, by the same path
   (:mod:`gangsched.core.stages.reclaim`), when the shell asks for it.

Each step is a stage module of :mod:`gangsched.core.stages` over one
:class:`~gangsched.core.stages.session.Session`. The stages are siblings: none
calls another. This module runs them, in order: :mod:`.triage` once, then for
each gang in the order of :mod:`.order` a turn of :mod:`.admit`,
:mod:`.place`, :mod:`.backfill`, :mod:`.preempt`, :mod:`.reclaim` and
:mod:`.starve`, each of which places the gang, tells why it waits, passes, or
answers that it waits (:class:`~gangsched.core.stages.session.Waits`). What a
stage only tries, it tries under a statement of the session, committed or
discarded whole.
"""

from __future__ import annotations

from gangsched.core.model.objects import Gang
from gangsched.core.stages.admit import admit
from gangsched.core.stages.backfill import backfill
from gangsched.core.stages.order import turns
from gangsched.core.stages.place import held_for_starving, place
from gangsched.core.stages.preempt import preempt, protected_by_shares
from gangsched.core.stages.reclaim import reclaim
from gangsched.core.stages.session import (
    CycleInput,
    CycleResult,
    Session,
    Waits,
    outstanding,
    release_holds,
    schedulable_total,
    take_hold,
)
from gangsched.core.stages.starve import wait
from gangsched.core.stages.triage import triage

__all__ = ["CycleInput", "CycleResult", "outstanding", "run_cycle", "schedulable_total"]


def run_cycle(inp: CycleInput) -> CycleResult:
    """Decide, for one snapshot, which gangs to place where and why the others wait."""
    session = Session(inp)
    run(session)
    return session.result()


def run(session: Session) -> None:
    """Every stage over the session: triage, then each gang's turn in order."""
    for gang in turns(session, triage(session)):
        take_turn(session, gang)


def take_turn(session: Session, gang: Gang) -> None:
    """Admit the gang if it is not yet, then place its pods if it has any, or say why not.

    The rooms held for the gang's departed members are its own to place into;
    a gang left unplaced holds them again where they fit now, which is not
    where they were when its own pins or preemption took that room meanwhile.
    """
    admitted = admit(session, gang)
    if isinstance(admitted, Waits):
        wait(session, gang, admitted.reason)
        return
    if not admitted or not gang.pending:
        return
    released = release_holds(session, gang.key) if gang.key in session.held else ()
    if not _placed(session, gang):
        for hold in released:
            take_hold(session, hold)


def _placed(session: Session, gang: Gang) -> bool:
    """The stages that may place the gang or account for its wait, first come first served;
    True when it was placed."""
    tried = place(session, gang)
    if tried is None:
        return False
    if tried.reason is None or backfill(session, gang):
        return True
    if tried.fitted:  # the cycle's promises keep it out: no eviction changes them
        wait(session, gang, tried.reason)
        return False
    reason = held_for_starving(session, gang, tried.reason)
    for stage in (preempt, reclaim):
        answer = stage(session, gang, reason)
        if isinstance(answer, Waits):
            wait(session, gang, answer.reason)
        if answer:
            return False
    wait(session, gang, protected_by_shares(session, gang, reason))
    return False
