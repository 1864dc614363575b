"""Estimated starts through the step: published on the PodGroup status, forecast again only
when something moved, and the starving gang's one its reservation in the next cycle."""

from __future__ import annotations

from dataclasses import replace

from gangsched.core.forecast import ForecastLimits
from gangsched.core.kubeobjects.groups import Flavor, GroupSpec
from gangsched.core.kubeobjects.status_bodies import status_body
from gangsched.core.model.objects import GangKey, Pod
from gangsched.core.reasons import HeldForStarving, Starving
from gangsched.core.state import State
from gangsched.core.step import step
from gangsched.core.view import StepView
from tests.unit.test_cycle import node
from tests.unit.test_step import CONFIG, Group, binds, group, members, status_of, view

RUN, WAITER, SHORT = GangKey("ns/run"), GangKey("ns/waiter"), GangKey("ns/short")


def timed(pods: list[Pod], runtime: float | None, started: float | None = None) -> list[Pod]:
    return [replace(p, expected_runtime=runtime, started=started if p.node_name else None)
            for p in pods]


def arrived(made: Group, at: float = 1040.0) -> Group:
    assert made.spec is not None
    return replace(made, spec=replace(made.spec, created=at))


def cluster(waiter_pods: int = 4, runtime: float | None = 300.0,
            extra: list[Pod] | None = None, groups: list[Group] | None = None) -> StepView:
    pods = [*timed(members("run", 2, on=["n1", "n1"]), runtime, started=1000.0),
            *members("waiter", waiter_pods), *(extra or [])]
    return view([node("n1", 4)], pods, [group("run", 2), group("waiter", waiter_pods),
                                         *(groups or [])])


def test_a_waiting_gang_gets_the_running_gangs_end_as_its_estimated_start() -> None:
    stepped = step(State(), cluster(), 1010.0, CONFIG)
    status = status_of(stepped.actions, WAITER).status
    assert status.estimated_start == "1970-01-01T00:21:40Z"  # 1000 s started + 300 s
    body = status_body(Flavor.GANGSCHED, status, previous_conditions=[], now="t")
    assert body["estimatedStart"] == "1970-01-01T00:21:40Z"
    assert status_of(stepped.actions, RUN).status.estimated_start is None


def test_an_unknown_runtime_gives_an_unknown_start() -> None:
    stepped = step(State(), cluster(runtime=None), 1010.0, CONFIG)
    assert status_of(stepped.actions, WAITER).status.estimated_start == "Unknown"


def test_the_forecast_is_reused_while_only_the_clock_moves() -> None:
    first = step(State(), cluster(), 1010.0, CONFIG)
    second = step(first.state, cluster(), 1020.0, CONFIG)  # admitted now, and its estimate
    third = step(second.state, cluster(), 1025.0, CONFIG)
    assert third.state.estimates is second.state.estimates


def test_a_bad_runtime_annotation_is_said_on_the_group_and_changes_nothing_else() -> None:
    bad = group("waiter", 4)
    assert bad.spec is not None
    spec: GroupSpec = replace(bad.spec, runtime_problem="annotation is negative")
    pods = [*timed(members("run", 2, on=["n1", "n1"]), 300.0, started=1000.0),
            *members("waiter", 4)]
    cluster_bad = view([node("n1", 4)], pods, [group("run", 2), replace(bad, spec=spec)])
    stepped = step(State(), cluster_bad, 1010.0, CONFIG)
    status = status_of(stepped.actions, WAITER).status
    good = status_of(step(State(), cluster(), 1010.0, CONFIG).actions, WAITER).status
    assert status.runtime_problem == "annotation is negative"
    assert (status.phase, status.reason, status.message) == (good.phase, good.reason, good.message)
    body = status_body(Flavor.GANGSCHED, status, previous_conditions=[], now="t")
    assert [c["reason"] for c in body["conditions"]] == [good.reason, "InvalidRuntime"]


def test_the_starving_gangs_estimate_becomes_its_reservation_and_a_short_gang_backfills() -> None:
    first = step(State(), cluster(), 1010.0, CONFIG)
    assert first.state.estimates[WAITER].at == 1300.0
    # Once the waiter starves (30 s), gangs that come after it find its room kept.
    arrivals = [replace(p, created=1040.0, expected_runtime=runtime)
                for name, runtime in (("short", 60.0), ("long", 600.0))
                for p in members(name, 1)]
    later = cluster(extra=arrivals, groups=[arrived(group("short", 1)), arrived(group("long", 1))])
    stepped = step(first.state, later, 1045.0, CONFIG)
    assert binds(stepped) == [SHORT], "ends at 1105, before the reservation at 1300"
    reason = stepped.state.reported[WAITER].reason
    assert isinstance(reason, Starving) and reason.at == 1300.0
    assert isinstance(stepped.state.reported[GangKey("ns/long")].reason, HeldForStarving)


def test_a_moved_large_cluster_is_forecast_again_at_most_once_per_interval() -> None:
    config = replace(CONFIG, forecast=ForecastLimits(throttle_gangs=2))
    first = step(State(), cluster(), 1010.0, config)
    arrival = [replace(p, created=1015.0) for p in members("next", 1, cores=4)]
    moved = cluster(extra=arrival, groups=[arrived(group("next", 1), 1015.0)])
    soon = step(first.state, moved, 1015.0, config)
    assert GangKey("ns/next") not in soon.state.estimates, "within 30 s of the last forecast"
    assert soon.state.estimates[WAITER] == first.state.estimates[WAITER]
    assert soon.state.forecast_stale, "the next cycle reserves by none of the old estimates"
    assert 1040.0 in soon.thresholds
    later = step(soon.state, moved, 1040.0, config)
    assert later.state.estimates[GangKey("ns/next")].unknown is not None, "behind the waiter"
