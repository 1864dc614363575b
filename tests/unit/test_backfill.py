"""EASY backfill: the room kept for a starving gang, used meanwhile only by gangs known to
end before its reservation."""

from __future__ import annotations

from dataclasses import replace

from gangsched.core.forecast import forecast
from gangsched.core.model.objects import Gang, GangKey, NodeName
from gangsched.core.model.resources import Resources
from gangsched.core.reasons import DevicesShort, HeldForStarving, Starving
from gangsched.core.stages.cycle import CycleInput, run_cycle
from gangsched.core.step import StepConfig
from gangsched.scheduler import SchedulerConfig
from tests.unit.test_dra import claim_obj, claiming, gpu_cluster, held_by, request
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
    assert SchedulerConfig(step=StepConfig(backfill=False)).step_config(
        evicts=True).backfill is False


def gpu_starving(*small: tuple[str, float | None]) -> CycleInput:
    """Two nodes of eight GPUs, one GPU of each held by a running one-GPU job's claim; a
    gang of two pods claiming eight GPUs each starving since 0 s; one-GPU gangs after it,
    each with the runtime given."""
    claims = [claim_obj("run-0", status=held_by("n-0", [0], "run-0-0")),
              claim_obj("run-1", status=held_by("n-1", [0], "run-1-0")),
              *(claim_obj(f"big-{i}", request(count=8)) for i in range(2)),
              *(claim_obj(name) for name, _ in small)]
    running = [(Gang(GangKey(f"ns/run-{i}"), 1, (), bound=1),
                [replace(claiming(f"ns/run-{i}-0", f"run-{i}"), node_name=NodeName(f"n-{i}"),
                         gang=GangKey(f"ns/run-{i}"))]) for i in range(2)]
    big = Gang(GangKey("ns/big"), 2, tuple(claiming(f"ns/big-{i}", f"big-{i}")
                                           for i in range(2)))
    smalls = [Gang(GangKey(f"ns/{name}"), 1, (replace(claiming(f"ns/{name}-0", name),
                                                      expected_runtime=runtime),),
                   created=1.0 + i) for i, (name, runtime) in enumerate(small)]
    inp = gpu_cluster(["n-0", "n-1"], claims, running, [big, *smalls], starvation_seconds=60.0,
                      estimated_starts={GangKey("ns/big"): 1500.0})
    return replace(inp, waiting_since={gang.key: 0.0 for gang in inp.gangs})


def test_the_devices_free_on_the_nodes_a_starving_gang_chose_are_kept_for_it() -> None:
    """The eight-GPU pods would land on n-0 and n-1 once their one-GPU jobs end: the seven
    GPUs free on each are kept, so a one-GPU gang of unknown runtime is held off them."""
    result = run_cycle(gpu_starving(("one", None)))
    assert result.placements == ()
    reasons = {u.gang: u.reason for u in result.unplaceable}
    starving = reasons[GangKey("ns/big")]
    assert isinstance(starving, Starving) and starving.nodes == ("n-0", "n-1")
    held = reasons[GangKey("ns/one")]
    assert isinstance(held, HeldForStarving) and held.starving == "ns/big"
    assert held.nodes == ("n-0", "n-1")


def test_a_gang_ending_before_the_reservation_uses_the_kept_devices_and_the_rest_stay_kept(
) -> None:
    result = run_cycle(gpu_starving(("short", 100.0), ("long", 5000.0)))
    assert [p.gang for p in result.placements] == ["ns/short"]
    reasons = {u.gang: u.reason for u in result.unplaceable}
    assert isinstance(reasons[GangKey("ns/long")], HeldForStarving)


def test_a_pod_kept_out_by_its_claims_is_told_so_not_that_room_is_held_for_the_starving_gang(
) -> None:
    """A starving cpu gang keeps the node's free cores; a plain pod after it is held off
    them, but a pod of the same requests claiming eight GPUs, all in use, would not fit
    even with them: its devices are why it waits."""
    claims = [claim_obj("run", request(count=8), status=held_by("n-0", range(8), "run-0")),
              claim_obj("eight", request(count=8))]
    run = (Gang(GangKey("ns/run"), 1, (), bound=1),
           [replace(claiming("ns/run-0", "run"), node_name=NodeName("n-0"),
                    gang=GangKey("ns/run"))])
    big = Gang(GangKey("ns/big"), 1, (replace(claiming("ns/big-0"),
                                               requests=Resources.of({"cpu": 16000})),))
    plain = Gang(GangKey("ns/plain"), 1, (claiming("ns/plain-0"),), created=1.0)
    gpus = Gang(GangKey("ns/gpus"), 1, (claiming("ns/gpus-0", "eight"),), created=2.0)
    inp = gpu_cluster(["n-0"], claims, [run], [big, plain, gpus])
    result = run_cycle(replace(inp, waiting_since={gang.key: 0.0 for gang in inp.gangs}))
    reasons = {u.gang: u.reason for u in result.unplaceable}
    assert isinstance(reasons[GangKey("ns/big")], Starving)
    assert isinstance(reasons[GangKey("ns/plain")], HeldForStarving)
    assert isinstance(reasons[GangKey("ns/gpus")], DevicesShort)


def test_a_starving_gpu_pod_keeps_the_node_with_most_of_its_devices_free() -> None:
    """Two GPUs are free on n-0, six on n-1: the eight-GPU pod's room is kept on n-1."""
    claims = [claim_obj("run-0", request(count=6), status=held_by("n-0", range(6), "run-0-0")),
              claim_obj("run-1", request(count=2), status=held_by("n-1", range(2), "run-1-0")),
              claim_obj("big", request(count=8))]
    running = [(Gang(GangKey(f"ns/run-{i}"), 1, (), bound=1),
                [replace(claiming(f"ns/run-{i}-0", f"run-{i}"), node_name=NodeName(f"n-{i}"),
                         gang=GangKey(f"ns/run-{i}"))]) for i in range(2)]
    big = Gang(GangKey("ns/big"), 1, (claiming("ns/big-0", "big"),))
    inp = gpu_cluster(["n-0", "n-1"], claims, running, [big])
    result = run_cycle(replace(inp, waiting_since={big.key: 0.0}))
    (starving,) = [u.reason for u in result.unplaceable]
    assert isinstance(starving, Starving) and starving.nodes == ("n-1",)
