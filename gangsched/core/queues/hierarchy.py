"""The queue hierarchy: which queues are valid, what each deserves, the fair order and the caps
down the tree.

A Queue may name a ``parent``. The weights of siblings split their parent's
deserved share (hierarchical DRF, as Volcano's hdrf and KAI's n-level queues
describe it): a queue's deserved share is its weight's part of its parent's,
shared only with the siblings that have work, so room an idle team leaves
goes to the teams that want it. The fair order walks the tree top down: of
the teams, the one furthest below its weighted dominant share, then of its
queues the one furthest below, so a team cannot take more than its share by
having many queues. A parent's capability caps its whole subtree together.

Only leaf queues take work, as in Volcano and KAI: a gang whose queue has
child queues waits with a :class:`QueueNotLeaf` reason naming them, and its
queue's own gangs do not make it busy for the deserved shares. Its gangs
already bound keep running, counted in its subtree's usage and caps.

A Closed queue stays in the tree, and so does every queue under it: closing
a queue only stops it and its subtree taking new gangs (:meth:`QueueTree.closed`),
while what they run still counts in every ancestor's total and cap, so a team
closed with 8 cpu running does not give its organisation 8 cpu more to hand out.

A queue that cannot be placed in the tree (its parent missing or invalid,
parents in a cycle, a weight under 1) is invalid: it has no share to
order by, so its new gangs wait with a :class:`QueueInvalid` reason naming the
problem, and every other queue is scheduled as if it were not there.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass
from fractions import Fraction

from gangsched.core.model.objects import QueueName, QueueSpec
from gangsched.core.model.resources import Capability, Resources
from gangsched.core.queues.fairness import dominant_share
from gangsched.core.reasons import QueueInvalid, QueueNotLeaf

FairKey = tuple[tuple[Fraction, QueueName], ...]
"""A queue's place in the fair order: per level from the top, its ancestor's weighted
dominant share and name; the smallest key goes next."""


@dataclass(frozen=True, slots=True)
class QueueTree:
    """The valid queues as a tree, and why the others are not in it."""

    specs: Mapping[QueueName, QueueSpec]
    invalid: Mapping[QueueName, QueueInvalid]
    children: Mapping[QueueName | None, tuple[QueueName, ...]]
    """Valid queues under each valid queue, by name; under None, the top level."""
    paths: Mapping[QueueName, tuple[QueueName, ...]]
    """Every valid queue's ancestors from the top, itself last."""
    below: Mapping[QueueName, tuple[QueueName, ...]]
    """Every valid queue with its descendants, itself first."""

    @property
    def flat(self) -> bool:
        """No queue has a parent: the tree is the flat list of queues it always was."""
        return all(len(path) == 1 for path in self.paths.values())

    def path(self, queue: QueueName) -> tuple[QueueName, ...]:
        """The queue's ancestors from the top, itself last; an invalid queue stands alone."""
        return self.paths.get(queue, (queue,))

    def subtree(self, queue: QueueName) -> tuple[QueueName, ...]:
        """The queue and every valid queue below it; an invalid queue stands alone."""
        return self.below.get(queue, (queue,))

    def refusal(self, queue: QueueName) -> QueueInvalid | QueueNotLeaf | None:
        """Why the queue takes no new gangs: it has no place in the tree, or it has child
        queues (only leaves take work); None when it takes them."""
        if queue in self.invalid:
            return self.invalid[queue]
        kids = self.children.get(queue)
        return QueueNotLeaf(queue, kids) if kids else None

    def closed(self, queue: QueueName) -> QueueName | None:
        """The nearest Closed queue from ``queue`` up (itself included): its gangs are
        admitted no more; None when every queue on the way is Open."""
        return next((name for name in reversed(self.path(queue))
                     if name in self.specs and not self.specs[name].open), None)


def build_tree(queues: Mapping[QueueName, QueueSpec]) -> QueueTree:
    """The tree of the valid queues; each invalid one with the first problem found."""
    problems = _own_problems(queues)

    def resolve(name: QueueName) -> QueueInvalid | None:
        if name in problems:
            return problems[name]
        parent = queues[name].parent
        if parent is not None and resolve(parent) is not None:
            problems[name] = QueueInvalid(name, "ParentInvalid", parent)
        return problems.get(name)

    for name in sorted(queues):
        resolve(name)
    children: dict[QueueName | None, list[QueueName]] = {}
    paths: dict[QueueName, tuple[QueueName, ...]] = {}
    for name in sorted(queues):
        if name in problems:
            continue
        children.setdefault(queues[name].parent, []).append(name)
        path = [name]
        while (parent := queues[path[-1]].parent) is not None:
            path.append(parent)
        paths[name] = tuple(reversed(path))
    below: dict[QueueName, list[QueueName]] = {name: [] for name in paths}
    for name, ancestry in sorted(paths.items(), key=lambda item: len(item[1])):
        for ancestor in ancestry:
            below[ancestor].append(name)
    return QueueTree(
        specs=queues, invalid=problems,
        children={parent: tuple(names) for parent, names in children.items()},
        paths=paths, below={name: tuple(names) for name, names in below.items()},
    )


def _own_problems(queues: Mapping[QueueName, QueueSpec]) -> dict[QueueName, QueueInvalid]:
    """What is wrong with each queue itself or with its parent link: a weight under 1,
    parents in a cycle, a parent missing. A Closed parent is none: its children stay in
    the tree, counted in its totals, and take no new gangs (:meth:`QueueTree.closed`)."""
    problems: dict[QueueName, QueueInvalid] = {}
    for name, spec in sorted(queues.items()):
        if spec.weight < 1:
            problems[name] = QueueInvalid(name, "WeightBelowOne", weight=spec.weight)
            continue
        parent = spec.parent
        if parent is None:
            continue
        cycle = _cycle_from(queues, name)
        if cycle:
            problems[name] = QueueInvalid(name, "ParentCycle", parent, cycle)
        elif parent not in queues:
            problems[name] = QueueInvalid(name, "ParentMissing", parent)
    return problems


def _cycle_from(queues: Mapping[QueueName, QueueSpec], name: QueueName) -> tuple[QueueName, ...]:
    """The queues from ``name`` up its parents back to it, when they come back; else ()."""
    chain = [name]
    parent = queues[name].parent
    while parent is not None and parent in queues and parent not in chain:
        chain.append(parent)
        parent = queues[parent].parent
    return tuple(chain) if parent == name else ()


def deserved_shares(tree: QueueTree, active: Set[QueueName]) -> dict[QueueName, Fraction]:
    """Every valid queue's deserved part of the cluster: its weight's part of its parent's,
    among the siblings whose subtree has work (``active`` names queues with gangs; only a
    leaf's count, as only leaves take work).

    An idle queue is given what it would deserve if it had work, for status and
    for the moment it gets some; the active children of a queue always share
    exactly its part, so the active leaves share the whole cluster.
    """
    busy = {ancestor for name in active if name in tree.paths and name not in tree.children
            for ancestor in tree.paths[name]}
    shares: dict[QueueName, Fraction] = {}
    stack: list[tuple[QueueName | None, Fraction]] = [(None, Fraction(1))]
    while stack:
        parent, share = stack.pop()
        kids = tree.children.get(parent, ())
        busy_weight = sum(tree.specs[kid].weight for kid in kids if kid in busy)
        for kid in kids:
            weight = tree.specs[kid].weight
            others = busy_weight - (weight if kid in busy else 0)
            shares[kid] = share * Fraction(weight, weight + others)
            stack.append((kid, shares[kid]))
    return shares


def subtree_total(
    tree: QueueTree, amounts: Mapping[QueueName, Resources], queue: QueueName
) -> Resources:
    """What the queue and every queue below it hold together."""
    return Resources.sum(amounts.get(name, Resources.zero()) for name in tree.subtree(queue))


def fair_key(
    tree: QueueTree, allocated: Mapping[QueueName, Resources], total: Resources,
    queue: QueueName,
) -> FairKey:
    """The queue's place in the fair order: at each level from the top, its ancestor's
    weighted dominant share of what that ancestor's subtree holds, then its name.

    Compared as tuples, the smallest key is the queue that the top-down walk
    (the furthest-behind team, then its furthest-behind queue) reaches; on a
    flat tree it is the queue with the lowest weighted share, then name.
    """
    return tuple(
        (dominant_share(subtree_total(tree, allocated, name), total, tree.specs[name].weight),
         name)
        for name in tree.paths[queue]
    )


@dataclass(frozen=True, slots=True)
class CapHit:
    """The queue (the gang's own or an ancestor) whose capability ``extra`` would exceed,
    with what its subtree holds: allocated by bound pods, reserved for admitted gangs."""

    queue: QueueName
    capability: Capability
    allocated: Resources
    reserved: Resources


def cap_hit(
    tree: QueueTree, allocated: Mapping[QueueName, Resources],
    reserved: Mapping[QueueName, Resources], queue: QueueName, extra: Resources,
) -> CapHit | None:
    """The nearest queue on the path from ``queue`` up whose capability would be exceeded
    if its subtree held ``extra`` more; None when every cap on the way allows it."""
    for name in reversed(tree.path(queue)):
        capability = tree.specs[name].capability
        if capability is None:
            continue
        held = subtree_total(tree, allocated, name)
        promised = subtree_total(tree, reserved, name)
        if not capability.allows(held + promised + extra):
            return CapHit(name, capability, held, promised)
    return None
