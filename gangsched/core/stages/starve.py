"""Waiting, and holding room for the first gang that has waited too long.

A stream of small gangs could otherwise keep a large one waiting forever:
each small gang fits in the room the large one would need the moment it
frees. So the first gang in order that starves (unplaced past
``starvation_seconds``, or partly bound and stranded) holds its room against
the gangs after it.
"""

from __future__ import annotations

from gangsched.core.model import Gang
from gangsched.core.placement import Unplaceable
from gangsched.core.reasons import PartlyBound, Reason, Starved, Starving, TooBigToHold, Urgency
from gangsched.core.stages.session import Session, pending_need


def wait(session: Session, gang: Gang, reason: Reason) -> None:
    """Record why the gang waits; the first starving one also holds its room.

    Only the first starving gang in order holds room, so that two starving
    giants cannot between them lock the whole cluster; the next one gets its
    turn once the first is placed. A gang that needs more than the
    schedulable nodes have in all holds nothing: waiting cannot help it.

    The reason names the threshold, not the seconds waited: it becomes pod
    conditions, status and Events, and a text that changed every second
    would rewrite them all every cycle.
    """
    inp = session.inp
    since = inp.waiting_since.get(gang.key)
    waited = 0.0 if since is None else inp.now - since
    # A partly bound gang needs no waiting time to be urgent: its bound
    # members are stranded until the rest is placed. A gang already whole
    # waits only with extras beyond its minMember: it runs, and holding
    # room for its extras would keep gangs that cannot start out.
    urgent = partly_bound(gang) or (
        gang.bound < gang.min_member and since is not None and waited >= inp.starvation_seconds
    )
    if session.starving is None and urgent:
        hold = pending_need(gang, session.bound[gang.key])
        if hold.fits(session.cluster_total):
            session.starving = gang.key
            session.hold(gang, hold)
            reason = Starving(_urgency(session, gang), hold, reason)
        else:
            reason = TooBigToHold(_urgency(session, gang), hold, session.cluster_total, reason)
    session.unplaceable.append(Unplaceable(gang.key, reason))


def _urgency(session: Session, gang: Gang) -> Urgency:
    if partly_bound(gang):
        return PartlyBound(gang.bound, gang.min_member)
    return Starved(session.inp.starvation_seconds)


def partly_bound(gang: Gang) -> bool:
    """Fewer than ``min_member`` bound: the gang holds nodes and cannot start."""
    return 0 < gang.bound < gang.min_member
