"""A gang's placement tried on the cycle's state, kept only while the cycle's promises hold.

The gang is placed on the cycle's scratch capacity under a statement and
committed only if the reservations of admitted gangs and the capabilities of
its queue and the queues above it still hold; otherwise the statement is
discarded, so a refused gang leaves no trace: the gangs after it see exactly
the room they would have seen without it. The place and backfill stages both
try gangs this way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gangsched.core.dra.usage import in_ledger
from gangsched.core.model.objects import Gang, Pod
from gangsched.core.model.resources import Resources
from gangsched.core.placement.capacity import Placement, Unplaceable
from gangsched.core.placement.topology import place_in_levels, place_in_one_domain
from gangsched.core.reasons import CapabilityExceeded, Reason, ReservedByAdmitted
from gangsched.core.stages.session import Session, claimed_by, outstanding, total


@dataclass(frozen=True, slots=True)
class Tried:
    """How a trial ended: placed (no reason), or why not, and whether the gang fitted the
    room at all (``fitted``: only the cycle's promises kept it out)."""

    reason: Reason | None
    fitted: bool


PLACED = Tried(None, fitted=True)


def try_place(session: Session, gang: Gang, spare: Resources | None = None,
              freed: Resources | None = None) -> Tried:
    """Place the gang if it fits and its placement keeps the cycle's promises.

    ``spare`` is held room the gang may use anyway (a starving gang's, for a gang that
    backfills), ``freed`` room given back to the capacity but not yet to ``session.free``.
    """
    decision = _decision(session, gang)
    if isinstance(decision, Unplaceable):
        return Tried(decision.reason, fitted=False)  # nothing taken: nothing to undo
    trial = session.open()
    session.took(decision)
    refusal = _keep(session, gang, decision, spare, freed)
    if refusal is not None:
        trial.discard()
        return Tried(refusal, fitted=True)
    trial.commit()
    return PLACED


def decide(session: Session, gang: Gang) -> Placement | Unplaceable:
    """Where the gang goes on the cycle's capacity, anywhere or inside one domain; a
    placement is taken from the capacity under the open statement."""
    decision = _decision(session, gang)
    return session.took(decision) if isinstance(decision, Placement) else decision


def _decision(session: Session, gang: Gang) -> Placement | Unplaceable:
    policy = session.inp.policy
    if gang.levels is not None:
        return place_in_levels(session.capacity, gang, policy, session.domains_for,
                               patient=_patient(session, gang))
    if not gang.topology_keys:
        return session.capacity.place(gang, policy)
    return place_in_one_domain(session.capacity, gang, policy, session.domains_of(gang))


def _patient(session: Session, gang: Gang) -> bool:
    """Whether the gang still waits for one domain of its preferred level rather than take
    a wider one: it has waited less than its ``preferredWaitSeconds`` since it began."""
    wait = gang.levels.preferred_wait_s if gang.levels is not None else 0
    if not wait:
        return False
    since = session.inp.waiting_since.get(gang.key, session.inp.now)
    return session.inp.now - since < wait


def _keep(
    session: Session, gang: Gang, decision: Placement,
    spare: Resources | None, freed: Resources | None,
) -> Reason | None:
    """Count the placement as made if the reservations of admitted gangs and the queue's
    capability still hold, else say why; None when it is kept."""
    requests = {pod.key: pod.requests for pod in gang.pending}
    placed = total(requests[pod] for pod, _ in decision.assignments)
    # What the queue's ledger counts: the pods' requests and the devices of their claims.
    used = in_ledger(placed, session.renames) + claimed_by(session, gang, decision)
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
        return _reserved_reason(session, gang, others, placed, free_after)

    queue = session.queues[gang.queue]
    hit = session.cap_hit(queue.name, used + own_after - own_before)
    if hit is not None:
        return CapabilityExceeded(hit.queue, hit.capability, hit.allocated,
                                  hit.reserved - own_before + own_after, used)

    session.pins.fits_unpinned.clear()  # room moved
    by_key = {pod.key: pod for pod in gang.pending}
    _count(session, gang, decision, [by_key[pod] for pod, _ in decision.assignments], used,
           free_after)
    session.hold(gang, own_after)
    return None


def _count(session: Session, gang: Gang, decision: Placement, pods: Sequence[Pod], used: Resources,
         free_after: Resources) -> None:
    """Count the placement as made: its pods, its room and the gang's queue's ledger."""
    placements, placed_pods = len(session.placements), len(session.placed_pods)
    free, bound, allocated = session.free, session.bound[gang.key], session.allocated[gang.queue]
    sole = [(claim, pod.key) for pod in pods for claim in pod.sole_claims
            if claim not in session.sole_users]
    session.placements.append(decision)
    session.placed_pods.extend(zip(pods, (node for _, node in decision.assignments),
                                strict=True))
    session.sole_users.update(reversed(sole))
    session.free = free_after
    session.bound[gang.key] = bound + used
    session.allocated[gang.queue] = allocated + used

    def undo() -> None:
        del session.placements[placements:]
        del session.placed_pods[placed_pods:]
        if session.with_placed is not None and session.with_placed[0] > placed_pods:
            session.with_placed = None
        for claim, _ in sole:
            session.sole_users.pop(claim, None)
        session.free = free
        session.bound[gang.key], session.allocated[gang.queue] = bound, allocated
    session.record(undo)


def _reserved_reason(
    session: Session, gang: Gang, others: Resources, placed: Resources, free_after: Resources
) -> ReservedByAdmitted:
    starving = session.starving
    if starving is None or starving == gang.key:
        return ReservedByAdmitted(others, placed, free_after)
    return ReservedByAdmitted(others, placed, free_after, starving, session.holding[starving])
