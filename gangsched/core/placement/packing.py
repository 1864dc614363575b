"""The exhaustive search for gangs that greedy placement cannot fit.

The unit here is a *state*: ``(free, mask)``, the free resources of a node
and the set of the gang's pod types that may still go there (eligible by
rules and fitting). Nodes in the same state are interchangeable for this
gang, so the search chooses states, not nodes, and a cluster of thousands of
identical nodes is a handful of states. Placing a pod moves one node from its
state to ``(free - request, mask')``.

:class:`~gangsched.core.placement.capacity.Capacity` answers almost every gang with
its greedy pass, which is exact when the gang has one kind of pod (each node
then takes ``fit_count(node)`` pods independently of the others). A gang mixing
kinds of pods (a parameter server beside its workers) that greedy could not
fit comes here: a depth-first search over states, biggest pods first, that
visits each distinct way of spreading identical pods once and prunes on
per-kind room and aggregate free resources. It is complete on small
instances and bounded by a work budget; when the budget runs out the greedy
answer stands, which was "does not fit", and the caller says the search was
cut short. The search places the gang's minimum only; the pods beyond it
are placed by the capacity's own binpack or spread, the one implementation
of each policy.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from gangsched.core.fit.nodefit import uses_node_name
from gangsched.core.fit.score import joins_gang, node_score
from gangsched.core.model.objects import NodeName, Pod, PodPlacementRules, Policy
from gangsched.core.model.resources import Resources
from gangsched.core.placement.room import fit_count, size_order, stranded_devices
from gangsched.core.placement.snapshot import NodeIndex

__all__ = ["SEARCH_BUDGET", "SEARCH_MAX_PODS", "PodType", "Search", "StateKey", "search_view"]

SEARCH_BUDGET = 50_000
"""Work allowed per gang for the exhaustive search, in node groups examined.

A step of the search looks at every group in the gang's view, so counting
groups rather than steps bounds the time whatever the size of the cluster
(a tenth of a second or so); instances of a few nodes and pods need a few hundred.
"""
SEARCH_MAX_PODS = 200
"""Gangs with more pending pods than this get the greedy answer only."""

StateKey = tuple[Resources, int]
"""(free resources, bitmask of pod types that may still go there)."""


@dataclass(slots=True)
class PodType:
    """Pods of one gang with identical requests and rules: interchangeable."""

    requests: Resources
    rules: PodPlacementRules
    pods: list[Pod]
    bit: int
    items: tuple[tuple[str, int], ...]

    @staticmethod
    def group(pods: Iterable[Pod], largest: Resources) -> list[PodType]:
        """Group identical pods, biggest first.

        Big pods go first because they have the fewest places to go; the
        size is the dominant share of the largest node, so a GPU is "bigger"
        than a few CPUs on a cluster where GPUs are scarce.
        """
        grouped: dict[tuple[Resources, PodPlacementRules], list[Pod]] = {}
        for pod in pods:
            grouped.setdefault((pod.requests, pod.rules), []).append(pod)

        ordered = sorted(grouped.items(), key=lambda entry: size_order(entry[0][0], largest))
        return [
            PodType(
                requests=requests,
                rules=rules,
                pods=members,
                bit=1 << index,
                items=tuple(sorted(requests.amounts.items())),
            )
            for index, ((requests, rules), members) in enumerate(ordered)
        ]


def search_view(
    index: NodeIndex, classes: Sequence[Mapping[Resources, Collection[NodeName]]],
    types: list[PodType],
) -> dict[StateKey, list[Collection[NodeName]]]:
    """The gang's view of the nodes for the exhaustive search: groups keyed by
    state, (free, mask of the gang's pod types that may go there).

    Nodes that differ in kind but not in state are one group here, since
    the gang cannot tell them apart; rules on node names split a group by
    the names they admit.
    """
    name_ok = [
        (kind, index.name_reasons(kind.rules)) for kind in types if uses_node_name(kind.rules)
    ]
    kind_bits = [0] * len(index.kinds)
    for kind in types:
        for kind_id, reason in enumerate(index.kind_reasons(kind.rules)):
            if reason is None and not uses_node_name(kind.rules):
                kind_bits[kind_id] |= kind.bit
    name_kinds = {
        kind_id
        for kind, _ in name_ok
        for kind_id, reason in enumerate(index.kind_reasons(kind.rules))
        if reason is None
    }
    fitmasks: dict[Resources, int] = {}
    view: dict[StateKey, list[Collection[NodeName]]] = {}
    for kind_id, kind_classes in enumerate(classes):
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


def _add(
    view: dict[StateKey, list[Collection[NodeName]]], key: StateKey, members: Collection[NodeName]
) -> None:
    # Shared, not copied: the search reads the groups before anything moves.
    found = view.get(key)
    if found is None:
        view[key] = [members]
    else:
        found.append(members)


class _Pool:
    """The nodes currently in one state: untouched ones first, then ones this gang used."""

    __slots__ = ("fresh", "left", "used")

    def __init__(self, members: Sequence[Collection[NodeName]]) -> None:
        self.fresh: Iterator[NodeName] = itertools.chain.from_iterable(members)
        self.left = sum(len(group) for group in members)
        self.used: list[NodeName] = []

    def __len__(self) -> int:
        return self.left + len(self.used)


class _BudgetExhausted(Exception):
    pass


class Search:
    """One gang against one view of the free nodes; used once and thrown away."""

    def __init__(
        self,
        view: dict[StateKey, list[Collection[NodeName]]],
        types: list[PodType],
        need: int,
        policy: Policy,
        budget: int = SEARCH_BUDGET,
    ) -> None:
        self.view = view
        self.types = types
        self.need = need
        self.policy = policy
        self.budget = budget
        self.exhausted = False
        self.work = 0
        self._fitmask: dict[Resources, int] = {}
        self._strand: dict[tuple[Resources, int], int] = {}
        self._order: dict[StateKey, tuple[tuple[int, ...], int]] = {}
        self._names: tuple[str, ...] = ()

    # -------------------------------------------------------------- helpers

    def fitmask(self, free: Resources) -> int:
        """Bits of the pod types that fit in ``free`` (rules aside)."""
        mask = self._fitmask.get(free)
        if mask is None:
            mask = 0
            for kind in self.types:
                if fit_count(free, kind.items) > 0:
                    mask |= kind.bit
            self._fitmask[free] = mask
        return mask

    def _stranded(self, free: Resources, kind: PodType) -> int:
        key = (free, kind.bit)
        value = self._strand.get(key)
        if value is None:
            value = self._strand[key] = stranded_devices(free, kind.requests)
        return value

    def _order_key(self, key: StateKey) -> tuple[tuple[int, ...], int]:
        """A total order in which a node comes strictly later after taking a pod.

        Descending free resources, lexicographically. Within a run of
        identical pods the search only moves forward in this order, which
        visits each way of spreading the run over nodes exactly once.
        """
        found = self._order.get(key)
        if found is None:
            amounts = key[0].amounts
            found = (tuple(-amounts.get(name, 0) for name in self._names), key[1])
            self._order[key] = found
        return found

    def _after(self, key: StateKey, kind: PodType, count: int) -> StateKey:
        free = key[0] - kind.requests.scale(count)
        return (free, key[1] & self.fitmask(free))

    # -------------------------------------------------------------- nodes

    def _pools(self) -> dict[StateKey, _Pool]:
        return {key: _Pool(members) for key, members in self.view.items()}

    @staticmethod
    def _take(pools: dict[StateKey, _Pool], key: StateKey, prefer_used: bool) -> NodeName:
        """A node in state ``key``: one the gang already uses (binpack) or a fresh one."""
        pool = pools[key]
        if pool.used and (prefer_used or not pool.left):
            node = pool.used.pop()
        else:
            pool.left -= 1
            node = next(pool.fresh)
        if not len(pool):
            del pools[key]
        return node

    @staticmethod
    def _move(pools: dict[StateKey, _Pool], node: NodeName, key: StateKey) -> None:
        if not key[1]:
            return  # nothing of this gang fits there any more
        pool = pools.get(key)
        if pool is None:
            pool = pools[key] = _Pool(())
        pool.used.append(node)

    # -------------------------------------------------------------- exhaustive

    def solve(self) -> list[tuple[Pod, NodeName]] | None:
        """Where the gang's minimum goes: ``need`` pods, biggest kinds first.

        Returns the assignments, or None when the minimum cannot be placed
        (``exhausted`` tells whether that is proven or the budget ran out).
        Pods beyond the minimum are the caller's: it places them with the
        same binpack or spread as every other pod.
        """
        if self.need == 0 or len(self.types) == 1:
            return None  # greedy is exact for one kind of pod and for optional pods
        total = sum(len(kind.pods) for kind in self.types)
        if total > SEARCH_MAX_PODS:
            self.exhausted = True
            return None
        chosen = self._search()
        if chosen is None:
            return None
        pools = self._pools()
        assignments: list[tuple[Pod, NodeName]] = []
        used = [0] * len(self.types)
        for index, key in chosen:
            kind = self.types[index]
            node = self._take(pools, key, prefer_used=joins_gang(self.policy))
            self._move(pools, node, self._after(key, kind, 1))
            assignments.append((kind.pods[used[index]], node))
            used[index] += 1
        return assignments

    def _search(self) -> list[tuple[int, StateKey]] | None:
        self._names = _resource_names(self.view, self.types)

        counts = {key: sum(len(group) for group in members) for key, members in self.view.items()}
        sequence: list[int] = []
        run_end: list[int] = []
        for index, kind in enumerate(self.types):
            end = len(sequence) + len(kind.pods)
            sequence.extend([index] * len(kind.pods))
            run_end.extend([end] * len(kind.pods))
        chosen: list[tuple[int, StateKey]] = []
        steps = 0
        size = len(sequence)

        def bound_ok(position: int, placed: int) -> bool:
            """Prune when even the most optimistic count cannot reach ``need``."""
            remaining = self._remaining(sequence, run_end, position)
            if placed + _most_placeable(self.types, counts, remaining) < self.need:
                return False
            # When every remaining pod is needed, each must go somewhere.
            return placed + size - position > self.need or _supply_covers(
                self.types, counts, remaining
            )

        def visit(position: int, placed: int, last: StateKey | None) -> bool:
            nonlocal steps
            if placed >= self.need:
                return True
            if position >= size or placed + size - position < self.need:
                return False
            steps += 1 + len(counts) * (len(self.types) + 1)
            if steps > self.budget:
                raise _BudgetExhausted
            if not bound_ok(position, placed):
                return False
            index = sequence[position]
            kind = self.types[index]
            floor = self._order_key(last) if last is not None else None
            options = []
            for key, count in counts.items():
                if not count or not key[1] & kind.bit:
                    continue
                order = self._order_key(key)
                if floor is not None and order < floor:
                    continue
                room = fit_count(key[0], kind.items)
                stranded = self._stranded(key[0], kind)
                options.append((node_score(self.policy, 0, room, stranded), order, key))
            options.sort(key=lambda option: (option[0], option[1]))
            for _, _, key in options:
                after = self._after(key, kind, 1)
                counts[key] -= 1
                if after[1]:
                    counts[after] = counts.get(after, 0) + 1
                chosen.append((index, key))
                same_run = run_end[position] > position + 1
                if visit(position + 1, placed + 1, key if same_run else None):
                    return True
                chosen.pop()
                if after[1]:
                    counts[after] -= 1
                counts[key] += 1
            # Leave the rest of this run unplaced (only the tail of a run, so
            # which identical pods stay pending is never a separate choice).
            end = run_end[position]
            return placed + size - end >= self.need and visit(end, placed, None)

        try:
            found = visit(0, 0, None)
        except _BudgetExhausted:
            self.exhausted = True
            return None
        finally:
            self.work = steps
        return chosen if found else None

    @staticmethod
    def _remaining(sequence: list[int], run_end: list[int], position: int) -> dict[int, int]:
        remaining: dict[int, int] = {}
        cursor = position
        while cursor < len(sequence):
            end = run_end[cursor]
            remaining[sequence[cursor]] = end - cursor
            cursor = end
        return remaining


def _resource_names(view: Mapping[StateKey, object], types: Iterable[PodType]
                    ) -> tuple[str, ...]:
    """Every resource a node group of the search has or one of its pods requests."""
    names: set[str] = set()
    for key in view:
        names.update(key[0].amounts)
    for kind in types:
        names.update(kind.requests.amounts)
    return tuple(sorted(names))


def _most_placeable(
    types: list[PodType], counts: dict[StateKey, int], remaining: dict[int, int]
) -> int:
    """An upper bound on the remaining pods that fit: each kind on its own, in
    every node its rules allow, as if the other kinds took nothing."""
    most = 0
    for index, left in remaining.items():
        kind = types[index]
        room = 0
        for key, count in counts.items():
            if count and key[1] & kind.bit:
                room += count * fit_count(key[0], kind.items)
                if room >= left:
                    break
        most += min(room, left)
    return most


def _supply_covers(
    types: list[PodType], counts: dict[StateKey, int], remaining: dict[int, int]
) -> bool:
    """Whether the free resources of the nodes any remaining pod may use add up to
    the remaining pods' requests, resource by resource."""
    demand: dict[str, int] = {}
    bits = 0
    for index, left in remaining.items():
        bits |= types[index].bit
        for name, amount in types[index].items:
            demand[name] = demand.get(name, 0) + amount * left
    for name, amount in demand.items():
        supply = 0
        for key, count in counts.items():
            if count and key[1] & bits:
                have = key[0].amounts.get(name, 0)
                if have > 0:
                    supply += have * count
        if supply < amount:
            return False
    return True
