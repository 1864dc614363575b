"""One scheduling cycle: order gangs, admit PodGroups, keep reservations, place gangs in turn.

The cycle is a pure function of a ``CycleInput``: the shell takes a frozen
snapshot, passes the clock in, and gets back placements to bind and reasons to
report. Nothing here binds, logs or reads the time, so a cycle can be replayed
from its input in a test and gives the same answer every time.

The flow, in the spirit of Volcano's allocate action:

1. Replacements for gangs that already run go first, because a running gang
   that cannot get a dead worker back holds all its other workers idle.
2. Every other gang with pending pods is taken in fair order: the queue
   furthest below its weighted dominant share, then priority, then age.
3. A gang with ``min_resources`` is placed only once admitted, and while
   admitted the part of its ``min_resources`` its bound pods do not yet use is
   reserved: no other gang's placement may eat into it. This is what lets a
   Spark driver start and its executors, created later, still find room.
4. A gang that has waited past ``starvation_seconds`` holds its room against
   the gangs after it, so a stream of small gangs cannot starve a large one.
5. A running gang that lost members holds their room (``holds``) before any
   gang is placed, so its replacements, which operators create a moment after
   the old pods go, find it still free.
6. A gang that does not fit may evict whole gangs of lower priority
   (:mod:`gangsched.core.preemption`). One preemption is under way at a time:
   while its victims go, the preemptor is placed before any other gang and
   holds its room, and no victim is chosen twice.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction

from gangsched.core.backoff import BindRefusal, backoff_reason
from gangsched.core.fairness import dominant_share, gang_order, lowest_share
from gangsched.core.holds import Hold, anywhere, describe, pinned
from gangsched.core.model import (
    DEFAULT_QUEUE,
    Gang,
    GangKey,
    NodeName,
    Pod,
    PodKey,
    Policy,
    QueueName,
    QueueSpec,
)
from gangsched.core.placement import Capacity, Placement, Snapshot, Unplaceable
from gangsched.core.preemption import Candidate, Preemption, choose_victims, shifted
from gangsched.core.resources import Resources
from gangsched.core.topology import Domain, domains_of, place_in_one_domain


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
    bind_refusals: Mapping[PodKey, BindRefusal] = field(default_factory=dict)
    """Pods whose last bind the API server refused: their gangs wait out the backoff."""


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


def run_cycle(inp: CycleInput) -> CycleResult:
    """Decide, for one snapshot, which gangs to place where and why the others wait."""
    return _Cycle(inp).run()


def outstanding(min_resources: Resources, used: Resources) -> Resources:
    """What of a reservation is still unused: per resource ``max(0, min - used)``.

    Clamped at zero because a gang that uses more of one resource than its
    ``min_resources`` does not thereby give another resource back.
    """
    return Resources.of(
        {name: max(0, amount - used.get(name)) for name, amount in min_resources.items()}
    )


def _total(amounts: Iterable[Resources]) -> Resources:
    return Resources.sum(amounts)


class _Cycle:
    """The mutable bookkeeping of one cycle, thrown away when it returns.

    It keeps running totals (free room, reservations, queue allocations)
    rather than summing them for every gang, so a cycle stays linear in the
    number of gangs.
    """

    def __init__(self, inp: CycleInput) -> None:
        self.inp = inp
        keys = [gang.key for gang in inp.gangs]
        if len(set(keys)) != len(keys):
            raise ValueError("CycleInput.gangs holds two gangs with the same key")
        self.gangs = sorted(inp.gangs, key=lambda gang: gang.key)
        self.queues = dict(inp.queues)
        # A default queue exists without anyone creating it.
        self.queues.setdefault(DEFAULT_QUEUE, QueueSpec(DEFAULT_QUEUE))

        nodes = inp.snapshot.nodes
        schedulable = [
            nodes[name].node
            for name in sorted(nodes)
            if nodes[name].node.ready and not nodes[name].node.unschedulable
        ]
        self.cluster_total = _total(node.allocatable for node in schedulable)
        self.capacity = Capacity.from_snapshot(inp.snapshot)
        self.domains: dict[tuple[str, ...], dict[Domain, tuple[NodeName, ...]]] = {}
        # Kept as a running total from here on (see _free_after) rather than
        # summed over the nodes again for every gang.
        self.free = self.capacity.free_total()
        self.held: dict[GangKey, list[tuple[Hold, Placement]]] = {}
        for hold in inp.holds:
            self._take_hold(hold)

        self.bound: dict[GangKey, Resources] = {
            gang.key: inp.bound_requests.get(gang.key, Resources.zero()) for gang in self.gangs
        }
        self.allocated = {name: Resources.zero() for name in self.queues}
        for gang in self.gangs:
            if gang.queue in self.queues:
                self.allocated[gang.queue] = self.allocated[gang.queue] + self.bound[gang.key]

        present = set(keys)
        self.admitted: set[GangKey] = {key for key in inp.admitted if key in present}
        self.newly_admitted: list[GangKey] = []
        # A gang with bound members was admitted in an earlier life even if the
        # shell lost the set (a restart): its pods already run.
        for gang in self.gangs:
            if gang.bound > 0 and gang.key not in self.admitted:
                self._admit(gang)

        self.holding: dict[GangKey, Resources] = {}
        self.reserved = Resources.zero()
        self.queue_reserved: dict[QueueName, Resources] = {
            name: Resources.zero() for name in self.queues
        }
        for gang in self.gangs:
            if gang.key in self.admitted:
                self._hold(gang, outstanding(gang.min_resources, self.bound[gang.key]))

        self.starving: GangKey | None = None
        self.victims_of = {
            victim: preemptor
            for preemptor, victims in inp.preempting.items()
            for victim in victims
        }
        self.preemptions: list[Preemption] = []
        self.placed_pods: list[Pod] = []
        """Pods placed this cycle, in order; only ever added to."""
        self._with_placed: tuple[int, tuple[Pod, ...], Snapshot] | None = None
        """The snapshot with the first N placed pods and the held rooms counted."""
        self.evictable = [g for g in self.gangs if g.preemptible
                          and g.key not in inp.unevictable and inp.bound_pods.get(g.key)]
        """Running gangs that may be evicted now, whole: the only possible victims."""
        self.lowest_evictable = min((g.priority for g in self.evictable), default=None)
        """The lowest priority a victim could have: a gang at or under it evicts nobody."""
        self.placements: list[Placement] = []
        self.unplaceable: list[Unplaceable] = []
        self.unadmitted: list[Unplaceable] = []

    def run(self) -> CycleResult:
        waiting = [gang for gang in self.gangs if gang.pending]
        for gang in self.gangs:
            if gang.queue in self.queues or not (gang.pending or gang.bound == 0):
                continue
            # As Volcano does: it waits, saying so, and never falls back to default.
            missing = Unplaceable(gang.key, f"queue {gang.queue!r} does not exist")
            (self.unplaceable if gang.pending else self.unadmitted).append(missing)
        known = []
        for gang in waiting:
            if gang.queue not in self.queues:
                continue
            preemptor = self.victims_of.get(gang.key)
            if preemptor is not None:
                # Its members are being evicted: a replacement placed now would
                # only be evicted too, and would take the preemptor's room.
                self.unplaceable.append(Unplaceable(
                    gang.key, f"preempted by gang {preemptor}: waiting for its members to go"))
                continue
            held_back = gated_reason(gang) or backoff_reason(
                gang, self.inp.bind_refusals, self.inp.now)
            if held_back is None:
                known.append(gang)
            else:
                # Not _wait: a gang held back by a gate or a refused bind holds
                # no room either, since no amount of room can place it now.
                self.unplaceable.append(Unplaceable(gang.key, held_back))

        replacements = sorted((g for g in known if _is_running(g)), key=gang_order)
        for gang in replacements:
            self._place(gang)
        # A preemptor whose victims are going comes next, before anyone who
        # could take the room it evicted for, and holds that room meanwhile.
        nominated = sorted(
            (g for g in known if g.key in self.inp.preempting and not _is_running(g)),
            key=gang_order,
        )
        for gang in nominated:
            self._consider(gang)
        known = [g for g in known if g.key not in self.inp.preempting]

        # PodGroups with no pods yet still ask for admission, in the same fair
        # order: Kubeflow's training-operator creates no pod of a Volcano job
        # until its PodGroup is Inqueue, so waiting for pods would wait forever.
        unborn = [
            gang for gang in self.gangs
            if not gang.pending and gang.bound == 0 and gang.key not in self.admitted
            and gang.queue in self.queues
        ]
        per_queue: dict[QueueName, list[Gang]] = {}
        for gang in sorted([*(g for g in known if not _is_running(g)), *unborn],
                           key=gang_order):
            per_queue.setdefault(gang.queue, []).append(gang)
        # Reversed so the next gang of a queue is a cheap pop() from the end.
        for gangs in per_queue.values():
            gangs.reverse()
        # The merge: always serve the queue furthest below its share, and
        # recharge it for what it just got, so weights hold within one cycle
        # and not only across many.
        shares = {queue: self._share(queue) for queue in per_queue}
        while shares:
            name = lowest_share(shares)
            queue_gangs = per_queue[name]
            self._consider(queue_gangs.pop())
            if queue_gangs:
                shares[name] = self._share(name)
            else:
                del shares[name]

        return CycleResult(
            placements=tuple(self.placements),
            unplaceable=tuple(self.unplaceable),
            admitted=frozenset(self.admitted),
            newly_admitted=tuple(self.newly_admitted),
            unadmitted=tuple(self.unadmitted),
            holding={
                key: describe((hold, placement.assignments[0][1]) for hold, placement in held)
                for key, held in sorted(self.held.items())
            },
            preemptions=tuple(self.preemptions),
        )

    # -- stages ---------------------------------------------------------------

    def _consider(self, gang: Gang) -> None:
        """Admit the gang if it is not yet, then place its pods if it has any.

        A PodGroup with no pods yet is only admitted or told why not: it has
        nothing to place and, having no pods, nothing to hold for starvation.
        """
        if gang.key not in self.admitted:
            queue = self.queues[gang.queue]
            if not queue.open:
                # A closed queue's gangs cannot run however long they wait, so
                # they hold nothing for starvation either.
                reason = f"queue {queue.name!r} is closed: it admits no new gangs"
                if gang.pending:
                    self.unplaceable.append(Unplaceable(gang.key, reason))
                else:
                    self.unadmitted.append(Unplaceable(gang.key, reason))
                return
            refusal = self._admission_refusal(gang)
            if refusal is not None:
                if gang.pending:
                    self._wait(gang, refusal)
                else:
                    self.unadmitted.append(Unplaceable(gang.key, refusal))
                return
            self._admit(gang)
            self._hold(gang, outstanding(gang.min_resources, self.bound[gang.key]))
        if gang.pending:
            self._place(gang)

    def _admission_refusal(self, gang: Gang) -> str | None:
        """Why the gang cannot be admitted now, or None when it can.

        Checked against the room left after this cycle's earlier placements
        and every reservation already promised, because admitting a gang is
        itself a promise: it would be broken if two admitted gangs counted on
        the same free CPUs.
        """
        if gang.min_resources.is_zero:
            return None
        need = outstanding(gang.min_resources, self.bound[gang.key])
        queue = self.queues[gang.queue]
        if queue.capability is not None:
            committed = self.allocated[queue.name] + self.queue_reserved[queue.name]
            if not queue.capability.allows(committed + need):
                return (
                    f"waiting for admission: minResources {gang.min_resources} would exceed "
                    f"queue {queue.name!r} capability {queue.capability} "
                    f"(allocated {self.allocated[queue.name]}, "
                    f"reserved {self.queue_reserved[queue.name]})"
                )
        if not (self.reserved + need).fits(self.free):
            return (
                f"waiting for admission: minResources {gang.min_resources} do not fit: "
                f"{self.free} free on schedulable nodes, {self.reserved} of it reserved "
                f"by admitted gangs (short {(self.reserved + need).short_of(self.free)})"
            )
        return None

    def _place(self, gang: Gang) -> None:
        """Place the gang, its held room included; if it is not placed, hold that room again."""
        released = self._release_holds(gang.key)
        placed_before = len(self.placements)
        self._place_gang(gang)
        if len(self.placements) == placed_before:
            for hold in released:
                self._take_hold(hold)

    def _place_gang(self, gang: Gang) -> None:
        """Place the gang all-or-nothing, then keep it only if reservations and the cap allow.

        The placement is tried on the scratch capacity first and released
        again when refused, so a refused gang leaves no trace: the gangs after
        it see exactly the room they would have seen without it.
        """
        decision = self._decide(gang)
        if isinstance(decision, Unplaceable):
            if not self._preempt_for(gang, decision.reason):
                self._wait(gang, decision.reason)
            return
        requests = {pod.key: pod.requests for pod in gang.pending}
        placed = _total(requests[pod] for pod, _ in decision.assignments)
        bound_after = self.bound[gang.key] + placed
        own_before = self.holding.get(gang.key, Resources.zero())
        own_after = (
            outstanding(gang.min_resources, bound_after)
            if gang.key in self.admitted
            else Resources.zero()
        )
        free_after = self._free_after(placed)

        others = self.reserved - own_before
        if not others.fits(free_after):
            self.capacity.release(decision)
            self._wait(gang, self._reserved_reason(gang, others, placed, free_after))
            return

        queue = self.queues[gang.queue]
        if queue.capability is not None:
            allocated_after = self.allocated[queue.name] + placed
            reserved_after = self.queue_reserved[queue.name] - own_before + own_after
            if not queue.capability.allows(allocated_after + reserved_after):
                self.capacity.release(decision)
                self._wait(
                    gang,
                    f"queue {queue.name!r} capability {queue.capability} would be exceeded: "
                    f"allocated {self.allocated[queue.name]}, reserved by admitted gangs "
                    f"{reserved_after}, this gang {placed}",
                )
                return

        self.placements.append(decision)
        by_key = {pod.key: pod for pod in gang.pending}
        self.placed_pods.extend(
            replace(by_key[pod], node_name=node) for pod, node in decision.assignments
        )
        self.free = free_after
        self.bound[gang.key] = bound_after
        self.allocated[queue.name] = self.allocated[queue.name] + placed
        self._hold(gang, own_after)

    def _decide(self, gang: Gang) -> Placement | Unplaceable:
        """Where the gang goes on the cycle's capacity: anywhere, or inside one domain."""
        if not gang.topology_keys:
            return self.capacity.place(gang, self.inp.policy)
        domains = self.domains.get(gang.topology_keys)
        if domains is None:
            domains = self.domains[gang.topology_keys] = domains_of(
                self.inp.snapshot, gang.topology_keys
            )
        return place_in_one_domain(self.capacity, gang, self.inp.policy, domains)

    def _wait(self, gang: Gang, reason: str) -> None:
        """Record why the gang waits; the first starving one also holds its room.

        Only the first starving gang in order holds room, so that two starving
        giants cannot between them lock the whole cluster; the next one gets its
        turn once the first is placed. A gang that needs more than the
        schedulable nodes have in all holds nothing: waiting cannot help it.

        The reason names the threshold, not the seconds waited: it becomes pod
        conditions, status and Events, and a text that changed every second
        would rewrite them all every cycle.
        """
        since = self.inp.waiting_since.get(gang.key)
        waited = 0.0 if since is None else self.inp.now - since
        # A partly bound gang needs no waiting time to be urgent: its bound
        # members are stranded until the rest is placed.
        urgent = _partly_bound(gang) or (
            since is not None and waited >= self.inp.starvation_seconds
        )
        if self.starving is None and urgent:
            pending = _total(pod.requests for pod in gang.pending)
            hold = Resources.max_each(
                outstanding(gang.min_resources, self.bound[gang.key]), pending
            )
            if hold.fits(self.cluster_total):
                self.starving = gang.key
                self._hold(gang, hold)
                reason = f"{self._urgency(gang)}: holding {hold} for it; {reason}"
            else:
                reason = (
                    f"{self._urgency(gang)} but needs {hold}, more than the "
                    f"schedulable nodes have ({self.cluster_total}); {reason}"
                )
        self.unplaceable.append(Unplaceable(gang.key, reason))

    # -- preemption -----------------------------------------------------------

    def _preempt_for(self, gang: Gang, reason: str) -> bool:
        """Hold room for a preemptor whose victims are going, or start a preemption.

        True when the gang's wait is accounted for here (held, with its
        reason); False when it just waits like any other gang.
        """
        victims = self.inp.preempting.get(gang.key)
        if victims is not None:
            self._hold_for_preemptor(
                gang, f"preempted {len(victims)} gang(s) ({', '.join(sorted(victims))})",
                "until they are gone", reason)
            return True
        if not self._may_preempt(gang):
            return False
        candidates = self._candidates(gang)
        if not candidates:
            return False
        chosen = choose_victims(
            self._snapshot_with_placed(),
            gang,
            candidates,
            gang.policy or self.inp.policy,
            room=lambda freed, placement: self._room_after_eviction(gang, freed, placement),
        )
        if chosen is None:
            return False
        self.preemptions.append(chosen)
        self._hold_for_preemptor(
            gang,
            f"preempting {len(chosen.victims)} gang(s) of lower priority "
            f"({', '.join(chosen.victims)})",
            "for it", reason)
        return True

    def _hold_for_preemptor(self, gang: Gang, what: str, until: str, reason: str) -> None:
        pending = _total(pod.requests for pod in gang.pending)
        hold = Resources.max_each(outstanding(gang.min_resources, self.bound[gang.key]), pending)
        self._hold(gang, hold)
        self.unplaceable.append(Unplaceable(gang.key, f"{what}; holding {hold} {until}; {reason}"))

    def _may_preempt(self, gang: Gang) -> bool:
        """One preemption at a time: a second chosen while the first's victims are still
        going would see their room as taken and evict more than needed."""
        return (
            self.inp.preemption
            and not self.inp.preempting
            and not self.preemptions
            and gang.preempts
            and not gang.topology_keys
            and gang.bound == 0
        )

    def _snapshot_with_placed(self) -> Snapshot:
        """The snapshot with this cycle's placements and the rooms held for other gangs'
        replacements counted, as the placement after an eviction will find them.

        Shifted only by the pods placed since it was last asked for: a cycle that
        places thousands of pods and then finds a thousand gangs that wait must
        not count every placed pod again for each of them.
        """
        held = tuple(
            replace(hold.pod, node_name=placement.assignments[0][1], terminal=False)
            for holds in self.held.values() for hold, placement in holds
        )
        kept = self._with_placed
        if kept is not None and kept[1] == held:
            snapshot = shifted(kept[2], add=self.placed_pods[kept[0]:])
        else:
            snapshot = shifted(self.inp.snapshot, add=[*self.placed_pods, *held])
        self._with_placed = (len(self.placed_pods), held, snapshot)
        return snapshot

    def _candidates(self, gang: Gang) -> list[Candidate]:
        """Running gangs of lower priority that may be evicted now, whole."""
        if self.lowest_evictable is None or self.lowest_evictable >= gang.priority:
            return []
        placed = {placement.gang for placement in self.placements}
        return [
            Candidate(other.key, other.priority, other.created,
                      tuple(self.inp.bound_pods[other.key]))
            for other in self.evictable
            if other.priority < gang.priority and other.key not in placed
        ]

    def _room_after_eviction(self, gang: Gang, freed: Resources, placement: Placement) -> bool:
        """Whether the placement found after evicting keeps every other promise:
        reservations of admitted gangs and the gang's queue capability."""
        requests = {pod.key: pod.requests for pod in gang.pending}
        placed = _total(requests[pod] for pod, _ in placement.assignments)
        others = self.reserved - self.holding.get(gang.key, Resources.zero())
        if not others.fits(self.free + freed - placed):
            return False
        queue = self.queues[gang.queue]
        if queue.capability is None:
            return True
        committed = self.allocated[queue.name] + self.queue_reserved[queue.name] + placed
        return queue.capability.allows(committed)

    def _urgency(self, gang: Gang) -> str:
        if _partly_bound(gang):
            return f"partly bound ({gang.bound} of {gang.min_member})"
        return f"starving (unplaced over {self.inp.starvation_seconds:g}s)"

    # -- bookkeeping ----------------------------------------------------------

    def _share(self, queue: QueueName) -> Fraction:
        return dominant_share(self.allocated[queue], self.cluster_total, self.queues[queue].weight)

    def _admit(self, gang: Gang) -> None:
        self.admitted.add(gang.key)
        self.newly_admitted.append(gang.key)

    def _hold(self, gang: Gang, amount: Resources) -> None:
        """Set what the gang holds, keeping the cluster and queue totals in step."""
        before = self.holding.get(gang.key, Resources.zero())
        if amount.is_zero:
            self.holding.pop(gang.key, None)
        else:
            self.holding[gang.key] = amount
        self.reserved = self.reserved - before + amount
        if gang.queue in self.queue_reserved:
            self.queue_reserved[gang.queue] = self.queue_reserved[gang.queue] - before + amount

    def _take_hold(self, hold: Hold) -> None:
        """Take a departed member's room from the capacity: on its node, else where it fits.

        Where it fits nowhere (a node went away), nothing is held: there is
        no room to keep, and pretending would only block other gangs.
        """
        for stand_in in (pinned(hold.pod), anywhere(hold.pod)):
            decision = self.capacity.place(
                Gang(hold.gang, min_member=1, pending=(stand_in,)), self.inp.policy
            )
            if isinstance(decision, Placement):
                self.held.setdefault(hold.gang, []).append((hold, decision))
                self.free = self.free - stand_in.requests
                return

    def _release_holds(self, gang: GangKey) -> list[Hold]:
        released = []
        for hold, placement in self.held.pop(gang, []):
            self.capacity.release(placement)
            self.free = self.free + hold.pod.requests
            released.append(hold)
        return released

    def _free_after(self, placed: Resources) -> Resources:
        """The free room on schedulable nodes once ``placed`` is taken from it.

        Subtracting is exact: a pod only lands where it fits, so it never
        takes from room a node does not have.
        """
        return self.free - placed

    def _reserved_reason(
        self, gang: Gang, others: Resources, placed: Resources, free_after: Resources
    ) -> str:
        starving = ""
        if self.starving is not None and self.starving != gang.key:
            held = self.holding[self.starving]
            starving = f" ({held} of it held for starving gang {self.starving})"
        return (
            f"resources reserved by admitted gangs: {others}{starving}; "
            f"placing {placed} would leave {free_after} free"
        )


def gated_reason(gang: Gang) -> str | None:
    """Why a gang with a gated pending member waits, or None when none is gated.

    The API server refuses to bind a pod that still has ``schedulingGates``, so
    placing the rest of its gang would split it: the gang waits whole, and is
    not even tried, until every gate of its pending members is lifted.
    """
    gated = [pod for pod in gang.pending if pod.gates]
    if not gated:
        return None
    first = gated[0]
    others = f" (and {len(gated) - 1} more pods of the gang)" if len(gated) > 1 else ""
    return (
        f"waiting for scheduling gates to be lifted: pod {first.key} has "
        f"{', '.join(first.gates)}{others}"
    )


def _is_running(gang: Gang) -> bool:
    """A gang with members bound goes first: its pending pods replace dead members or
    complete a gang whose binding was cut short, and until they are placed the bound
    members hold their nodes without making progress."""
    return gang.bound > 0


def _partly_bound(gang: Gang) -> bool:
    """Fewer than ``min_member`` bound: the gang holds nodes and cannot start."""
    return 0 < gang.bound < gang.min_member
