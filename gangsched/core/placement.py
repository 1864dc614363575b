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
from dataclasses import dataclass, replace

from gangsched.core.dra.devices import Allocation, ClaimKey, DeviceRef
from gangsched.core.dra.placing import ClaimWrite, DevicePlacement, NodeRoom, place_with_devices
from gangsched.core.interpod import Residents
from gangsched.core.model import Gang, GangKey, NodeName, Pod, PodKey, Policy
from gangsched.core.nodefit import uses_node_name
from gangsched.core.packing import SEARCH_BUDGET, SEARCH_MAX_PODS, PodType, Search, search_view
from gangsched.core.reasons import (
    MembersMissing,
    PodRulesUnmet,
    Reason,
    ShapeFigures,
    unplaceable_reason,
)
from gangsched.core.resources import Resources
from gangsched.core.rulesearch import place_under_rules
from gangsched.core.shapes import ClassKey, FreeNodes, ShapeIndex
from gangsched.core.snapshot import NodeUsage, Snapshot

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

    __slots__ = (
        "_allocated", "_budget", "_devices", "_figures_of", "_infeasible", "_nodes", "_placed",
        "_placed_holders", "_residents", "_snapshot", "_taken",
    )

    def __init__(self, snapshot: Snapshot, *, budget: int = SEARCH_BUDGET) -> None:
        """``budget`` bounds the exhaustive search per gang (0: greedy answers only)."""
        self._snapshot = snapshot
        self._nodes = FreeNodes(snapshot.index)
        self._placed: dict[PodKey, tuple[Pod, NodeName]] = {}
        self._placed_holders = 0
        """Placed pods with required anti-affinity, which may keep any later pod away."""
        self._residents: Residents | None = None
        self._infeasible: dict[tuple[object, ...], bool] = {}
        self._figures_of: dict[tuple[object, ...], list[ShapeFigures]] = {}
        """The figures of a signature that did not fit, while no node's room moved:
        a thousand identical waiting gangs are counted once."""
        self._budget = budget
        self._devices = snapshot.devices
        # Claims allocated, and devices taken, before this pass and by its placements.
        self._allocated: dict[ClaimKey, Allocation] = {
            key: claim.allocation for key, claim in self._devices.claims.items()
            if claim.allocation is not None
        }
        self._taken: set[DeviceRef] = set(self._devices.in_use)

    @classmethod
    def from_snapshot(cls, snapshot: Snapshot, *, budget: int = SEARCH_BUDGET) -> Capacity:
        return cls(snapshot, budget=budget)

    # ------------------------------------------------------------ queries

    def free(self, name: NodeName) -> Resources:
        return self._nodes.free[name]

    def groups(self) -> Iterator[tuple[int, Resources, Collection[NodeName]]]:
        """The nodes in groups of one kind (labels, taints, flags) and equal free room."""
        for kind, by_free in enumerate(self._nodes.classes):
            for free, names in by_free.items():
                if names:
                    yield kind, free, names

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
        if any(pod.resource_claims for pod in pending):
            return self._place_with_devices(gang, need, policy)
        if self._under_rules(pending):
            return self._place_under_rules(gang, need, policy)
        types = PodType.group(pending, self._nodes.index.max_allocatable)
        signature = (tuple((kind.requests, kind.rules, len(kind.pods)) for kind in types), need)
        known = self._infeasible.get(signature)
        exhausted = bool(known)
        assignments = None
        if known is None:
            assignments, exhausted = self._solve(types, need, policy)
        if assignments is None:
            # Capacity only shrinks until the next release, so what did not
            # fit now will not fit later in the pass either.
            self._infeasible[signature] = exhausted
            figures = self._figures_of.get(signature)
            if figures is None:
                figures = self._figures_of[signature] = [self._figures(kind) for kind in types]
            return Unplaceable(gang.key, self._reason(gang, figures, need, exhausted))
        self._figures_of.clear()
        residents = self._residents
        for pod, node in assignments:
            self._keep(pod, node)
            if residents is not None:
                residents.add(pod, node)
        return _ordered(gang, assignments)

    def _keep(self, pod: Pod, node: NodeName) -> None:
        self._placed[pod.key] = (pod, node)
        if pod.anti_affinity:
            self._placed_holders += 1

    # ------------------------------------------------------------ inter-pod rules

    def _residents_now(self) -> Residents:
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

    def _under_rules(self, pending: Sequence[Pod]) -> bool:
        """Whether where these pods may go depends on the pods already placed: they carry
        inter-pod rules, or some placed pod's anti-affinity selects one of them.

        Gangs without either keep the plain search, whose cost does not grow with
        the pods on nodes."""
        if any(pod.has_pod_rules for pod in pending):
            return True
        if not self._placed_holders and not self._snapshot.holds_anti_affinity:
            return False
        residents = self._residents_now()
        return any(residents.held_off(pod) for pod in pending)

    def _place_under_rules(self, gang: Gang, need: int, policy: Policy) -> Decision:
        outcome = place_under_rules(self._nodes, self._residents_now(), gang.pending, need,
                                    policy, self._budget)
        if outcome.assignments is None:
            blocked = outcome.blocked
            if blocked is None:
                types = PodType.group(gang.pending, self._nodes.index.max_allocatable)
                figures = [self._figures(kind) for kind in types]
                return Unplaceable(gang.key, self._reason(gang, figures, need, outcome.exhausted))
            return Unplaceable(gang.key, PodRulesUnmet(
                gang.key, need, blocked.placed, blocked.pod.key, blocked.refused, blocked.short,
                blocked.excluded, blocked.shown,
                self._budget if outcome.exhausted else None,
            ))
        self._figures_of.clear()
        for pod, node in outcome.assignments:
            self._keep(pod, node)
        return _ordered(gang, outcome.assignments)

    def take(self, gang: GangKey, pod: PodKey, node: NodeName, requests: Resources) -> Placement:
        """Take room on a node chosen already (a starving gang's): no search, no rules.

        The caller took ``requests`` from what :meth:`free` says the node has;
        :meth:`release` gives it back like any placement.
        """
        if not requests.fits(self.free(node)):
            raise ValueError(f"{requests} is not free on {node}")
        self._nodes.take([(node, requests)])
        self._placed[pod] = (Pod(pod, requests, node_name=node), node)
        self._figures_of.clear()
        return Placement(gang, ((pod, node),))

    def release(self, placement: Placement) -> None:
        """Give back exactly what :meth:`place` took for this placement.

        For a gang whose binding failed, or one the shell decides to back
        out of in the same pass. Releasing a placement this capacity did not
        make is a bug and raises ValueError.
        """
        missing = [key for key, _ in placement.assignments if key not in self._placed]
        if missing:
            raise ValueError(f"release of pods this capacity did not place: {missing}")
        returned = []
        for key, node in placement.assignments:
            pod, _ = self._placed.pop(key)
            returned.append((node, pod.requests))
            if pod.anti_affinity:
                self._placed_holders -= 1
            if self._residents is not None:
                self._residents.remove(key)
        self._nodes.take(returned, sign=-1)
        self._infeasible.clear()
        self._figures_of.clear()
        for write in placement.claims:
            if write.allocation is not None:
                del self._allocated[write.claim]
                self._taken.difference_update(d.device for d in write.allocation.devices)

    # ------------------------------------------------------------ devices

    def _place_with_devices(self, gang: Gang, need: int, policy: Policy) -> Decision:
        """A gang whose pods claim devices: nodes and devices together (see
        :mod:`gangsched.core.dra.placing`), pod by pod; consumed only when whole.

        Inter-pod rules are not weighed on this path yet: a gang that has both
        waits, saying so, rather than be placed against its rules.
        """
        if self._under_rules(gang.pending):
            return Unplaceable(gang.key, f"gang {gang.key} has pods with resource claims and "
                               f"inter-pod rules (affinity, anti-affinity, spread), which "
                               f"gangsched does not place together yet")
        nodes = self._nodes
        room = NodeRoom(self._allowed, nodes.free.__getitem__,
                        lambda name: dict(nodes.index.nodes[name].node.labels))
        answer = place_with_devices(gang, need, self._devices, room, policy,
                                    allocated=self._allocated, taken=self._taken)
        if not isinstance(answer, DevicePlacement):
            return Unplaceable(gang.key, answer)
        nodes.take((node, pod.requests) for pod, node in answer.assignments)
        self._figures_of.clear()
        residents = self._residents
        for pod, node in answer.assignments:
            self._keep(pod, node)
            if residents is not None:
                residents.add(pod, node)
        for write in answer.writes:
            if write.allocation is not None:
                self._allocated[write.claim] = write.allocation
                self._taken.update(d.device for d in write.allocation.devices
                                   if not d.admin_access)
        return Placement(gang.key, tuple((pod.key, node) for pod, node in answer.assignments),
                         answer.writes)

    def _allowed(self, pod: Pod) -> list[NodeName]:
        """The nodes the pod's rules let it onto, however full they are."""
        index = self._nodes.index
        if uses_node_name(pod.rules):
            return [name for name, reason in index.name_reasons(pod.rules).items()
                    if reason is None]
        reasons = index.kind_reasons(pod.rules)
        return [name for name in self._nodes.free if reasons[index.kind_of[name]] is None]

    # ------------------------------------------------------------ solving

    def _solve(
        self, types: list[PodType], need: int, policy: Policy
    ) -> tuple[list[tuple[Pod, NodeName]] | None, bool]:
        """(assignments, search cut short); assignments are already consumed."""
        nodes = self._nodes
        nodes.begin()
        placed = self._greedy([(kind, kind.pods) for kind in types], policy, {})
        if placed and len(placed) >= need:
            nodes.commit()
            return placed, False
        nodes.undo()
        if len(types) == 1:
            return None, False  # greedy is exact for one kind of pod
        view = search_view(nodes.index, nodes.classes, types)
        search = Search(view, types, need, policy, self._budget)
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
        return found + self._greedy(rest, policy, mine), False

    def _greedy(
        self, runs: list[tuple[PodType, list[Pod]]], policy: Policy, mine: dict[NodeName, int]
    ) -> list[tuple[Pod, NodeName]]:
        """Place every pod that fits, run by run, consuming as it goes.

        ``mine`` counts the gang's pods per node so far; the policy reads it
        (binpack joins them, spread avoids them) and each run adds to it.
        """
        placed: list[tuple[Pod, NodeName]] = []
        for kind, pods in runs:
            if not pods:
                continue
            shape = self._nodes.shape(kind.requests, kind.rules)
            if policy is Policy.SPREAD:
                self._spread_run(shape, pods, placed, mine)
            else:
                self._binpack_run(shape, pods, placed, mine)
        return placed

    def _binpack_run(
        self,
        shape: ShapeIndex,
        pods: list[Pod],
        placed: list[tuple[Pod, NodeName]],
        mine: dict[NodeName, int],
    ) -> None:
        """Binpack: fewest nodes, tightest fit, no devices stranded.

        Each step fills one node with as many of the run as it takes, from
        the group :meth:`ShapeIndex.best_for_binpack` names, joining a node
        the gang already uses where that group has one. So a run lands
        whole on the partly used node it fills exactly, and whole nodes
        (and GPU nodes, for pods that use no GPU) stay whole for the larger
        gangs behind it: binpacking is what keeps big gangs placeable.
        """
        nodes = self._nodes
        position = 0
        while position < len(pods):
            group = shape.best_for_binpack(len(pods) - position)
            if group is None:
                return
            take = min(shape.room(group[1]), len(pods) - position)
            node = self._member(shape, group, mine)
            nodes.move(node, nodes.free[node] - shape.requests.scale(take))
            mine[node] = mine.get(node, 0) + take
            for pod in pods[position : position + take]:
                placed.append((pod, node))
            position += take

    def _spread_run(
        self,
        shape: ShapeIndex,
        pods: list[Pod],
        placed: list[tuple[Pod, NodeName]],
        mine: dict[NodeName, int],
    ) -> None:
        """Spread: as many nodes as possible, one pod per node the gang has not used yet.

        Nodes come in :meth:`ShapeIndex.for_spread` order (no devices
        stranded, then the roomiest); only when no unused node has room
        does a node take another member, the one with fewest, then most
        room. A gang that asked for spread wants to lose as few members as
        possible to one node's failure. For a gang of one kind of pod it
        places as many members as binpack does: each node takes what fits
        either way.
        """
        nodes = self._nodes
        free, kind_of = nodes.free, nodes.index.kind_of
        for pod in pods:
            node = self._fresh_member(shape, mine)
            if node is None:
                candidates = [
                    name for name in mine
                    if shape.room(free[name]) and shape.admits(kind_of[name], name)
                ]
                if not candidates:
                    return
                node = min(candidates, key=lambda name: (mine[name], -shape.room(free[name])))
            nodes.move(node, free[node] - shape.requests)
            mine[node] = mine.get(node, 0) + 1
            placed.append((pod, node))

    def _fresh_member(self, shape: ShapeIndex, mine: dict[NodeName, int]) -> NodeName | None:
        classes = self._nodes.classes
        for kind, free in shape.for_spread():
            for name in classes[kind][free]:
                if name not in mine and shape.admits(kind, name):
                    return name
        return None

    def _member(self, shape: ShapeIndex, group: ClassKey, mine: dict[NodeName, int]) -> NodeName:
        """A node of the group the shape may use, one this gang already uses if there is
        one (fewer nodes)."""
        kind, free = group
        nodes = self._nodes
        for name in mine:
            if (
                nodes.free[name] == free
                and nodes.index.kind_of[name] == kind
                and shape.admits(kind, name)
            ):
                return name
        return next(name for name in nodes.classes[kind][free] if shape.admits(kind, name))

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

    def _figures(self, kind: PodType) -> ShapeFigures:
        """Nodes by room for the kind, those short of room by resource, the rest by rule."""
        index = self._nodes.index
        excluded: dict[str, int] = {}
        if uses_node_name(kind.rules):
            for reason in index.name_reasons(kind.rules).values():
                if reason is not None:
                    excluded[reason] = excluded.get(reason, 0) + 1
        else:
            for kind_id, reason in enumerate(index.kind_reasons(kind.rules)):
                if reason is not None:
                    excluded[reason] = excluded.get(reason, 0) + index.kind_size[kind_id]
        room, short = self._nodes.shape(kind.requests, kind.rules).counts()
        return ShapeFigures(kind.requests, kind.rules, len(kind.pods), room, short, excluded)


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
