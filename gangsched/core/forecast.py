"""When each waiting gang is expected to start: the cycle itself, run forward in time.

Users ask "when will my gang start?". The honest answer comes from the same
decisions the scheduler will take, not from a second, simpler scheduler that
would disagree with it: from the cycle's input and answer, the running gangs
end at their expected ends (:mod:`gangsched.core.model.runtimes`), and at each such
moment :func:`~gangsched.core.stages.cycle.run_cycle` decides again over the room
they free, with the clock at that moment (so starvation, reservations and
backfill play out as they will). The moment a waiting gang is placed is its
estimated start.

What is not known is said: a gang still waiting once every gang of known
runtime has ended, while a gang of unknown runtime still runs, has an unknown
start, and so does one beyond the forecast's bounds. Preemption is left out
(what it would evict is not decided before it happens). Devices follow the
gangs: a gang placed holds the claims it was given, and a gang that ends lets
go of its claims, deallocated once no consumer holds them, as the
resource-claim controller does.

The cost is bounded: at most ``max_steps`` cycles and ``max_refinements`` more,
within ``horizon_s``, and the step recomputes only when :func:`fingerprint` moved.

A start is exact, not rounded to the forecast's steps: the starving gang's
estimate is the reservation others backfill by, so one late by a step would let
a backfilled gang hold its room past the moment it frees, and one early would keep
gangs from backfilling that the next, closer forecast lets in, which is then
wrong about when those start.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from gangsched.core.dra.devices import Claim, ClaimKey
from gangsched.core.dra.placing import ClaimWrite
from gangsched.core.model.objects import Gang, GangKey, NodeName, Pod, PodKey
from gangsched.core.model.resources import Resources
from gangsched.core.model.runtimes import expected_end, moment_text, pod_runtime
from gangsched.core.placement.capacity import Placement, Snapshot
from gangsched.core.placement.snapshot import NodeUsage
from gangsched.core.stages.cycle import CycleInput, CycleResult, run_cycle


@dataclass(frozen=True, slots=True)
class ForecastLimits:
    max_steps: int = 24
    """Moments at which running gangs end that the forecast decides again at, at most."""
    min_interval_s: float = 30.0
    throttle_gangs: int = 500
    """With more gangs than this, a forecast is made again, when what it was made from
    moved, at most every ``min_interval_s``: on a large busy cluster each costs up to
    ``max_steps`` cycles, and something moves every cycle. Meanwhile the last estimates
    stand (a gang that began to wait since has none), and nobody backfills: a
    reservation that may have moved earlier is no safe bound."""
    max_refinements: int = 24
    """More cycles, at most, to find the exact end at which a step that places a gang
    first places one (halving the ends taken together; twice as many cycles at most on
    a forecast that places at every step). Beyond them a start is the last of those
    ends, and what is reserved by it the earliest not ruled out (``Estimate.earliest``)."""
    horizon_s: float = 7 * 24 * 3600.0
    """How far ahead it looks."""
    resolution_s: float = 5.0
    relative_resolution: float = 0.05
    """Gangs ending within ``max(resolution_s, relative_resolution * how far ahead)`` of
    the next end are taken to end together, at the last of them: the steps grow with the
    distance, so a forecast of hundreds of ends costs a few dozen cycles. A step that
    places a gang is then halved down to the end at which one is first placed (see
    ``max_refinements``), so a start is not late for the ends taken together."""


class Unknown(StrEnum):
    """Why a waiting gang has no estimated start."""

    RUNTIME = "it waits behind running gangs with no expected runtime"
    HORIZON = "not placed within the forecast's bounds"
    NOT_PLACED = "not placed even once every gang with an expected runtime has ended"


UNKNOWN = "Unknown"
"""What a status, ``gangsched status`` and ``explain`` say for an unknown start."""


@dataclass(frozen=True, slots=True)
class Estimate:
    """A waiting gang's estimated start (seconds since the epoch), or why it is unknown."""

    at: float | None
    unknown: Unknown | None = None
    earliest: float | None = None
    """The earliest it may start, when ``at`` may be late: the first of the ends taken
    together with ``at`` that the forecast had no cycles left to rule out (see
    ``ForecastLimits.max_refinements``); None when ``at`` is exact."""

    @property
    def reservation(self) -> float | None:
        """What a starving gang reserves by: a gang that backfills must end by then, so
        its room is back however the ends that placed it were taken together."""
        return self.at if self.earliest is None else self.earliest

    @property
    def text(self) -> str:
        """RFC 3339 to the second (what ``status.estimatedStart`` holds), or ``Unknown``."""
        if self.at is None:
            return UNKNOWN
        return moment_text(self.at)

    @property
    def explained(self) -> str:
        """The estimate in words, for ``explain`` and ``status``."""
        return self.text if self.unknown is None else f"{UNKNOWN}: {self.unknown.value}"


@dataclass
class _World:
    """The cluster as the forecast moves it forward: what runs, where, until when."""

    inp: CycleInput
    nodes: dict[NodeName, NodeUsage]
    gangs: dict[GangKey, Gang]
    bound_pods: dict[GangKey, tuple[Pod, ...]]
    bound_requests: dict[GangKey, Resources]
    ends: dict[GangKey, float | None]
    ended: set[PodKey]
    placed: list[Pod]
    claims: dict[ClaimKey, Claim]
    """The resource claims as they stand at this moment: allocated for the gangs placed,
    let go by the gangs ended (the resource-claim controller deallocates a claim once no
    consumer holds it)."""
    holders: dict[str, tuple[ClaimKey, ...]]
    """The claims each consumer (a pod's or a PodGroup's UID) holds."""
    claims_moved: bool = False

    @staticmethod
    def of(inp: CycleInput, ends: Mapping[GangKey, float | None]) -> _World:
        claims = dict(inp.snapshot.devices.claims)
        holders: dict[str, tuple[ClaimKey, ...]] = {}
        for claim in claims.values():
            for uid in claim.reserved_for:
                holders[uid] = (*holders.get(uid, ()), claim.key)
        return _World(
            inp=inp, nodes=dict(inp.snapshot.nodes), gangs={g.key: g for g in inp.gangs},
            bound_pods={k: v for k, v in inp.bound_pods.items() if v},
            bound_requests=dict(inp.bound_requests), ends=dict(ends), ended=set(), placed=[],
            claims=claims, holders=holders)

    def copy(self) -> _World:
        """A world to try a moment in, leaving this one as it is."""
        return _World(self.inp, dict(self.nodes), dict(self.gangs), dict(self.bound_pods),
                      dict(self.bound_requests), dict(self.ends), set(self.ended),
                      list(self.placed), dict(self.claims), dict(self.holders),
                      self.claims_moved)

    def run(self, placement: Placement, at: float) -> None:
        """The placed pods run from ``at``; the gang ends when its last pod does."""
        gang = self.gangs[placement.gang]
        by_key = {pod.key: pod for pod in gang.pending}
        pods = [replace(by_key[key], node_name=node, started=at)
                for key, node in placement.assignments]
        for pod in pods:
            node = pod.node_name
            assert node is not None
            usage = self.nodes[node]
            self.nodes[node] = NodeUsage(usage.node, usage.requested + pod.requests)
        placed_keys = {pod.key for pod in pods}
        self.gangs[gang.key] = replace(
            gang, pending=tuple(p for p in gang.pending if p.key not in placed_keys),
            bound=gang.bound + len(pods),
            bound_on=gang.bound_on | {p.node_name for p in pods if p.node_name is not None})
        self.bound_pods[gang.key] = (*self.bound_pods.get(gang.key, ()), *pods)
        self.bound_requests[gang.key] = self.bound_requests.get(
            gang.key, Resources.zero()) + Resources.sum(p.requests for p in pods)
        self.placed.extend(pods)
        self._hold_claims(placement.claims)
        before = self.ends.get(gang.key, at)
        runtime = _longest_of(pods, gang.expected_runtime)
        self.ends[gang.key] = (None if runtime is None or before is None
                               else max(before, at + runtime))

    def end(self, gang: GangKey) -> None:
        """The gang ended: its pods free their room and claims, and it leaves the cluster."""
        consumers: set[str] = set()
        for pod in self.bound_pods.pop(gang, ()):
            node = pod.node_name
            if node is not None and node in self.nodes:
                usage = self.nodes[node]
                self.nodes[node] = NodeUsage(usage.node, usage.requested - pod.requests)
            self.ended.add(pod.key)
            consumers.add(pod.uid)
        ended = self.gangs.pop(gang, None)
        if ended is not None and ended.group_uid:
            consumers.add(ended.group_uid)
        if self.holders:
            self._let_go(consumers)
        self.bound_requests.pop(gang, None)
        self.ends.pop(gang, None)

    def _hold_claims(self, writes: Iterable[ClaimWrite]) -> None:
        """The claims a placement wrote: allocated, and held by the consumers it added."""
        for write in writes:
            held = self.claims.get(write.claim) or Claim(write.claim, uid=write.uid)
            uids = tuple(consumer.uid for consumer in write.consumers)
            self.claims[write.claim] = held.reserved(write.allocation, uids)
            for uid in uids:
                self.holders[uid] = (*self.holders.get(uid, ()), write.claim)
            self.claims_moved = True

    def _let_go(self, consumers: Iterable[str]) -> None:
        """The consumers are gone: each claim no one holds any more is deallocated."""
        for uid in consumers:
            for key in self.holders.pop(uid, ()):
                claim = self.claims.get(key)
                if claim is not None and uid in claim.reserved_for:
                    self.claims[key] = claim.released(uid)
                    self.claims_moved = True

    def input_at(self, at: float, admitted: frozenset[GangKey]) -> CycleInput:
        base = self.inp.snapshot
        devices = (base.devices.with_claims(self.claims) if self.claims_moved
                   else base.devices)
        return replace(
            self.inp,
            snapshot=Snapshot(dict(self.nodes), seated=_seated(base, self.ended, self.placed),
                              devices=devices),
            gangs=tuple(self.gangs.values()),
            bound_requests=dict(self.bound_requests),
            bound_pods=dict(self.bound_pods),
            admitted=admitted,
            now=at,
            holds=tuple(hold for hold in self.inp.holds if hold.until > at),
            preemption=False,
            preempting={},
            reclaim=False,
        )


def running_ends(inp: CycleInput) -> dict[GangKey, float | None]:
    """When each gang with members on nodes is expected to end (None: unknown)."""
    runtimes = {gang.key: gang.expected_runtime for gang in inp.gangs}
    return {
        key: expected_end(pods, runtimes.get(key), inp.now)
        for key, pods in inp.bound_pods.items() if pods
    }


def fingerprint(
    inp: CycleInput, result: CycleResult, ends: Mapping[GangKey, float | None] | None = None
) -> tuple[object, ...]:
    """What the forecast is made from, but the clock: equal fingerprints, equal forecasts.

    A running gang past its expected end is expected to end any moment, so
    the set of those is in it too (it changes once per gang, not every cycle).
    The estimates the cycle reserved by are not: they come from the last
    forecast, and would make every forecast differ from the one before.
    Empty when no end is known: then there is nothing to run forward. ``ends`` are
    :func:`running_ends` of the input, when the caller has them already.
    """
    ends = running_ends(inp) if ends is None else ends
    if not _any_end_known(inp, result, ends):
        return ()  # nothing to forecast: the forecast is cheap, and made every time
    runtimes = {gang.key: gang.expected_runtime for gang in inp.gangs}
    return (
        tuple((g.key, tuple(p.key for p in g.pending), g.bound, g.expected_runtime)
              for g in inp.gangs),
        frozenset(inp.snapshot.nodes.items()),
        tuple((key, tuple((p.key, p.started, pod_runtime(p, runtimes.get(key))) for p in pods))
              for key, pods in sorted(inp.bound_pods.items())),
        frozenset(key for key, end in ends.items() if end is not None and end <= inp.now),
        tuple(placement.gang for placement in result.placements),
        result.admitted,
        frozenset(hold.pod.key for hold in inp.holds),
    )


def forecast(
    inp: CycleInput, result: CycleResult, limits: ForecastLimits = ForecastLimits(),
    ends: Mapping[GangKey, float | None] | None = None, *, any_known: bool | None = None,
) -> dict[GangKey, Estimate]:
    """The estimated start of every gang the cycle left waiting, from its input and answer.

    ``ends`` (:func:`running_ends`) and ``any_known`` (whether some end is known, as an
    empty :func:`fingerprint` says it is not) spare a caller that has them the work again.
    """
    waiting = {u.gang for u in result.unplaceable}
    if not waiting:
        return {}
    ends = running_ends(inp) if ends is None else ends
    if any_known is None:
        any_known = _any_end_known(inp, result, ends)
    if not any_known:
        # Nothing ends that is known to: no cycle to run (the common case where no
        # runtimes are stated costs next to nothing).
        blocked = bool(ends) or bool(result.placements)
        return {gang: Estimate(None, Unknown.RUNTIME if blocked else Unknown.NOT_PLACED)
                for gang in sorted(waiting)}
    world = _World.of(inp, ends)
    for placement in result.placements:
        world.run(placement, inp.now)
    admitted = result.admitted
    starts: dict[GangKey, float] = {}
    earliest: dict[GangKey, float] = {}  # starts not told apart from earlier ends
    bounded = False
    refinements = limits.max_refinements
    for _ in range(limits.max_steps):
        known = [end for end in world.ends.values() if end is not None]
        if not known or waiting <= starts.keys():
            break
        first = min(known)
        window = sorted({end for end in known if end <= first + max(
            limits.resolution_s, limits.relative_resolution * (first - inp.now))})
        if window[-1] > inp.now + limits.horizon_s:
            bounded = True
            break
        world, answer, at, soonest, refinements = _decide_at(world, window, admitted,
                                                              refinements)
        admitted = answer.admitted
        for placement in answer.placements:
            if placement.gang in waiting and placement.gang not in starts:
                starts[placement.gang] = at
                if soonest < at:
                    earliest[placement.gang] = soonest
            world.run(placement, at)
    else:
        bounded = any(end is not None for end in world.ends.values())
    blocked = any(end is None for end in world.ends.values())
    estimates = {}
    for gang in sorted(waiting):
        if gang in starts:
            estimates[gang] = Estimate(starts[gang], earliest=earliest.get(gang))
        else:
            estimates[gang] = Estimate(None, Unknown.RUNTIME if blocked
                                       else Unknown.HORIZON if bounded else Unknown.NOT_PLACED)
    return estimates


def _decide_at(
    world: _World, window: Sequence[float], admitted: frozenset[GangKey], refinements: int,
) -> tuple[_World, CycleResult, float, float, int]:
    """The cycle at the last of ``window``'s ends, taken together; if it places a gang,
    the first of those ends at which a cycle places one, found by halving (at most
    ``refinements`` more cycles, fewer left returned), so a start is as exact as the
    scheduler, which decides again at every end, will make it.

    Returns the world after the ends up to that moment, the cycle's answer there,
    the moment, the soonest a placement there may be (the moment itself unless the
    refinements ran out before the ends were told apart) and the refinements left. A step
    that places nothing costs one cycle: ends that free too little for anyone stay
    taken together.
    """
    def at(end: float, moved: _World) -> tuple[_World, CycleResult]:
        for gang in [key for key, until in moved.ends.items()
                     if until is not None and until <= end]:
            moved.end(gang)
        return moved, run_cycle(moved.input_at(end, admitted))

    low, high = 0, len(window) - 1
    # The world is kept as it is only while a moment before the last may be tried.
    best = at(window[high], world.copy() if high else world)
    if not best[1].placements:
        return (*best, window[high], window[high], refinements)
    while low < high and refinements > 0:
        middle = (low + high) // 2
        tried = at(window[middle], world.copy())
        refinements -= 1
        if tried[1].placements:
            high, best = middle, tried
        else:
            low = middle + 1
    return (*best, window[high], window[low], refinements)


def _any_end_known(
    inp: CycleInput, result: CycleResult, ends: Mapping[GangKey, float | None]
) -> bool:
    """Whether some running gang, or one placed now, is expected to end at a known time."""
    if any(end is not None for end in ends.values()):
        return True
    gangs = {gang.key: gang for gang in inp.gangs} if result.placements else {}
    for placement in result.placements:
        gang = gangs[placement.gang]
        placed = {key for key, _ in placement.assignments}
        if _longest_of((p for p in gang.pending if p.key in placed),
                       gang.expected_runtime) is not None:
            return True
    return False


def _longest_of(pods: Iterable[Pod], group_runtime: float | None) -> float | None:
    longest = 0.0
    for pod in pods:
        runtime = pod_runtime(pod, group_runtime)
        if runtime is None:
            return None
        longest = max(longest, runtime)
    return longest


def _seated(
    base: Snapshot, ended: set[PodKey], placed: list[Pod]
) -> Callable[[], Iterator[Pod]]:
    """The pods on the nodes at a moment of the forecast, read only if a rule asks."""
    gone, added = frozenset(ended), tuple(placed)

    def pods() -> Iterator[Pod]:
        yield from (pod for pod in base.pods if pod.key not in gone)
        yield from added
    return pods


def known_starts(estimates: Mapping[GangKey, Estimate]) -> dict[GangKey, float]:
    """The reservations of the estimates that are times: what the next cycle reserves by."""
    return {gang: estimate.reservation for gang, estimate in estimates.items()
            if estimate.reservation is not None}
