"""Placement of a gang whose pods carry inter-pod rules (affinity, anti-affinity, spread).

For such a gang nodes of one kind and free room are no longer
interchangeable: a member placed on one changes where the next may go
("one worker per node", "spread evenly over zones"). The search places
members one by one on the capacity itself, keeping per-domain counts
(:class:`~gangsched.core.fit.interpod.RuleCounts`) exact as it goes, and
backtracks when a member finds no node. It still works on groups, not
nodes: beside the few nodes some count marks, nodes of the same kind and
free room are one choice, so a cluster of a thousand nodes is a few dozen
choices per member, and a refused node is pruned before anything is tried
on it. The first descent is the greedy answer (emptiest domain first, then
the policy); backtracking is bounded by a work budget, as the other search.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from gangsched.core.fit.interpod import PodRule, Refusal, Residents, RuleCounts, term_selects
from gangsched.core.fit.nodefit import PER_NODE_LABELS, uses_node_name
from gangsched.core.fit.nodelocal import rule_of_term
from gangsched.core.fit.score import node_score
from gangsched.core.model.objects import GangKey, NodeName, Pod, PodAffinityTerm, PodKey, Policy
from gangsched.core.model.resources import Resources
from gangsched.core.placement.packing import SEARCH_MAX_PODS
from gangsched.core.placement.room import (
    UNBOUNDED,
    blamed_resource,
    fit_count,
    size_order,
    stranded_devices,
)
from gangsched.core.placement.shapes import FreeNodes
from gangsched.core.reasons import PodRulesUnmet, RuleBlock

__all__ = ["Blocked", "MemberRules", "RulesOutcome", "diagnose", "place_under_rules"]

SHOWN_BLOCKS = 3
"""Nodes named in a reason; more would bury the line."""


@dataclass(frozen=True, slots=True)
class Blocked:
    """Where the first descent stopped: the member that found no node, and why each
    node refused it."""

    placed: int
    pod: Pod
    refused: tuple[tuple[str, int], ...]
    """Inter-pod rule to the number of nodes it kept the pod off."""
    short: tuple[tuple[str, int], ...]
    """Resource to the number of nodes that lack it for the pod."""
    excluded: tuple[tuple[str, int], ...]
    """Node rule (taint, selector...) to the number of nodes it keeps the pod off."""
    shown: tuple[RuleBlock, ...]

    def unmet(self, gang: GangKey, need: int, stopped_after: int | None) -> PodRulesUnmet:
        return PodRulesUnmet(gang, need, self.placed, self.pod.key, self.refused, self.short,
                             self.excluded, self.shown, stopped_after)


@dataclass(frozen=True, slots=True)
class RulesOutcome:
    assignments: list[tuple[Pod, NodeName]] | None
    exhausted: bool
    blocked: Blocked | None


class _Exhausted(Exception):
    pass


def _rule_key(pod: Pod) -> tuple[object, ...]:
    return (pod.requests, pod.rules, pod.labels, pod.affinity, pod.anti_affinity, pod.spread,
            pod.preferred, pod.soft_spread, pod.namespace, pod.gang)


class _Search:
    """One gang on one capacity: used once, leaves the capacity and residents as it
    found them unless it succeeds."""

    def __init__(
        self, nodes: FreeNodes, residents: Residents, pending: Sequence[Pod], need: int,
        policy: Policy, budget: int,
    ) -> None:
        self.nodes = nodes
        grouped: dict[tuple[object, ...], list[Pod]] = {}
        for pod in pending:
            grouped.setdefault(_rule_key(pod), []).append(pod)
        largest = nodes.index.max_allocatable
        runs = sorted(grouped.values(), key=lambda pods: size_order(pods[0].requests, largest))
        self.pods = [pod for run in runs for pod in run]
        self.kind_of = [index for index, run in enumerate(runs) for _ in run]
        self.run_end: list[int] = []
        for run in runs:
            self.run_end.extend([len(self.run_end) + len(run)] * len(run))
        self.counts = RuleCounts(residents, [run[0] for run in runs])
        self.per_node = frozenset(k for k in self.counts.topology_keys() if k in PER_NODE_LABELS)
        self.need = need
        self.policy = policy
        self.budget = budget
        self.steps = 0
        self.mine: dict[NodeName, int] = {}
        self.chosen: list[tuple[int, NodeName]] = []
        self.blocked: Blocked | None = None

    # ------------------------------------------------------------ moves

    def _put(self, position: int, node: NodeName) -> None:
        pod = self.pods[position]
        self.nodes.move(node, self.nodes.free[node] - pod.requests)
        self.counts.add(pod, node)
        self.mine[node] = self.mine.get(node, 0) + 1
        self.chosen.append((position, node))

    def _take_back(self) -> None:
        position, node = self.chosen.pop()
        pod = self.pods[position]
        self.counts.remove(pod, node)
        self.nodes.move(node, self.nodes.free[node] + pod.requests)
        left = self.mine[node] - 1
        if left:
            self.mine[node] = left
        else:
            del self.mine[node]

    # ------------------------------------------------------------ choices

    def _candidates(self, pod: Pod) -> list[tuple[NodeName, object]]:
        """One node per set of interchangeable nodes with room for the pod: one unmarked
        node per (kind, free) group, and every marked node alone; each with what its
        rule figures depend on (an unmarked node's kind, as its counts on per-node keys
        are all zero; else the node itself)."""
        nodes = self.nodes
        shape = nodes.shape(pod.requests, pod.rules)
        marked = self.counts.marked(self.per_node) if self.per_node else set()
        marked.update(self.mine)
        groups = list(shape.for_spread())
        found: list[tuple[NodeName, object]] = []
        if uses_node_name(pod.rules):
            for kind, free in groups:
                found.extend((name, name) for name in nodes.classes[kind][free]
                             if shape.admits(kind, name))
            return found
        for kind, free in groups:
            for name in nodes.classes[kind][free]:
                if name not in marked:
                    found.append((name, kind))
                    break
        if marked:
            open_groups = set(groups)
            kind_of = nodes.index.kind_of
            found.extend((name, name) for name in sorted(marked)
                         if (kind_of[name], nodes.free[name]) in open_groups)
        return found

    def _options(self, position: int) -> list[NodeName]:
        """The candidates for the member, best first, not yet asked whether the rules
        allow them (see :meth:`_allowed`): the search mostly takes the first allowed."""
        pod = self.pods[position]
        index = self.kind_of[position]
        items = tuple(sorted(pod.requests.amounts.items()))
        counts, free_of, mine = self.counts, self.nodes.free, self.mine
        rooms: dict[Resources, tuple[int, int]] = {}
        figures: dict[object, tuple[int, int]] = {}
        ranked = []
        for order, (name, alike) in enumerate(self._candidates(pod)):
            self.steps += 1
            if self.steps > self.budget:
                raise _Exhausted
            free = free_of[name]
            room = rooms.get(free)
            if room is None:
                room = rooms[free] = (fit_count(free, items), stranded_devices(free, pod.requests))
            rule = figures.get(alike)
            if rule is None:
                rule = figures[alike] = counts.rank(index, name)
            used = mine.get(name, 0)
            ranked.append(((*rule, *node_score(self.policy, used, *room), order), name))
        ranked.sort()
        return [name for _, name in ranked]

    def _allowed(self, position: int, options: list[NodeName]) -> Iterator[NodeName]:
        """The options the inter-pod rules allow the member now, in order; asked lazily,
        as the search state is the same whenever the next one is asked."""
        index, counts = self.kind_of[position], self.counts
        return (name for name in options if counts.refusal(index, name) is None)

    # ------------------------------------------------------------ search

    def solve(self) -> list[tuple[Pod, NodeName]] | None:
        """The gang's minimum placed (then what else fits), or None with everything undone."""
        size = len(self.pods)

        def visit(position: int, placed: int) -> bool:
            if placed >= self.need:
                return True
            if position >= size or placed + size - position < self.need:
                return False
            tried = False
            for node in self._allowed(position, self._options(position)):
                tried = True
                self._put(position, node)
                if visit(position + 1, placed + 1):
                    return True
                self._take_back()
            if not tried and self.blocked is None:
                self.blocked = self._diagnose(position, placed)
            end = self.run_end[position]
            return placed + size - end >= self.need and visit(end, placed)

        try:
            found = visit(0, 0) if size <= SEARCH_MAX_PODS else self._greedy()
        except _Exhausted:
            self._undo_all()
            raise
        if not found:
            self._undo_all()
            return None
        taken = {position for position, _ in self.chosen}
        try:
            for position in range(size):
                if position not in taken:
                    first = next(self._allowed(position, self._options(position)), None)
                    if first is not None:
                        self._put(position, first)
        except _Exhausted:
            pass  # the minimum is placed; the extras wait for the next cycle
        return [(self.pods[position], node) for position, node in self.chosen]

    def _greedy(self) -> bool:
        """The first descent alone, without backtracking, for a gang too large to search:
        each member takes its best node in turn, and one with none is left out while the
        minimum can still be reached. Iterative, so no gang size meets a recursion limit."""
        self.budget = UNBOUNDED
        size, placed = len(self.pods), 0
        for position in range(size):
            if placed >= self.need:
                break
            first = next(self._allowed(position, self._options(position)), None)
            if first is not None:
                self._put(position, first)
                placed += 1
                continue
            if self.blocked is None:
                self.blocked = self._diagnose(position, placed)
            if placed + size - position - 1 < self.need:
                return False
        return placed >= self.need

    def _undo_all(self) -> None:
        while self.chosen:
            self._take_back()

    # ------------------------------------------------------------ reasons

    def _diagnose(self, position: int, placed: int) -> Blocked:
        return diagnose(self.nodes, self.counts, self.kind_of[position], self.pods[position],
                        placed)


def diagnose(nodes: FreeNodes, counts: RuleCounts, index: int, pod: Pod, placed: int
             ) -> Blocked:
    """Why every node refuses the pod (the ``index``-th kind of ``counts``), counted over
    all nodes."""
    node_index = nodes.index
    items = tuple(sorted(pod.requests.amounts.items()))
    by_names = uses_node_name(pod.rules)
    kind_reasons = node_index.kind_reasons(pod.rules)
    name_reasons = node_index.name_reasons(pod.rules) if by_names else None
    refused: dict[str, int] = {}
    short: dict[str, int] = {}
    excluded: dict[str, int] = {}
    shown: list[RuleBlock] = []
    for name in sorted(nodes.free):
        reason = (name_reasons[name] if name_reasons is not None
                  else kind_reasons[node_index.kind_of[name]])
        if reason is not None:
            excluded[reason] = excluded.get(reason, 0) + 1
            continue
        free = nodes.free[name]
        if not fit_count(free, items):
            blamed = blamed_resource(free, pod.requests)
            short[blamed] = short.get(blamed, 0) + 1
            continue
        refusal = counts.refusal(index, name)
        if refusal is None:
            continue
        refused[refusal.rule.value] = refused.get(refusal.rule.value, 0) + 1
        block = _block(counts.residents, pod, name, refusal)
        if len(shown) < SHOWN_BLOCKS and all(_same(b, block) is False for b in shown):
            shown.append(block)
    return Blocked(placed, pod, tuple(sorted(refused.items())), tuple(sorted(short.items())),
                   tuple(sorted(excluded.items())), tuple(shown))


def _block(residents: Residents, pod: Pod, node: NodeName, refusal: Refusal) -> RuleBlock:
    other, term = _blamed(residents, pod, refusal)
    held = rule_of_term(term) if term is not None else None
    return RuleBlock(
        node=node, rule=held[0] if held else refusal.rule.value,
        topology_key=held[1] if held else refusal.topology_key,
        domain=refusal.domain, other=other.key if other else None,
        same_gang=other is not None and other.gang is not None and other.gang == pod.gang,
        max_skew=refusal.max_skew, skew=refusal.skew,
    )


class MemberRules:
    """A gang's inter-pod rules for a search that places its members one by one on its
    own terms (the device search, :mod:`gangsched.core.dra.placing`): the counts this
    module's search keeps, asked member by member, the members counted as they are
    placed, and all of them taken back unless the placement is kept.

    The residents are the pass's own: what the members add is seen by every gang after
    this one, so :meth:`undo` must follow a placement that is not kept.
    """

    __slots__ = ("_counts", "_kind", "_nodes", "_placed")

    def __init__(self, nodes: FreeNodes, residents: Residents, pending: Sequence[Pod]) -> None:
        kinds: dict[tuple[object, ...], int] = {}
        first: list[Pod] = []
        self._kind: dict[PodKey, int] = {}
        for pod in pending:
            index = kinds.setdefault(_rule_key(pod), len(first))
            if index == len(first):
                first.append(pod)
            self._kind[pod.key] = index
        self._nodes = nodes
        self._counts = RuleCounts(residents, first)
        self._placed: list[tuple[Pod, NodeName]] = []

    def refuses(self, pod: Pod, node: NodeName) -> bool:
        return self._counts.refusal(self._kind[pod.key], node) is not None

    def rank(self, pod: Pod, node: NodeName) -> tuple[int, int]:
        return self._counts.rank(self._kind[pod.key], node)

    def add(self, pod: Pod, node: NodeName) -> None:
        self._counts.add(pod, node)
        self._placed.append((pod, node))

    def undo(self) -> None:
        while self._placed:
            pod, node = self._placed.pop()
            self._counts.remove(pod, node)

    def unmet(self, gang: GangKey, need: int, pod: Pod, placed: int) -> PodRulesUnmet:
        """Why the rules leave the pod no node, after ``placed`` members."""
        blocked = diagnose(self._nodes, self._counts, self._kind[pod.key], pod, placed)
        return blocked.unmet(gang, need, None)


def _same(one: RuleBlock, other: RuleBlock) -> bool:
    """Spread refusals of one domain say the same thing: show the domain once."""
    if one.rule == other.rule == PodRule.SPREAD.value:
        return (one.topology_key, one.domain) == (other.topology_key, other.domain)
    return False


def _blamed(
    residents: Residents, pod: Pod, refusal: Refusal
) -> tuple[Pod | None, PodAffinityTerm | None]:
    """A pod in the refused domain that the refusing rule reads, to name in the reason,
    and the term that reads it (a host port's or a disk's, when that is what they share)."""
    key, value = refusal.topology_key, refusal.domain
    labels = residents.labels

    def there(node: NodeName) -> bool:
        return labels[node].get(key) == value

    if refusal.rule is PodRule.ANTI_AFFINITY:
        for term in pod.anti_affinity:
            if term.topology_key != key:
                continue
            for other, node in residents.having(term.match_labels, term.match_expressions):
                if there(node) and term_selects(term, other):
                    return other, term
    if refusal.rule is PodRule.EXISTING_ANTI_AFFINITY:
        for term in residents.terms_selecting(pod):
            if term.topology_key != key:
                continue
            for other, node in residents.holders_of(term):
                if there(node):
                    return other, term
    return None, None


def place_under_rules(
    nodes: FreeNodes, residents: Residents, pending: Sequence[Pod], need: int, policy: Policy,
    budget: int,
) -> RulesOutcome:
    """Place at least ``need`` of the pods, honouring their inter-pod rules among
    themselves and against the residents, or nothing.

    On success the nodes and residents hold the placed pods; otherwise they are
    as they were. ``exhausted`` says the budget ran out before an answer.
    """
    search = _Search(nodes, residents, pending, need, policy, budget)
    try:
        found = search.solve()
    except _Exhausted:
        return RulesOutcome(None, True, search.blocked)
    if found is None or len(found) < need:
        return RulesOutcome(None, False, search.blocked)
    return RulesOutcome(found, False, None)
