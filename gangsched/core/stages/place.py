"""Placement of one gang, all or nothing, within the cycle's promises.

The gang is tried on the cycle's state (:mod:`.trial`): placed and kept, or
left without a trace. A gang that does not fit is told why, and where the
starving gang's pinned room is all that keeps it out, the reason says so: the
cycle then offers it the later stages (backfill, preempt, reclaim, wait).
"""

from __future__ import annotations

from gangsched.core.model.objects import Gang, VolumeBlock, VolumeProblem
from gangsched.core.model.resources import Resources
from gangsched.core.placement.capacity import Placement
from gangsched.core.reasons import HeldForStarving, Reason, VolumeBlocked
from gangsched.core.stages.session import Session, unpin
from gangsched.core.stages.trial import Tried, decide, try_place


def place(session: Session, gang: Gang) -> Tried | None:
    """Try the gang; None when a ReadWriteOncePod claim it needs went to a pod placed
    earlier in the cycle (it is told so, and waits holding nothing)."""
    taken = _claim_taken(session, gang)
    if taken is not None:
        session.tell(gang, taken)
        return None
    return try_place(session, gang)


def held_for_starving(session: Session, gang: Gang, reason: Reason) -> Reason:
    """The reason a gang that did not fit waits with: ``reason``, or that the starving
    gang's pins hold the room it would fit in."""
    starving = session.starving
    if starving is not None and session.pins and _fits_unpinned(session, gang):
        return HeldForStarving(starving, session.pinned.get(starving, Resources.zero()),
                               session.pins.nodes())
    return reason


def _claim_taken(session: Session, gang: Gang) -> VolumeBlocked | None:
    """Why the gang waits when a pod placed earlier in the cycle took a ReadWriteOncePod
    claim a pending member uses, or None. Next cycle that pod is assumed bound and the
    claim in use; until then, placing both would run two pods on a claim only one may use.
    The gang waits whole, as for a claim in use before the cycle."""
    users = session.sole_users
    if not users:
        return None
    blocked = [(pod.key, claim) for pod in gang.pending for claim in pod.sole_claims
               if claim in users]
    if not blocked:
        return None
    pod, claim = blocked[0]
    others = len({key for key, _ in blocked}) - 1
    return VolumeBlocked(pod, VolumeBlock(claim, VolumeProblem.IN_USE, users[claim]), others)


def _fits_unpinned(session: Session, gang: Gang) -> bool:
    """Whether the gang would fit with the starving gang's pins given back: then they,
    not the cluster, are why it waits. Asked once per shape (claims included: devices
    they cannot get keep a pod out whatever is pinned) while no room moves."""
    key = (tuple((pod.requests, pod.rules, pod.resource_claims, pod.sub_group)
                 for pod in gang.pending),
           gang.min_member - gang.bound, gang.topology_keys, gang.levels, gang.policy)
    known = session.pins.fits_unpinned.get(key)
    if known is None:
        question = session.open()
        unpin(session)
        known = isinstance(decide(session, gang), Placement)
        question.discard()
        session.pins.fits_unpinned[key] = known
    return known
