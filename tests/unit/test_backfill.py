"""EASY backfill: the room kept for a starving gang, used meanwhile only by gangs known to
end before its reservation."""

from __future__ import annotations

from dataclasses import replace

from gangsched.core.cycle import CycleInput, run_cycle
from gangsched.core.forecast import forecast
from gangsched.core.model import GangKey
from gangsched.core.reasons import HeldForStarving, Starving
from gangsched.scheduler import SchedulerConfig
from tests.unit.test_forecast import node, running, waiting, world

BIG = GangKey("big")


def cluster(*small: tuple[str, float | None], reservation: float | None = 100.0,
            backfill: bool = True) -> CycleInput:
    """One 4-core node, 2 cores running until 100 s; a 4-core gang starving since 0 s;
    small 1-core gangs after it, each with the runtime given."""
    inp = world(
        [node("a", 4)], [running("run", 2, on="a", started=0.0, runtime=100.0)],
        [waiting("big", 1, 4), *(waiting(name, 1, runtime=runtime, created=1.0 + i)
                                 for i, (name, runtime) in enumerate(small))],
        now=10.0)
    return replace(inp, starvation_seconds=5.0, waiting_since={g.key: 0.0 for g in inp.gangs},
                   estimated_starts={} if reservation is None else {BIG: reservation},
                   backfill=backfill)


def test_a_gang_that_ends_before_the_reservation_uses_the_kept_room() -> None:
    result = run_cycle(cluster(("short", 50.0)))
    assert [p.gang for p in result.placements] == ["short"]
    (starving,) = [u.reason for u in result.unplaceable if u.gang == BIG]
    assert isinstance(starving, Starving) and starving.at == 100.0


def test_gangs_that_end_after_it_or_at_an_unknown_time_are_held_for_the_starving_gang() -> None:
    result = run_cycle(cluster(("long", 500.0), ("unknown", None)))
    assert result.placements == ()
    reasons = {u.gang: u.reason for u in result.unplaceable}
    assert isinstance(reasons[GangKey("long")], HeldForStarving)
    assert isinstance(reasons[GangKey("unknown")], HeldForStarving)


def test_no_backfill_without_a_reservation_time_or_with_backfill_off() -> None:
    for inp in (cluster(("short", 50.0), reservation=None),
                cluster(("short", 50.0), backfill=False)):
        result = run_cycle(inp)
        assert result.placements == ()
        reasons = {u.gang: u.reason for u in result.unplaceable}
        assert isinstance(reasons[GangKey("short")], HeldForStarving)


def test_what_a_backfilled_gang_leaves_stays_kept_for_the_starving_gang() -> None:
    result = run_cycle(cluster(("first", 50.0), ("long", 500.0), ("second", 20.0)))
    assert [p.gang for p in result.placements] == ["first", "second"]
    reasons = {u.gang: u.reason for u in result.unplaceable}
    assert isinstance(reasons[GangKey("long")], HeldForStarving)


def test_the_starving_gang_starts_no_later_for_the_backfill() -> None:
    with_backfill = cluster(("short", 50.0))
    without = cluster(("short", 50.0), backfill=False)
    starts = [forecast(inp, run_cycle(inp))[BIG].at for inp in (with_backfill, without)]
    assert starts == [100.0, 100.0]


def test_the_schedulers_no_backfill_setting_reaches_the_step() -> None:
    """``gangsched run --no-backfill`` (chart value ``backfill: false``) turns it off."""
    assert SchedulerConfig().step_config(evicts=True).backfill is True
    assert SchedulerConfig(backfill=False).step_config(evicts=True).backfill is False
