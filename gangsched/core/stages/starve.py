"""Waiting, and holding room for the first gang that has waited too long.

A stream of small gangs could otherwise keep a large one waiting forever:
each small gang fits in the room the large one would need the moment it
frees. So the first gang in order that starves (unplaced past
``starvation_seconds``, or partly bound and stranded) holds its room against
the gangs after it: in total, and on the nodes where it would land first,
so that small gangs cannot fragment the room it waits for (two 8-GPU pods
need two nodes with 8 GPUs free, not 16 GPUs free across the cluster).
"""

from __future__ import annotations

from gangsched.core.dra.devices import DeviceRef
from gangsched.core.fit.nodefit import uses_node_name
from gangsched.core.model.objects import Gang, NodeName, Pod
from gangsched.core.model.resources import Resources
from gangsched.core.reasons import PartlyBound, Reason, Starved, Starving, TooBigToHold, Urgency
from gangsched.core.stages.session import Session, pending_need, pin


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
            taken, nodes = pin_room(session, gang)
            session.hold(gang, hold, taken)
            reason = Starving(_urgency(session, gang), hold, reason, nodes,
                              inp.estimated_starts.get(gang.key))
        else:
            reason = TooBigToHold(_urgency(session, gang), hold, session.cluster_total, reason)
    session.tell(gang, reason)


def pin_room(session: Session, gang: Gang) -> tuple[Resources, tuple[NodeName, ...]]:
    """Keep, on the nodes the gang would land on first, the room and devices free there now.

    For each pod the gang lacks, biggest first, the node that could take it
    once freed (its rules allow it, its allocatable holds it beside the
    gang's other pods planned there, its devices could serve its claims) and
    has most of it free now; the room free there, up to the pod's requests,
    and the devices free of those its claims would get there, are taken from
    the capacity for the rest of the cycle. The choice is the same next cycle
    unless other nodes freed more, as the kept room only grows. Returns what
    was taken and where.
    """
    need = max(0, gang.min_member - gang.bound)
    pods = sorted(gang.pending[:need], key=lambda pod: _size(pod.requests), reverse=True)
    planned: dict[NodeName, Resources] = {}
    devices: dict[NodeName, set[DeviceRef]] = {}
    taken, nodes = Resources.zero(), []
    for pod in pods:
        found = _closest_to_fitting(session, pod, planned, devices)
        if found is None:
            continue
        node, wanted = found
        planned[node] = planned.get(node, Resources.zero()) + pod.requests
        devices.setdefault(node, set()).update(wanted)
        free = session.capacity.free(node)
        share = Resources.of({name: min(amount, max(0, free.get(name)))
                              for name, amount in pod.requests.items()})
        if share.is_zero and not session.capacity.devices_free(wanted):
            continue
        pin(session, gang.key, pod.key, node, share, wanted)
        taken = taken + share
        if node not in nodes:
            nodes.append(node)
    return taken, tuple(sorted(nodes))


def _closest_to_fitting(
    session: Session, pod: Pod, planned: dict[NodeName, Resources],
    devices: dict[NodeName, set[DeviceRef]],
) -> tuple[NodeName, tuple[DeviceRef, ...]] | None:
    """The node allowed to the pod, able to hold it when free, with most of it free now,
    and the devices its claims would get there (besides ``devices``, planned for the
    gang's other pods).

    Nodes are looked at in groups of one kind and equal free room, best
    group first, so a cluster of thousands of alike nodes costs a few groups.
    A pod that claims devices goes where most of those devices are free now,
    the first such node in that order: nodes are weighed until one has all of
    them free, skipping those whose count of free devices could not beat the
    best found.
    """
    index = session.inp.snapshot.index
    capacity = session.capacity
    kinds = index.kind_reasons(pod.rules)
    by_name = index.name_reasons(pod.rules) if uses_node_name(pod.rules) else None
    ranked = sorted(
        ((_closeness(free, pod.requests), kind, names)
         for kind, free, names in capacity.groups() if kinds[kind] is None),
        key=lambda entry: entry[0], reverse=True,
    )
    least = capacity.devices_least(pod)
    best: tuple[float, NodeName, tuple[DeviceRef, ...]] | None = None
    for _, _, names in ranked:
        for name in sorted(names):
            if by_name is not None and by_name[name] is not None:
                continue
            needed = planned.get(name, Resources.zero()) + pod.requests
            if not needed.fits(index.nodes[name].node.allocatable):
                continue
            if best is not None and least and capacity.devices_free_on(name) / least <= best[0]:
                continue  # fewer free devices than the best has free of its share
            wanted = capacity.devices_wanted(pod, name, devices.get(name, set()))
            if wanted is None:
                continue
            if not wanted:
                return name, wanted
            share = len(capacity.devices_free(wanted)) / len(wanted)
            if share >= 1.0:
                return name, wanted
            if best is None or share > best[0]:
                best = (share, name, wanted)
    return None if best is None else (best[1], best[2])


def _closeness(free: Resources, requests: Resources) -> tuple[float, float]:
    """How much of the pod the free room holds: its scarcest resource, then all of them."""
    fractions = [min(1.0, max(0, free.get(name)) / amount)
                 for name, amount in requests.items() if amount > 0]
    return min(fractions, default=1.0), sum(fractions)


def _size(requests: Resources) -> tuple[int, ...]:
    return tuple(amount for _, amount in requests.items())


def _urgency(session: Session, gang: Gang) -> Urgency:
    if partly_bound(gang):
        return PartlyBound(gang.bound, gang.min_member)
    return Starved(session.inp.starvation_seconds)


def partly_bound(gang: Gang) -> bool:
    """Fewer than ``min_member`` bound: the gang holds nodes and cannot start."""
    return 0 < gang.bound < gang.min_member
