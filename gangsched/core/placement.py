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

from collections.abc import Collection, Iterable
from dataclasses import dataclass

from gangsched.core.model import Gang, GangKey, NodeName, Pod, PodKey, Policy
from gangsched.core.nodefit import uses_node_name
from gangsched.core.packing import (
    SEARCH_BUDGET,
    SEARCH_MAX_PODS,
    PodType,
    Search,
    StateKey,
)
from gangsched.core.reasons import MembersMissing, Reason, ShapeFigures, unplaceable_reason
from gangsched.core.resources import Resources
from gangsched.core.room import blamed_resource, fit_count
from gangsched.core.shapes import ClassKey, ShapeIndex
from gangsched.core.snapshot import NodeIndex, NodeUsage, Snapshot

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


@dataclass(frozen=True, slots=True)
class Unplaceable:
    """The gang cannot be placed now; ``reason`` says why, with figures."""

    gang: GangKey
    reason: Reason


Decision = Placement | Unplaceable

_Members = tuple[NodeName, ...] | dict[NodeName, None]
_ShapeKey = tuple[Resources, object]

SHAPE_INDEXES = 64
"""Shape indexes kept per Capacity; the least recently used beyond this are dropped."""


class Capacity:
    """Free resources per node, mutable, for one pass over many gangs.

    Taken from a snapshot once; each successful :meth:`place` consumes what
    it placed, so the next gang in the pass sees it gone without rebuilding
    anything, and :meth:`release` gives it back exactly (integer arithmetic,
    no drift). Nodes are kept in groups of equal kind and free resources,
    shared with the snapshot until written, and each pod shape in use keeps
    a :class:`ShapeIndex` over those groups.
    """

    __slots__ = (
        "_budget",
        "_classes",
        "_free",
        "_index",
        "_infeasible",
        "_journal",
        "_requests",
        "_shapes",
    )

    def __init__(self, snapshot: Snapshot, *, budget: int = SEARCH_BUDGET) -> None:
        """``budget`` bounds the exhaustive search per gang (0: greedy answers only)."""
        index = snapshot.index
        self._index: NodeIndex = index
        self._free: dict[NodeName, Resources] = dict(index.free)
        self._classes: list[dict[Resources, _Members]] = [dict(c) for c in index.classes]
        self._requests: dict[PodKey, Resources] = {}
        self._infeasible: dict[tuple[object, ...], bool] = {}
        self._shapes: dict[_ShapeKey, ShapeIndex] = {}
        self._journal: list[tuple[NodeName, Resources]] | None = None
        self._budget = budget

    @classmethod
    def from_snapshot(cls, snapshot: Snapshot, *, budget: int = SEARCH_BUDGET) -> Capacity:
        return cls(snapshot, budget=budget)

    # ------------------------------------------------------------ queries

    def free(self, name: NodeName) -> Resources:
        return self._free[name]

    def free_total(self) -> Resources:
        """Free resources summed over nodes that can take pods at all.

        Cordoned and not-ready nodes are left out, and a node overcommitted
        by another scheduler adds nothing rather than subtracting from the
        others: this is what admission may promise to a gang.
        """
        total: dict[str, int] = {}
        for kind, kind_classes in enumerate(self._classes):
            node = self._index.kinds[kind]
            if node.unschedulable or not node.ready:
                continue
            for free, members in kind_classes.items():
                count = len(members)
                for name, amount in free.amounts.items():
                    if amount > 0:
                        total[name] = total.get(name, 0) + amount * count
        return Resources.of(total)

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
        types = PodType.group(pending, self._index.max_allocatable)
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
            return Unplaceable(gang.key, self._reason(gang, types, need, exhausted))
        for pod, _ in assignments:
            self._requests[pod.key] = pod.requests
        order = {pod.key: position for position, pod in enumerate(pending)}
        ordered = sorted(assignments, key=lambda item: order[item[0].key])
        return Placement(gang.key, tuple((pod.key, node) for pod, node in ordered))

    def release(self, placement: Placement) -> None:
        """Give back exactly what :meth:`place` took for this placement.

        For a gang whose binding failed, or one the shell decides to back
        out of in the same pass. Releasing a placement this capacity did not
        make is a bug and raises ValueError.
        """
        missing = [key for key, _ in placement.assignments if key not in self._requests]
        if missing:
            raise ValueError(f"release of pods this capacity did not place: {missing}")
        returned: dict[NodeName, Resources] = {}
        for key, node in placement.assignments:
            requests = self._requests.pop(key)
            returned[node] = returned.get(node, Resources.zero()) + requests
        for node, amount in returned.items():
            self._move(node, self._free[node] + amount)
        self._infeasible.clear()

    # ------------------------------------------------------------ solving

    def _solve(
        self, types: list[PodType], need: int, policy: Policy
    ) -> tuple[list[tuple[Pod, NodeName]] | None, bool]:
        """(assignments, search cut short); assignments are already consumed."""
        self._journal = []
        try:
            placed = self._greedy([(kind, kind.pods) for kind in types], policy, {})
        finally:
            journal, self._journal = self._journal, None
        if placed and len(placed) >= need:
            return placed, False
        for node, free in reversed(journal):
            self._move(node, free)
        if len(types) == 1:
            return None, False  # greedy is exact for one kind of pod
        search = Search(self._view(types), types, need, policy, self._budget)
        found = search.solve()
        if found is None:
            return None, search.exhausted
        self._consume(found)
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
            shape = self._shape(kind)
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
        position = 0
        while position < len(pods):
            group = shape.best_for_binpack(len(pods) - position)
            if group is None:
                return
            take = min(shape.room(group[1]), len(pods) - position)
            node = self._member(shape, group, mine)
            self._move(node, self._free[node] - shape.requests.scale(take))
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
        for pod in pods:
            node = self._fresh_member(shape, mine)
            if node is None:
                kind_of = self._index.kind_of
                candidates = [
                    name for name in mine
                    if shape.room(self._free[name]) and shape.admits(kind_of[name], name)
                ]
                if not candidates:
                    return
                node = min(candidates, key=lambda name: (mine[name], -shape.room(self._free[name])))
            self._move(node, self._free[node] - shape.requests)
            mine[node] = mine.get(node, 0) + 1
            placed.append((pod, node))

    def _fresh_member(self, shape: ShapeIndex, mine: dict[NodeName, int]) -> NodeName | None:
        for kind, free in shape.for_spread():
            for name in self._classes[kind][free]:
                if name not in mine and shape.admits(kind, name):
                    return name
        return None

    def _member(self, shape: ShapeIndex, group: ClassKey, mine: dict[NodeName, int]) -> NodeName:
        """A node of the group the shape may use, one this gang already uses if there is
        one (fewer nodes)."""
        kind, free = group
        for name in mine:
            if (
                self._free[name] == free
                and self._index.kind_of[name] == kind
                and shape.admits(kind, name)
            ):
                return name
        return next(name for name in self._classes[kind][free] if shape.admits(kind, name))

    def _shape(self, kind: PodType) -> ShapeIndex:
        key = (kind.requests, kind.rules)
        shape = self._shapes.pop(key, None)
        if shape is None:
            index = self._index
            eligible = [reason is None for reason in index.kind_reasons(kind.rules)]
            names = index.name_reasons(kind.rules) if _uses_names(kind) else None
            shape = ShapeIndex(kind.requests, eligible, self._classes, names)
            if len(self._shapes) >= SHAPE_INDEXES:
                del self._shapes[next(iter(self._shapes))]
        self._shapes[key] = shape  # most recently used last
        return shape

    def _view(self, types: list[PodType]) -> dict[StateKey, list[Collection[NodeName]]]:
        """The gang's view of the nodes for the exhaustive search: groups keyed by
        (free, mask of the gang's pod types that may go there)."""
        index = self._index
        name_ok = [(kind, index.name_reasons(kind.rules)) for kind in types if _uses_names(kind)]
        kind_bits = [0] * len(index.kinds)
        for kind in types:
            for kind_id, reason in enumerate(index.kind_reasons(kind.rules)):
                if reason is None and not _uses_names(kind):
                    kind_bits[kind_id] |= kind.bit
        name_kinds = {
            kind_id
            for kind, _ in name_ok
            for kind_id, reason in enumerate(index.kind_reasons(kind.rules))
            if reason is None
        }
        fitmasks: dict[Resources, int] = {}
        view: dict[StateKey, list[Collection[NodeName]]] = {}
        for kind_id, kind_classes in enumerate(self._classes):
            bits = kind_bits[kind_id]
            if not bits and kind_id not in name_kinds:
                continue
            for free, members in kind_classes.items():
                fits = fitmasks.get(free)
                if fits is None:
                    fits = fitmasks[free] = sum(
                        kind.bit for kind in types if fit_count(free, kind.items)
                    )
                if kind_id not in name_kinds:
                    if bits & fits:
                        _add(view, (free, bits & fits), members)
                    continue
                split: dict[int, list[NodeName]] = {}
                for name in members:
                    mask = bits & fits
                    for kind, reasons in name_ok:
                        if kind.bit & fits and reasons[name] is None:
                            mask |= kind.bit
                    if mask:
                        split.setdefault(mask, []).append(name)
                for mask, names in split.items():
                    _add(view, (free, mask), names)
        return view

    def _consume(self, assignments: Iterable[tuple[Pod, NodeName]]) -> None:
        taken: dict[NodeName, Resources] = {}
        for pod, node in assignments:
            taken[node] = taken.get(node, Resources.zero()) + pod.requests
        for node, amount in taken.items():
            self._move(node, self._free[node] - amount)

    def _move(self, name: NodeName, free: Resources) -> None:
        """Move a node to the group of its new free resources, and tell the shape indexes."""
        kind = self._index.kind_of[name]
        kind_classes = self._classes[kind]
        old = self._free[name]
        if self._journal is not None:
            self._journal.append((name, old))
        members = kind_classes[old]
        if isinstance(members, tuple):  # still shared with the snapshot: copy on write
            members = dict.fromkeys(members)
            kind_classes[old] = members
        del members[name]
        old_gone = not members
        if old_gone:
            del kind_classes[old]
        target = kind_classes.get(free)
        if target is None:
            kind_classes[free] = {name: None}
        else:
            if isinstance(target, tuple):
                target = dict.fromkeys(target)
                kind_classes[free] = target
            target[name] = None
        self._free[name] = free
        for shape in self._shapes.values():
            shape.node_moved(name, kind, old, old_gone, free)

    # ------------------------------------------------------------ reasons

    def _reason(self, gang: Gang, types: list[PodType], need: int, exhausted: bool) -> Reason:
        stopped = exhausted and len(gang.pending) <= SEARCH_MAX_PODS
        skipped = exhausted and not stopped
        figures = [self._figures(kind) for kind in types]
        return unplaceable_reason(
            gang, figures, need, len(self._free),
            search_stopped_after=self._budget if stopped else None,
            search_skipped_over=SEARCH_MAX_PODS if skipped else None,
        )

    def _figures(self, kind: PodType) -> ShapeFigures:
        index = self._index
        reasons = index.kind_reasons(kind.rules)
        excluded: dict[str, int] = {}
        if not _uses_names(kind):
            for kind_id, reason in enumerate(reasons):
                if reason is not None:
                    excluded[reason] = excluded.get(reason, 0) + index.kind_size[kind_id]
            room, short = self._shape(kind).counts()
            return ShapeFigures(kind.requests, kind.rules, len(kind.pods), room, short, excluded)
        by_name = index.name_reasons(kind.rules)
        room = {}
        short = {}
        for kind_classes in self._classes:
            for free, members in kind_classes.items():
                fits = fit_count(free, kind.items)
                for name in members:
                    reason = by_name[name]
                    if reason is not None:
                        excluded[reason] = excluded.get(reason, 0) + 1
                    elif fits:
                        room[fits] = room.get(fits, 0) + 1
                    else:
                        blamed = blamed_resource(free, kind.requests)
                        short[blamed] = short.get(blamed, 0) + 1
        return ShapeFigures(kind.requests, kind.rules, len(kind.pods), room, short, excluded)


def _uses_names(kind: PodType) -> bool:
    return uses_node_name(kind.rules)


def _add(
    view: dict[StateKey, list[Collection[NodeName]]], key: StateKey, members: Collection[NodeName]
) -> None:
    # Shared, not copied: the search reads the groups before anything moves.
    found = view.get(key)
    if found is None:
        view[key] = [members]
    else:
        found.append(members)


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
    return Snapshot(nodes)


def apply(snapshot: Snapshot, placement: Placement, pods: Iterable[Pod]) -> Snapshot:
    """The snapshot with the placement's pods counted on their nodes (assumed bound)."""
    return _shifted(snapshot, placement, pods, +1)


def remove(snapshot: Snapshot, placement: Placement, pods: Iterable[Pod]) -> Snapshot:
    """The inverse of :func:`apply`: ``remove(apply(s, p, pods), p, pods) == s``."""
    return _shifted(snapshot, placement, pods, -1)
