"""Inter-pod rules: required pod affinity and anti-affinity, and topology spread.

A node rule's answer depends on the node alone; these depend on which pods
run in the node's topology domain (the nodes sharing its value of a label),
including pods placed a moment ago in the same cycle and the gang's own
members placed before. So the answers are kept as counts per domain: built
once per gang from the pods on nodes (:class:`Residents`), updated as each
member is placed, and read with a few lookups per node tried
(:class:`RuleCounts`). The semantics are kube-scheduler's InterPodAffinity
and PodTopologySpread filters: a pod placed here is one kube-scheduler
would accept on that node, given the same pods.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from gangsched.core.fit.nodefit import requirement_matches, selector_ok, untolerated_taint
from gangsched.core.fit.nodelocal import NODE_NAME_LABEL
from gangsched.core.model.objects import (
    Node,
    NodeName,
    Pod,
    PodAffinityTerm,
    PodKey,
    PreferredTerm,
    SelectorRequirement,
    SpreadConstraint,
)

__all__ = [
    "PodRule",
    "Refusal",
    "Residents",
    "RuleCounts",
    "pod_rules_refusal",
    "selector_matches",
    "spread_selects",
    "term_selects",
]


class PodRule(StrEnum):
    """Which inter-pod rule keeps a pod off a node."""

    AFFINITY = "pod affinity"
    ANTI_AFFINITY = "pod anti-affinity"
    EXISTING_ANTI_AFFINITY = "anti-affinity of a pod already there"
    SPREAD = "topology spread"
    SPREAD_LABEL = "topology spread key missing"


@dataclass(frozen=True, slots=True)
class Refusal:
    """One pod kept off one node: the rule, and the domain (label and value) it read."""

    rule: PodRule
    topology_key: str
    domain: str
    """The node's value of ``topology_key``; empty when the node lacks the label."""
    max_skew: int = 0
    skew: int = 0
    """For a spread: the skew the pod would make there."""


@functools.lru_cache(maxsize=65536)
def _label_map(labels: tuple[tuple[str, str], ...]) -> Mapping[str, str]:
    return dict(labels)


def selector_matches(
    match_labels: Sequence[tuple[str, str]], match_expressions: Sequence[SelectorRequirement],
    labels: Mapping[str, str],
) -> bool:
    """A label selector (``matchLabels`` and ``matchExpressions`` ANDed) against labels."""
    for key, value in match_labels:
        if labels.get(key) != value:
            return False
    return all(requirement_matches(r, labels) for r in match_expressions)


def required_pairs(
    match_labels: Sequence[tuple[str, str]], match_expressions: Sequence[SelectorRequirement],
) -> list[tuple[str, str]]:
    """Label pairs every pod a selector matches must carry: its ``matchLabels`` and its
    ``In`` requirements of one value (what ``matchLabelKeys`` become)."""
    pairs = list(match_labels)
    pairs.extend((r.key, r.values[0]) for r in match_expressions
                 if r.operator == "In" and len(r.values) == 1)
    return pairs


def _term_pair(term: PodAffinityTerm) -> tuple[str, str] | None:
    """The pair a term is indexed by: its last required pair, the most particular one
    (``matchLabelKeys`` come last), or None when it requires none."""
    pairs = required_pairs(term.match_labels, term.match_expressions)
    return pairs[-1] if pairs else None


def term_selects(term: PodAffinityTerm, pod: Pod) -> bool:
    """Whether an affinity term selects the pod: its namespace, then its labels.

    A term's ``namespaceSelector`` is read from the namespaces it was resolved
    into (:mod:`gangsched.core.fit.namespaces`), as kube-scheduler reads it.
    """
    if not term.selects_pods:
        return False
    if not (term.any_namespace or pod.namespace in term.namespaces):
        return False
    return selector_matches(term.match_labels, term.match_expressions, _label_map(pod.labels))


def _selects_all(terms: Sequence[PodAffinityTerm], pod: Pod) -> bool:
    """kube-scheduler counts a pod for affinity only when it matches every term."""
    return bool(terms) and all(term_selects(term, pod) for term in terms)


def spread_selects(constraint: SpreadConstraint, namespace: str, pod: Pod) -> bool:
    """Whether a spread constraint of a pod in ``namespace`` counts the pod.

    Terminating pods are not counted, and an empty selector counts no pod
    (kube-scheduler's ``countPodsMatchSelector``); both only hold for pods
    already placed, so the pod itself is matched with :func:`spread_self`.
    """
    if pod.terminating or pod.namespace != namespace or not constraint.selects_pods:
        return False
    if not constraint.match_labels and not constraint.match_expressions:
        return False
    return selector_matches(constraint.match_labels, constraint.match_expressions,
                            _label_map(pod.labels))


def spread_self(constraint: SpreadConstraint, pod: Pod) -> bool:
    return constraint.selects_pods and selector_matches(
        constraint.match_labels, constraint.match_expressions, _label_map(pod.labels))


class Residents:
    """The pods on nodes, as inter-pod rules read them: mutable, for one pass.

    Built from a snapshot's pods, then told of each pod placed or released,
    so the next gang of the pass counts the ones before it as kube-scheduler
    counts assumed pods. Indexed by label, so a term finds the few pods it
    may select without reading every pod of the cluster.
    """

    __slots__ = (
        "_by_label", "_by_value", "_carrying", "_holder_terms", "_terms_by_label", "_values",
        "labels", "nodes", "on",
    )

    def __init__(self, nodes: Mapping[NodeName, Node], pods: Iterable[Pod]) -> None:
        self.nodes = nodes
        self.labels: dict[NodeName, Mapping[str, str]] = {
            name: {**_label_map(node.labels), NODE_NAME_LABEL: name}
            for name, node in nodes.items()
        }
        self.on: dict[PodKey, tuple[Pod, NodeName]] = {}
        self._by_label: dict[tuple[str, str], dict[PodKey, None]] = {}
        self._holder_terms: dict[PodAffinityTerm, dict[PodKey, None]] = {}
        self._terms_by_label: dict[tuple[str, str] | None, dict[PodAffinityTerm, None]] = {}
        self._by_value: dict[str, dict[str | None, list[NodeName]]] = {}
        self._carrying: dict[tuple[str, ...], tuple[NodeName, ...]] = {}
        self._values: dict[tuple[tuple[str, ...], str], tuple[str, ...]] = {}
        for pod in pods:
            if pod.node_name is not None and not pod.terminal and pod.node_name in nodes:
                self.add(pod, pod.node_name)

    def add(self, pod: Pod, node: NodeName) -> None:
        self.on[pod.key] = (pod, node)
        for pair in pod.labels:
            self._by_label.setdefault(pair, {})[pod.key] = None
        for term in pod.anti_affinity:
            holders = self._holder_terms.get(term)
            if holders is None:
                holders = self._holder_terms[term] = {}
                self._terms_by_label.setdefault(_term_pair(term), {})[term] = None
            holders[pod.key] = None

    def remove(self, key: PodKey) -> None:
        found = self.on.pop(key, None)
        if found is None:
            return
        pod = found[0]
        for pair in pod.labels:
            self._by_label[pair].pop(key, None)
        for term in pod.anti_affinity:
            holders = self._holder_terms[term]
            holders.pop(key, None)
            if not holders:
                del self._holder_terms[term]
                del self._terms_by_label[_term_pair(term)][term]

    def having(
        self, match_labels: Sequence[tuple[str, str]],
        match_expressions: Sequence[SelectorRequirement] = (),
    ) -> Iterator[tuple[Pod, NodeName]]:
        """Pods that may match a selector: those carrying the rarest of the pairs it
        requires, or every pod when it requires none."""
        pairs = required_pairs(match_labels, match_expressions)
        if not pairs:
            yield from list(self.on.values())
            return
        by_label = self._by_label
        rarest = min(pairs, key=lambda pair: len(by_label.get(pair, ())))
        for key in list(by_label.get(rarest, ())):
            yield self.on[key]

    def terms_selecting(self, pod: Pod) -> Iterator[PodAffinityTerm]:
        """The anti-affinity terms of pods on nodes that select the pod."""
        for pair in (None, *pod.labels):
            for term in self._terms_by_label.get(pair, ()):
                if term_selects(term, pod):
                    yield term

    def holders_of(self, term: PodAffinityTerm) -> Iterator[tuple[Pod, NodeName]]:
        for key in self._holder_terms.get(term, ()):
            yield self.on[key]

    def nodes_with(self, key: str, value: str | None) -> list[NodeName]:
        """The nodes whose label ``key`` has this value (None: nodes without the label)."""
        by_value = self._by_value.get(key)
        if by_value is None:
            by_value = self._by_value[key] = {}
            for name in sorted(self.labels):
                by_value.setdefault(self.labels[name].get(key), []).append(name)
        return by_value.get(value, [])

    def carrying(self, keys: tuple[str, ...]) -> tuple[NodeName, ...]:
        """The nodes that carry every one of the keys (spread domains are theirs)."""
        found = self._carrying.get(keys)
        if found is None:
            found = self._carrying[keys] = tuple(
                name for name in sorted(self.labels)
                if all(key in self.labels[name] for key in keys))
        return found

    def values(self, keys: tuple[str, ...], key: str) -> tuple[str, ...]:
        """The values of ``key`` among the nodes carrying every one of ``keys``."""
        found = self._values.get((keys, key))
        if found is None:
            found = self._values[keys, key] = tuple(dict.fromkeys(
                self.labels[name][key] for name in self.carrying(keys)))
        return found

    def held_off(self, pod: Pod) -> bool:
        """Whether some pod's required anti-affinity selects this one."""
        return next(self.terms_selecting(pod), None) is not None


class _SpreadCount:
    """One spread constraint of one kind of pod: matching pods per domain, and how many
    domains have each count, so the smallest count is a lookup."""

    __slots__ = ("constraint", "counts", "eligible", "levels", "nonzero", "self_match")

    def __init__(self, constraint: SpreadConstraint, self_match: bool) -> None:
        self.constraint = constraint
        self.self_match = self_match
        self.counts: dict[str, int] = {}
        self.levels: dict[int, int] = {}
        self.eligible: dict[NodeName, bool] | None = None
        """Nodes whose domain the constraint counts; None: every node carrying the keys."""
        self.nonzero: dict[str, None] = {}

    def open(self, domain: str) -> None:
        if domain not in self.counts:
            self.counts[domain] = 0
            self.levels[0] = self.levels.get(0, 0) + 1

    def shift(self, domain: str, delta: int) -> None:
        before = self.counts[domain]
        after = before + delta
        self.counts[domain] = after
        left = self.levels[before] - 1
        if left:
            self.levels[before] = left
        else:
            del self.levels[before]
        self.levels[after] = self.levels.get(after, 0) + 1
        if after:
            self.nonzero[domain] = None
        else:
            self.nonzero.pop(domain, None)

    def minimum(self) -> int:
        if len(self.counts) < self.constraint.min_domains:
            return 0
        return min(self.levels) if self.levels else 0


class _KindCounts:
    """The counts one kind of incoming pod reads, per topology pair (label, value)."""

    __slots__ = (
        "affinity", "anti", "existing", "pod", "preferred", "self_affine", "soft", "spread",
    )

    def __init__(self, pod: Pod) -> None:
        self.pod = pod
        self.affinity: dict[tuple[str, str], int] = {}
        self.anti: dict[tuple[str, str], int] = {}
        self.existing: dict[tuple[str, str], int] = {}
        self.self_affine = _selects_all(pod.affinity, pod)
        self.spread = [_SpreadCount(c, spread_self(c, pod)) for c in pod.spread]
        self.preferred: list[tuple[PreferredTerm, dict[tuple[str, str], int]]] = [
            (preferred, {}) for preferred in pod.preferred]
        """Per preferred term, the pods it selects per topology pair."""
        self.soft = [_SpreadCount(c, spread_self(c, pod)) for c in pod.soft_spread]


def _bump(counts: dict[tuple[str, str], int], labels: Mapping[str, str], key: str,
          delta: int) -> None:
    value = labels.get(key)
    if value is None:
        return
    pair = (key, value)
    left = counts.get(pair, 0) + delta
    if left:
        counts[pair] = left
    else:
        counts.pop(pair, None)


class RuleCounts:
    """The per-domain counts that decide where each kind of a gang's pods may go.

    Built from the residents once per gang; :meth:`add` and :meth:`remove`
    keep them exact as members are placed and taken back during the search,
    so :meth:`refusal` reads counts instead of scanning pods.
    """

    __slots__ = ("_kinds", "residents")

    def __init__(self, residents: Residents, pods: Sequence[Pod]) -> None:
        self.residents = residents
        self._kinds = [_KindCounts(pod) for pod in pods]
        for kind in self._kinds:
            self._count_residents(kind)

    def _count_residents(self, kind: _KindCounts) -> None:
        residents = self.residents
        labels = residents.labels
        pod = kind.pod
        if pod.affinity:
            first = pod.affinity[0]
            for other, node in residents.having(first.match_labels, first.match_expressions):
                if _selects_all(pod.affinity, other):
                    for term in pod.affinity:
                        _bump(kind.affinity, labels[node], term.topology_key, 1)
        for term in pod.anti_affinity:
            for other, node in residents.having(term.match_labels, term.match_expressions):
                if term_selects(term, other):
                    _bump(kind.anti, labels[node], term.topology_key, 1)
        for term in residents.terms_selecting(pod):
            for _, node in residents.holders_of(term):
                _bump(kind.existing, labels[node], term.topology_key, 1)
        for preferred, counts in kind.preferred:
            term = preferred.term
            for other, node in residents.having(term.match_labels, term.match_expressions):
                if term_selects(term, other):
                    _bump(counts, labels[node], term.topology_key, 1)
        for spreads in (kind.spread, kind.soft):
            self._open_domains(kind, spreads)
            for spread in spreads:
                constraint = spread.constraint
                for other, node in residents.having(constraint.match_labels,
                                                    constraint.match_expressions):
                    self._count_spread(kind, spread, other, node, 1)

    def _open_domains(self, kind: _KindCounts, spreads: Sequence[_SpreadCount]) -> None:
        """Every node the constraints count (by their node policies, carrying every
        constraint's key) opens its domain, with no pods yet."""
        if not spreads:
            return
        pod = kind.pod
        residents = self.residents
        keys = tuple(sorted({spread.constraint.topology_key for spread in spreads}))
        carrying = residents.carrying(keys)
        for spread in spreads:
            constraint = spread.constraint
            key = constraint.topology_key
            filtered = constraint.honour_taints or (constraint.honour_node_affinity and (
                pod.rules.node_selector or pod.rules.required_affinity))
            if not filtered:
                for value in residents.values(keys, key):
                    spread.open(value)
                spread.eligible = dict.fromkeys(carrying, True) if len(keys) > 1 else None
                continue
            eligible = spread.eligible = {}
            for name in carrying:
                ok = eligible[name] = _counted(constraint, pod, residents.nodes[name])
                if ok:
                    spread.open(residents.labels[name][key])

    def _count_spread(
        self, kind: _KindCounts, spread: _SpreadCount, other: Pod, node: NodeName, delta: int
    ) -> None:
        key = spread.constraint.topology_key
        labels = self.residents.labels[node]
        eligible = spread.eligible
        counted = key in labels if eligible is None else eligible.get(node, False)
        if counted and spread_selects(spread.constraint, kind.pod.namespace, other):
            # A counted node carries the key, and its domain is open.
            spread.shift(labels[key], delta)

    def add(self, pod: Pod, node: NodeName) -> None:
        """Count a pod placed on a node (a member the search just placed)."""
        self.residents.add(pod, node)
        self._shift(pod, node, 1)

    def remove(self, pod: Pod, node: NodeName) -> None:
        self.residents.remove(pod.key)
        self._shift(pod, node, -1)

    def _shift(self, pod: Pod, node: NodeName, delta: int) -> None:
        labels = self.residents.labels[node]
        for kind in self._kinds:
            mine = kind.pod
            if mine.affinity and _selects_all(mine.affinity, pod):
                for term in mine.affinity:
                    _bump(kind.affinity, labels, term.topology_key, delta)
            for term in mine.anti_affinity:
                if term_selects(term, pod):
                    _bump(kind.anti, labels, term.topology_key, delta)
            for term in pod.anti_affinity:
                if term_selects(term, mine):
                    _bump(kind.existing, labels, term.topology_key, delta)
            for spread in (*kind.spread, *kind.soft):
                self._count_spread(kind, spread, pod, node, delta)
            for preferred, counts in kind.preferred:
                if term_selects(preferred.term, pod):
                    _bump(counts, labels, preferred.term.topology_key, delta)

    def refusal(self, index: int, node: NodeName) -> Refusal | None:
        """Why the ``index``-th kind of pod may not go on the node now, or None.

        In kube-scheduler's order: spread, then the pod's affinity, its
        anti-affinity, and the anti-affinity of pods already there.
        """
        kind = self._kinds[index]
        labels = self.residents.labels[node]
        for spread in kind.spread:
            refused = _spread_refusal(kind, spread, labels)
            if refused is not None:
                return refused
        pod = kind.pod
        if pod.affinity:
            refused = _affinity_refusal(kind, labels)
            if refused is not None:
                return refused
        for term in pod.anti_affinity:
            value = labels.get(term.topology_key)
            if value is not None and kind.anti.get((term.topology_key, value), 0) > 0:
                return Refusal(PodRule.ANTI_AFFINITY, term.topology_key, value)
        for (key, value), count in kind.existing.items():
            if count > 0 and labels.get(key) == value:
                return Refusal(PodRule.EXISTING_ANTI_AFFINITY, key, value)
        return None

    def topology_keys(self) -> frozenset[str]:
        """Every topology key the gang's counts read."""
        found: set[str] = set()
        for kind in self._kinds:
            pod = kind.pod
            found.update(term.topology_key for term in (*pod.affinity, *pod.anti_affinity))
            found.update(s.constraint.topology_key for s in (*kind.spread, *kind.soft))
            found.update(key for key, _ in kind.existing)
            found.update(preferred.term.topology_key for preferred, _ in kind.preferred)
        return frozenset(found)

    def marked(self, keys: frozenset[str]) -> set[NodeName]:
        """The nodes where a count on one of ``keys`` is not zero, or that lack a key:
        beside them, nodes of equal kind and free room are interchangeable."""
        residents = self.residents
        found: set[NodeName] = set()
        for key in keys:
            found.update(residents.nodes_with(key, None))
        for kind in self._kinds:
            for counts in (kind.affinity, kind.anti, kind.existing,
                           *(counts for _, counts in kind.preferred)):
                for key, value in counts:
                    if key in keys:
                        found.update(residents.nodes_with(key, value))
            for spread in (*kind.spread, *kind.soft):
                key = spread.constraint.topology_key
                if key in keys:
                    for value in spread.nonzero:
                        found.update(residents.nodes_with(key, value))
        return found

    def rank(self, index: int, node: NodeName) -> tuple[int, int]:
        """How the kind's rules rank the node, lowest first: the emptiest spread domain,
        then what its preferred terms and soft spreads like most. Every search that
        places pods under these rules orders its nodes by it."""
        return self.domain_count(index, node), -self.preference(index, node)

    def domain_count(self, index: int, node: NodeName) -> int:
        """The matching pods already in the node's domains, summed over the kind's spread
        constraints: a search prefers the emptiest, as kube-scheduler's score does."""
        kind = self._kinds[index]
        labels = self.residents.labels[node]
        return sum(spread.counts.get(labels.get(spread.constraint.topology_key, ""), 0)
                   for spread in kind.spread)

    def preference(self, index: int, node: NodeName) -> int:
        """How much the kind's preferred terms and ``ScheduleAnyway`` spreads like the node:
        each preferred term its weight per pod it selects in the node's domain (less for
        anti-affinity), less one per pod a soft spread counts there. It only ranks nodes
        a search may use anyway, as kube-scheduler's scores only rank feasible ones."""
        kind = self._kinds[index]
        labels = self.residents.labels[node]
        score = 0
        for preferred, counts in kind.preferred:
            key = preferred.term.topology_key
            value = labels.get(key)
            if value is not None:
                found = counts.get((key, value), 0) * preferred.weight
                score += -found if preferred.anti else found
        for spread in kind.soft:
            score -= spread.counts.get(labels.get(spread.constraint.topology_key, ""), 0)
        return score


def _counted(constraint: SpreadConstraint, pod: Pod, node: Node) -> bool:
    """Whether the constraint's node policies count the node's domain for this pod."""
    if constraint.honour_node_affinity and not selector_ok(pod.rules, node):
        return False
    return not (constraint.honour_taints and untolerated_taint(pod.rules, node) is not None)


def _spread_refusal(
    kind: _KindCounts, spread: _SpreadCount, labels: Mapping[str, str]
) -> Refusal | None:
    for other in kind.spread:
        key = other.constraint.topology_key
        if key not in labels:
            return Refusal(PodRule.SPREAD_LABEL, key, "")
    constraint = spread.constraint
    value = labels[constraint.topology_key]
    skew = spread.counts.get(value, 0) + spread.self_match - spread.minimum()
    if skew > constraint.max_skew:
        return Refusal(PodRule.SPREAD, constraint.topology_key, value, constraint.max_skew, skew)
    return None


def _affinity_refusal(kind: _KindCounts, labels: Mapping[str, str]) -> Refusal | None:
    """kube-scheduler's special case included: when no pod anywhere matches the terms,
    a pod matching them itself may go anywhere carrying the keys (the first of a set
    of pods with affinity to each other)."""
    missing: Refusal | None = None
    for term in kind.pod.affinity:
        value = labels.get(term.topology_key)
        if value is None:
            return Refusal(PodRule.AFFINITY, term.topology_key, "")
        if missing is None and kind.affinity.get((term.topology_key, value), 0) <= 0:
            missing = Refusal(PodRule.AFFINITY, term.topology_key, value)
    if missing is not None and not (not kind.affinity and kind.self_affine):
        return missing
    return None


def pod_rules_refusal(
    pod: Pod, node: NodeName, nodes: Mapping[NodeName, Node], pods: Iterable[Pod]
) -> Refusal | None:
    """The inter-pod verdict for one pod on one node, given the pods on nodes: None
    when kube-scheduler's InterPodAffinity and PodTopologySpread filters pass it.

    The same counts the gang search reads, for one pod; the differential test
    against kube-scheduler asks this.
    """
    counts = RuleCounts(Residents(nodes, pods), [pod])
    return counts.refusal(0, node)
