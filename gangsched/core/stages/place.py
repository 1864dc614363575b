"""Placement of one gang, all or nothing, within the cycle's promises.

The gang is placed on the cycle's scratch capacity first and kept only if
the reservations of admitted gangs and the capabilities of its queue and the
queues above it still hold;
otherwise it is released again, so a refused gang leaves no trace: the gangs
after it see exactly the room they would have seen without it. A gang that
does not fit may preempt (:mod:`.preempt`), or reclaim room its queue deserves
(:mod:`.reclaim`), else it waits (:mod:`.starve`).
"""

from __future__ import annotations

from gangsched.core.dra.usage import in_ledger
from gangsched.core.model.objects import Gang, VolumeBlock, VolumeProblem
from gangsched.core.model.resources import Resources
from gangsched.core.model.runtimes import backfills
from gangsched.core.placement.capacity import Placement, Unplaceable
from gangsched.core.placement.topology import place_in_levels, place_in_one_domain
from gangsched.core.reasons import (
    CapabilityExceeded,
    HeldForStarving,
    Reason,
    ReservedByAdmitted,
    VolumeBlocked,
)
from gangsched.core.stages.preempt import preempt, protected_by_shares
from gangsched.core.stages.reclaim import reclaim
from gangsched.core.stages.session import Session, outstanding, total
from gangsched.core.stages.starve import wait


def place(session: Session, gang: Gang) -> None:
    """Place the gang, its held room included; if it is not placed, hold that room again."""
    released = session.release_holds(gang.key)
    placed_before = len(session.placements)
    _place_gang(session, gang)
    if len(session.placements) == placed_before:
        for hold in released:
            session.take_hold(hold)


def _place_gang(session: Session, gang: Gang) -> None:
    taken = _claim_taken(session, gang)
    if taken is not None:
        session.unplaceable.append(Unplaceable(gang.key, taken))
        return
    decision = _decide(session, gang)
    if isinstance(decision, Unplaceable):
        if _backfill(session, gang):
            return
        reason = decision.reason
        starving = session.starving
        if starving is not None and session.pins and _fits_unpinned(session, gang):
            reason = HeldForStarving(starving, session.pinned.get(starving, Resources.zero()),
                                     session.pins.nodes())
        if not preempt(session, gang, reason) and not reclaim(session, gang, reason):
            wait(session, gang, protected_by_shares(session, gang, reason))
        return
    refusal = _keep(session, gang, decision)
    if refusal is not None and not _backfill(session, gang):
        wait(session, gang, refusal)


def _keep(
    session: Session, gang: Gang, decision: Placement,
    spare: Resources | None = None, freed: Resources | None = None,
) -> Reason | None:
    """Keep the placement if the reservations of admitted gangs and the queue's capability
    still hold, else give its room back and say why; None when it is kept.

    ``spare`` is held room the gang may use anyway (a starving gang's, for a gang that
    backfills), ``freed`` room given back to the capacity but not yet to ``session.free``.
    """
    requests = {pod.key: pod.requests for pod in gang.pending}
    placed = total(requests[pod] for pod, _ in decision.assignments)
    # What the queue's ledger counts: the pods' requests and the devices of their claims.
    used = in_ledger(placed, session.renames) + session.claimed_by(gang, decision)
    bound_after = session.bound[gang.key] + used
    own_before = session.holding.get(gang.key, Resources.zero())
    own_after = (
        outstanding(gang.min_resources, bound_after)
        if gang.key in session.admitted
        else Resources.zero()
    )
    # Subtracting is exact: a pod only lands where it fits.
    free_after = session.free + (freed or Resources.zero()) - placed

    others = session.room(session.reserved - own_before - (spare or Resources.zero()))
    if not others.fits(free_after):
        session.capacity.release(decision)
        return _reserved_reason(session, gang, others, placed, free_after)

    queue = session.queues[gang.queue]
    hit = session.cap_hit(queue.name, used + own_after - own_before)
    if hit is not None:
        session.capacity.release(decision)
        return CapabilityExceeded(hit.queue, hit.capability, hit.allocated,
                                  hit.reserved - own_before + own_after, used)

    session.pins.fits_unpinned.clear()  # room moved
    session.placements.append(decision)
    by_key = {pod.key: pod for pod in gang.pending}
    session.placed_pods.extend(
        (by_key[pod], node) for pod, node in decision.assignments
    )
    for key, _ in decision.assignments:
        for claim in by_key[key].sole_claims:
            session.sole_users.setdefault(claim, key)
    session.free = free_after
    session.bound[gang.key] = bound_after
    session.allocated[queue.name] = session.allocated[queue.name] + used
    session.hold(gang, own_after)
    return None


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


def _backfill(session: Session, gang: Gang) -> bool:
    """Place the gang in the room held for the starving gang, if it is expected to end
    before that gang's reservation (EASY backfill); True when it was placed.

    The reservation is the starving gang's estimated start (core.forecast): a
    gang gone by then leaves the room as it found it, so the starving gang
    starts no later, and the room does not stand idle meanwhile. A gang of
    unknown runtime never backfills. What the gang leaves of the pinned room
    stays pinned.
    """
    starving = session.starving
    inp = session.inp
    if (not inp.backfill or starving is None or starving == gang.key
            or not backfills(gang, inp.now, inp.estimated_starts.get(starving))):
        return False
    freed = session.pins.unpin()
    decision = _decide(session, gang)
    kept = isinstance(decision, Placement) and _keep(
        session, gang, decision,
        spare=session.holding.get(starving, Resources.zero())
        - session.pinned.get(starving, Resources.zero()),
        freed=freed) is None
    session.repin(starving)
    return kept


def _decide(session: Session, gang: Gang) -> Placement | Unplaceable:
    """Where the gang goes on the cycle's capacity: anywhere, or inside one domain."""
    policy = session.inp.policy
    if gang.levels is not None:
        return place_in_levels(session.capacity, gang, policy, session.domains_for)
    if not gang.topology_keys:
        return session.capacity.place(gang, policy)
    return place_in_one_domain(session.capacity, gang, policy, session.domains_of(gang))


def _fits_unpinned(session: Session, gang: Gang) -> bool:
    """Whether the gang would fit with the starving gang's pins given back: then they,
    not the cluster, are why it waits. Asked once per shape (claims included: devices
    they cannot get keep a pod out whatever is pinned) while no room moves."""
    key = (tuple((pod.requests, pod.rules, pod.resource_claims, pod.sub_group)
                 for pod in gang.pending),
           gang.min_member - gang.bound, gang.topology_keys, gang.levels, gang.policy)
    known = session.pins.fits_unpinned.get(key)
    if known is None:
        with session.pins.unpinned():
            decision = _decide(session, gang)
            if isinstance(decision, Placement):
                session.capacity.release(decision)
        known = session.pins.fits_unpinned[key] = isinstance(decision, Placement)
    return known


def _reserved_reason(
    session: Session, gang: Gang, others: Resources, placed: Resources, free_after: Resources
) -> ReservedByAdmitted:
    starving = session.starving
    if starving is None or starving == gang.key:
        return ReservedByAdmitted(others, placed, free_after)
    return ReservedByAdmitted(others, placed, free_after, starving, session.holding[starving])
