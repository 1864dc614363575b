"""A cycle that reuses the last answer gives the answer a full cycle would give.

Two schedulers see the same cluster, the same changes and the same clock, one
reusing settled answers and one deciding in full every cycle; every cycle's
result must be the same. The clock jumps cross starvation thresholds, schedule
timeouts and the expiry of assumed binds (binds here never complete), and
pods come and go between cycles.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from hypothesis import given, settings
from hypothesis import strategies as st

from gangsched.binder import Binder, BindOutcome
from gangsched.core.kubeobjects.groups import Flavor
from gangsched.core.model.objects import PodKey
from gangsched.core.placement.capacity import Placement
from gangsched.core.reasons import BindBackoff, Starved, Starving, TooBigToHold
from gangsched.core.stages.cycle import CycleResult
from gangsched.core.step import StepConfig
from gangsched.core.thresholds import next_threshold
from gangsched.feed import Feed
from gangsched.mirror import Mirror
from gangsched.reporting import Reporter
from gangsched.scheduler import Scheduler, SchedulerConfig

GROUP_LABEL = "scheduling.gangsched.io/pod-group"


def node(name: str, gpus: int) -> dict[str, Any]:
    return {"metadata": {"name": name},
            "status": {"allocatable": {"cpu": "32", "memory": "64Gi", "pods": "110",
                                       "nvidia.com/gpu": str(gpus)},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def pod(name: str, group: str, gpus: int) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}",
                         "labels": {GROUP_LABEL: group},
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"schedulerName": "gang", "containers": [{"name": "c", "resources": {
                "requests": {"cpu": "1", "nvidia.com/gpu": str(gpus)},
                "limits": {"nvidia.com/gpu": str(gpus)}}}]},
            "status": {"phase": "Pending"}}


def podgroup(name: str, min_member: int, timeout: int | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": min_member}
    if timeout is not None:
        spec["scheduleTimeoutSeconds"] = timeout
    return {"apiVersion": "scheduling.gangsched.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}",
                         "generation": 1, "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": spec}


class SilentReporter:
    """Takes every report and writes nothing: only decisions are compared here."""

    def queued(self) -> int:
        return 0

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: None


class PendingBinder:
    """Binds never complete, so placed pods stay assumed until their assumption expires."""

    async def bind_gang(self, placement: Placement,
                        uids: Mapping[PodKey, str] | None = None) -> list[BindOutcome]:
        await asyncio.Event().wait()
        return []


@dataclass
class Clock:
    now: float = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Gang:
    name: str
    min_member: int
    gpus: int
    size: int
    timeout: int | None


@dataclass
class Scenario:
    nodes: list[int]
    gangs: list[Gang]
    steps: list[tuple[float, str, int]]
    starvation_s: float
    assume_ttl_s: float
    pods: dict[str, list[str]] = field(default_factory=dict)


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    nodes = draw(st.lists(st.integers(1, 8), min_size=1, max_size=4))
    gangs = []
    for index in range(draw(st.integers(1, 6))):
        size = draw(st.integers(1, 4))
        gangs.append(Gang(f"g{index}", draw(st.integers(1, size)), draw(st.integers(1, 3)),
                          size, draw(st.none() | st.integers(0, 120))))
    steps = draw(st.lists(
        st.tuples(st.floats(0, 45), st.sampled_from(["none", "none", "add", "delete"]),
                  st.integers(0, len(gangs) - 1)),
        min_size=1, max_size=25))
    return Scenario(nodes, gangs, steps, draw(st.floats(1, 90)), draw(st.floats(5, 120)))


def start(scenario: Scenario, clock: Clock, reuse: bool, *,
          binder: object = None, reporter: object = None) -> Scheduler:
    mirror = Mirror(scheduler_names=frozenset({"gang"}))
    Feed(mirror).replace("nodes", [node(f"n{i}", gpus) for i, gpus in enumerate(scenario.nodes)])
    Feed(mirror).replace("pods", [pod(f"{g.name}-{i}", g.name, g.gpus)
                            for g in scenario.gangs for i in range(g.size)])
    for gang in scenario.gangs:
        Feed(mirror).upsert_group(Flavor.GANGSCHED,
                                  podgroup(gang.name, gang.min_member, gang.timeout))
    config = SchedulerConfig(
        step=StepConfig(starvation_s=scenario.starvation_s),
        reuse_unchanged=reuse, refresh_s=1e9, assume_ttl_s=scenario.assume_ttl_s)
    return Scheduler(mirror=mirror, binder=cast(Binder, binder or PendingBinder()),
                     reporter=cast(Reporter, reporter or SilentReporter()), config=config,
                     clock=clock)


def decided(result: CycleResult) -> tuple[object, ...]:
    return (result.placements, result.unplaceable, result.admitted, result.newly_admitted,
            result.unadmitted, dict(result.holding), result.preemptions)


@given(scenarios())
@settings(max_examples=60, deadline=None)
def test_a_reused_answer_is_the_answer_of_a_full_cycle(scenario: Scenario) -> None:
    async def run() -> int:
        clock = Clock()
        reusing, deciding = start(scenario, clock, True), start(scenario, clock, False)
        added = 0
        reused = 0
        for seconds, change, which in scenario.steps:
            clock.now += seconds
            gang = scenario.gangs[which]
            for scheduler in (reusing, deciding):
                if change == "add":
                    Feed(scheduler.mirror).upsert("pods", pod(f"{gang.name}-x{added}", gang.name,
                                                        gang.gpus))
                elif change == "delete":
                    Feed(scheduler.mirror).delete(
                        "pods", pod(f"{gang.name}-0", gang.name, gang.gpus))
            added += change == "add"
            for _ in range(2):  # the second cycle on unchanged inputs may reuse the first
                before = reusing._settled
                mine, theirs = reusing.cycle(), deciding.cycle()
                reused += before is not None and reusing._settled is before
                assert decided(mine) == decided(theirs)
        for scheduler in (reusing, deciding):
            for task in list(scheduler.actuator.tasks):
                task.cancel()
        return reused

    asyncio.run(run())


def test_reuse_happens_once_settled_and_stops_at_a_threshold() -> None:
    async def run() -> None:
        clock = Clock()
        scenario = Scenario(nodes=[1], gangs=[Gang("big", 2, 1, 2, None)],
                            steps=[], starvation_s=30.0, assume_ttl_s=60.0)
        scheduler = start(scenario, clock, True)
        first = scheduler.cycle()
        assert first.unplaceable, "two pods of one GPU cannot fit one GPU"
        clock.now += 1
        scheduler.cycle()
        settled = scheduler._settled
        assert settled is not None
        assert settled.until == next_threshold(clock.now - 1, [clock.now - 1 + 30.0])
        clock.now += 1
        scheduler.cycle()
        assert scheduler._settled is settled, "nothing changed: the answer is reused"
        clock.now += 30
        result = scheduler.cycle()
        assert scheduler._settled is not settled, "the gang starves: the cycle decides again"
        starving = result.unplaceable[0].reason
        assert isinstance(starving, Starving | TooBigToHold) and starving.urgency == Starved(30.0)

    asyncio.run(run())


class CountingReporter(SilentReporter):
    def __init__(self) -> None:
        self.unschedulable: list[str] = []

    def pod_unschedulable(self, record: Any, message: str, *, event: bool = True,
                          reason: str = "Unschedulable") -> None:
        if event:
            self.unschedulable.append(record.pod.key)


def test_a_waiting_pods_event_is_due_when_its_reason_is_new_then_every_few_minutes() -> None:
    async def run() -> list[int]:
        clock = Clock()
        scenario = Scenario(nodes=[1], gangs=[Gang("big", 2, 1, 2, None)],
                            steps=[], starvation_s=1e6, assume_ttl_s=60.0)
        reporter = CountingReporter()
        scheduler = start(scenario, clock, False, reporter=reporter)
        counts = []
        for seconds in (0, 5, 10, 20, 200, 290, 310):
            clock.now = 1000.0 + seconds
            before = len(reporter.unschedulable)
            scheduler.cycle()
            counts.append(len(reporter.unschedulable) - before)
        return counts

    # Two pods each time: when the reason is new, then at 300 s.
    assert asyncio.run(run()) == [2, 0, 0, 0, 0, 0, 2]


class RefusingBinder:
    """The API server refuses every bind (an admission policy, say)."""

    async def bind_gang(self, placement: Placement,
                        uids: Mapping[PodKey, str] | None = None) -> list[BindOutcome]:
        return [BindOutcome(pod, node, 403, "bindings are frozen")
                for pod, node in placement.assignments]


def test_a_refused_bind_is_tried_again_when_its_backoff_ends_not_at_the_next_refresh() -> None:
    async def run() -> None:
        clock = Clock()
        scenario = Scenario(nodes=[1], gangs=[Gang("one", 1, 1, 1, None)],
                            steps=[], starvation_s=1e6, assume_ttl_s=60.0)
        scheduler = start(scenario, clock, True, binder=RefusingBinder())
        assert scheduler.cycle().placements
        while scheduler.actuator.tasks:
            await asyncio.sleep(0)
        refusal = scheduler.state.bind_refusals[PodKey("ns/one-0")]
        clock.now += 0.1
        waiting = scheduler.cycle()
        assert isinstance(waiting.unplaceable[0].reason, BindBackoff)
        clock.now += 0.1
        scheduler.cycle()  # the gang waited already: this answer settles
        settled = scheduler._settled
        clock.now += 0.1
        scheduler.cycle()
        assert settled is not None and scheduler._settled is settled, "reused while backing off"
        clock.now = refusal.until + 0.01
        assert scheduler.cycle().placements, "the backoff ended: the gang is tried again"
        for task in list(scheduler.actuator.tasks):
            task.cancel()

    asyncio.run(run())
