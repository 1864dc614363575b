"""Many cycles in a row, with what one cycle leaves carried into the next.

A single cycle can keep every promise and a sequence still break one: a hold
taken one cycle and never released, a member that terminates still counted,
a gang that can never be whole holding room for ever. So the world here is
carried by hand from cycle to cycle, as the shell carries it: placements
become bound pods, admissions and waiting times are passed back, departed
members' rooms are held (core.placement.holds), and between cycles members terminate
(still on their node, no longer members), go, and come back under their names.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from hypothesis import given, settings
from hypothesis import strategies as st

from gangsched.core.model.objects import (
    DEFAULT_QUEUE,
    Gang,
    GangKey,
    Pod,
    PodKey,
    Policy,
    QueueSpec,
)
from gangsched.core.model.resources import Resources
from gangsched.core.placement.capacity import Snapshot
from gangsched.core.placement.holds import GroupLife, Hold, Seat, seats_of, update_holds
from gangsched.core.reasons import (
    HeldForStarving,
    ReservedByAdmitted,
    ShortOfMembers,
    Starving,
)
from gangsched.core.stages.cycle import CycleInput, CycleResult, run_cycle
from tests.unit.test_cycle import node, pod

STARVATION_S = 2.0
GRACE_S = 3.0


@dataclass(frozen=True)
class Spec:
    key: GangKey
    min_member: int
    pods: int
    cores: int
    priority: int


@dataclass
class World:
    """What the shell would carry: pods where they are, and the state between cycles."""

    specs: dict[GangKey, Spec]
    pending: dict[PodKey, Pod] = field(default_factory=dict)
    running: dict[PodKey, Pod] = field(default_factory=dict)
    terminating: dict[PodKey, Pod] = field(default_factory=dict)
    admitted: frozenset[GangKey] = frozenset()
    waiting_since: dict[GangKey, float] = field(default_factory=dict)
    holds: tuple[Hold, ...] = ()
    seats: dict[PodKey, Seat] = field(default_factory=dict)
    preempting: dict[GangKey, frozenset[GangKey]] = field(default_factory=dict)

    def gangs(self) -> tuple[Gang, ...]:
        return tuple(
            Gang(spec.key, spec.min_member,
                 pending=tuple(sorted((p for p in self.pending.values() if p.gang == spec.key),
                                      key=lambda p: p.key)),
                 bound=sum(1 for p in self.running.values() if p.gang == spec.key),
                 priority=spec.priority)
            for spec in self.specs.values()
        )

    def members(self, gang: GangKey) -> tuple[Pod, ...]:
        return tuple(p for p in self.running.values() if p.gang == gang)


NODES = [node("n1", 4), node("n2", 4), node("n3", 2)]
ALLOCATABLE = {n.name: n.allocatable for n in NODES}


@st.composite
def specs(draw: st.DrawFn) -> dict[GangKey, Spec]:
    out = {}
    for i in range(draw(st.integers(2, 5))):
        min_member = draw(st.integers(1, 4))
        # Some gangs have fewer pods than minMember: they can never be whole.
        pods = draw(st.integers(max(1, min_member - 1), min_member + 2))
        key = GangKey(f"ns/g{i}")
        out[key] = Spec(key, min_member, pods, draw(st.integers(1, 2)), draw(st.integers(0, 2)))
    return out


EVENTS = st.lists(st.tuples(st.sampled_from(["terminate", "gone", "back"]), st.integers(0, 20)),
                  max_size=3)


@settings(max_examples=80, deadline=None)
@given(specs=specs(), steps=st.lists(EVENTS, min_size=3, max_size=8))
def test_promises_hold_over_consecutive_cycles(
    specs: dict[GangKey, Spec], steps: list[list[tuple[str, int]]]
) -> None:
    world = World(specs)
    for spec in specs.values():
        for i in range(spec.pods):
            member = pod(f"{spec.key}-{i}", spec.cores, gang=spec.key)
            world.pending[member.key] = replace(member, priority=spec.priority)
    now = 0.0
    left: dict[PodKey, Pod] = {}
    for events in steps:
        now += 1.0
        for kind, index in events:
            _happen(world, left, kind, index)
        result = _cycle(world, now)
        _check(world, result)
        _carry(world, result, now)


def _happen(world: World, left: dict[PodKey, Pod], kind: str, index: int) -> None:
    """Between cycles: a member starts terminating, a terminating one is gone, or one
    that left comes back under its name, pending."""
    if kind == "terminate" and world.running:
        key = sorted(world.running)[index % len(world.running)]
        world.terminating[key] = world.running.pop(key)
    elif kind == "gone" and world.terminating:
        key = sorted(world.terminating)[index % len(world.terminating)]
        left[key] = world.terminating.pop(key)
    elif kind == "back" and left:
        key = sorted(left)[index % len(left)]
        if key not in world.pending and key not in world.running and key not in world.terminating:
            world.pending[key] = replace(left.pop(key), node_name=None)


def _cycle(world: World, now: float) -> CycleResult:
    seats = seats_of((p, p.gang) for p in world.running.values())
    lives = {key: GroupLife("uid", spec.min_member) for key, spec in world.specs.items()}
    world.holds = update_holds(world.seats, seats, world.holds, lives, (), now=now, grace=GRACE_S)
    world.seats = seats
    members = {key: world.members(key) for key in world.specs}
    return run_cycle(CycleInput(
        # Terminating pods still take their node's room.
        snapshot=Snapshot.build(NODES, [*world.running.values(), *world.terminating.values()]),
        gangs=world.gangs(),
        bound_requests={k: Resources.sum(p.requests for p in pods) for k, pods in members.items()},
        queues={DEFAULT_QUEUE: QueueSpec(DEFAULT_QUEUE)},
        admitted=world.admitted,
        waiting_since=world.waiting_since,
        now=now,
        policy=Policy.BINPACK,
        starvation_seconds=STARVATION_S,
        holds=world.holds,
        bound_pods=members,
        preemption=True,
        preempting=world.preempting,
    ))


def _check(world: World, result: CycleResult) -> None:
    used = {name: Resources.zero() for name in ALLOCATABLE}
    for placed in (*world.running.values(), *world.terminating.values()):
        assert placed.node_name is not None
        used[placed.node_name] = used[placed.node_name] + placed.requests
    gangs = {gang.key: gang for gang in world.gangs()}
    for placement in result.placements:
        gang = gangs[placement.gang]
        assert gang.bound + len(placement.assignments) >= gang.min_member, "a gang bound part"
        for key, name in placement.assignments:
            used[name] = used[name] + world.pending[key].requests
    for name, amount in used.items():
        assert amount.fits(ALLOCATABLE[name]), f"{name} over its allocatable: {amount}"

    def could_run(key: GangKey) -> bool:
        gang = gangs[key]
        return len(gang.pending) + gang.bound >= gang.min_member

    for waiting in result.unplaceable:
        reason = waiting.reason
        if isinstance(reason, Starving):
            assert could_run(waiting.gang), f"{waiting.gang} holds room it can never use"
        if isinstance(reason, ReservedByAdmitted | HeldForStarving) and reason.starving is not None:
            assert could_run(reason.starving), "a gang waits behind one that cannot run"
        if isinstance(reason, ShortOfMembers):
            assert not could_run(waiting.gang)


def _carry(world: World, result: CycleResult, now: float) -> None:
    """What the shell does after a cycle: assume the placements bound, pass the rest back."""
    for placement in result.placements:
        for key, name in placement.assignments:
            world.running[key] = replace(world.pending.pop(key), node_name=name)
    reasons = {u.gang for u in (*result.unplaceable, *result.unadmitted)}
    world.waiting_since = {gang: world.waiting_since.get(gang, now) for gang in reasons}
    world.admitted = result.admitted
    # A preemption ends when its preemptor is placed or waits no more.
    placed = {placement.gang for placement in result.placements}
    world.preempting = {
        key: victims for key, victims in world.preempting.items()
        if key not in placed and any(p.gang == key for p in world.pending.values())
    }
    for preemption in result.preemptions:
        # The evictions succeed at once: the victims' pods start terminating.
        world.preempting[preemption.preemptor] = frozenset(preemption.victims)
        for key in preemption.pods:
            if key in world.running:
                world.terminating[key] = world.running.pop(key)
