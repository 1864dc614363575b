"""All-or-nothing placement of gangs onto a snapshot.

A gang is placed whole or not at all: a half-placed gang holds capacity
without making progress, and several half-placed gangs are exactly the
deadlock this scheduler exists to break. So :meth:`Capacity.place` works as
a transaction on a scratch copy of free resources and returns either a
:class:`Placement` for at least ``min_member - bound`` pods, or an
:class:`Unplaceable` with a reason, and consumes capacity only in the first
case. Nothing here binds anything; the shell assumes and binds what it gets.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, replace
from functools import partial

from gangsched.core.dra.devices import ClaimKey, DeviceRef, Inventory
from gangsched.core.dra.ledger import DeviceLedger
from gangsched.core.dra.placing import ClaimWrite, DevicePlacement, NodeRoom
from gangsched.core.fit.interpod import Residents, term_selects
from gangsched.core.model.objects import Gang, GangKey, Node, NodeName, Pod, PodKey, Policy
from gangsched.core.model.resources import Resources
from gangsched.core.placement.packing import (
    SEARCH_BUDGET,
    SEARCH_MAX_PODS,
    PodType,
    Search,
    search_view,
)
from gangsched.core.placement.policies import allowed_nodes, greedy, shape_figures
from gangsched.core.placement.rulesearch import MemberRules, place_under_rules
from gangsched.core.placement.shapes import FreeNodes
from gangsched.core.placement.snapshot import NodeUsage, Snapshot
from gangsched.core.reasons import (
    LevelHeld,
    MembersMissing,
    Reason,
    ShapeFigures,
    unplaceable_reason,
)

__all__ = [
    "Capacity",
    "Decision",
    "NodeUsage",
    "Placement",
    "Snapshot",
    "Unplaceable",
    "apply",
    "place_gang",
    "remove",
]


@dataclass(frozen=True, slots=True)
class Placement:
    """Where each placed pod of a gang goes; pods not listed stay pending."""

    gang: GangKey
    assignments: tuple[tuple[PodKey, NodeName], ...]
    claims: tuple[ClaimWrite, ...] = ()
    """Claim allocations and reservations to write before any of the pods is bound."""
    level: LevelHeld | None = None
    """For a gang with Topology levels: the level and domain it landed in."""


@dataclass(frozen=True, slots=True)
class Unplaceable:
    """The gang cannot be placed now; ``reason`` says why, with figures."""

    gang: GangKey
    reason: Reason


Decision = Placement | Unplaceable

class Capacity:
    """Free resources per node, mutable, for one pass over many gangs.

    Taken from a snapshot once; each successful :meth:`place` consumes what
    it placed, so the next gang in the pass sees it gone without rebuilding
    anything, and :meth:`release` gives it back exactly (integer arithmetic,
    no drift). The nodes and the shape indexes over them are a
    :class:`FreeNodes`; this class holds the policies that choose among them.
    """

    __slots__ = ("_budget", "_devices", "_figures_of", "_infeasible", "_nodes", "_placed")

    def __init__(self, snapshot: Snapshot, *, budget: int = SEARCH_BUDGET) -> None:
        """``budget`` bounds the exhaustive search per gang (0: greedy answers only)."""
        self._nodes = FreeNodes(snapshot.index)
        self._placed = PlacedPods(snapshot)
        self._infeasible: dict[tuple[object, ...], bool] = {}
        self._figures_of: dict[tuple[object, ...], list[ShapeFigures]] = {}
        """The figures of a signature that did not fit, while no node's room moved:
        a thousand identical waiting gangs are counted once."""
        self._budget = budget
        self._devices = DeviceLedger(snapshot.devices)

    @classmethod
    def from_snapshot(cls, snapshot: Snapshot, *, budget: int = SEARCH_BUDGET) -> Capacity:
        return cls(snapshot, budget=budget)

    # ------------------------------------------------------------ queries

    def free(self, name: NodeName) -> Resources:
        return self._nodes.free[name]

    def groups(self) -> Iterator[tuple[int, Resources, Collection[NodeName]]]:
        """The nodes in groups of one kind (labels, taints, flags) and equal free room, in
        the order a fresh snapshot lists them: by kind, then by first node."""
        for kind, by_free in enumerate(self._nodes.classes):
            for free, names in sorted(by_free.items(), key=lambda group: next(iter(group[1]))):
                yield kind, free, names

    def node(self, name: NodeName) -> Node:
        return self._nodes.index.nodes[name].node

    def free_total(self) -> Resources:
        """Free resources over nodes that can take pods; see :meth:`FreeNodes.total`."""
        return self._nodes.total()

    # ------------------------------------------------------------ placing

    def place(self, gang: Gang, policy: Policy = Policy.BINPACK) -> Decision:
        """Place the gang whole or not at all; on success the capacity is consumed.

        At least ``min_member - bound`` pending pods must fit at once; pending
        pods beyond that are placed too where they fit, after the gang's
        minimum is secured, never instead of it. ``gang.policy`` overrides
        ``policy``.

        First a greedy pass shaped by the policy, run as a transaction on
        this capacity and undone if it falls short; it is exact when the
        gang has one kind of pod. A gang mixing kinds that greedy cannot fit
        gets an exhaustive search over groups of equivalent nodes, bounded
        by the step budget. Exhausting the budget (or a gang of more than
        ``SEARCH_MAX_PODS`` pods) falls back to the greedy answer, which was
        "does not fit", and the reason says the search was cut short.
        """
        policy = gang.policy or policy
        need = max(0, gang.min_member - gang.bound)
        pending = gang.pending
        if len(pending) < need:
            # No count of the pods pending: it changes with every pod an operator
            # creates, and each change would rewrite every member's condition.
            missing = MembersMissing(gang.key, need, gang.min_member, gang.bound)
            return Unplaceable(gang.key, missing)
        if not pending:
            return Placement(gang.key, ())
        # One pod at the least, even for a gang's extras: a placement of none binds nothing.
        if any(pod.resource_claims or self._served_by_devices(pod) for pod in pending):
            return self._place_with_devices(gang, max(need, 1), policy)
        if self._placed.under_rules(pending):
            return self._place_under_rules(gang, max(need, 1), policy)
        types = PodType.group(pending, self._nodes.index.max_allocatable)
        signature = (tuple((kind.requests, kind.rules, len(kind.pods)) for kind in types), need)
        known = self._infeasible.get(signature)
        exhausted = bool(known)
        assignments = None
        if known is None:
            assignments, exhausted = _solve(self._nodes, types, need, policy, self._budget)
        if assignments is None:
            # Capacity only shrinks until the next release, so what did not
            # fit now will not fit later in the pass either.
            self._infeasible[signature] = exhausted
            figures = self._figures_of.get(signature)
            if figures is None:
                figures = [shape_figures(self._nodes, kind) for kind in types]
                self._figures_of[signature] = figures
            return Unplaceable(gang.key, self._reason(gang, figures, need, exhausted))
        self._figures_of.clear()
        for pod, node in assignments:
            self._placed.keep(pod, node)
        return _ordered(gang, assignments)

    # ------------------------------------------------------------ inter-pod rules

    def _place_under_rules(self, gang: Gang, need: int, policy: Policy) -> Decision:
        outcome = place_under_rules(self._nodes, self._placed.residents(), gang.pending, need,
                                    policy, self._budget)
        if outcome.assignments is None:
            blocked = outcome.blocked
            if blocked is None:
                types = PodType.group(gang.pending, self._nodes.index.max_allocatable)
                figures = [shape_figures(self._nodes, kind) for kind in types]
                return Unplaceable(gang.key, self._reason(gang, figures, need, outcome.exhausted))
            return Unplaceable(gang.key, blocked.unmet(
                gang.key, need, self._budget if outcome.exhausted else None))
        self._figures_of.clear()
        for pod, node in outcome.assignments:
            self._placed.keep(pod, node, residents=False)
        return _ordered(gang, outcome.assignments)

    def take(self, gang: GangKey, pod: PodKey, node: NodeName, requests: Resources) -> Placement:
        """Take room on a node chosen already (a starving gang's): no search, no rules.

        The caller took ``requests`` from what :meth:`free` says the node has;
        :meth:`release` gives it back like any placement.
        """
        if not requests.fits(self.free(node)):
            raise ValueError(f"{requests} is not free on {node}")
        self._nodes.take([(node, requests)])
        self._placed.keep(Pod(pod, requests, node_name=node), node, residents=False)
        self._figures_of.clear()
        return Placement(gang, ((pod, node),))

    def devices_wanted(self, pod: Pod, node: NodeName, besides: AbstractSet[DeviceRef]
                       ) -> tuple[DeviceRef, ...] | None:
        """The devices the pod's claims would get on the node, free ones first, else any
        but ``besides`` (see :meth:`DeviceLedger.wanted`)."""
        allocatable = self._nodes.index.nodes[node].node.allocatable
        return self._devices.wanted(pod, node, allocatable, besides)

    def devices_least(self, pod: Pod) -> int:
        """The fewest devices the pod's claims may get (see :meth:`DeviceLedger.least`)."""
        return self._devices.least(pod)

    def devices_free_on(self, node: NodeName) -> int:
        """How many devices of the node no claim has and no placement of this pass holds."""
        return self._devices.free_devices(node)

    def devices_now(self) -> Inventory:
        """The devices and claims as this pass has left them (see :meth:`DeviceLedger.now`)."""
        return self._devices.now()

    def devices_free(self, devices: Iterable[DeviceRef]) -> tuple[DeviceRef, ...]:
        """Those of the devices no claim has and no placement of this pass holds."""
        return self._devices.untaken(devices)

    def hold_devices(self, placement: Placement, devices: Iterable[DeviceRef]) -> Placement:
        """The placement of a pod that is not bound (a stand-in for room held: a starving
        gang's, a departed member's), holding too those of ``devices`` free now, so that no
        claim placed after it gets them; :meth:`release` gives them back with its room."""
        (pod, node), *_ = placement.assignments
        write = self._devices.hold(ClaimKey(f"{pod}#devices"), node, devices)
        return placement if write is None else replace(
            placement, claims=(*placement.claims, write))

    def release(self, placement: Placement) -> None:
        """Give back exactly what :meth:`place` took for this placement.

        For a gang whose binding failed, or one the shell decides to back
        out of in the same pass. Releasing a placement this capacity did not
        make is a bug and raises ValueError.
        """
        missing = [key for key, _ in placement.assignments if key not in self._placed]
        if missing:
            raise ValueError(f"release of pods this capacity did not place: {missing}")
        returned = [(node, self._placed.drop(key).requests) for key, node in placement.assignments]
        self._nodes.take(returned, sign=-1)
        self._infeasible.clear()
        self._figures_of.clear()
        self._devices.forget(placement.claims)

    # ------------------------------------------------------------ devices

    def by_devices(self, resource: str) -> bool:
        """Whether a DeviceClass names the extended resource: devices may serve it where
        a node does not list it, so a node's free room does not bound it."""
        return resource in self._devices.inventory.extended

    def _served_by_devices(self, pod: Pod) -> bool:
        """Whether a DeviceClass names one of the pod's extended resources: devices may
        serve it where a node does not list it, so the pod is placed with devices."""
        extended = self._devices.inventory.extended
        return bool(extended) and any(
            entry.resource in extended for entry in pod.extended_requests)

    def _place_with_devices(self, gang: Gang, need: int, policy: Policy) -> Decision:
        """A gang whose pods claim devices: nodes and devices together (see
        :mod:`gangsched.core.dra.placing`), pod by pod; consumed only when whole.

        Inter-pod rules (host ports included) are the plain search's counts, asked
        member by member, with the members placed before counted: they keep a pod off
        the nodes they refuse and rank the others before the devices do.
        """
        nodes = self._nodes
        rules = (MemberRules(nodes, self._placed.residents(), gang.pending)
                 if self._placed.under_rules(gang.pending) else None)
        room = NodeRoom(partial(allowed_nodes, nodes), nodes.free.__getitem__,
                        lambda name: dict(nodes.index.nodes[name].node.labels),
                        lambda name: nodes.index.nodes[name].node.allocatable)
        answer = self._devices.place(gang, need, room, policy, rules)
        if not isinstance(answer, DevicePlacement):
            if rules is not None:
                rules.undo()
            return Unplaceable(gang.key, answer)
        nodes.take((node, pod.requests) for pod, node in answer.assignments)
        self._figures_of.clear()
        for pod, node in answer.assignments:
            self._placed.keep(pod, node)
        self._devices.record(answer.writes)
        return Placement(gang.key, tuple((pod.key, node) for pod, node in answer.assignments),
                         answer.writes)

    # ------------------------------------------------------------ reasons

    def _reason(
        self, gang: Gang, figures: list[ShapeFigures], need: int, exhausted: bool
    ) -> Reason:
        stopped = exhausted and len(gang.pending) <= SEARCH_MAX_PODS
        skipped = exhausted and not stopped
        return unplaceable_reason(
            gang, figures, need, len(self._nodes.free),
            search_stopped_after=self._budget if stopped else None,
            search_skipped_over=SEARCH_MAX_PODS if skipped else None,
        )

class PlacedPods:
    """The pods a pass has placed, as inter-pod rules read them: which hold
    anti-affinity, and the pods on nodes with them (built the first time a gang needs
    them, then kept current)."""

    __slots__ = ("_holders", "_placed", "_residents", "_snapshot")

    def __init__(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot
        self._placed: dict[PodKey, tuple[Pod, NodeName]] = {}
        self._holders = 0
        """Placed pods with required anti-affinity, which may keep any later pod away."""
        self._residents: Residents | None = None

    def __contains__(self, key: PodKey) -> bool:
        return key in self._placed

    def keep(self, pod: Pod, node: NodeName, *, residents: bool = True) -> None:
        """Count the pod placed; ``residents``: add it to the residents too, when built
        (the search under rules added its own already)."""
        self._placed[pod.key] = (pod, node)
        if pod.anti_affinity:
            self._holders += 1
        if residents and self._residents is not None:
            self._residents.add(pod, node)

    def drop(self, key: PodKey) -> Pod:
        """The placed pod ``key`` released: placed no more."""
        pod, _ = self._placed.pop(key)
        if pod.anti_affinity:
            self._holders -= 1
        if self._residents is not None:
            self._residents.remove(key)
        return pod

    def residents(self) -> Residents:
        """The pods on nodes as inter-pod rules read them, placed ones included; built the
        first time a gang needs them, then kept current."""
        residents = self._residents
        if residents is None:
            nodes = {name: usage.node for name, usage in self._snapshot.nodes.items()}
            residents = Residents(nodes, self._snapshot.pods)
            for pod, node in self._placed.values():
                residents.add(pod, node)
            self._residents = residents
        return residents

    def under_rules(self, pending: Sequence[Pod]) -> bool:
        """Whether where these pods may go depends on the pods already placed: they carry
        inter-pod rules, or some placed pod's anti-affinity selects one of them.

        Gangs without either keep the plain search, whose cost does not grow with
        the pods on nodes."""
        if any(pod.has_pod_rules for pod in pending):
            return True
        if not self._holders and not self._snapshot.holds_anti_affinity:
            return False
        terms = self._snapshot.anti_affinity_terms
        if terms is not None and not self._holders:
            # Distinct terms, however many pods hold them (a DaemonSet's host port).
            return any(term_selects(term, pod) for pod in pending for term in terms)
        residents = self.residents()
        return any(residents.held_off(pod) for pod in pending)


def _solve(
    nodes: FreeNodes, types: list[PodType], need: int, policy: Policy, budget: int
) -> tuple[list[tuple[Pod, NodeName]] | None, bool]:
    """(assignments, search cut short); assignments are already taken from ``nodes``: a
    greedy pass first, exact for one kind of pod, then the search within ``budget``."""
    nodes.begin()
    placed = greedy(nodes, [(kind, kind.pods) for kind in types], policy, {})
    if placed and len(placed) >= need:
        nodes.commit()
        return placed, False
    nodes.undo()
    if len(types) == 1:
        return None, False  # greedy is exact for one kind of pod
    view = search_view(nodes.index, nodes.classes, types)
    search = Search(view, types, need, policy, budget)
    found = search.solve()
    if found is None:
        return None, search.exhausted
    nodes.take((node, pod.requests) for pod, node in found)
    # The gang's minimum is secured; the pods beyond it go where the
    # policy puts them, beside the nodes the search chose.
    chosen = {pod.key for pod, _ in found}
    mine: dict[NodeName, int] = {}
    for _, node in found:
        mine[node] = mine.get(node, 0) + 1
    rest = [(kind, [pod for pod in kind.pods if pod.key not in chosen]) for kind in types]
    return found + greedy(nodes, rest, policy, mine), False


def _ordered(gang: Gang, assignments: Iterable[tuple[Pod, NodeName]]) -> Placement:
    """The placement with the gang's pods in their pending order."""
    order = {pod.key: position for position, pod in enumerate(gang.pending)}
    ordered = sorted(assignments, key=lambda item: order[item[0].key])
    return Placement(gang.key, tuple((pod.key, node) for pod, node in ordered))


def place_gang(snapshot: Snapshot, gang: Gang, policy: Policy = Policy.BINPACK) -> Decision:
    """Place one gang against a snapshot; see :meth:`Capacity.place`."""
    return Capacity.from_snapshot(snapshot).place(gang, policy)


def _shifted(snapshot: Snapshot, placement: Placement, pods: Iterable[Pod], sign: int) -> Snapshot:
    by_key = {pod.key: pod for pod in pods}
    nodes = dict(snapshot.nodes)
    for key, name in placement.assignments:
        if key not in by_key:
            raise ValueError(f"placement of {placement.gang} names pod {key} not among the pods")
        if name not in nodes:
            raise ValueError(f"placement of {placement.gang} names unknown node {name}")
        usage = nodes[name]
        requests = by_key[key].requests
        requested = usage.requested + requests if sign > 0 else usage.requested - requests
        nodes[name] = NodeUsage(usage.node, requested)
    placed = {key: name for key, name in placement.assignments}
    if sign > 0:
        pods_after = [*snapshot.pods,
                      *(replace(by_key[key], node_name=name) for key, name in placed.items())]
    else:
        pods_after = [pod for pod in snapshot.pods if pod.key not in placed]
    return Snapshot(nodes, devices=snapshot.devices).with_pods(pods_after)


def apply(snapshot: Snapshot, placement: Placement, pods: Iterable[Pod]) -> Snapshot:
    """The snapshot with the placement's pods counted on their nodes (assumed bound)."""
    return _shifted(snapshot, placement, pods, +1)


def remove(snapshot: Snapshot, placement: Placement, pods: Iterable[Pod]) -> Snapshot:
    """The inverse of :func:`apply`: ``remove(apply(s, p, pods), p, pods) == s``."""
    return _shifted(snapshot, placement, pods, -1)
