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
:class:`~gangsched.core.stages.session.Session`; this module only calls
them in order.
"""

from __future__ import annotations

from gangsched.core.stages.allocate import allocate
from gangsched.core.stages.session import (
    CycleInput,
    CycleResult,
    Session,
    outstanding,
    schedulable_total,
)
from gangsched.core.stages.triage import triage

__all__ = ["CycleInput", "CycleResult", "outstanding", "run_cycle", "schedulable_total"]


def run_cycle(inp: CycleInput) -> CycleResult:
    """Decide, for one snapshot, which gangs to place where and why the others wait."""
    session = Session(inp)
    allocate(session, triage(session))
    return session.result()
