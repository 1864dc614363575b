"""Which waiting gangs the cycle tries at all, and why the others wait untried.

A gang whose queue does not exist, whose members are being evicted, that has
a gated member, whose bind backs off or that has fewer pods than its
minMember cannot be placed by any amount of room; it is told why and holds
nothing, so it takes no room from the gangs after it. Nor can a gang whose job
Kueue has not admitted: it waits, with or without pods, and is not admitted here
either (the session leaves it out of the admitted gangs, allocation out of the
PodGroups it admits), so room held for it never blocks the job Kueue admits.
"""

from __future__ import annotations

from gangsched.core.fit.volumes import volume_reason
from gangsched.core.model.objects import Gang
from gangsched.core.placement.capacity import Unplaceable
from gangsched.core.placement.topology import level_problem, sub_group_problem
from gangsched.core.reasons import (
    KUEUE_GATE,
    BeingPreempted,
    Gated,
    GatedByKueue,
    QueueMissing,
    ShortOfMembers,
    SuspendedByKueue,
)
from gangsched.core.stages.backoff import backoff_reason
from gangsched.core.stages.session import Session


def triage(session: Session) -> list[Gang]:
    """The gangs with pending pods that this cycle may place, in key order."""
    for gang in session.gangs:
        if gang.kueue_workload is not None and (gang.pending or gang.bound == 0):
            held = Unplaceable(gang.key, SuspendedByKueue(gang.key, gang.kueue_workload))
            (session.unplaceable if gang.pending else session.unadmitted).append(held)
            continue
        if gang.queue in session.queues or not (gang.pending or gang.bound == 0):
            continue
        # As Volcano does: it waits, saying so, and never falls back to default.
        missing = Unplaceable(gang.key, QueueMissing(gang.queue))
        (session.unplaceable if gang.pending else session.unadmitted).append(missing)
    known = []
    for gang in session.gangs:
        if not gang.pending or gang.queue not in session.queues or gang.kueue_workload:
            continue
        preemptor = session.victims_of.get(gang.key)
        if preemptor is not None:
            # Its members are being evicted: a replacement placed now would
            # only be evicted too, and would take the preemptor's room.
            session.unplaceable.append(Unplaceable(gang.key, BeingPreempted(preemptor)))
            continue
        held_back = (gated_reason(gang) or volume_reason(gang)
                     or (gang.levels and level_problem(gang.levels))
                     or sub_group_problem(gang)
                     or short_reason(gang)
                     or backoff_reason(gang, session.inp.bind_refusals, session.inp.now))
        if held_back is None:
            known.append(gang)
        else:
            session.unplaceable.append(Unplaceable(gang.key, held_back))
    return known


def gated_reason(gang: Gang) -> Gated | GatedByKueue | None:
    """Why a gang with a gated pending member waits, or None when none is gated.

    The API server refuses to bind a pod that still has ``schedulingGates``, so
    placing the rest of its gang would split it: the gang waits whole, and is
    not even tried, until every gate of its pending members is lifted. Kueue's
    gate is named as Kueue's: it is lifted when Kueue admits the workload.
    """
    by_kueue = [pod for pod in gang.pending if KUEUE_GATE in pod.gates]
    if by_kueue:
        return GatedByKueue(by_kueue[0].key, len(by_kueue) - 1)
    gated = [pod for pod in gang.pending if pod.gates]
    if not gated:
        return None
    return Gated(gated[0].key, tuple(gated[0].gates), len(gated) - 1)


def short_reason(gang: Gang) -> ShortOfMembers | None:
    """Why a gang with fewer pods than ``min_member`` waits, or None when it has enough.

    Pending and bound members together are all it can have until someone
    creates more; below ``min_member`` no placement can make it whole, so it
    must neither be tried nor become the starving gang that holds room.
    """
    has = len(gang.pending) + gang.bound
    if has >= gang.min_member:
        return None
    return ShortOfMembers(gang.key, has, gang.min_member)
