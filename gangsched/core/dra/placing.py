"""Placing a gang whose pods claim devices: nodes and devices chosen together, whole.

Pod after pod, each goes to the first node (in the policy's order) where its
resources fit, its rules allow it, the claims already allocated let it, and
every claim it has still to allocate gets its devices there, with the
devices the gang took so far counted as taken. A claim two members share is
allocated once, with the first, and binds the second to the same node. The
answer is every member's node and every claim's new allocation and
reservations, or why not; nothing is consumed here (the caller does it, all
at once, only for a whole answer).

The node order keeps the cluster placeable for the gangs behind: binpack
tries the gang's own nodes first, then the nodes with the fewest free
devices that still do (the fullest NVLink cliques first, see
:mod:`.allocator`), so one-GPU jobs fill partly used nodes and cliques and
leave the whole ones to the jobs that need them whole.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, replace
from typing import Protocol

from gangsched.core.dra.allocator import (
    ClaimBroken,
    NodeAllocation,
    allocate_on_node,
    candidates,
    check_claim,
)
from gangsched.core.dra.devices import Allocation, Claim, ClaimKey, DeviceRef, Inventory
from gangsched.core.dra.extended import ExtendedClaim, extended_claim, served_by_devices
from gangsched.core.dra.selectors import SelectorError
from gangsched.core.fit.nodefit import term_matches
from gangsched.core.fit.score import Score, node_score
from gangsched.core.model.objects import Gang, GangKey, NodeName, Pod, PodClaim, Policy
from gangsched.core.model.resources import Resources
from gangsched.core.reasons import (
    ClaimInvalid,
    ClaimNotReady,
    DevicesNotServed,
    DevicesShort,
    PodRulesUnmet,
)

__all__ = [
    "ClaimWrite", "Consumer", "DevicePlacement", "MemberRules", "NodeRoom", "place_with_devices",
]

Refusal = ClaimInvalid | ClaimNotReady | DevicesNotServed | DevicesShort | PodRulesUnmet


class MemberRules(Protocol):
    """A gang's inter-pod rules (affinity, anti-affinity, spread, host ports), kept by the
    plain search (:class:`gangsched.core.placement.rulesearch.MemberRules`) and asked here member by
    member, each member placed counted for the next."""

    def refuses(self, pod: Pod, node: NodeName) -> bool: ...

    def rank(self, pod: Pod, node: NodeName) -> tuple[int, int]: ...

    def add(self, pod: Pod, node: NodeName) -> None: ...

    def unmet(self, gang: GangKey, need: int, pod: Pod, placed: int) -> PodRulesUnmet: ...


@dataclass(frozen=True, slots=True)
class Consumer:
    """An entry of a claim's ``reservedFor``: a pod, or a native PodGroup for its claims."""

    name: str
    uid: str
    resource: str = "pods"
    api_group: str = ""


@dataclass(frozen=True, slots=True)
class ClaimWrite:
    """What to write to one claim before its pods' Bindings: the allocation chosen (None
    when it had one already) and the consumers to add to its ``reservedFor``."""

    claim: ClaimKey
    uid: str
    resource_version: str
    allocation: Allocation | None
    consumers: tuple[Consumer, ...]
    create: ExtendedClaim | None = None
    """A pod's extended resource claim, named in the pod's status once allocated; created
    first when ``uid`` is empty (``claim`` is then only its generated name's prefix),
    else one an earlier attempt made and left unallocated."""

    def merged(self, later: ClaimWrite) -> ClaimWrite | None:
        """This write and a later one to the same claim as one, or None where they cannot
        be (a claim made for a pod is its alone). A claim has one allocation at a time:
        a later write of a cycle found it allocated by this one and only reserves it too,
        so the allocation is kept and the consumers of both are reserved together."""
        if self.create is not None or later.create is not None or self.claim != later.claim:
            return None
        kept = self if self.allocation is not None or later.allocation is None else later
        known = {consumer.uid for consumer in self.consumers}
        return replace(kept, consumers=(
            *self.consumers, *(c for c in later.consumers if c.uid not in known)))


@dataclass(frozen=True, slots=True)
class DevicePlacement:
    assignments: tuple[tuple[Pod, NodeName], ...]
    writes: tuple[ClaimWrite, ...]


@dataclass(frozen=True, slots=True)
class NodeRoom:
    """What placement offers of nodes: where a pod's rules let it, and what is free."""

    allowed: Callable[[Pod], Sequence[NodeName]]
    free: Callable[[NodeName], Resources]
    labels: Callable[[NodeName], Mapping[str, str]]
    allocatable: Callable[[NodeName], Resources]
    """Whether a node lists an extended resource itself, or devices serve it there."""


class _Gang:
    """The running answer for one gang: devices, claims and room taken so far."""

    def __init__(self, gang: Gang, inventory: Inventory,
                 allocated: Mapping[ClaimKey, Allocation], taken: AbstractSet[DeviceRef],
                 base_free: Callable[[NodeName], int] | None = None) -> None:
        self.gang = gang
        self.inventory = inventory
        self.allocated = dict(allocated)
        self.new: dict[ClaimKey, Allocation] = {}
        self.taken = set(taken)
        self.used: dict[NodeName, Resources] = {}
        self.mine: dict[NodeName, int] = {}
        self.reserve: dict[ClaimKey, list[Consumer]] = {}
        self.free: dict[NodeName, int] = {}
        """Free devices per node, counted when first asked and kept as the gang takes."""
        self.base_free = base_free
        """Free devices per node before this gang, as the pass keeps them: counting them
        for every gang again would look at every device of every node once per gang."""
        self.assignments: list[tuple[Pod, NodeName]] = []
        self.created: dict[ClaimKey, ExtendedClaim] = {}
        """Extended resource claims to create, by their placeholder keys."""

    def claims_of(
        self, pod: Pod
    ) -> list[Claim] | ClaimInvalid | ClaimNotReady | DevicesNotServed:
        if pod.resource_claims and self.inventory.unserved is not None:
            return DevicesNotServed(pod.key, len(pod.resource_claims), self.inventory.unserved)
        found = []
        for pod_claim in pod.resource_claims:
            if pod_claim.claim is None:
                return ClaimNotReady(pod.key, f"{pod_claim.name} (from template "
                                     f"{pod_claim.template})", "is not created yet")
            claim = self.inventory.claims.get(pod_claim.claim)
            if claim is None:
                return ClaimNotReady(pod.key, pod_claim.claim, "does not exist")
            if claim.deleting:
                return ClaimNotReady(pod.key, pod_claim.claim, "is being deleted")
            broken = check_claim(self.inventory, claim) if claim.key not in self.allocated else None
            if broken is not None:
                return ClaimInvalid(pod.key, claim.key, broken.request, broken.problem)
            found.append(claim)
        return found

    def node_allows(self, claims: list[Claim], node: NodeName, room: NodeRoom) -> bool:
        """Whether the claims already allocated let a pod run on the node."""
        for claim in claims:
            allocation = self.allocated.get(claim.key)
            if allocation is None:
                continue
            if allocation.node is not None and allocation.node != node:
                return False
            if allocation.node_terms and not any(
                term_matches(term, room.labels(node), node) for term in allocation.node_terms
            ):
                return False
        return True

    def free_devices(self, node: NodeName) -> int:
        count = self.free.get(node)
        if count is None:
            if self.base_free is not None:
                return self.base_free(node)
            taken = self.taken
            count = self.free[node] = sum(
                1 for device in self.inventory.on_node(node) if device.ref not in taken)
        return count

    def extended_on(self, pod: Pod, node: NodeName, room: NodeRoom
                    ) -> tuple[Resources, tuple[Claim, ExtendedClaim] | None]:
        """What the pod asks of the node's own room, and the claim to make for the
        extended resources devices serve there (None: the node serves them all, none is
        asked, or the pod has its claim already)."""
        served = served_by_devices(pod, self.inventory.extended, room.allocatable(node))
        if not served:
            return pod.requests, None
        own = pod.requests - Resources.of({name: pod.requests.get(name) for name in served})
        fresh = extended_claim(pod, served, self.inventory.extended)
        key = self.inventory.extended_claims.get(pod.uid)
        if key is None:
            return own, fresh
        made = self.inventory.claims[key]
        if made.allocation is not None:
            return own, None
        return own, (made, replace(fresh[1], requests=made.requests))

    def made_for(self, pod: Pod) -> Claim | ClaimNotReady | None:
        """The claim an earlier attempt made for the pod's extended resources. Allocated
        and reserved for the pod (its bind did not go through), it keeps the pod on its
        node as any allocated claim does; left unallocated (the attempt stopped half
        way), it is allocated now rather than a second one made (see
        :meth:`extended_on`)."""
        if not pod.extended_requests or not self.inventory.extended_claims:
            return None
        key = self.inventory.extended_claims.get(pod.uid)
        if key is None:
            return None
        claim = self.inventory.claims[key]
        if claim.deleting:
            return ClaimNotReady(pod.key, key, "is being deleted")
        if claim.allocation is not None and pod.uid not in claim.reserved_for:
            return ClaimNotReady(pod.key, key, "was made for the pod's extended resources "
                                 "and is allocated, but not reserved for it")
        return claim

    def take(self, pod: Pod, node: NodeName, found: NodeAllocation | None,
             requests: Resources | None = None,
             created: tuple[Claim, ExtendedClaim] | None = None) -> None:
        if found is not None:
            for key, allocation in found.allocations:
                self.allocated[key] = self.new[key] = allocation
                fresh = {d.device for d in allocation.devices
                         if not d.admin_access and d.device not in self.taken}
                local = fresh & {d.ref for d in self.inventory.devices.get(node, ())}
                if local != fresh:
                    # Devices every node shares: count again, here, from what is taken.
                    self.free.clear()
                    self.base_free = None
                elif node in self.free or self.base_free is not None:
                    self.free[node] = self.free_devices(node) - len(local)
                self.taken.update(fresh)
        for pod_claim in pod.resource_claims:
            claim = self.inventory.claims[pod_claim.claim] if pod_claim.claim else None
            if claim is None:
                continue
            consumer = self._consumer(pod, pod_claim)
            held = self.reserve.get(claim.key, [])
            if consumer.uid not in claim.reserved_for and consumer not in held:
                self.reserve[claim.key] = [*held, consumer]
        if created is not None:
            claim, create = created
            self.created[claim.key] = create
            self.reserve[claim.key] = [Consumer(create.pod, create.pod_uid)]
        used = pod.requests if requests is None else requests
        self.used[node] = self.used.get(node, Resources.zero()) + used
        self.mine[node] = self.mine.get(node, 0) + 1
        self.assignments.append((pod, node))

    def _consumer(self, pod: Pod, claim: PodClaim) -> Consumer:
        """The PodGroup for a claim of its ``spec.resourceClaims``, else the pod itself."""
        gang = self.gang
        if any(group_claim.matches(claim) for group_claim in gang.group_claims):
            return Consumer(gang.key.split("/", 1)[1], gang.group_uid, "podgroups",
                            "scheduling.k8s.io")
        return Consumer(pod.key.split("/", 1)[1], pod.uid)

    def writes(self) -> tuple[ClaimWrite, ...]:
        keys = sorted(set(self.new) | set(self.reserve))
        claims = self.inventory.claims
        found = []
        for key in keys:
            claim = claims.get(key)
            uid, version = (claim.uid, claim.resource_version) if claim is not None \
                else ("", "")
            found.append(ClaimWrite(key, uid, version, self.new.get(key),
                                    tuple(self.reserve.get(key, ())), self.created.get(key)))
        return tuple(found)


def _order(state: _Gang, pod: Pod, nodes: Sequence[NodeName], policy: Policy,
           rules: MemberRules | None) -> list[NodeName]:
    """The nodes by the one node preference (:func:`node_score`), room counted in free
    devices; before it, what the pod's inter-pod rules rank first (as the plain search)."""

    def rank(node: NodeName) -> tuple[tuple[int, int], Score, str]:
        liked = rules.rank(pod, node) if rules is not None else (0, 0)
        return (liked, node_score(policy, state.mine.get(node, 0), state.free_devices(node)),
                node)

    return sorted(nodes, key=rank)


def least_devices(claims: Sequence[Claim]) -> int:
    """Free devices a node needs at the least to hold the claims (0: no bound known, as
    with admin access, which may use devices in use); cheaper than trying the node."""
    least = 0
    for claim in claims:
        for claim_request in claim.requests:
            alternatives = claim_request.alternatives
            if any(request.admin_access for request in alternatives):
                return 0
            least += min(1 if request.all_devices else request.count
                         for request in alternatives)
    return least


def _place_pod(state: _Gang, pod: Pod, room: NodeRoom, policy: Policy,
               rules: MemberRules | None
               ) -> NodeName | ClaimInvalid | ClaimNotReady | DevicesNotServed | None:
    """The node the pod takes (its claims allocated there), a refusal, or None: no node."""
    claims = state.claims_of(pod)
    if not isinstance(claims, list):
        return claims
    made = state.made_for(pod)
    if isinstance(made, ClaimNotReady):
        return made
    if made is not None and made.allocation is not None:
        claims.append(made)  # keeps the pod on its node
    to_allocate = [claim for claim in claims if claim.key not in state.allocated]
    least = least_devices(to_allocate)
    offering = [node for node in room.allowed(pod)
                if not least or state.free_devices(node) >= least]
    for node in _order(state, pod, offering, policy, rules):
        # Room, claims already allocated and rules are checked in order, not for every
        # node: binpack usually takes the first node it looks at.
        requests, created = state.extended_on(pod, node, room)
        if not requests.fits(room.free(node) - state.used.get(node, Resources.zero())):
            continue
        if not state.node_allows(claims, node, room):
            continue
        if rules is not None and rules.refuses(pod, node):
            continue
        allocating = to_allocate if created is None else [*to_allocate, created[0]]
        found = None
        if allocating:
            answer = allocate_on_node(state.inventory, allocating, node, state.taken)
            if isinstance(answer, ClaimBroken):
                return ClaimInvalid(pod.key, answer.claim, answer.request, answer.problem)
            if answer is None:
                continue
            found = answer
        state.take(pod, node, found, requests, created)
        if rules is not None:
            rules.add(pod, node)
        return node
    return None


def place_with_devices(
    gang: Gang, need: int, inventory: Inventory, room: NodeRoom, policy: Policy, *,
    allocated: Mapping[ClaimKey, Allocation], taken: AbstractSet[DeviceRef],
    free: Callable[[NodeName], int] | None = None, rules: MemberRules | None = None,
) -> DevicePlacement | Refusal:
    """At least ``need`` pending members placed with their devices, or why not.

    ``allocated``: claims allocated so far this cycle as well as before it;
    ``taken``: devices no new allocation may use; ``free``, when given, the
    count of a node's devices not in ``taken`` (kept by the caller across
    gangs); ``rules``, when the gang's pods have inter-pod rules or others'
    anti-affinity selects them: each member is counted there as it is placed,
    and the caller takes them back when it does not keep the answer. Members
    beyond ``need`` are placed where they fit; one that does not fit stays
    pending.
    """
    state = _Gang(gang, inventory, allocated, taken, free)
    refused: Refusal | None = None
    for pod in gang.pending:
        placed = _place_pod(state, pod, room, policy, rules)
        if isinstance(placed, ClaimInvalid | ClaimNotReady | DevicesNotServed):
            return placed
        if placed is None and refused is None:
            refused = _claims_reason(gang, pod, state, room, len(state.assignments), need,
                                     rules)
    if len(state.assignments) < need:
        assert refused is not None
        return refused
    return DevicePlacement(tuple(state.assignments), state.writes())


def _claims_reason(gang: Gang, pod: Pod, state: _Gang, room: NodeRoom, placed: int,
                  need: int, rules: MemberRules | None) -> Refusal:
    """Why the pod found no node: the inter-pod rules when they refuse every node with
    room for it, else its first claim no node the rules allow can hold, with the best
    offer (its extended resources' claim counts as one of its claims)."""
    claims = state.claims_of(pod)
    if not isinstance(claims, list):
        return claims
    made = state.made_for(pod)
    if isinstance(made, ClaimNotReady):
        return made
    if made is not None and made.allocation is not None:
        claims.append(made)  # keeps the pod on its node
    nodes = []
    extended: tuple[Claim, ExtendedClaim] | None = None
    for node in room.allowed(pod):
        requests, created = state.extended_on(pod, node, room)
        extended = extended or created
        if (requests.fits(room.free(node) - state.used.get(node, Resources.zero()))
                and state.node_allows(claims, node, room)):
            nodes.append(node)
    if rules is not None:
        ruled = [node for node in nodes if not rules.refuses(pod, node)]
        if nodes and not ruled:
            return rules.unmet(gang.key, need, pod, placed)
        nodes = ruled
    pending = [claim for claim in claims if claim.key not in state.allocated]
    if not pending:
        pending = claims
    if extended is not None:
        pending = [*pending, extended[0]]
    blamed = next((claim for claim in pending
                   if not any(isinstance(allocate_on_node(state.inventory, [claim], node,
                                                          state.taken), NodeAllocation)
                              for node in nodes)), pending[0] if pending else None)
    minimum = need if need > 1 else 0
    if blamed is None or not blamed.requests:
        return DevicesShort(gang.key, pod.key, "", "", "", 0, len(nodes), placed, minimum)
    offer = _offer(gang, pod, blamed, state, nodes, placed, minimum)
    if extended is not None and blamed is extended[0] and isinstance(offer, DevicesShort):
        asked = offer.request
        resource = next((m.resource for m in extended[1].mappings if m.request == asked), None)
        if resource is not None:
            offer = replace(offer, claim="", resource=resource)
    bad = state.inventory.bad_slices
    unreadable = next((bad[node] for node in nodes if node in bad), None)
    if isinstance(offer, DevicesShort) and unreadable is not None:
        return replace(offer, unreadable=unreadable)
    return offer


def _offer(gang: Gang, pod: Pod, claim: Claim, state: _Gang, nodes: list[NodeName],
           placed: int, minimum: int) -> Refusal:
    """The figures of the claim's first request on the node that offers most."""
    request = claim.requests[0].alternatives[0]
    inventory = state.inventory
    constraint = next((c for c in claim.constraints if c.covers(request.name)), None)
    attribute = constraint.attribute if constraint else None
    best: tuple[int, int, str, str | None] | None = None
    try:
        for node in nodes:
            free = candidates(inventory, request, node, state.taken)
            total = len(candidates(inventory, request, node, frozenset()))
            count, group = len(free), None
            if attribute is not None and free:
                groups: dict[str, int] = {}
                for device in free:
                    value = str(device.attribute(attribute))
                    groups[value] = groups.get(value, 0) + 1
                group, count = max(groups.items(), key=lambda item: (item[1], item[0]))
            if total and (best is None or count > best[0]):
                best = (count, total, node, group)
    except SelectorError as error:
        return ClaimInvalid(pod.key, claim.key, request.name, str(error))
    need = request.count if not request.all_devices else (best[1] if best else 0)
    if best is None:
        return DevicesShort(gang.key, pod.key, claim.key, request.name, request.device_class,
                            need, len(nodes), placed, minimum, attribute)
    return DevicesShort(gang.key, pod.key, claim.key, request.name, request.device_class, need,
                        len(nodes), placed, minimum, attribute, best[2], best[0], best[1],
                        best[3])
