"""Admission: a gang with ``minResources`` is placed only once its whole job fits.

Admitting a gang is a promise: the part of its ``minResources`` its bound
pods do not use yet stays reserved from then on, so a Spark driver that
starts first still finds room for the executors it creates later. So a gang
is admitted only while its queue's capability and the unreserved free room
can hold it. Devices (claims' and extended resources that devices serve where
no node lists them, ``core.dra``) are no node's room: the queue's capability
counts them, placement finds their devices.
"""

from __future__ import annotations

from gangsched.core.model.objects import Gang
from gangsched.core.placement.capacity import Unplaceable
from gangsched.core.reasons import AdmissionNoRoom, AdmissionOverCapability, QueueClosed
from gangsched.core.stages.session import Session, Waits, outstanding


def admit(session: Session, gang: Gang) -> bool | Waits:
    """Admit the gang if it is not yet: True when it is admitted, False (with its reason
    recorded) or Waits when it may not be.

    A closed queue's gangs, and those of any queue under a closed one, cannot
    run however long they wait, so they hold nothing for starvation; a gang
    refused for room does, through the wait stage (:mod:`.starve`).
    A PodGroup with no pods yet is only told why: no pod of it waits.
    """
    if gang.key in session.admitted:
        return True
    closed = session.tree.closed(gang.queue)
    if closed is not None:
        target = session.unplaceable if gang.pending else session.unadmitted
        target.append(Unplaceable(gang.key, QueueClosed(closed)))
        return False
    refusal = admission_refusal(session, gang)
    if refusal is not None:
        if gang.pending:
            return Waits(refusal)
        session.unadmitted.append(Unplaceable(gang.key, refusal))
        return False
    session.admit(gang)
    session.hold(gang, outstanding(gang.min_resources, session.bound[gang.key]))
    return True


def admission_refusal(
    session: Session, gang: Gang
) -> AdmissionOverCapability | AdmissionNoRoom | None:
    """Why the gang cannot be admitted now, or None when it can.

    Checked against the room left after this cycle's earlier placements
    and every reservation already promised (the capability of the gang's
    queue and of each queue above it included), because admitting a gang is
    itself a promise: it would be broken if two admitted gangs counted on
    the same free CPUs.
    """
    if gang.min_resources.is_zero:
        return None
    need = outstanding(gang.min_resources, session.bound[gang.key])
    hit = session.cap_hit(gang.queue, need)
    if hit is not None:
        return AdmissionOverCapability(
            gang.min_resources, hit.queue, hit.capability, hit.allocated, hit.reserved)
    room = session.room(session.reserved + need)
    if not room.fits(session.free):
        return AdmissionNoRoom(gang.min_resources, session.free, session.reserved,
                               room.short_of(session.free))
    return None
