"""A frozen view of the cluster for one scheduling cycle.

The mirror changes as watch events arrive; a cycle must not see it change
under its feet, or it could place one gang against two different pictures of
a node. A :class:`Snapshot` is taken once per cycle and never changes. It also
carries a lazily built :class:`NodeIndex`: nodes grouped by *kind* (labels,
taints, flags) and, within a kind, by free resources. Placement works on
those groups rather than on single nodes, which is what makes a pass over
thousands of nodes cost in proportion to the number of distinct nodes, not
the number of nodes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from gangsched.core.dra.devices import Inventory
from gangsched.core.fit.nodefit import PER_NODE_LABELS, node_excluded_reason, uses_node_name
from gangsched.core.model.objects import (
    Node,
    NodeName,
    Pod,
    PodAffinityTerm,
    PodPlacementRules,
    Taint,
)
from gangsched.core.model.resources import Resources

__all__ = ["NodeIndex", "NodeUsage", "Snapshot"]


@dataclass(frozen=True, slots=True)
class NodeUsage:
    """A node and what the pods on it request, whoever scheduled them.

    Pods of kube-scheduler and of every other scheduler count: the node's
    kubelet admits against the sum of all of them.
    """

    node: Node
    requested: Resources

    @property
    def free(self) -> Resources:
        return self.node.allocatable - self.requested


_KindKey = tuple[tuple[tuple[str, str], ...], tuple[Taint, ...], bool, bool, frozenset[str]]


class NodeIndex:
    """Nodes grouped for placement, derived once from a snapshot and never changed.

    ``kinds[k]`` is one node standing for every node with the same labels
    (but those naming one node, see ``PER_NODE_LABELS``), taints and flags:
    a pod's rules give the same answer for all of them
    (unless the rules look at node names, see :func:`uses_node_name`), so the
    answer is computed once per (rules, kind) and cached here, shared by every
    :class:`~gangsched.core.placement.capacity.Capacity` taken from the snapshot.
    """

    __slots__ = (
        "_fit_cache",
        "_name_fit_cache",
        "classes",
        "free",
        "kind_of",
        "kind_size",
        "kinds",
        "max_allocatable",
        "nodes",
        "schedulable_nodes",
        "schedulable_total",
    )

    def __init__(self, nodes: Mapping[NodeName, NodeUsage]) -> None:
        self.nodes = nodes
        self.kinds: list[Node] = []
        self.kind_of: dict[NodeName, int] = {}
        self.kind_size: list[int] = []
        self.free: dict[NodeName, Resources] = {}
        grouped: list[dict[Resources, list[NodeName]]] = []
        by_key: dict[_KindKey, int] = {}
        largest: dict[str, int] = {}
        schedulable: dict[str, int] = {}
        ready: list[NodeName] = []
        for name in sorted(nodes):
            usage = nodes[name]
            node = usage.node
            labels = tuple(item for item in node.labels if item[0] not in PER_NODE_LABELS)
            key = (labels, node.taints, node.unschedulable, node.ready, node.features)
            kind = by_key.get(key)
            if kind is None:
                kind = by_key[key] = len(self.kinds)
                self.kinds.append(node)
                self.kind_size.append(0)
                grouped.append({})
            self.kind_of[name] = kind
            self.kind_size[kind] += 1
            free = node.allocatable - usage.requested
            self.free[name] = free
            members = grouped[kind].get(free)
            if members is None:
                grouped[kind][free] = [name]
            else:
                members.append(name)
            for resource, amount in node.allocatable.amounts.items():
                if amount > largest.get(resource, 0):
                    largest[resource] = amount
            if node.ready and not node.unschedulable:
                ready.append(name)
                for resource, amount in node.allocatable.amounts.items():
                    schedulable[resource] = schedulable.get(resource, 0) + amount
        self.classes: list[dict[Resources, tuple[NodeName, ...]]] = [
            {free: tuple(members) for free, members in kind_classes.items()}
            for kind_classes in grouped
        ]
        self.max_allocatable = Resources.of(largest)
        self.schedulable_total = Resources.of(schedulable)
        """What the ready, uncordoned nodes can hold: the whole queue shares are parts of."""
        self.schedulable_nodes = frozenset(ready)
        """The ready, uncordoned nodes, whose devices count in that whole too."""
        self._fit_cache: dict[PodPlacementRules, tuple[str | None, ...]] = {}
        self._name_fit_cache: dict[PodPlacementRules, dict[NodeName, str | None]] = {}

    def kind_reasons(self, rules: PodPlacementRules) -> tuple[str | None, ...]:
        """Per kind, why pods with these rules may not go there (None: they may).

        Rules that look at node names get None here for kinds that pass on
        labels alone; :meth:`name_reasons` has the per-node answer.
        """
        cached = self._fit_cache.get(rules)
        if cached is None:
            if uses_node_name(rules):
                by_name = self.name_reasons(rules)
                first: list[str | None] = ["" for _ in self.kinds]
                for name, reason in by_name.items():
                    kind = self.kind_of[name]
                    if reason is None:
                        first[kind] = None
                    elif first[kind] == "":
                        first[kind] = reason
                cached = tuple(first)
            else:
                cached = tuple(node_excluded_reason(rules, node) for node in self.kinds)
            self._fit_cache[rules] = cached
        return cached

    def name_reasons(self, rules: PodPlacementRules) -> dict[NodeName, str | None]:
        """Per node, for rules whose answer depends on the node's name (matchFields)."""
        cached = self._name_fit_cache.get(rules)
        if cached is None:
            cached = {
                name: node_excluded_reason(rules, usage.node) for name, usage in self.nodes.items()
            }
            self._name_fit_cache[rules] = cached
        return cached


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Nodes and what is requested on them, frozen for one cycle; with the devices
    drivers publish on them and the claims that hold them."""

    nodes: Mapping[NodeName, NodeUsage]
    seated: Callable[[], Iterable[Pod]] | None = field(default=None, compare=False, repr=False)
    """Where the pods on these nodes come from, whoever placed them: inter-pod rules
    (affinity, anti-affinity, spread) read their labels and terms. Read only when a
    gang or a pod carries such a rule, so a cluster without them never pays for it."""
    _pods: tuple[Pod, ...] | None = field(default=None, init=False, repr=False, compare=False)
    _index: NodeIndex | None = field(default=None, init=False, repr=False, compare=False)
    _holders: bool | None = field(default=None, init=False, repr=False, compare=False)
    devices: Inventory = field(default_factory=Inventory)
    anti_affinity_terms: tuple[PodAffinityTerm, ...] | None = field(
        default=None, compare=False, repr=False)
    """The distinct required anti-affinity terms the pods on nodes hold, when the caller
    keeps them (the mirror does); None: found by reading ``seated`` when asked."""

    def __post_init__(self) -> None:
        # A private copy: a caller mutating its dict later must not change us.
        object.__setattr__(self, "nodes", MappingProxyType(dict(self.nodes)))

    @staticmethod
    def build(nodes: Iterable[Node], pods: Iterable[Pod]) -> Snapshot:
        """Sum the requests of the pods bound to each node.

        Terminal pods hold nothing. Pods naming a node we do not know are
        ignored: the node is gone or not yet seen, and either way no gang can
        be placed there in this cycle.
        """
        by_name = {node.name: node for node in nodes}
        pods = tuple(pods)
        sums: dict[NodeName, dict[str, int]] = {}
        for pod in pods:
            if pod.terminal or pod.node_name is None or pod.node_name not in by_name:
                continue
            total = sums.setdefault(pod.node_name, {})
            for resource, amount in pod.requests.amounts.items():
                total[resource] = total.get(resource, 0) + amount
        zero = Resources.zero()
        return Snapshot(
            {
                name: NodeUsage(node, Resources.of(sums[name]) if name in sums else zero)
                for name, node in by_name.items()
            }
        ).with_pods(pods)

    def with_pods(self, pods: Iterable[Pod]) -> Snapshot:
        """This snapshot, with these pods seated on its nodes (see ``seated``)."""
        kept = tuple(pods)
        return Snapshot(self.nodes, lambda: kept, devices=self.devices)

    @property
    def pods(self) -> tuple[Pod, ...]:
        """The live pods on these nodes, read from ``seated`` once."""
        pods = self._pods
        if pods is None:
            nodes = self.nodes
            pods = tuple(
                pod for pod in (self.seated() if self.seated is not None else ())
                if pod.node_name is not None and not pod.terminal and pod.node_name in nodes
            )
            object.__setattr__(self, "_pods", pods)
        return pods

    @property
    def holds_anti_affinity(self) -> bool:
        """Whether any pod on a node has a required anti-affinity term, which may keep
        any pod of any gang off its domain; found once per snapshot, without keeping
        the pods when none has one."""
        found = self._holders
        if found is None:
            if self.anti_affinity_terms is not None:
                found = bool(self.anti_affinity_terms)
            elif self._pods is not None:
                found = any(pod.anti_affinity for pod in self._pods)
            else:
                found = self.seated is not None and any(
                    pod.anti_affinity and pod.node_name is not None and not pod.terminal
                    for pod in self.seated())
            object.__setattr__(self, "_holders", found)
        return found

    @property
    def index(self) -> NodeIndex:
        """Built on first use, then shared by every placement against this snapshot."""
        index = self._index
        if index is None:
            index = NodeIndex(self.nodes)
            object.__setattr__(self, "_index", index)
        return index

    def free(self, name: NodeName) -> Resources:
        return self.nodes[name].free
