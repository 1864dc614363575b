"""All-or-nothing placement of gangs onto a snapshot.

A gang is placed whole or not at all: a half-placed gang holds capacity
without making progress, and several half-placed gangs are exactly the
deadlock this scheduler exists to break. So :meth:`Capacity.place` works on a
scratch copy of free resources and returns either a :class:`Placement` for at
least ``min_member - bound`` pods, or an :class:`Unplaceable` with a reason,
and consumes capacity only in the first case. Nothing here binds anything;
the shell assumes and binds what it gets.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

from gangsched.core.model import Gang, GangKey, NodeName, Pod, PodKey, Policy
from gangsched.core.packing import SEARCH_BUDGET, SEARCH_MAX_PODS, PodType, Search, StateKey
from gangsched.core.reasons import unplaceable_reason
from gangsched.core.resources import Resources
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
    reason: str


Decision = Placement | Unplaceable

_Members = tuple[NodeName, ...] | dict[NodeName, None]


class Capacity:
    """Free resources per node, mutable, for one pass over many gangs.

    Taken from a snapshot once; each successful :meth:`place` consumes what
    it placed, so the next gang in the pass sees it gone without rebuilding
    anything, and :meth:`release` gives it back exactly (integer arithmetic,
    no drift). Nodes are kept grouped by kind and free resources, the groups
    the search works on; groups are shared with the snapshot until written.
    """

    __slots__ = ("_budget", "_classes", "_free", "_index", "_infeasible", "_requests")

    def __init__(self, snapshot: Snapshot, *, budget: int = SEARCH_BUDGET) -> None:
        index = snapshot.index
        self._index: NodeIndex = index
        self._free: dict[NodeName, Resources] = dict(index.free)
        self._classes: list[dict[Resources, _Members]] = [dict(c) for c in index.classes]
        self._requests: dict[PodKey, Resources] = {}
        self._infeasible: dict[tuple[object, ...], bool] = {}
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

        The answer comes from a policy-shaped greedy pass, then, for gangs
        mixing kinds of pods that greedy could not fit, from an exhaustive
        search over groups of equivalent nodes bounded by the step budget.
        Exhausting the budget (or a gang of more than ``SEARCH_MAX_PODS``
        pods) falls back to the greedy answer, and the reason says so.
        """
        policy = gang.policy or policy
        need = max(0, gang.min_member - gang.bound)
        pending = gang.pending
        if len(pending) < need:
            return Unplaceable(
                gang.key,
                f"gang {gang.key} needs {need} more pods to reach minMember {gang.min_member} "
                f"({gang.bound} bound) but only {len(pending)} are pending",
            )
        if not pending:
            return Placement(gang.key, ())
        types = PodType.group(pending, self._index.max_allocatable)
        signature = (tuple((kind.requests, kind.rules, len(kind.pods)) for kind in types), need)
        known = self._infeasible.get(signature)
        assignments = None
        exhausted = bool(known)
        if known is None:
            search = Search(self._view(types), types, need, policy, self._budget)
            assignments = search.solve()
            exhausted = search.exhausted
        if assignments is None:
            # Capacity only shrinks until the next release, so what did not
            # fit now will not fit later in the pass either.
            self._infeasible[signature] = exhausted
            cut_short = None
            if exhausted:
                cut_short = (
                    f"search stopped after {self._budget} steps"
                    if len(pending) <= SEARCH_MAX_PODS
                    else f"exhaustive search skipped for more than {SEARCH_MAX_PODS} pods"
                )
            return Unplaceable(
                gang.key,
                unplaceable_reason(gang, types, need, self._index, self._classes, cut_short),
            )
        self._commit(assignments)
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

    # ------------------------------------------------------------ internals

    def _view(self, types: list[PodType]) -> dict[StateKey, list[Collection[NodeName]]]:
        """The gang's view of the nodes: states keyed by (free, mask of types allowed)."""
        index = self._index
        by_name = [kind for kind in types if _uses_names(kind)]
        kind_bits = [0] * len(index.kinds)
        for kind in types:
            if _uses_names(kind):
                continue
            for kind_id, reason in enumerate(index.kind_reasons(kind.rules)):
                if reason is None:
                    kind_bits[kind_id] |= kind.bit
        name_ok = [(kind, index.name_reasons(kind.rules)) for kind in by_name]
        name_kinds: set[int] = set()
        for kind in by_name:
            for kind_id, reason in enumerate(index.kind_reasons(kind.rules)):
                if reason is None:
                    name_kinds.add(kind_id)

        view: dict[StateKey, list[Collection[NodeName]]] = {}
        fitmask_cache: dict[Resources, int] = {}

        def fitmask(free: Resources) -> int:
            mask = fitmask_cache.get(free)
            if mask is None:
                mask = 0
                for kind in types:
                    if free_fits(free, kind):
                        mask |= kind.bit
                fitmask_cache[free] = mask
            return mask

        for kind_id, kind_classes in enumerate(self._classes):
            bits = kind_bits[kind_id]
            if not bits and kind_id not in name_kinds:
                continue
            for free, members in kind_classes.items():
                fits = fitmask(free)
                if kind_id not in name_kinds:
                    mask = bits & fits
                    if mask:
                        _add(view, (free, mask), members)
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

    def _commit(self, assignments: Iterable[tuple[Pod, NodeName]]) -> None:
        taken: dict[NodeName, Resources] = {}
        for pod, node in assignments:
            self._requests[pod.key] = pod.requests
            taken[node] = taken.get(node, Resources.zero()) + pod.requests
        for node, amount in taken.items():
            self._move(node, self._free[node] - amount)

    def _move(self, name: NodeName, free: Resources) -> None:
        """Move a node to the group of its new free resources (copy-on-write)."""
        kind_classes = self._classes[self._index.kind_of[name]]
        old = self._free[name]
        members = kind_classes[old]
        if isinstance(members, tuple):
            members = dict.fromkeys(members)
            kind_classes[old] = members
        del members[name]
        if not members:
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


def free_fits(free: Resources, kind: PodType) -> bool:
    amounts = free.amounts
    return all(amounts.get(name, 0) >= amount for name, amount in kind.items)


def _uses_names(kind: PodType) -> bool:
    return any(term.match_fields for term in kind.rules.required_affinity)


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
