"""Node groups bucketed by how many pods of one shape they can take.

A pass places a thousand gangs, but most of them ask for a handful of pod
shapes (the same worker image and size, job after job). For each shape in
use, a :class:`ShapeIndex` keeps the node groups its rules allow, bucketed
by *room* (how many such pods fit) and *stranded devices* (free GPUs and the
like the pod would not use). Finding the best group for a run of pods is
then a look at a few dozen buckets instead of a scan of every group, and
when a bind moves one node between groups only that node's buckets change.
So the cost of a pass follows the number of gangs and the nodes they touch,
not the size of the cluster.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence

from gangsched.core.model import NodeName
from gangsched.core.resources import Resources
from gangsched.core.room import blamed_resource, fit_count, stranded_devices

__all__ = ["ClassKey", "ShapeIndex"]

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
        "_admitted", "_buckets", "_eligible", "_levels", "_names", "_nodes", "_slot", "items",
        "requests",
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
        if self.admits(kind, name):
            self._drop(kind, old, old_gone)
            self._add(kind, new, 1)

    # ------------------------------------------------------------ queries

    def admits(self, kind: int, name: NodeName) -> bool:
        """Whether the shape's rules let it onto this node (of this kind)."""
        return self._eligible[kind] and (self._names is None or self._names[name] is None)

    def room(self, free: Resources) -> int:
        return self._bucket(free)[1]

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
                return next(iter(rooms[chosen]))
        return None

    def for_spread(self) -> Iterator[ClassKey]:
        """Groups in spread order: fewest stranded devices, then most room.

        Lazy; the caller must stop iterating before it moves any node.
        """
        for stranded in sorted(self._levels):
            rooms = self._levels[stranded]
            for room in sorted(rooms, reverse=True):
                yield from rooms[room]

    def counts(self) -> tuple[dict[int, int], dict[str, int]]:
        """Nodes by room (room ≥ 1) and, for nodes with none, by the resource they lack."""
        room: dict[int, int] = {}
        short: dict[str, int] = {}
        for (_, fits, blamed), nodes in self._nodes.items():
            if not nodes:
                continue
            if fits:
                room[fits] = room.get(fits, 0) + nodes
            else:
                short[blamed] = short.get(blamed, 0) + nodes
        return room, short
