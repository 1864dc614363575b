"""Node groups bucketed by how many pods of one shape they can take.

A pass places a thousand gangs, but most of them ask for a handful of pod
shapes (the same worker image and size, job after job). For each shape in
use, a :class:`ShapeIndex` keeps the node groups its rules allow, bucketed
by *room* (how many such pods fit) and *stranded devices* (free GPUs and the
like the pod would not use). Finding the best group for a run of pods is
then a look at a few dozen buckets instead of a scan of every group, and
when a bind moves one node between groups only that node's buckets change.
So the cost of a pass follows the number of gangs and the nodes they touch,
not the size of the cluster. :class:`FreeNodes` holds the groups themselves
and keeps every shape index current as nodes move between them.

Ties are broken as a fresh snapshot of the same free room would break them:
a group's nodes in name order, and among equally good groups, by kind and
then by first node. Which node a gang lands on never depends on the order in
which nodes left and rejoined their groups, so a placement tried and given
back (a domain searched, a trial discarded) changes no later decision.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence

from gangsched.core.fit.nodefit import uses_node_name
from gangsched.core.model.objects import NodeName, PodPlacementRules
from gangsched.core.model.resources import Resources
from gangsched.core.placement.room import blamed_resource, fit_count, stranded_devices
from gangsched.core.placement.snapshot import NodeIndex

__all__ = ["SHAPE_INDEXES", "ClassKey", "FreeNodes", "ShapeIndex"]

ClassKey = tuple[int, Resources]
"""(kind of node, free resources): one group of interchangeable nodes."""

_Bucket = tuple[int, int, str]
"""(stranded devices, room, resource blamed when room is 0)."""

class ShapeIndex:
    """The node groups allowed for one (requests, rules) shape, bucketed by room.

    Kept current by :meth:`node_moved`; holds group keys and node counts,
    never nodes, so it is cheap to update and to copy. Rules that look at
    node names (``names``) admit some nodes of a group and not others: a
    group then counts only the nodes they admit, and is in a bucket while
    it has one.
    """

    __slots__ = (
        "_admitted", "_buckets", "_eligible", "_groups", "_levels", "_names", "_nodes", "_slot",
        "items", "requests",
    )

    def __init__(
        self,
        requests: Resources,
        eligible: list[bool],
        groups: Sequence[Mapping[Resources, Collection[NodeName]]],
        names: Mapping[NodeName, str | None] | None = None,
    ) -> None:
        """``eligible`` per kind of node; ``names``, per node, why rules that look at
        names keep the shape off it (None: they let it on), for such rules only."""
        self.requests = requests
        self.items = tuple(sorted(requests.amounts.items()))
        self._eligible = eligible
        self._groups = groups
        self._names = names
        self._buckets: dict[Resources, _Bucket] = {}
        self._slot: dict[ClassKey, _Bucket] = {}
        # Nodes per group the name rules admit; without such rules, every node.
        self._admitted: dict[ClassKey, int] | None = None if names is None else {}
        self._levels: dict[int, dict[int, dict[ClassKey, None]]] = {}
        self._nodes: dict[_Bucket, int] = {}
        for kind, kind_groups in enumerate(groups):
            if eligible[kind]:
                for free, members in kind_groups.items():
                    count = len(members) if names is None else sum(
                        names[name] is None for name in members
                    )
                    if count:
                        self._add(kind, free, count)

    # ------------------------------------------------------------ upkeep

    def _bucket(self, free: Resources) -> _Bucket:
        bucket = self._buckets.get(free)
        if bucket is None:
            room = fit_count(free, self.items)
            if room:
                bucket = (stranded_devices(free, self.requests), room, "")
            else:
                bucket = (0, 0, blamed_resource(free, self.requests))
            self._buckets[free] = bucket
        return bucket

    def _add(self, kind: int, free: Resources, count: int) -> None:
        key = (kind, free)
        bucket = self._slot.get(key)
        if bucket is None:
            bucket = self._bucket(free)
            self._slot[key] = bucket
            if bucket[1]:
                level = self._levels.setdefault(bucket[0], {})
                level.setdefault(bucket[1], {})[key] = None
        self._nodes[bucket] = self._nodes.get(bucket, 0) + count
        admitted = self._admitted
        if admitted is not None:
            admitted[key] = admitted.get(key, 0) + count

    def _drop(self, kind: int, free: Resources, group_gone: bool) -> None:
        key = (kind, free)
        bucket = self._slot[key]
        self._nodes[bucket] -= 1
        admitted = self._admitted
        if admitted is not None:
            left = admitted.pop(key) - 1
            if left:
                admitted[key] = left
            group_gone = not left
        if not group_gone:
            return
        del self._slot[key]
        if bucket[1]:
            level = self._levels[bucket[0]]
            keys = level[bucket[1]]
            del keys[key]
            if not keys:
                del level[bucket[1]]
                if not level:
                    del self._levels[bucket[0]]

    def node_moved(
        self, name: NodeName, kind: int, old: Resources, old_gone: bool, new: Resources
    ) -> None:
        """Node ``name`` of ``kind`` went from ``old`` free to ``new`` free;
        ``old_gone``: no node of the kind has ``old`` free any more."""
        # admits(), inlined: every move of every node calls this for every shape.
        if self._eligible[kind] and (self._names is None or self._names[name] is None):
            self._drop(kind, old, old_gone)
            self._add(kind, new, 1)

    # ------------------------------------------------------------ queries

    def admits(self, kind: int, name: NodeName) -> bool:
        """Whether the shape's rules let it onto this node (of this kind)."""
        return self._eligible[kind] and (self._names is None or self._names[name] is None)

    def room(self, free: Resources) -> int:
        return self._bucket(free)[1]

    def _first(self, key: ClassKey) -> tuple[int, NodeName]:
        """Where a fresh snapshot puts the group among its equals: by kind, then first node."""
        kind, free = key
        return kind, next(iter(self._groups[kind][free]))

    def _in_order(self, keys: dict[ClassKey, None]) -> list[ClassKey]:
        return list(keys) if len(keys) == 1 else sorted(keys, key=self._first)

    def best_for_binpack(self, remaining: int) -> ClassKey | None:
        """The group a binpacking run of ``remaining`` pods should fill next.

        Fewest stranded devices first; then the tightest group that takes the
        whole run (exact fill keeps whole nodes whole), else the group that
        takes the most.
        """
        for stranded in sorted(self._levels):
            rooms = self._levels[stranded]
            fitting = None
            largest = 0
            for room in rooms:
                if room >= remaining:
                    if fitting is None or room < fitting:
                        fitting = room
                elif room > largest:
                    largest = room
            chosen = fitting if fitting is not None else largest
            if chosen:
                keys = rooms[chosen]
                return next(iter(keys)) if len(keys) == 1 else min(keys, key=self._first)
        return None

    def for_spread(self) -> Iterator[ClassKey]:
        """Groups in spread order: fewest stranded devices, then most room, then as
        :meth:`_first` ranks equals.

        Lazy; the caller must stop iterating before it moves any node.
        """
        for stranded in sorted(self._levels):
            rooms = self._levels[stranded]
            for room in sorted(rooms, reverse=True):
                yield from self._in_order(rooms[room])

    def counts(self) -> tuple[dict[int, int], dict[str, int]]:
        """Nodes by room (room ≥ 1) and, for nodes with none, by the resource they lack;
        in the order of room and of name, whichever buckets were filled first."""
        room: dict[int, int] = {}
        short: dict[str, int] = {}
        for (_, fits, blamed), nodes in sorted(self._nodes.items()):
            if not nodes:
                continue
            if fits:
                room[fits] = room.get(fits, 0) + nodes
            else:
                short[blamed] = short.get(blamed, 0) + nodes
        return room, short


_Members = tuple[NodeName, ...] | dict[NodeName, None]
_ShapeKey = tuple[Resources, PodPlacementRules]

SHAPE_INDEXES = 64
"""Shape indexes kept per FreeNodes; the least recently used beyond this are dropped."""


class FreeNodes:
    """Free resources per node, in groups of equal kind and free, with the shape
    indexes over those groups: mutable, for one pass over many gangs.

    Groups are shared with the snapshot's index until written (copy on
    write), so taking one costs nothing for nodes no gang touches. Every
    change goes through :meth:`move`, which updates the node's group and
    every shape index together: they can never disagree.
    """

    __slots__ = ("_journal", "_shapes", "classes", "free", "index")

    def __init__(self, index: NodeIndex) -> None:
        self.index = index
        self.free: dict[NodeName, Resources] = dict(index.free)
        self.classes: list[dict[Resources, _Members]] = [dict(c) for c in index.classes]
        self._shapes: dict[_ShapeKey, ShapeIndex] = {}
        self._journal: list[tuple[NodeName, Resources]] | None = None

    def shape(self, requests: Resources, rules: PodPlacementRules) -> ShapeIndex:
        """The index of the groups where pods of this shape may go, built on first use."""
        key = (requests, rules)
        shape = self._shapes.pop(key, None)
        if shape is None:
            index = self.index
            eligible = [reason is None for reason in index.kind_reasons(rules)]
            names = index.name_reasons(rules) if uses_node_name(rules) else None
            shape = ShapeIndex(requests, eligible, self.classes, names)
            if len(self._shapes) >= SHAPE_INDEXES:
                del self._shapes[next(iter(self._shapes))]
        self._shapes[key] = shape  # most recently used last
        return shape

    def total(self) -> Resources:
        """Free resources summed over nodes that can take pods at all.

        Cordoned nodes are left out (a node not Ready takes pods until it is
        tainted, as in kube-scheduler), and a node overcommitted
        by another scheduler adds nothing rather than subtracting from the
        others: this is what admission may promise to a gang.
        """
        total: dict[str, int] = {}
        for kind, kind_classes in enumerate(self.classes):
            node = self.index.kinds[kind]
            if node.unschedulable:
                continue
            for free, members in kind_classes.items():
                count = len(members)
                for name, amount in free.amounts.items():
                    if amount > 0:
                        total[name] = total.get(name, 0) + amount * count
        return Resources.of(total)

    def take(self, amounts: Iterable[tuple[NodeName, Resources]], sign: int = 1) -> None:
        """Take (``sign`` 1) or give back (-1) the amounts, summed per node first."""
        summed: dict[NodeName, Resources] = {}
        for node, amount in amounts:
            summed[node] = summed.get(node, Resources.zero()) + amount
        for node, amount in summed.items():
            free = self.free[node]
            self.move(node, free - amount if sign > 0 else free + amount)

    def begin(self) -> None:
        """Start recording moves, so that :meth:`undo` can take them back."""
        self._journal = []

    def undo(self) -> None:
        """Take back every move since :meth:`begin`."""
        journal, self._journal = self._journal or [], None
        for node, free in reversed(journal):
            self.move(node, free)

    def commit(self) -> None:
        """Keep the moves since :meth:`begin`."""
        self._journal = None

    def move(self, name: NodeName, free: Resources) -> None:
        """Move a node to the group of its new free resources, and tell the shape indexes."""
        kind = self.index.kind_of[name]
        kind_classes = self.classes[kind]
        old = self.free[name]
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
        kind_classes[free] = _joined(kind_classes.get(free), name)
        self.free[name] = free
        for shape in self._shapes.values():
            shape.node_moved(name, kind, old, old_gone, free)


def _joined(members: _Members | None, name: NodeName) -> dict[NodeName, None]:
    """The group's members with ``name`` added, in name order as a snapshot lists them;
    written in place when it goes last (a node taking room mostly does)."""
    if members is None:
        return {name: None}
    if name < (members[-1] if isinstance(members, tuple) else next(reversed(members))):
        return dict.fromkeys(sorted((*members, name)))
    if isinstance(members, tuple):  # still shared with the snapshot: copy on write
        members = dict.fromkeys(members)
    members[name] = None
    return members
