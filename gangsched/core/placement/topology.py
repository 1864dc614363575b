"""Gangs that must land inside one topology domain: nodes sharing a label's value.

Kubernetes 1.37's native PodGroup says this with
``schedulingConstraints.topology[].key``: a training job whose workers talk
over a fast fabric is useless when half of it sits in another rack. The gang
is placed whole inside one domain or not at all; among the domains that can
hold it, the one left with the least free room after it is chosen, so the
emptier domains stay whole for the next large gang. A domain whose free room,
summed over its nodes, is short of what the gang's minimum asks is not
searched: no placement could fit there, and the search of each domain is
most of a cycle's time.

A gangsched PodGroup says it in levels: a ``Topology`` names node labels from
the widest level to the narrowest (block, rack, host), and the group names a
level it requires and one it prefers. A domain of a level is the nodes sharing
that label's value and every wider one's, so a rack is a rack of one block.
The required level is kept as the native keys are; the preferred level is
tried first, then each wider level down to the required one, then anywhere,
and the placement says which level held it.

Sub-groups split a gang inside its domain: the pods naming one by the
sub-group label land inside one domain of its own level (tensor-parallel
workers in one NVLink domain, pipeline stages in racks of one block). In
each domain the gang is tried in, its sub-groups are placed largest first,
each in the domain of its level it wastes least of, then its members in no
sub-group; if any part does not fit, every part is given back and the next
domain is tried: the gang is placed whole or not at all.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from gangsched.core.model.objects import (
    Gang,
    LevelRequest,
    NodeName,
    Pod,
    PodPlacementRules,
    Policy,
    SubGroup,
)
from gangsched.core.model.resources import devices_first
from gangsched.core.placement.capacity import Capacity, Decision, Placement, Snapshot, Unplaceable
from gangsched.core.reasons import (
    BoundAcrossDomains,
    DomainRoom,
    InDomain,
    InSubGroup,
    LevelHeld,
    MembersMissing,
    NoDomainHolds,
    NoDomainLabel,
    ShortOfMembers,
    SubGroupHeld,
    SubGroupUnknown,
    TopologyUnknown,
    WaitsForPreferred,
)

__all__ = [
    "Domain",
    "domains_of",
    "level_problem",
    "place_in_levels",
    "place_in_one_domain",
    "preferred_keys",
    "required_keys",
    "sub_group_problem",
    "sub_groups_of",
    "with_levels",
]

Domain = tuple[tuple[str, str], ...]
"""The label values that name a domain, one pair per topology key."""

REASON_DOMAINS = 3
"""Domains named in a reason when none fits; more would bury the line."""


def domains_of(snapshot: Snapshot, keys: Sequence[str]) -> dict[Domain, tuple[NodeName, ...]]:
    """Nodes by the values they carry for every key; a node missing a key is in no domain."""
    found: dict[Domain, list[NodeName]] = {}
    for name in sorted(snapshot.nodes):
        labels = dict(snapshot.nodes[name].node.labels)
        if all(key in labels for key in keys):
            domain = tuple((key, labels[key]) for key in keys)
            found.setdefault(domain, []).append(name)
    return {domain: tuple(names) for domain, names in found.items()}


def describe_domain(domain: Domain) -> str:
    return ",".join(f"{key}={value}" for key, value in domain)


def _confined(gang: Gang, domain: Domain) -> Gang:
    """The gang with every pending pod's node selector narrowed to the domain; members
    sharing rules (most gangs' all do) share their narrowed rules, built once."""
    narrowed: dict[PodPlacementRules, PodPlacementRules] = {}
    pods = []
    for pod in gang.pending:
        rules = narrowed.get(pod.rules)
        if rules is None:
            rules = narrowed[pod.rules] = replace(
                pod.rules, node_selector=tuple(sorted({*pod.rules.node_selector, *domain})))
        pods.append(replace(pod, rules=rules))
    return replace(gang, pending=tuple(pods))


def _leftover(
    capacity: Capacity, nodes: Sequence[NodeName], names: Sequence[str]
) -> tuple[int, ...]:
    """Free room left in the domain, scarcest resource first: the waste to minimise."""
    free = [capacity.free(node) for node in nodes]
    return tuple(sum(room.get(name) for room in free) for name in names)


def _least_asked(gang: Gang, names: Sequence[str]) -> tuple[int, ...]:
    """Per resource, the least the gang's minimum takes of it: its ``min_member - bound``
    smallest asks, wherever they land."""
    need = max(0, gang.min_member - gang.bound)
    return tuple(sum(sorted(pod.requests.get(name) for pod in gang.pending)[:need])
                 for name in names)


def _may_hold(
    capacity: Capacity, nodes: Sequence[NodeName], names: Sequence[str], least: Sequence[int]
) -> bool:
    """Whether the domain's free room, summed over its nodes, reaches the least the gang
    asks of every resource: a pod fits only where a node has its ask free, so a domain
    short of it holds no placement. A node overcommitted by another scheduler adds
    nothing, and a resource devices may serve is not counted (no node need list it)."""
    for name, asked in zip(names, least, strict=True):
        if asked and not capacity.by_devices(name):
            free = 0
            for node in nodes:
                amount = capacity.free(node).get(name)
                if amount > 0:
                    free += amount
            if free < asked:
                return False
    return True


def place_in_one_domain(
    capacity: Capacity,
    gang: Gang,
    policy: Policy,
    domains: Mapping[Domain, tuple[NodeName, ...]],
    keys: Sequence[str] | None = None,
) -> Decision:
    """Place the gang whole inside the domain it wastes least of, or say why none holds it.

    Each domain is tried on the capacity and released again, so the answer
    consumes only the chosen domain's room, exactly as a plain placement
    would. A gang with members already bound stays in their domain. The
    domains that refused it are named most free room first: the closest.
    ``keys`` are the domains' labels, the gang's own topology keys unless given.
    """
    decision = _in_best_domain(capacity, gang, policy, domains, keys)
    return decision if isinstance(decision, Unplaceable) else decision[0]


def _in_best_domain(
    capacity: Capacity,
    gang: Gang,
    policy: Policy,
    domains: Mapping[Domain, tuple[NodeName, ...]],
    keys: Sequence[str] | None,
    worded: int = REASON_DOMAINS,
) -> tuple[Placement, Domain] | Unplaceable:
    """The placement in the best domain and the domain, or why none holds the gang: the
    ``worded`` closest domains' refusals in its line, the closest ``REASON_DOMAINS``'
    room as figures."""
    candidates = {
        domain: nodes for domain, nodes in domains.items()
        if gang.bound_on <= set(nodes)
    }
    label = "/".join(gang.topology_keys if keys is None else keys)
    if not domains:
        return Unplaceable(gang.key, NoDomainLabel(gang.key, label))
    if not candidates:
        return Unplaceable(gang.key, BoundAcrossDomains(gang.key, label))
    names = sorted({name for pod in gang.pending for name in pod.requests.amounts},
                   key=devices_first)
    least = _least_asked(gang, names)
    best: tuple[tuple[int, ...], Domain] | None = None
    refused: dict[Domain, Unplaceable] = {}
    for domain in sorted(candidates):
        if not _may_hold(capacity, candidates[domain], names, least):
            continue  # searched only if its refusal is worded
        decision = _place_inside(capacity, gang, policy, domain, candidates[domain])
        if isinstance(decision, Unplaceable):
            refused[domain] = decision
            continue
        waste = _leftover(capacity, candidates[domain], names)
        capacity.release(decision)
        if best is None or waste < best[0]:
            best = (waste, domain)
    if best is None:
        return Unplaceable(gang.key, _none_holds(
            capacity, gang, policy, candidates, refused, label, names, worded))
    placed = _place_inside(capacity, gang, policy, best[1], candidates[best[1]])
    if not isinstance(placed, Placement):  # the domain held it a moment ago
        raise AssertionError(f"domain {describe_domain(best[1])} refused gang {gang.key} twice")
    return placed, best[1]


def _none_holds(
    capacity: Capacity, gang: Gang, policy: Policy,
    candidates: Mapping[Domain, tuple[NodeName, ...]], refused: Mapping[Domain, Unplaceable],
    label: str, names: Sequence[str], worded: int,
) -> NoDomainHolds:
    """Why no candidate domain holds the gang: the ``worded`` domains with the most free room
    with their refusals, the closest ``REASON_DOMAINS``' room as figures. A domain passed
    over for its free room is searched now, only when it is named, so the reason is the
    one a search of every domain gives."""
    free = {domain: _leftover(capacity, nodes, names) for domain, nodes in candidates.items()}
    closest = sorted(sorted(candidates),
                     key=lambda domain: tuple(-amount for amount in free[domain]))
    shown: list[InDomain] = []
    for domain in closest[:worded]:
        decision = refused.get(domain) or _place_inside(
            capacity, gang, policy, domain, candidates[domain])
        if not isinstance(decision, Unplaceable):  # its free room said it could not
            raise AssertionError(f"domain {describe_domain(domain)} held gang {gang.key}")
        shown.append(InDomain(describe_domain(domain), decision.reason))
    return NoDomainHolds(label, len(candidates), tuple(shown), tuple(
        _room(capacity, gang, domain, candidates[domain], names, free[domain])
        for domain in closest[:REASON_DOMAINS]))


def _room(
    capacity: Capacity, gang: Gang, domain: Domain, nodes: Sequence[NodeName],
    names: Sequence[str], free: Sequence[int],
) -> DomainRoom:
    """How near the domain came: of the first resource (scarcest first) it has less free of
    than the gang asks, else of the scarcest, what is free of what its nodes have."""
    asked = [sum(pod.requests.get(name) for pod in gang.pending) for name in names]
    short = next((i for i, name in enumerate(names) if free[i] < asked[i]), 0)
    resource = names[short] if names else ""
    total = sum(capacity.node(node).allocatable.get(resource) for node in nodes)
    level, value = domain[-1] if domain else ("", "")
    return DomainRoom(level, value, resource, free[short] if names else 0, total,
                      asked[short] if names else 0)


def _with_closest(decision: Unplaceable, closest: Sequence[DomainRoom]) -> Unplaceable:
    """The refusal of the widest level tried, naming the closest domains of every level."""
    reason = decision.reason
    if not isinstance(reason, NoDomainHolds):
        return decision
    return replace(decision, reason=replace(reason, closest=tuple(closest)))


def _closest_of(decision: Unplaceable) -> tuple[DomainRoom, ...]:
    reason = decision.reason
    return reason.closest if isinstance(reason, NoDomainHolds) else ()


# ---- levels of a Topology -------------------------------------------------------------


def level_problem(request: LevelRequest) -> TopologyUnknown | None:
    """Why the request's Topology or one of its levels (its sub-groups' too) is not there,
    or None."""
    if request.levels is None:
        return TopologyUnknown(request.topology)
    asked = (request.required, request.preferred,
             *(label for sub in request.sub_groups for label in (sub.required, sub.preferred)))
    for label in asked:
        if label is not None and label not in request.levels:
            return TopologyUnknown(request.topology, label, request.levels)
    return None


def _keys_to(levels: Sequence[str], label: str) -> tuple[str, ...]:
    """The labels naming a domain of ``label``'s level: it and every wider level's."""
    return tuple(levels[:levels.index(label) + 1])


def required_keys(request: LevelRequest) -> tuple[str, ...]:
    """The labels every member must share, none when the request asks for no required level
    or cannot be read."""
    if request.required is None or request.levels is None or level_problem(request):
        return ()
    return _keys_to(request.levels, request.required)


def preferred_keys(request: LevelRequest) -> tuple[tuple[str, ...], ...]:
    """The labels of each level to try before the required one (or anywhere), tightest
    first: the preferred level, then each wider level above the required one."""
    levels = request.levels
    if request.preferred is None or levels is None or level_problem(request):
        return ()
    widest = -1 if request.required is None else levels.index(request.required)
    return tuple(tuple(levels[:index + 1])
                 for index in range(levels.index(request.preferred), widest, -1))


def with_levels(gang: Gang, topologies: Mapping[str, tuple[str, ...]]) -> Gang:
    """The gang with its Topology's levels looked up, and its required level as its keys; a
    native CompositePodGroup's gang brings its levels with it."""
    if gang.levels is None:
        return gang
    request = replace(gang.levels, levels=topologies.get(gang.levels.topology,
                                                         gang.levels.levels))
    return replace(gang, levels=request, topology_keys=required_keys(request))


def place_in_levels(
    capacity: Capacity,
    gang: Gang,
    policy: Policy,
    domains_for: Callable[[tuple[str, ...]], Mapping[Domain, tuple[NodeName, ...]]],
    patient: bool = False,
) -> Decision:
    """Place a gang with Topology levels in the tightest level that holds it, from its
    preferred level out to its required one (or anywhere), best fit within each; the
    placement says where it landed. A ``patient`` gang (one still inside its
    ``preferredWaitSeconds``) takes nothing wider than its preferred level: it is told
    which wider level would hold it, and waits."""
    request = gang.levels
    preferred = "" if request is None else request.preferred or ""
    closest: list[DomainRoom] = []
    refusal: Unplaceable | None = None
    for keys in (*(preferred_keys(request) if request else ()), gang.topology_keys):
        if not keys:
            continue
        held = _in_best_domain(capacity, gang, policy, domains_for(keys), keys)
        if isinstance(held, tuple):
            placement, domain = held
            return _unless_patient(capacity, replace(placement, level=LevelHeld(
                keys[-1], domain[-1][1], preferred, _sub_groups_held(placement))),
                refusal, request)
        closest.extend(_closest_of(held))
        if patient and refusal is None:
            refusal = held  # the preferred level's: what the gang waits to see change
        if keys == gang.topology_keys:
            return _with_closest(held, closest)
    everywhere = next(iter(domains_for(()).values()), ())
    spread = _place_inside(capacity, gang, policy, (), everywhere)
    if isinstance(spread, Placement) and request is not None:
        return _unless_patient(capacity, replace(spread, level=LevelHeld(
            "", "", preferred, _sub_groups_held(spread))), refusal, request)
    return spread


def _unless_patient(
    capacity: Capacity, placement: Placement, refusal: Unplaceable | None,
    request: LevelRequest | None,
) -> Decision:
    """The placement, or, for a gang patient for its preferred level (``refusal`` is that
    level's), the placement given back and the gang told it waits for that level."""
    if refusal is None or request is None or request.preferred is None:
        return placement
    capacity.release(placement)
    wider = placement.level.level if placement.level is not None else ""
    return Unplaceable(placement.gang, WaitsForPreferred(
        request.preferred, request.preferred_wait_s, wider, refusal.reason))


# ---- sub-groups -------------------------------------------------------------------------


def sub_groups_of(gang: Gang) -> tuple[SubGroup, ...]:
    """The gang's sub-groups; none while its Topology is not known."""
    request = gang.levels
    if request is None or request.levels is None:
        return ()
    return request.sub_groups


def sub_group_problem(gang: Gang) -> SubGroupUnknown | InSubGroup | None:
    """Why no room could place the gang for its sub-groups, or None: a pending pod names a
    sub-group its PodGroup does not list, or a sub-group has fewer pods, pending and bound,
    than its minMember."""
    listed = gang.levels.sub_groups if gang.levels is not None else ()
    names = tuple(sub.name for sub in listed)
    unknown = [(pod.key, name) for pod in gang.pending
               if (name := pod.sub_group) is not None and name not in names]
    if unknown:
        pod, name = unknown[0]
        return SubGroupUnknown(pod, name, names, len(unknown) - 1)
    for sub in listed:
        has = (sum(pod.sub_group == sub.name for pod in gang.pending)
               + sum(name == sub.name for name, _ in gang.bound_in))
        if has < sub.min_member:
            return InSubGroup(sub.name, ShortOfMembers(gang.key, has, sub.min_member))
    return None


def _sub_groups_held(placement: Placement) -> tuple[SubGroupHeld, ...]:
    return () if placement.level is None else placement.level.sub_groups


def _place_inside(
    capacity: Capacity, gang: Gang, policy: Policy, domain: Domain, nodes: Sequence[NodeName]
) -> Decision:
    """Place the gang whole inside the domain (of ``nodes``), each sub-group inside one
    domain of its own level there; the placement's level names where each sub-group went."""
    confined = _confined(gang, domain) if domain else gang
    subs = sub_groups_of(gang)
    if not subs:
        return capacity.place(confined, policy)
    members: dict[str | None, list[Pod]] = {}
    for pod in confined.pending:
        members.setdefault(pod.sub_group, []).append(pod)
    parts: list[Placement] = []
    held: list[SubGroupHeld] = []

    def undone(reason: Unplaceable) -> Unplaceable:
        for part in parts:
            capacity.release(part)
        return reason

    levels = gang.levels.levels if gang.levels is not None else None
    for sub in sorted(subs, key=lambda sub: (-sub.min_member, sub.name)):
        pods = members.get(sub.name)
        if not pods:
            continue  # every member is bound: its domain is kept by theirs
        bound = tuple(node for name, node in gang.bound_in if name == sub.name)
        part = replace(confined, min_member=sub.min_member, pending=tuple(pods),
                       bound=len(bound), bound_on=frozenset(bound), levels=None,
                       topology_keys=(), bound_in=())
        decision = _place_sub_group(capacity, part, sub, policy, levels or (), nodes)
        if isinstance(decision, Unplaceable):
            return undone(Unplaceable(gang.key, InSubGroup(sub.name, decision.reason)))
        parts.append(decision[0])
        held.append(decision[1])
    need = gang.min_member - gang.bound - sum(len(part.assignments) for part in parts)
    rest = tuple(members.get(None, ()))
    if rest:
        others = capacity.place(replace(confined, pending=rest, min_member=max(0, need), bound=0,
                                        levels=None, topology_keys=(), bound_in=()), policy)
        if isinstance(others, Placement):
            parts.append(others)
        elif need > 0:
            return undone(others)
    elif need > 0:
        return undone(Unplaceable(gang.key, MembersMissing(gang.key, need, gang.min_member,
                                                           gang.bound)))
    order = {pod.key: position for position, pod in enumerate(gang.pending)}
    assignments = sorted((pair for part in parts for pair in part.assignments),
                         key=lambda pair: order[pair[0]])
    return Placement(gang.key, tuple(assignments),
                     tuple(write for part in parts for write in part.claims),
                     LevelHeld("", sub_groups=tuple(sorted(held, key=lambda h: h.sub_group))))


def _place_sub_group(
    capacity: Capacity, part: Gang, sub: SubGroup, policy: Policy, levels: tuple[str, ...],
    nodes: Sequence[NodeName],
) -> tuple[Placement, SubGroupHeld] | Unplaceable:
    """Place one sub-group among ``nodes`` as a gang is placed in levels: in its preferred
    level's tightest domain that holds it, out to its required level's, else anywhere."""
    request = LevelRequest("", sub.required, sub.preferred, levels)
    required = required_keys(request)
    closest: list[DomainRoom] = []
    for keys in (*preferred_keys(request), required):
        if not keys:
            continue
        # One domain's refusal worded per sub-group: the line names the gang's domains too,
        # and a condition's message holds 1024 characters.
        held = _in_best_domain(capacity, part, policy, _domains_among(capacity, nodes, keys),
                               keys, worded=1)
        if isinstance(held, tuple):
            return held[0], SubGroupHeld(sub.name, keys[-1], held[1][-1][1])
        closest.extend(_closest_of(held))
        if keys == required:
            return _with_closest(held, closest)
    placed = capacity.place(part, policy)
    return placed if isinstance(placed, Unplaceable) else (placed, SubGroupHeld(sub.name))


def _domains_among(
    capacity: Capacity, nodes: Sequence[NodeName], keys: Sequence[str]
) -> dict[Domain, tuple[NodeName, ...]]:
    """The domains of ``keys`` among the nodes, as :func:`domains_of` finds them."""
    found: dict[Domain, list[NodeName]] = {}
    for name in nodes:
        labels = dict(capacity.node(name).labels)
        if all(key in labels for key in keys):
            found.setdefault(tuple((key, labels[key]) for key in keys), []).append(name)
    return {domain: tuple(names) for domain, names in found.items()}
