"""What ``gangsched explain``/``status``/``simulate`` decide is what the scheduler does.

The CLI fills a mirror from objects and calls :func:`gangsched.decisions.decide`,
the scheduler's own step from the state the objects' status shows; the
scheduler calls :func:`gangsched.core.step.step` on the same mirror's view.
Each test writes the objects a user would apply, reads them as the CLI does,
and compares the two decisions: who is admitted, what binds where, and the
reason (with its figures) every waiting gang is given; and shows that the
policies only the step applies (preemption, a starving gang's hold) are in the
CLI's answer.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gangsched.clusterobjects import QUEUE_API, from_files
from gangsched.console import explanation_json
from gangsched.core.model.objects import GangKey, Policy
from gangsched.core.reasons import (
    AdmissionNoRoom,
    DoesNotFit,
    HeldForStarving,
    Preempting,
    Reason,
    ReservedByAdmitted,
    Starving,
)
from gangsched.core.reports.explain import explain_gang
from gangsched.core.state import State
from gangsched.core.step import StepConfig, Stepped, step
from gangsched.core.view import StepView
from gangsched.decisions import ADMITTED_PHASES, decide, published_state, step_view
from gangsched.mirror import Mirror

if TYPE_CHECKING:
    from gangsched.core.stages.session import CycleResult
from tests.unit.test_simulate import nodes, pod, podgroup

NOW = 2_000_000_000.0
STARVATION_S = 1000.0
"""Longer than any gang of these objects has waited: none starves unless a test says so."""
CONFIG = StepConfig(policy=Policy.BINPACK, starvation_s=STARVATION_S, preemption=True)


def priority_class(name: str, value: int) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name}, "value": value}


def queue(name: str, weight: int) -> dict[str, Any]:
    return {"apiVersion": QUEUE_API, "kind": "Queue", "metadata": {"name": name},
            "spec": {"weight": weight, "state": "Open"}}


def member(name: str, group: str, *, cpu: str = "1", node: str | None = None,
           priority_class_name: str | None = None) -> dict[str, Any]:
    body = pod(name, group, cpu=cpu, node=node, run_for=None)
    if node is not None:
        body["status"] = {"phase": "Running"}
    if priority_class_name is not None:
        body["spec"]["priorityClassName"] = priority_class_name
    return body


def mirrored(tmp_path: Path, documents: list[dict[str, Any]]) -> Mirror:
    """The objects read from a file as the CLI reads them, created 100 s before NOW."""
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(documents))
    return from_files([path], created=NOW - 100).mirror(frozenset({"gang"}))


def cli_decision(mirror: Mirror, config: StepConfig = CONFIG) -> Stepped:
    view = step_view(mirror, mirror.view())
    return decide(view, published_state(view, NOW), NOW, config)


def scheduler_decision(mirror: Mirror) -> CycleResult:
    """What the scheduler's first step decides on the mirror, knowing the admissions its
    status shows."""
    view = mirror.view()
    admitted = frozenset(key for key, group in view.groups.items()
                         if group.status.get("phase") in ADMITTED_PHASES)
    stepped = step(
        State(admitted=admitted),
        StepView(view, priority_classes=mirror.groups_and_queues.priority_classes,
                 never_preempting_classes=frozenset(mirror.groups_and_queues.never_preempting_classes),
                 bad_pods=dict(mirror.bad_pods)),
        NOW, CONFIG)
    return stepped.result


def both(tmp_path: Path, documents: list[dict[str, Any]]) -> tuple[Stepped, CycleResult]:
    """The CLI's decision and the scheduler's first step's, over the same objects."""
    mirror = mirrored(tmp_path, documents)
    return cli_decision(mirror), scheduler_decision(mirror)


def reasons(result: CycleResult) -> dict[GangKey, Reason]:
    return {u.gang: u.reason for u in (*result.unplaceable, *result.unadmitted)}


def assert_same(cli: CycleResult, scheduler: CycleResult) -> None:
    assert cli.placements == scheduler.placements
    assert reasons(cli) == reasons(scheduler)
    assert cli.admitted == scheduler.admitted
    assert cli.newly_admitted == scheduler.newly_admitted


def test_the_cli_places_and_refuses_as_the_scheduler_does(tmp_path: Path) -> None:
    documents = [
        *nodes(2, "4"), priority_class("high", 100),
        podgroup("small", 2), member("small-0", "small"), member("small-1", "small"),
        podgroup("urgent", 3, priorityClassName="high"),
        *(member(f"urgent-{i}", "urgent", cpu="2", priority_class_name="high")
          for i in range(3)),
        podgroup("big", 4), *(member(f"big-{i}", "big", cpu="2") for i in range(4)),
    ]
    cli, scheduler = both(tmp_path, documents)
    assert_same(cli.result, scheduler)
    # Priority first: urgent takes six of the eight cores, small the other two, big waits.
    assert [p.gang for p in cli.result.placements] == ["default/urgent", "default/small"]
    reason = reasons(cli.result)[GangKey("default/big")]
    assert isinstance(reason, DoesNotFit) and (reason.need, reason.min_member) == (4, 4)
    assert [g.key for g in cli.gathered.gangs if g.priority == 100] == ["default/urgent"]


def test_reservations_and_admission_refusals_agree(tmp_path: Path) -> None:
    # spark-0's PodGroup reserves three cores; the one-core driver binds, and a later
    # gang that would eat into the reservation is refused, as spark-1's admission is.
    documents = [
        *nodes(2, "2"),
        podgroup("spark-0", 1, minResources={"cpu": "3"}), member("spark-0-driver", "spark-0"),
        podgroup("spark-1", 1, minResources={"cpu": "3"}), member("spark-1-driver", "spark-1"),
        podgroup("late", 2), member("late-0", "late"), member("late-1", "late"),
    ]
    cli, scheduler = both(tmp_path, documents)
    assert_same(cli.result, scheduler)
    assert [p.gang for p in cli.result.placements] == ["default/spark-0"]
    refusals = reasons(cli.result)
    assert isinstance(refusals[GangKey("default/spark-1")], AdmissionNoRoom)
    late = refusals[GangKey("default/late")]
    assert isinstance(late, ReservedByAdmitted) and late.reserved.get("cpu") == 2000


def test_a_pod_s_priority_class_counts_in_files_as_it_does_on_the_cluster(tmp_path: Path) -> None:
    def documents(stored: bool) -> list[dict[str, Any]]:
        urgent = [member(f"urgent-{i}", "urgent", cpu="2") for i in range(2)]
        for body in urgent:
            body["spec"]["priorityClassName"] = "high"
            if stored:  # as the API server keeps it
                body["spec"]["priority"] = 100
        return [*nodes(1, "4"), priority_class("high", 100),
                podgroup("early", 2), member("early-0", "early", cpu="2"),
                member("early-1", "early", cpu="2"), podgroup("urgent", 2), *urgent]

    from_file = cli_decision(mirrored(tmp_path, documents(stored=False)))
    on_cluster = scheduler_decision(mirrored(tmp_path, documents(stored=True)))
    assert [p.gang for p in on_cluster.placements] == ["default/urgent"]
    assert from_file.result.placements == on_cluster.placements


@st.composite
def clusters(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A few nodes, queues and priority classes; gangs, some partly running, some reserving."""
    node_count = draw(st.integers(1, 3))
    documents = [*nodes(node_count, draw(st.sampled_from(["2", "4"]))),
                 priority_class("high", 100), queue("a", 1), queue("b", 3)]
    for g in range(draw(st.integers(1, 5))):
        name = f"g{g}"
        size = draw(st.integers(1, 4))
        spec: dict[str, Any] = {"queue": draw(st.sampled_from(["default", "a", "b"]))}
        if draw(st.booleans()):
            spec["priorityClassName"] = "high"
        if draw(st.booleans()):
            spec["minResources"] = {"cpu": str(draw(st.integers(1, 6)))}
        group = podgroup(name, draw(st.integers(1, size)), **spec)
        if draw(st.booleans()):
            group["status"] = {"phase": "Inqueue"}  # admitted by an earlier life
        documents.append(group)
        running = draw(st.integers(0, size))
        for i in range(size):
            on = f"node-{draw(st.integers(0, node_count - 1))}" if i < running else None
            documents.append(member(f"{name}-{i}", name, cpu=draw(st.sampled_from(["500m", "1"])),
                                    node=on))
    return documents


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(clusters())
def test_for_any_objects_the_cli_decides_what_the_scheduler_does(
    tmp_path: Path, documents: list[dict[str, Any]],
) -> None:
    cli, scheduler = both(tmp_path, documents)
    assert_same(cli.result, scheduler)


def test_explain_names_the_gangs_a_preemption_would_evict(tmp_path: Path) -> None:
    """The scheduler evicts a running gang of lower priority for an urgent one that does
    not fit: ``explain`` says so, with the victims, as the step decides it."""
    documents = [
        *nodes(1, "4"), priority_class("high", 100),
        podgroup("batch", 2), *(member(f"batch-{i}", "batch", cpu="2", node="node-0")
                                for i in range(2)),
        podgroup("urgent", 2, priorityClassName="high"),
        *(member(f"urgent-{i}", "urgent", cpu="2", priority_class_name="high")
          for i in range(2)),
    ]
    decision = cli_decision(mirrored(tmp_path, documents))
    explanation = explain_gang(decision.input, decision.result, GangKey("default/urgent"))
    assert explanation is not None
    answer = explanation_json(explanation)
    assert (answer["verdict"], answer["code"]) == ("waiting", "Preempting")
    assert answer["preempts"] == ["default/batch"]
    reason = reasons(decision.result)[GangKey("default/urgent")]
    assert isinstance(reason, Preempting) and reason.hold.get("cpu") == 4000

    without = cli_decision(mirrored(tmp_path, documents), replace(CONFIG, preemption=False))
    assert isinstance(reasons(without.result)[GangKey("default/urgent")], DoesNotFit)

    budget = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
              "metadata": {"name": "batch"},
              "spec": {"selector": {"matchLabels": {
                  "scheduling.gangsched.io/pod-group": "batch"}}},
              "status": {"disruptionsAllowed": 0}}
    protected = cli_decision(mirrored(tmp_path, [*documents, budget]))
    assert protected.result.preemptions == ()
    assert not isinstance(reasons(protected.result)[GangKey("default/urgent")], Preempting)


def test_a_gang_held_behind_a_starving_gangs_room_says_so(tmp_path: Path) -> None:
    """``big`` has waited 100 s, past the 60 s threshold: it holds the two cores left on
    the node, and ``small``, which would fit there, waits behind it."""
    documents = [
        *nodes(1, "4"),
        pod("blocker", None, cpu="2", node="node-0", scheduler="default-scheduler",
            run_for=None),
        podgroup("big", 2), *(member(f"big-{i}", "big", cpu="2") for i in range(2)),
        podgroup("small", 1), member("small-0", "small"),
    ]
    starving = cli_decision(mirrored(tmp_path, documents), replace(CONFIG, starvation_s=60.0))
    assert starving.result.placements == ()
    held = reasons(starving.result)
    assert isinstance(held[GangKey("default/big")], Starving)
    small = held[GangKey("default/small")]
    assert isinstance(small, HeldForStarving)
    assert (small.starving, small.held.get("cpu"), small.nodes) == (
        "default/big", 2000, ("node-0",))
    explanation = explain_gang(starving.input, starving.result, GangKey("default/small"))
    assert explanation is not None and explanation_json(explanation)["code"] == "HeldForStarving"

    patient = cli_decision(mirrored(tmp_path, documents))  # nobody has waited 1000 s
    assert [p.gang for p in patient.result.placements] == ["default/small"]
