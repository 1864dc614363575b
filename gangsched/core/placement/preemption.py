"""Which whole gangs to evict so that a gang of higher priority fits.

Volcano's preemption evicts single pods and so breaks the gangs it takes
from: a training job that loses one worker of eight holds seven GPUs and
makes no progress. Here a victim is always a whole gang, and the set of
victims is checked with the very placement core that will place the
preemptor (:class:`~gangsched.core.placement.capacity.Capacity`) before anything is
evicted: freeing room that the preemptor then cannot use would kill work
for nothing.

The chosen set is the smallest one that makes the preemptor fit, and of the
smallest ones, the one whose highest-priority victim is lowest (then the
next highest, and so on; equal priorities lose their youngest gang first,
which has done the least work). The search is exact while it stays within a
budget of placement checks; past it, it falls back to a greedy set pruned
until no victim can be spared, which is minimal though perhaps not minimum.

A set of victims is also decided against the PodDisruptionBudgets: every
victim pod a budget selects spends one of its ``disruptionsAllowed``, across
all the victims of the preemption, and a set that would overspend any budget
is no choice. Evicting it would stop half-way when the Eviction API refuses
the pod past the budget, leaving a gang below its minMember; a dry run
cannot tell, because it never spends the budget.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

from gangsched.core.fit.nodefit import requirement_matches
from gangsched.core.model.objects import (
    DisruptionBudget,
    Gang,
    GangKey,
    NodeName,
    Pod,
    PodKey,
    Policy,
    QueueName,
)
from gangsched.core.model.resources import Resources
from gangsched.core.placement.capacity import Capacity, Decision, Placement, Snapshot
from gangsched.core.placement.snapshot import NodeUsage
from gangsched.core.placement.topology import Domain, place_in_one_domain

__all__ = [
    "PREEMPTION_BUDGET",
    "Candidate",
    "Placer",
    "Preemption",
    "budget_selects",
    "choose_victims",
    "choose_victims_in_one_domain",
    "protected_by_budgets",
    "shifted",
]

PREEMPTION_BUDGET = 256
"""Placement checks one preemptor may spend on the exact search."""

_ENUMERATION_LIMIT = 20_000
"""Victim sets looked at (mostly rejected by arithmetic alone) before falling back."""


@dataclass(frozen=True, slots=True)
class Candidate:
    """A running gang that may be evicted: every one of its bound, live pods."""

    gang: GangKey
    priority: int
    created: float
    pods: tuple[Pod, ...]

    @property
    def order(self) -> tuple[int, float, GangKey]:
        """Evicted first: lowest priority, then youngest (least work lost), then by key."""
        return (self.priority, -self.created, self.gang)

    @property
    def requests(self) -> Resources:
        total = Resources.zero()
        for pod in self.pods:
            total = total + pod.requests
        return total


@dataclass(frozen=True, slots=True)
class Preemption:
    """Evict ``victims`` (all of ``pods``), then ``placement`` holds for the preemptor."""

    preemptor: GangKey
    victims: tuple[GangKey, ...]
    pods: tuple[PodKey, ...]
    placement: Placement
    reclaim_for: QueueName | None = None
    """The preemptor's queue when the victims are evicted to reclaim room it deserves
    (core.stages.reclaim), not for priority."""


RoomCheck = Callable[[Resources, Placement], bool]
"""Whether a placement found after freeing ``freed`` keeps the cycle's other promises
(reservations, queue caps); the placement core only knows nodes."""

Placer = Callable[[Capacity, Gang, Policy], Decision]
"""Where the preemptor would go on a capacity: anywhere, or inside one domain."""


def _anywhere(capacity: Capacity, gang: Gang, policy: Policy) -> Decision:
    return capacity.place(gang, policy)


def shifted(snapshot: Snapshot, add: Iterable[Pod] = (), remove: Iterable[Pod] = ()) -> Snapshot:
    """The snapshot with ``add`` counted on their nodes and ``remove`` taken off theirs.

    Pods without a node, terminal pods and pods on unknown nodes change
    nothing, as in :meth:`Snapshot.build`. The claims ``remove`` held are let
    go: each one no other consumer holds is deallocated, as the resource-claim
    controller does once the pods are gone, so their devices are free.
    """
    delta: dict[NodeName, Resources] = {}
    add, remove = tuple(add), tuple(remove)
    devices = snapshot.devices
    if remove and devices.claims:
        devices = devices.released(pod.uid for pod in remove if pod.uid)
    for sign, pods in ((1, add), (-1, remove)):
        for pod in pods:
            name = pod.node_name
            if name is None or pod.terminal or name not in snapshot.nodes:
                continue
            change = pod.requests if sign > 0 else Resources.zero() - pod.requests
            delta[name] = delta.get(name, Resources.zero()) + change
    if not delta and devices is snapshot.devices:
        return snapshot
    nodes = dict(snapshot.nodes)
    for name, change in delta.items():
        usage = nodes[name]
        nodes[name] = NodeUsage(usage.node, usage.requested + change)
    gone = {pod.key for pod in remove}
    return Snapshot(nodes, devices=devices).with_pods(
        [*(p for p in snapshot.pods if p.key not in gone), *add])


def budget_selects(budget: DisruptionBudget, pod: Pod) -> bool:
    """Whether the budget guards the pod: same namespace, and its selector matches the
    pod's labels (an empty selector matches every pod, a missing one none)."""
    if not budget.selects_pods or pod.key.split("/", 1)[0] != budget.namespace:
        return False
    labels = dict(pod.labels)
    if any(labels.get(key) != value for key, value in budget.match_labels):
        return False
    return all(requirement_matches(r, labels) for r in budget.match_expressions)


Spend = Mapping[str, int]
"""Pods of a victim each budget selects, by budget key: what evicting it spends."""


def _spend(candidate: Candidate, budgets: Sequence[DisruptionBudget]) -> dict[str, int]:
    spend: dict[str, int] = {}
    for budget in budgets:
        selected = sum(1 for pod in candidate.pods if budget_selects(budget, pod))
        if selected:
            spend[budget.key] = selected
    return spend


def protected_by_budgets(
    candidates: Sequence[Candidate], budgets: Sequence[DisruptionBudget]
) -> dict[GangKey, tuple[str, ...]]:
    """Candidates that a budget forbids evicting whole even alone, with those budgets."""
    allowed = {budget.key: budget.disruptions_allowed for budget in budgets}
    found: dict[GangKey, tuple[str, ...]] = {}
    for candidate in candidates:
        over = tuple(sorted(key for key, count in _spend(candidate, budgets).items()
                            if count > allowed[key]))
        if over:
            found[candidate.gang] = over
    return found


def choose_victims(
    snapshot: Snapshot,
    preemptor: Gang,
    candidates: Sequence[Candidate],
    policy: Policy = Policy.BINPACK,
    *,
    room: RoomCheck | None = None,
    budget: int = PREEMPTION_BUDGET,
    placer: Placer = _anywhere,
    budgets: Sequence[DisruptionBudget] = (),
) -> Preemption | None:
    """The fewest, lowest-priority whole gangs whose eviction lets ``preemptor`` fit and
    spends no PodDisruptionBudget of ``budgets`` beyond what it allows.

    The caller chooses who may go (preemption: gangs of strictly lower
    priority; reclaim: gangs of queues above their share) and has left out
    gangs that may not be evicted. None when no set of
    them would do, or when the preemptor may not preempt at all. A partly
    bound preemptor needs room for the members it lacks, not for all.
    """
    if not preemptor.preempts or not preemptor.pending:
        return None
    protected = protected_by_budgets(candidates, budgets)
    pool = sorted(
        (c for c in candidates if c.pods and c.gang not in protected),
        key=lambda c: c.order,
    )
    if not pool:
        return None
    checker = _Checker(snapshot, preemptor, policy, room, placer, budgets, pool)
    # Evicting every candidate is the most room preemption can make: if the
    # gang does not fit then, no subset will, and nothing is searched.
    if checker.place(pool) is None:
        return None
    whole = True
    for size in range(1, len(pool) + 1):
        found, complete = _smallest_of_size(checker, pool, size, budget)
        if found is not None:
            return checker.preemption(found)
        if not complete:
            whole = False
            break
    if whole:
        return None  # every set was tried: the budgets allow none that makes room
    chosen = _greedy_pruned(checker, pool)
    return None if chosen is None else checker.preemption(chosen)


class _Checker:
    """Places the preemptor on the snapshot with a set of victims gone; counts the checks."""

    def __init__(
        self, snapshot: Snapshot, preemptor: Gang, policy: Policy, room: RoomCheck | None,
        placer: Placer, budgets: Sequence[DisruptionBudget] = (),
        pool: Sequence[Candidate] = (),
    ) -> None:
        self.snapshot = snapshot
        self.preemptor = preemptor
        self.policy = policy
        self.room = room
        self.placer = placer
        self.checks = 0
        free = Capacity.from_snapshot(snapshot).free_total()
        self.free = free
        self.need = _least_need(preemptor)
        self.found: dict[tuple[GangKey, ...], Placement] = {}
        self.allowed = {b.key: b.disruptions_allowed for b in budgets}
        self.spends: dict[GangKey, Spend] = {c.gang: _spend(c, budgets) for c in pool}

    def within_budgets(self, victims: Sequence[Candidate]) -> bool:
        """Whether evicting all of ``victims`` leaves every budget at zero or above."""
        spent: dict[str, int] = {}
        for victim in victims:
            for key, count in self.spends[victim.gang].items():
                spent[key] = spent.get(key, 0) + count
                if spent[key] > self.allowed[key]:
                    return False
        return True

    def may_fit(self, victims: Sequence[Candidate]) -> bool:
        """The arithmetic necessary condition: freed plus free covers the minimum need."""
        freed = Resources.zero()
        for victim in victims:
            freed = freed + victim.requests
        return self.need.fits(self.free + freed)

    def place(self, victims: Sequence[Candidate]) -> Placement | None:
        self.checks += 1
        pods = [pod for victim in victims for pod in victim.pods]
        decision = self.placer(
            Capacity.from_snapshot(shifted(self.snapshot, remove=pods)), self.preemptor, self.policy
        )
        if not isinstance(decision, Placement):
            return None
        if self.room is not None:
            freed = Resources.zero()
            for pod in pods:
                freed = freed + pod.requests
            if not self.room(freed, decision):
                return None
        self.found[tuple(victim.gang for victim in victims)] = decision
        return decision

    def preemption(self, victims: Sequence[Candidate]) -> Preemption:
        keys = tuple(victim.gang for victim in victims)
        placement = self.found.get(keys) or self.place(victims)
        if placement is None:  # pragma: no cover - only sets that fit get here
            raise AssertionError("a victim set was chosen that does not make room")
        return Preemption(
            preemptor=self.preemptor.key,
            victims=keys,
            pods=tuple(pod.key for victim in victims for pod in victim.pods),
            placement=placement,
        )


def choose_victims_in_one_domain(
    snapshot: Snapshot,
    preemptor: Gang,
    candidates: Sequence[Candidate],
    domains: Mapping[Domain, tuple[NodeName, ...]],
    policy: Policy = Policy.BINPACK,
    *,
    room: RoomCheck | None = None,
    budget: int = PREEMPTION_BUDGET,
    budgets: Sequence[DisruptionBudget] = (),
) -> Preemption | None:
    """Victims for a gang that must land inside one topology domain: whole gangs that
    run wholly inside the domain it will land in, the best set over every domain.

    A gang evicted from another rack frees nothing the preemptor can use, and
    one that runs across the boundary would be evicted for the part of it
    outside as well. A preemptor with members bound stays in their domain.
    Domains are compared by the sets they need: fewest victims, then the
    lowest priorities, as within one.
    """
    by_key = {candidate.gang: candidate for candidate in candidates}
    best: tuple[tuple[int, tuple[tuple[int, float, GangKey], ...]], Preemption] | None = None
    for domain, nodes in sorted(domains.items()):
        inside = set(nodes)
        if not preemptor.bound_on <= inside:
            continue
        local = [c for c in candidates if all(pod.node_name in inside for pod in c.pods)]
        if not local:
            continue  # with nobody to evict here, no preemption can change this domain

        def confined(capacity: Capacity, gang: Gang, how: Policy,
                     domain: Domain = domain, nodes: tuple[NodeName, ...] = nodes) -> Decision:
            return place_in_one_domain(capacity, gang, how, {domain: nodes})

        chosen = choose_victims(snapshot, preemptor, local, policy, room=room, budget=budget,
                                placer=confined, budgets=budgets)
        if chosen is None:
            continue
        rank = (len(chosen.victims), _set_order(tuple(by_key[v] for v in chosen.victims)))
        if best is None or rank < best[0]:
            best = (rank, chosen)
    return None if best is None else best[1]


def _least_need(gang: Gang) -> Resources:
    """Per resource, the least that ``min_member - bound`` of its pending pods can ask."""
    count = max(0, gang.min_member - gang.bound)
    names = {name for pod in gang.pending for name in pod.requests.amounts}
    return Resources.of({
        name: sum(sorted(pod.requests.get(name) for pod in gang.pending)[:count])
        for name in names
    })


def _smallest_of_size(
    checker: _Checker, pool: Sequence[Candidate], size: int, budget: int
) -> tuple[tuple[Candidate, ...] | None, bool]:
    """(best set of ``size`` victims that makes room, or None; whether the search was whole).

    Sets are tried best first (lowest highest priority, and so on), so the
    first that makes room is the answer for this size.
    """
    sets: list[tuple[Candidate, ...]] = []
    for looked, victims in enumerate(combinations(pool, size)):
        if looked >= _ENUMERATION_LIMIT:
            return None, False
        if checker.may_fit(victims) and checker.within_budgets(victims):
            sets.append(victims)
    sets.sort(key=_set_order)
    for victims in sets:
        if checker.checks >= budget:
            return None, False
        if checker.place(victims) is not None:
            return victims, True
    return None, True


def _set_order(victims: tuple[Candidate, ...]) -> tuple[tuple[int, float, GangKey], ...]:
    return tuple(sorted((victim.order for victim in victims), reverse=True))


def _greedy_pruned(checker: _Checker, pool: Sequence[Candidate]) -> tuple[Candidate, ...] | None:
    """Victims in eviction order (each the budgets still allow) until the gang fits, then
    each spared that can be; None when the budgets run out first.

    Every check is bounded by the pool's size, so this ends however large the
    cluster.
    """
    chosen: list[Candidate] | None = None
    taken: list[Candidate] = []
    for candidate in pool:
        if not checker.within_budgets([*taken, candidate]):
            continue
        taken.append(candidate)
        if checker.may_fit(taken) and checker.place(taken) is not None:
            chosen = list(taken)
            break
    if chosen is None:
        return None
    for victim in sorted(chosen, key=lambda c: c.order, reverse=True):
        rest = [c for c in chosen if c is not victim]
        if rest and checker.may_fit(rest) and checker.place(rest) is not None:
            chosen = rest
    return tuple(chosen)
