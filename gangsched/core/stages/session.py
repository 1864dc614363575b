"""The mutable bookkeeping of one cycle, shared by its stages and thrown away when it returns.

It keeps running totals (free room, reservations, queue allocations) rather
than summing them for every gang, so a cycle stays linear in the number of
gangs. Only the stages write to it; the cycle's answer is read from it once
at the end (:meth:`Session.result`). A stage that tries something opens a
:class:`~gangsched.core.stages.statement.Statement` (:meth:`Session.open`) and
commits or discards what it changed under it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction
from functools import partial

from gangsched.core.dra.devices import DeviceRef
from gangsched.core.dra.extended import left_to_devices
from gangsched.core.dra.usage import (
    capability_in_ledger,
    claim_devices,
    claims_of,
    device_totals,
    in_ledger,
    renames,
)
from gangsched.core.model.objects import (
    DEFAULT_QUEUE,
    DisruptionBudget,
    Gang,
    GangKey,
    NodeName,
    Pod,
    PodKey,
    Policy,
    QueueName,
    QueueSpec,
)
from gangsched.core.model.resources import Resources
from gangsched.core.placement.capacity import Capacity, Placement, Snapshot, Unplaceable
from gangsched.core.placement.holds import Hold, anywhere, describe, pinned
from gangsched.core.placement.preemption import Preemption
from gangsched.core.placement.topology import Domain, domains_of
from gangsched.core.queues.hierarchy import (
    CapHit,
    FairKey,
    build_tree,
    cap_hit,
    deserved_shares,
    fair_key,
)
from gangsched.core.reasons import Reason
from gangsched.core.stages.backoff import BindRefusal
from gangsched.core.stages.pins import Pins
from gangsched.core.stages.statement import Statement, Undo


@dataclass(frozen=True, slots=True)
class CycleInput:
    """Everything one cycle decides from; the clock is ``now`` so the cycle never reads it.

    ``gangs`` holds every active gang, including admitted gangs with no
    pending pods: a Spark job whose driver runs and whose executors do not yet
    exist still holds a reservation. ``bound_requests`` are the summed
    effective requests of each gang's non-terminal bound pods; they measure
    both what a gang has used of its reservation and its queue's allocation.
    """

    snapshot: Snapshot
    gangs: tuple[Gang, ...]
    bound_requests: Mapping[GangKey, Resources]
    queues: Mapping[QueueName, QueueSpec]
    admitted: frozenset[GangKey]
    waiting_since: Mapping[GangKey, float]
    now: float
    policy: Policy
    starvation_seconds: float = 60.0
    holds: tuple[Hold, ...] = ()
    """Rooms of departed members held for their gangs' replacements (see ``holds``)."""
    bound_pods: Mapping[GangKey, tuple[Pod, ...]] = field(default_factory=dict)
    """The live pods each gang has on nodes: what evicting it would free."""
    preemption: bool = False
    preempting: Mapping[GangKey, frozenset[GangKey]] = field(default_factory=dict)
    """Preemptions under way: preemptor to the victims whose pods are going."""
    unevictable: frozenset[GangKey] = frozenset()
    """Gangs the Eviction API refused lately (a PodDisruptionBudget): not victims now."""
    budgets: tuple[DisruptionBudget, ...] = ()
    """PodDisruptionBudgets: victims are chosen so that none of them is exceeded."""
    bind_refusals: Mapping[PodKey, BindRefusal] = field(default_factory=dict)
    """Pods whose last bind the API server refused: their gangs wait out the backoff."""
    reclaim: bool = False
    """Whether a queue below its deserved share may evict gangs of queues above theirs
    (see core.stages.reclaim); it needs ``preemption`` too."""
    reclaim_paused: frozenset[QueueName] = frozenset()
    """Queues that reclaimed lately: they reclaim no more until their interval is over."""
    estimated_starts: Mapping[GangKey, float] = field(default_factory=dict)
    """When waiting gangs are expected to start (core.forecast): the starving gang's is
    the time of its reservation, which a gang may backfill before."""
    backfill: bool = True
    """Whether a gang whose expected end comes before the starving gang's reservation may
    use the room held for it (EASY backfill)."""


@dataclass(frozen=True, slots=True)
class CycleResult:
    """What the shell acts on.

    ``placements`` are in the order to bind. ``unplaceable`` has one entry for
    every gang with pending pods that was not placed, so every waiting pod
    gets a reason. ``admitted`` is the set to pass back as the next cycle's
    input; ``newly_admitted`` are the gangs whose PodGroup turns Inqueue now.
    ``unadmitted`` says why PodGroups that have no pods yet were not admitted:
    no pod waits on them, but their PodGroup status shows it.
    """

    placements: tuple[Placement, ...]
    unplaceable: tuple[Unplaceable, ...]
    admitted: frozenset[GangKey]
    newly_admitted: tuple[GangKey, ...]
    unadmitted: tuple[Unplaceable, ...] = ()
    holding: Mapping[GangKey, str] = field(default_factory=dict)
    """Gangs still holding the room of departed members after this cycle, and what they hold."""
    preemptions: tuple[Preemption, ...] = ()
    """New preemptions to carry out: evict every victim pod, then the preemptor fits."""


@dataclass(frozen=True, slots=True)
class Waits:
    """A stage's answer that the gang waits with ``reason`` through the last stage
    (:mod:`~gangsched.core.stages.starve`), which may hold room for it. A stage answers
    True when it settled the gang's turn itself (placed it, or told why it waits), False
    when it had nothing to do."""

    reason: Reason


def outstanding(min_resources: Resources, used: Resources) -> Resources:
    """What of a reservation is still unused: per resource ``max(0, min - used)``.

    Clamped at zero because a gang that uses more of one resource than its
    ``min_resources`` does not thereby give another resource back.
    """
    return Resources.of(
        {name: max(0, amount - used.get(name)) for name, amount in min_resources.items()}
    )


def total(amounts: Iterable[Resources]) -> Resources:
    return Resources.sum(amounts)


def pending_need(gang: Gang, bound: Resources) -> Resources:
    """What a waiting gang needs held for it: its unused reservation or its pending pods
    with the devices their claims will take, whichever is larger per resource."""
    pending = total(pod.requests for pod in gang.pending) + gang.claimed
    return Resources.max_each(outstanding(gang.min_resources, bound), pending)


def schedulable_total(snapshot: Snapshot) -> Resources:
    """What the ready, uncordoned nodes can hold, their devices of each class included:
    the whole that queue shares are parts of."""
    index = snapshot.index
    if snapshot.devices.empty:
        return index.schedulable_total
    return index.schedulable_total + device_totals(snapshot.devices, index.schedulable_nodes)


class Session:
    """The running totals and answers of one cycle; every stage reads and updates them."""

    def __init__(self, inp: CycleInput) -> None:
        self.inp = inp
        self.statement: Statement | None = None  # the innermost open: it records undos
        keys = [gang.key for gang in inp.gangs]
        if len(set(keys)) != len(keys):
            raise ValueError("CycleInput.gangs holds two gangs with the same key")
        self.gangs = sorted(inp.gangs, key=lambda gang: gang.key)
        self.renames = renames(inp.snapshot.devices)
        """Implicit DeviceClass names read as the classes' extended resource names."""
        self.queues = _queues(inp.queues, self.renames)
        self.tree = build_tree(self.queues)
        self._deserved: Mapping[QueueName, Fraction] | None = None

        self.cluster_total = schedulable_total(inp.snapshot)
        self.capacity = Capacity.from_snapshot(inp.snapshot)
        self.domains: dict[tuple[str, ...], dict[Domain, tuple[NodeName, ...]]] = {}
        # A running total from here on, not summed over the nodes again for every gang.
        self.free = self.capacity.free_total()
        self.held: dict[GangKey, list[tuple[Hold, Placement]]] = {}
        for hold in inp.holds:
            take_hold(self, hold)

        self.bound: dict[GangKey, Resources] = {
            gang.key: inp.bound_requests.get(gang.key, Resources.zero()) for gang in self.gangs
        }
        held: dict[QueueName, list[Resources]] = {name: [] for name in self.queues}
        for gang in self.gangs:
            if gang.queue in held:
                held[gang.queue].append(self.bound[gang.key])
        # Summed once per queue: every pod in no PodGroup is a gang of its own here.
        self.allocated = {name: Resources.sum(amounts) for name, amounts in held.items()}

        present = {gang.key for gang in inp.gangs if gang.kueue_workload is None}  # see triage
        self.admitted: set[GangKey] = {key for key in inp.admitted if key in present}
        self.newly_admitted: list[GangKey] = []
        # A gang with bound members was admitted in an earlier life even if the
        # shell lost the set (a restart): its pods already run.
        for gang in self.gangs:
            if gang.bound > 0 and gang.key not in self.admitted and gang.key in present:
                self.admit(gang)

        self.holding: dict[GangKey, Resources] = {}
        self.pinned: dict[GangKey, Resources] = {}
        """The part of a gang's hold taken from the capacity on nodes it chose."""
        self.reserved = Resources.zero()
        self.queue_reserved: dict[QueueName, Resources] = {
            name: Resources.zero() for name in self.queues
        }
        for gang in self.gangs:
            if gang.key in self.admitted and not gang.min_resources.is_zero:
                self.hold(gang, outstanding(gang.min_resources, self.bound[gang.key]))

        self.starving: GangKey | None = None
        self.pins = Pins(self.capacity)
        self.victims_of = {
            victim: preemptor
            for preemptor, victims in inp.preempting.items()
            for victim in victims
        }
        self.preemptions: list[Preemption] = []
        self.sole_users: dict[str, PodKey] = {}
        """ReadWriteOncePod claims of the pods placed this cycle, to the pod using each."""
        self.placed_pods: list[tuple[Pod, NodeName]] = []
        """Pods placed this cycle and their nodes, in order; only ever added to. Kept as
        pairs: the pods as placed are made only when preemption reads them."""
        self.with_placed: tuple[int, tuple[Pod, ...], Snapshot] | None = None
        """The snapshot with the first N placed pods and the held rooms counted."""
        self.evictable = [g for g in self.gangs
                          if g.key not in inp.unevictable and inp.bound_pods.get(g.key)]
        """Running gangs that may be evicted now, whole: the only possible victims. Reclaim
        takes any of them its queues allow; priority preemption only those whose group
        did not opt out (``Gang.preemptible``): a tenant's annotation is no admin's
        ``reclaimable``."""
        self.lowest_evictable = min((g.priority for g in self.evictable if g.preemptible),
                                    default=None)
        """The lowest priority a victim of priority preemption could have: a gang at or
        under it evicts nobody by priority."""
        self.placements: list[Placement] = []
        self.unplaceable: list[Unplaceable] = []
        self.unadmitted: list[Unplaceable] = []

    def result(self) -> CycleResult:
        placements = _merged(self.placements)
        placed = {placement.gang for placement in placements}
        return CycleResult(
            placements=placements,
            # A gang whose replacements were placed and whose extras were not is
            # placed this cycle; its extras wait for the next without a gang reason.
            unplaceable=tuple(u for u in self.unplaceable if u.gang not in placed),
            admitted=frozenset(self.admitted),
            newly_admitted=tuple(self.newly_admitted),
            unadmitted=tuple(self.unadmitted),
            holding={
                key: describe((hold, placement.assignments[0][1]) for hold, placement in held)
                for key, held in sorted(self.held.items())
            },
            preemptions=tuple(self.preemptions),
        )

    def deserved(self) -> Mapping[QueueName, Fraction]:
        """Every valid queue's deserved share among the queues with gangs, worked out once
        per cycle and only when a reclaim asks for it."""
        if self._deserved is None:
            self._deserved = deserved_shares(self.tree, {gang.queue for gang in self.gangs})
        return self._deserved

    def fair_key(self, queue: QueueName) -> FairKey:
        """Where the queue stands in the fair order now (see core.queues.hierarchy.fair_key)."""
        return fair_key(self.tree, self.allocated, self.cluster_total, queue)

    def cap_hit(self, queue: QueueName, extra: Resources) -> CapHit | None:
        """The capability on the queue's path up the tree that ``extra`` more would exceed."""
        return cap_hit(self.tree, self.allocated, self.queue_reserved, queue,
                       in_ledger(extra, self.renames))

    def room(self, amount: Resources) -> Resources:
        """The amount as node room counts it: devices served through claims left out (no
        node lists them; the device search finds where they are). Every comparison of a
        need or a hold with the free room (``free``, ``reserved``) reads it so."""
        inventory = self.inp.snapshot.devices
        return left_to_devices(amount, inventory.extended,
                               self.inp.snapshot.index.schedulable_total)

    def admit(self, gang: Gang) -> None:
        self.admitted.add(gang.key)
        self.newly_admitted.append(gang.key)

    def hold(self, gang: Gang, amount: Resources, pinned: Resources | None = None) -> None:
        """Set what the gang holds, keeping the cluster and queue totals in step.

        ``pinned`` is the part of it already taken from the capacity on chosen
        nodes (see :meth:`pin`): the gangs after it cannot have that room
        anyway, so it is not counted against them twice.
        """
        if self.statement is not None:
            self.statement.record(self._holding_again(gang))
        before = self.holding.get(gang.key, Resources.zero())
        before_pinned = self.pinned.pop(gang.key, Resources.zero())
        if amount.is_zero:
            self.holding.pop(gang.key, None)
        else:
            self.holding[gang.key] = amount
        if pinned is not None and not pinned.is_zero:
            self.pinned[gang.key] = pinned
        else:
            pinned = Resources.zero()
        self.reserved = self.reserved - self.room(before - before_pinned) + self.room(
            amount - pinned)
        if gang.queue in self.queue_reserved:
            self.queue_reserved[gang.queue] = (self.queue_reserved[gang.queue]
                                               - in_ledger(before, self.renames)
                                               + in_ledger(amount, self.renames))

    def _holding_again(self, gang: Gang) -> Undo:
        """The undo of :meth:`hold`: the gang's hold and the totals as they are now."""
        holding, pinned = self.holding.get(gang.key), self.pinned.get(gang.key)
        reserved, queue_reserved = self.reserved, self.queue_reserved.get(gang.queue)

        def undo() -> None:
            for held, amount in ((self.holding, holding), (self.pinned, pinned)):
                if amount is None:
                    held.pop(gang.key, None)
                else:
                    held[gang.key] = amount
            self.reserved = reserved
            if queue_reserved is not None:
                self.queue_reserved[gang.queue] = queue_reserved
        return undo

    def open(self) -> Statement:
        """A statement for tentative changes, nested in the one open now if any."""
        self.statement = Statement(self.statement, self._closed)
        return self.statement

    def _closed(self, statement: Statement) -> None:
        if statement is not self.statement:
            raise ValueError("a statement was closed while one nested in it was open")
        self.statement = statement.outer

    def for_good(self) -> None:
        """Holds and pins move only between trials: no statement could take them back."""
        if self.statement is not None:
            raise ValueError("holds and pins change for good, not under a statement")

    def record(self, undo: Undo) -> None:
        """Leave the undo of a change with the open statement, if any."""
        if self.statement is not None:
            self.statement.record(undo)

    def took(self, decision: Placement) -> Placement:
        """A placement the capacity just made: the statement gives its room back on discard."""
        self.record(partial(self.capacity.release, decision))
        return decision

    def tell(self, gang: Gang, reason: Reason) -> None:
        """Record why a gang with pending pods waits."""
        self.unplaceable.append(Unplaceable(gang.key, reason))
        self.record(self._untell)

    def _untell(self) -> None:
        self.unplaceable.pop()

    def domains_of(self, gang: Gang) -> Mapping[Domain, tuple[NodeName, ...]]:
        """The domains of the gang's topology keys."""
        return self.domains_for(gang.topology_keys)

    def domains_for(self, keys: tuple[str, ...]) -> Mapping[Domain, tuple[NodeName, ...]]:
        """The domains of a set of keys, found once per cycle for each."""
        domains = self.domains.get(keys)
        if domains is None:
            domains = self.domains[keys] = domains_of(self.inp.snapshot, keys)
        return domains




def claimed_by(session: Session, gang: Gang, placement: Placement) -> Resources:
    """The devices the claims of the placement's pods take, but those of claims the
    gang's bound pods hold already (counted in its usage): a claim counts once. A claim
    allocated before (its pod's bind was refused) needs no write, and counts too."""
    placed = {pod for pod, _ in placement.assignments}
    pods = [pod for pod in gang.pending if pod.key in placed and pod.resource_claims]
    if not pods:
        return Resources.zero()
    inventory = session.inp.snapshot.devices
    held = claims_of(session.inp.bound_pods.get(gang.key, ()), inventory)
    claims = claims_of(pods, inventory)
    allocations = {write.claim: write.allocation for write in placement.claims
                   if write.allocation is not None}
    return claim_devices((claim for key, claim in claims.items() if key not in held),
                         inventory, allocations)


def take_hold(session: Session, hold: Hold) -> None:
    """Take a departed member's room from the capacity: on its node, with those of its
    devices free there, else where it fits.

    Where it fits nowhere (a node went away), nothing is held: there is
    no room to keep, and pretending would only block other gangs. A node made for
    the gang is held on that node or not at all.
    """
    session.for_good()
    tries = ((pinned(hold.pod), hold.devices),) if hold.bought else (
        (pinned(hold.pod), hold.devices), (anywhere(hold.pod), ()))
    for stand_in, devices in tries:
        decision = session.capacity.place(
            Gang(hold.gang, min_member=1, pending=(stand_in,)), session.inp.policy
        )
        if isinstance(decision, Placement):
            decision = session.capacity.hold_devices(decision, devices)
            session.held.setdefault(hold.gang, []).append((hold, decision))
            session.free = session.free - stand_in.requests
            return


def release_holds(session: Session, gang: GangKey) -> list[Hold]:
    """Give the rooms held for the gang's departed members back to the capacity."""
    session.for_good()
    released = []
    for hold, placement in session.held.pop(gang, []):
        session.capacity.release(placement)
        session.free = session.free + hold.pod.requests
        released.append(hold)
    return released


def pin(session: Session, gang: GangKey, pod: PodKey, node: NodeName, room: Resources,
        devices: Iterable[DeviceRef] = ()) -> None:
    """Pin ``room``, free on ``node``, and those of ``devices`` free there, for the
    rest of the cycle: a starving gang's room on a node it chose for its pod ``pod``."""
    session.for_good()
    session.pins.pin(gang, pod, node, room, devices)
    session.free = session.free - room


def repin(session: Session, starving: GangKey) -> None:
    """Pin again what is still free of each pin (see :meth:`Pins.repin`). The starving
    gang's hold keeps its total; the part no longer pinned is held in the cluster's
    total instead."""
    session.for_good()
    was, now = session.pins.repin()
    if now == was:
        return
    session.free = session.free + was - now
    gang = next(g for g in session.gangs if g.key == starving)
    session.hold(gang, session.holding.get(starving, Resources.zero()), now)


def unpin(session: Session) -> Resources:
    """Give the starving gang's pinned room back to the capacity (see :meth:`Pins.unpin`);
    the statement pins it again, exactly, on discard. Returns the room."""
    released = session.pins.unpin()
    session.record(partial(session.pins.pin_again, released))
    return Resources.sum(room for _, room in released)


def _queues(queues: Mapping[QueueName, QueueSpec], names: Mapping[str, str]
            ) -> dict[QueueName, QueueSpec]:
    """The queues with the default one, which exists without anyone creating it, and
    their capabilities in the ledger's names of devices."""
    found = dict(queues)
    found.setdefault(DEFAULT_QUEUE, QueueSpec(DEFAULT_QUEUE))
    if names:
        found = {name: spec if spec.capability is None else replace(
            spec, capability=capability_in_ledger(spec.capability, names))
            for name, spec in found.items()}
    return found


def _merged(placements: Iterable[Placement]) -> tuple[Placement, ...]:
    """One placement per gang, at its first place in the order: a gang whose replacements
    went first and whose extras were placed in their queue's turn is bound as one."""
    merged: dict[GangKey, Placement] = {}
    for placement in placements:
        before = merged.get(placement.gang)
        merged[placement.gang] = placement if before is None else Placement(
            placement.gang, before.assignments + placement.assignments,
            before.claims + placement.claims)
    return tuple(merged.values())
