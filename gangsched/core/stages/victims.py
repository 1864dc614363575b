"""The victims of a preemption or a reclaim, and the room their preemptor holds meanwhile.

Priority preemption (:mod:`.preempt`) and reclaim (:mod:`.reclaim`) choose
victims by the same search, against the snapshot as this cycle has left it,
and only where the placement after the eviction keeps every other promise
(reservations, the queue's capability). One preemption is under way at a
time: while its victims go, the preemptor holds the room it evicted for, on
the nodes it will land on, not as a cluster-wide sum: a sum lets later gangs
scatter over those very nodes (the preemptor then fits nowhere though the
total is free) and keeps them off nodes it does not need.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace

from gangsched.core.model.objects import Gang, GangKey, NodeName, Pod, PodKey
from gangsched.core.model.resources import Resources
from gangsched.core.placement.capacity import Capacity, Placement, Snapshot
from gangsched.core.placement.holds import pinned
from gangsched.core.placement.preemption import (
    Candidate,
    Preemption,
    choose_victims,
    choose_victims_in_one_domain,
    shifted,
)
from gangsched.core.placement.topology import place_in_one_domain, sub_groups_of
from gangsched.core.stages.session import (
    Session,
    claimed_by,
    outstanding,
    pending_need,
    total,
)


def hold_for_preemptor(
    session: Session, gang: Gang, victims: Collection[GangKey], placement: Placement | None
) -> Resources:
    """Hold the preemptor's room, so the gangs after it cannot take what is evicted for it.

    Held on the nodes of ``placement``, where the preemptor goes once its
    victims are gone: on each, what the victims leaving there will not free
    is taken now. Without such a placement (room it counted on was taken
    meanwhile), its whole need is held cluster-wide as a last resort.
    """
    if placement is not None:
        held = _hold_on_nodes(session, gang, victims, placement)
        if held is not None:
            return held
    hold = pending_need(gang, session.bound[gang.key])
    session.hold(gang, hold)
    return hold


def placement_after(
    session: Session, gang: Gang, victims: Collection[GangKey]
) -> Placement | None:
    """Where the preemptor goes once the victims' pods still running are gone."""
    going = [pod for victim in victims for pod in session.inp.bound_pods.get(victim, ())]
    capacity = Capacity.from_snapshot(shifted(snapshot_with_placed(session), remove=going))
    policy = gang.policy or session.inp.policy
    decision = (
        place_in_one_domain(capacity, gang, policy, session.domains_of(gang))
        if in_domains(gang) else capacity.place(gang, policy)
    )
    return decision if isinstance(decision, Placement) else None


def _hold_on_nodes(
    session: Session, gang: Gang, victims: Collection[GangKey], placement: Placement
) -> Resources | None:
    """Take, on each node of the placement, the free room the preemptor will need there
    beyond what its victims free; the figure returned is all it will have there.

    Later gangs may use what is left: free room beyond that need, and every
    node the preemptor does not go to. None when the room cannot be taken.
    """
    pods = {pod.key: pod for pod in gang.pending}
    wanted: dict[NodeName, Resources] = {}
    first: dict[NodeName, Pod] = {}
    for key, node in placement.assignments:
        wanted[node] = wanted.get(node, Resources.zero()) + pods[key].requests
        first.setdefault(node, pods[key])
    freed: dict[NodeName, Resources] = {}
    for victim in victims:
        for pod in session.inp.bound_pods.get(victim, ()):
            if pod.node_name is not None:
                freed[pod.node_name] = freed.get(pod.node_name, Resources.zero()) + pod.requests
    stand_ins = []
    for node, want in sorted(wanted.items()):
        free = session.capacity.free(node)
        short = outstanding(want, freed.get(node, Resources.zero()))
        take = Resources.of({name: min(amount, max(0, free.get(name)))
                             for name, amount in short.items()})
        if not take.is_zero:
            stand_in = replace(first[node], key=PodKey(f"{first[node].key}@{node}"),
                               requests=take, node_name=node)
            stand_ins.append(pinned(stand_in))
    if stand_ins:
        decision = session.capacity.place(
            Gang(gang.key, min_member=len(stand_ins), pending=tuple(stand_ins)),
            session.inp.policy)
        if not isinstance(decision, Placement):
            return None
        session.free = session.free - Resources.sum(pod.requests for pod in stand_ins)
    return Resources.sum(wanted.values())


def may_preempt(session: Session, gang: Gang) -> bool:
    """One preemption at a time: a second chosen while the first's victims are still
    going would see their room as taken and evict more than needed. A partly bound
    gang may preempt for the members it lacks, a topology gang inside one domain."""
    return (
        session.inp.preemption
        and not session.inp.preempting
        and not session.preemptions
        and gang.preempts
    )


def snapshot_with_placed(session: Session) -> Snapshot:
    """The snapshot with this cycle's placements and the rooms held for other gangs'
    replacements counted, as the placement after an eviction will find them, and the
    devices the cycle allocated or holds (for a starving gang, for replacements) taken.

    Shifted only by the pods placed since it was last asked for: a cycle that
    places thousands of pods and then finds a thousand gangs that wait must
    not count every placed pod again for each of them.
    """
    held = tuple(
        replace(hold.pod, node_name=placement.assignments[0][1], terminal=False)
        for holds in session.held.values() for hold, placement in holds
    )
    kept = session.with_placed
    if kept is not None and kept[1] == held:
        added = session.placed_pods[kept[0]:]
        snapshot = shifted(kept[2], add=[pod.on_node(node) for pod, node in added])
    else:
        placed = [pod.on_node(node) for pod, node in session.placed_pods]
        snapshot = shifted(session.inp.snapshot, add=[*placed, *held])
    devices = session.capacity.devices_now()
    if snapshot.devices is not devices:
        snapshot = replace(snapshot, devices=devices)
    session.with_placed = (len(session.placed_pods), held, snapshot)
    return snapshot


def in_domains(gang: Gang) -> bool:
    """Whether the gang goes inside one domain (of its keys, or anywhere when it has none)
    or has sub-groups that do: victims are then chosen domain by domain."""
    return bool(gang.topology_keys or sub_groups_of(gang))


def victims_for(session: Session, gang: Gang, candidates: list[Candidate]) -> Preemption | None:
    """The fewest whole gangs of ``candidates`` whose eviction lets the gang fit, within one
    of its domains if it asks for one, keeping every other promise of the cycle."""
    policy = gang.policy or session.inp.policy

    def room(freed: Resources, placement: Placement) -> bool:
        return room_after_eviction(session, gang, freed, placement)

    budgets = session.inp.budgets
    if in_domains(gang):
        return choose_victims_in_one_domain(
            snapshot_with_placed(session), gang, candidates, session.domains_of(gang), policy,
            room=room, budgets=budgets)
    return choose_victims(snapshot_with_placed(session), gang, candidates, policy,
                          room=room, budgets=budgets)


def room_after_eviction(
    session: Session, gang: Gang, freed: Resources, placement: Placement
) -> bool:
    """Whether the placement found after evicting keeps every other promise:
    reservations of admitted gangs and the capabilities of the gang's queue and those
    above it."""
    requests = {pod.key: pod.requests for pod in gang.pending}
    placed = total(requests[pod] for pod, _ in placement.assignments)
    others = session.room(session.reserved - session.holding.get(gang.key, Resources.zero()))
    if not others.fits(session.free + freed - placed):
        return False
    return session.cap_hit(gang.queue, placed + claimed_by(session, gang, placement)) is None
