"""What ``gangsched explain``/``status``/``simulate`` decide equals what the scheduler does.

The CLI fills a mirror from objects and calls :func:`gangsched.decisions.decide`;
the scheduler calls :func:`gangsched.core.step.step` on the same mirror's view.
Each test writes the objects a user would apply, reads them as the CLI does,
and compares the two decisions: who is admitted, what binds where, and the
reason (with its figures) every waiting gang is given.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gangsched.clusterobjects import QUEUE_API, admitted_groups, from_files
from gangsched.core.cycle import CycleResult
from gangsched.core.model import GangKey, Policy
from gangsched.core.reasons import AdmissionNoRoom, DoesNotFit, Reason, ReservedByAdmitted
from gangsched.core.state import State
from gangsched.core.step import StepConfig, step
from gangsched.core.view import StepView
from gangsched.decisions import Decision, decide
from gangsched.mirror import Mirror
from tests.unit.test_simulate import nodes, pod, podgroup

NOW = 2_000_000_000.0
STARVATION_S = 60.0


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


def mirrored(tmp_path: Path, documents: list[dict[str, Any]]) -> tuple[Mirror, frozenset[GangKey]]:
    """The objects read from a file as the CLI reads them, and the groups they say are admitted."""
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(documents))
    objects = from_files([path], created=NOW - 100)
    return objects.mirror(frozenset({"gang"})), admitted_groups(objects)


def cli_decision(mirror: Mirror, admitted: frozenset[GangKey]) -> Decision:
    return decide(mirror.view(), admitted=admitted, waiting_since={}, finished_uids=frozenset(),
                  priority_classes=mirror.groups_and_queues.priority_classes, now=NOW,
                  policy=Policy.BINPACK, starvation_s=STARVATION_S)


def scheduler_decision(mirror: Mirror, admitted: frozenset[GangKey]) -> CycleResult:
    """What the scheduler's first step decides on the mirror, knowing the same admissions."""
    view = mirror.view()
    stepped = step(
        State(admitted=admitted),
        StepView(view, priority_classes=mirror.groups_and_queues.priority_classes,
                 never_preempting_classes=frozenset(mirror.groups_and_queues.never_preempting_classes),
                 bad_pods=dict(mirror.bad_pods)),
        NOW, StepConfig(policy=Policy.BINPACK, starvation_s=STARVATION_S))
    return stepped.result


def both(tmp_path: Path, documents: list[dict[str, Any]]) -> tuple[Decision, CycleResult]:
    """The CLI's decision and the scheduler's first step's, over the same objects."""
    mirror, admitted = mirrored(tmp_path, documents)
    return cli_decision(mirror, admitted), scheduler_decision(mirror, admitted)


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

    from_file = cli_decision(*mirrored(tmp_path, documents(stored=False)))
    on_cluster = scheduler_decision(*mirrored(tmp_path, documents(stored=True)))
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
