"""The estimated start of waiting gangs: the cycle run forward over the running gangs' ends."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from gangsched.core.forecast import (
    Estimate,
    ForecastLimits,
    Unknown,
    fingerprint,
    forecast,
)
from gangsched.core.model.objects import (
    DEFAULT_QUEUE,
    Gang,
    GangKey,
    Node,
    NodeName,
    Pod,
    PodKey,
    Policy,
    QueueSpec,
)
from gangsched.core.model.resources import Resources
from gangsched.core.model.runtimes import backfills
from gangsched.core.placement.capacity import Snapshot
from gangsched.core.stages.cycle import CycleInput, run_cycle


def cores(n: int) -> Resources:
    return Resources.of({"cpu": n * 1000, "pods": 1})


def node(name: str, n: int) -> Node:
    return Node(NodeName(name), Resources.of({"cpu": n * 1000, "pods": 110}))


def pods(key: str, count: int, n: int = 1, *, runtime: float | None = None,
         on: str | None = None, started: float | None = None) -> tuple[Pod, ...]:
    return tuple(
        Pod(PodKey(f"{key}-{i}"), cores(n), gang=GangKey(key), expected_runtime=runtime,
            node_name=NodeName(on) if on else None, started=started, created=float(i))
        for i in range(count))


def running(key: str, count: int, n: int = 1, *, on: str, started: float,
            runtime: float | None) -> tuple[Gang, tuple[Pod, ...]]:
    members = pods(key, count, n, runtime=runtime, on=on, started=started)
    return Gang(GangKey(key), min_member=count, pending=(), bound=count), members


def waiting(key: str, count: int, n: int = 1, *, runtime: float | None = None,
            created: float = 0.0) -> Gang:
    return Gang(GangKey(key), min_member=count, pending=pods(key, count, n, runtime=runtime),
                created=created)


def world(nodes: Sequence[Node], runs: Sequence[tuple[Gang, tuple[Pod, ...]]],
          waits: Sequence[Gang], *, now: float = 10.0) -> CycleInput:
    bound = [pod for _, members in runs for pod in members]
    return CycleInput(
        snapshot=Snapshot.build(nodes, bound),
        gangs=(*(gang for gang, _ in runs), *waits),
        bound_requests={g.key: Resources.sum(p.requests for p in m) for g, m in runs},
        bound_pods={g.key: m for g, m in runs},
        queues={DEFAULT_QUEUE: QueueSpec(DEFAULT_QUEUE)},
        admitted=frozenset(g.key for g, _ in runs),
        waiting_since={g.key: now for g in waits},
        now=now,
        policy=Policy.BINPACK,
        starvation_seconds=3600.0,
    )


def estimates(inp: CycleInput, limits: ForecastLimits | None = None) -> dict[str, Estimate]:
    found = forecast(inp, run_cycle(inp), limits or ForecastLimits())
    return {str(k): v for k, v in found.items()}


def test_a_waiting_gang_starts_when_the_gang_holding_its_room_ends() -> None:
    inp = world([node("a", 4)], [running("train", 4, on="a", started=0.0, runtime=100.0)],
                [waiting("next", 2, runtime=50.0), waiting("after", 4, created=1.0)])
    found = estimates(inp)
    assert found["next"] == Estimate(100.0)
    assert found["after"] == Estimate(150.0)  # behind "next", which runs 50 s from 100


def test_gangs_placed_this_cycle_end_on_time_in_the_forecast() -> None:
    inp = world([node("a", 4)], [], [waiting("now", 4, runtime=30.0),
                                     waiting("later", 2, created=1.0)])
    assert estimates(inp) == {"later": Estimate(40.0)}


def test_behind_a_gang_of_unknown_runtime_the_start_is_unknown() -> None:
    inp = world([node("a", 4)], [running("forever", 4, on="a", started=0.0, runtime=None)],
                [waiting("next", 2)])
    assert estimates(inp) == {"next": Estimate(None, Unknown.RUNTIME)}


def test_a_gang_that_fits_nowhere_even_when_all_ends_is_not_placed() -> None:
    inp = world([node("a", 4)], [running("short", 2, on="a", started=0.0, runtime=20.0)],
                [waiting("huge", 8)])
    assert estimates(inp) == {"huge": Estimate(None, Unknown.NOT_PLACED)}


def test_beyond_the_horizon_the_start_is_unknown() -> None:
    inp = world([node("a", 4)], [running("long", 4, on="a", started=0.0, runtime=1e6)],
                [waiting("next", 2)])
    assert estimates(inp, ForecastLimits(horizon_s=3600.0)) == {
        "next": Estimate(None, Unknown.HORIZON)}


def test_a_gang_past_its_expected_end_is_expected_to_end_now() -> None:
    inp = world([node("a", 4)], [running("late", 4, on="a", started=0.0, runtime=5.0)],
                [waiting("next", 2)], now=60.0)
    assert estimates(inp) == {"next": Estimate(60.0)}


def test_a_start_among_ends_taken_together_is_the_end_that_frees_its_room() -> None:
    """The forecast takes ends within its resolution together; when that step places a
    gang, it finds the end at which the gang could start, as the scheduler deciding at
    every end will: "next" needs only the room "first" frees, at 100 s, not 103 s."""
    inp = world([node("a", 4)], [running("first", 2, on="a", started=0.0, runtime=100.0),
                                 running("second", 2, on="a", started=0.0, runtime=103.0)],
                [waiting("next", 2)])
    assert estimates(inp) == {"next": Estimate(100.0)}


def test_ends_taken_together_unrefined_reserve_by_the_first_of_them() -> None:
    """With no cycles left to find the exact end, the estimate is the last of the ends
    taken together and may be late; the reservation gangs backfill before is the first,
    so a gang that backfills is gone by the time the waiting gang could start."""
    inp = world([node("a", 4)], [running("first", 2, on="a", started=0.0, runtime=100.0),
                                 running("second", 2, on="a", started=0.0, runtime=103.0)],
                [waiting("next", 2)])
    (estimate,) = estimates(inp, ForecastLimits(max_refinements=0)).values()
    assert estimate == Estimate(103.0, earliest=100.0)
    assert estimate.reservation == 100.0


def test_the_fingerprint_moves_with_the_cluster_but_not_the_clock() -> None:
    inp = world([node("a", 4)], [running("train", 4, on="a", started=0.0, runtime=100.0)],
                [waiting("next", 2)])
    result = run_cycle(inp)
    later = replace(inp, now=50.0)
    assert fingerprint(later, run_cycle(later)) == fingerprint(inp, result)
    overrun = replace(inp, now=150.0)
    assert fingerprint(overrun, run_cycle(overrun)) != fingerprint(inp, result)
    more = replace(inp, gangs=(*inp.gangs, waiting("other", 1)))
    assert fingerprint(more, run_cycle(more)) != fingerprint(inp, result)


def test_only_a_gang_known_to_end_before_the_reservation_backfills() -> None:
    short, long, unknown = waiting("s", 1, runtime=50.0), waiting("l", 1, runtime=500.0), \
        waiting("u", 1)
    assert backfills(short, 10.0, reservation=100.0)
    assert not backfills(long, 10.0, reservation=100.0)
    assert not backfills(unknown, 10.0, reservation=100.0)
    assert not backfills(short, 10.0, reservation=None)


def test_the_estimate_reads_as_rfc3339_or_unknown() -> None:
    assert Estimate(1_700_000_000.4).text == "2023-11-14T22:13:20Z"
    assert Estimate(None, Unknown.RUNTIME).text == "Unknown"
    assert Estimate(None, Unknown.RUNTIME).explained.startswith("Unknown: it waits behind")
