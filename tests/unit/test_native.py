"""Kubernetes 1.37 native PodGroups: read as kube-scheduler reads them, reported in its words."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from gangsched.core.kubeobjects.fields import ObjectError
from gangsched.core.kubeobjects.podgroups import group_from_api, native_group_name
from gangsched.core.kubeobjects.status_bodies import GroupStatus, Phase, invalid_body, status_body
from gangsched.core.model.objects import (
    Flavor,
    Gang,
    GangKey,
    MemberCounts,
    NodeName,
    Policy,
    QueueName,
    QueueSpec,
    solo_gang_key,
)
from gangsched.core.placement.capacity import Capacity, Placement, Snapshot, Unplaceable
from gangsched.core.placement.topology import domains_of, place_in_one_domain
from gangsched.core.reasons import DoesNotFit, NoDomainHolds, NoDomainLabel
from gangsched.core.stages.cycle import CycleInput, run_cycle
from gangsched.core.stages.gangs import Member, gather
from tests.unit.clusters import assigned, node, pod, workers

NOW, EARLIER = "2026-01-01T00:00:10Z", "2026-01-01T00:00:00Z"


def native(spec: dict[str, Any], **meta: Any) -> dict[str, Any]:
    return {"metadata": {"name": "train", "namespace": "ml", **meta}, "spec": spec}


def test_gang_policy_min_count_is_min_member() -> None:
    spec = group_from_api(native({
        "schedulingPolicy": {"gang": {"minCount": 4}},
        "schedulingConstraints": {"topology": [{"key": "topology.kubernetes.io/zone"}]},
        "priorityClassName": "high", "priority": 1000,
    }), Flavor.NATIVE)
    assert (spec.min_member, spec.basic, spec.topology_keys) == (
        4, False, ("topology.kubernetes.io/zone",))
    assert (spec.priority_class, spec.priority, spec.queue) == ("high", 1000, "default")


def test_basic_policy_places_pods_alone() -> None:
    spec = group_from_api(native({"schedulingPolicy": {"basic": {}}}), Flavor.NATIVE)
    assert (spec.min_member, spec.basic) == (1, True)


def test_queue_from_annotation_else_from_the_workload() -> None:
    own = group_from_api(native({"schedulingPolicy": {"basic": {}},
                                 "workloadRef": {"workloadName": "w", "templateName": "t"}},
                                annotations={"scheduling.gangsched.io/queue": "research"}),
                         Flavor.NATIVE)
    assert (own.queue, own.workload) == ("research", None)
    inherited = group_from_api(native({"schedulingPolicy": {"basic": {}},
                                       "workloadRef": {"workloadName": "w", "templateName": "t"}}),
                               Flavor.NATIVE)
    assert (inherited.queue, inherited.workload) == ("default", "ml/w")


@pytest.mark.parametrize("spec", [
    {"schedulingPolicy": {"gang": {"minCount": 0}}},
    {"schedulingPolicy": {"gang": {}}},
    {"schedulingPolicy": {"gang": {"minCount": 2}},
     "schedulingConstraints": {"topology": [{"key": ""}]}},
    {"schedulingPolicy": {"basic": {}}, "priority": "high"},
])
def test_bad_native_spec_names_the_group(spec: dict[str, Any]) -> None:
    with pytest.raises(ObjectError, match="podgroup ml/train"):
        group_from_api(native(spec), Flavor.NATIVE)


def test_pod_names_its_native_group_in_its_spec() -> None:
    assert native_group_name({"schedulingGroup": {"podGroupName": "train"}}) == "train"
    assert native_group_name({"schedulingGroup": {}}) is None
    assert native_group_name({}) is None


def test_basic_group_pods_are_gangs_of_one_counted_in_the_group() -> None:
    spec = group_from_api(native({"schedulingPolicy": {"basic": {}}, "priority": 7},
                                 annotations={"scheduling.gangsched.io/queue": "q"}),
                          Flavor.NATIVE)
    key = GangKey("ml/train")
    # Each pod's own admitted priority is its gang's: the group's never raises it.
    members = [Member(replace(pod("ml/a"), priority=7), key), Member(pod("ml/b"), key),
               Member(pod("ml/c", node_name="n1"), key, running=True)]
    gathered = gather(members, {key: spec})
    solos = {g.key: g for g in gathered.gangs}
    assert set(solos) == {solo_gang_key(pod("ml/a").key), solo_gang_key(pod("ml/b").key)}
    assert all(g.min_member == 1 and g.queue == "q" for g in solos.values())
    assert [solos[solo_gang_key(pod(f"ml/{n}").key)].priority for n in "ab"] == [7, 0]
    assert gathered.counts[key] == MemberCounts(pending=2, scheduled=1, running=1)
    assert set(gathered.solo_of.values()) == {key}


def test_basic_group_is_finished_only_when_no_member_waits() -> None:
    spec = group_from_api(native({"schedulingPolicy": {"basic": {}}}), Flavor.NATIVE)
    key = GangKey("ml/train")
    done = [Member(pod("ml/a", terminal=True), key, succeeded=True)]
    assert key in gather(done, {key: spec}).finished
    assert key not in gather([*done, Member(pod("ml/b"), key)], {key: spec}).finished


# ---------------------------------------------------------------- topology

def racks() -> Snapshot:
    """Rack r1: 2 nodes of 4 GPUs; rack r2: 3 nodes of 4 GPUs; one unlabelled node."""
    nodes = [node(f"r1-{i}", gpu=4, cpu="32", labels={"rack": "r1"}) for i in range(2)]
    nodes += [node(f"r2-{i}", gpu=4, cpu="32", labels={"rack": "r2"}) for i in range(3)]
    nodes.append(node("loose", gpu=8, cpu="32"))
    return Snapshot.build(nodes, [])


def topology_gang(count: int, gpu: int = 1, **kwargs: Any) -> Gang:
    return Gang(GangKey("ml/train"), count, tuple(workers("ml/w", count, gpu=gpu)),
                topology_keys=("rack",), **kwargs)


def test_gang_lands_in_one_domain_the_one_it_wastes_least_of() -> None:
    snapshot = racks()
    decision = place_in_one_domain(Capacity(snapshot), topology_gang(8), Policy.BINPACK,
                                   domains_of(snapshot, ("rack",)))
    assert isinstance(decision, Placement)
    assert {name.split("-")[0] for name in assigned(decision).values()} == {"r1"}


def test_gang_too_big_for_any_domain_waits_naming_the_closest_domains_first() -> None:
    snapshot = racks()
    decision = place_in_one_domain(Capacity(snapshot), topology_gang(13), Policy.BINPACK,
                                   domains_of(snapshot, ("rack",)))
    assert isinstance(decision, Unplaceable)
    reason = decision.reason
    assert isinstance(reason, NoDomainHolds) and (reason.label, reason.domains) == ("rack", 2)
    assert [shown.domain for shown in reason.shown] == ["rack=r2", "rack=r1"]  # 12 GPUs free, 8
    assert all(isinstance(shown.cause, DoesNotFit) for shown in reason.shown)


def test_bound_members_keep_the_gang_in_their_domain() -> None:
    snapshot = racks()
    gang = topology_gang(2, bound_on=frozenset({NodeName("r2-0")}))
    decision = place_in_one_domain(Capacity(snapshot), gang, Policy.BINPACK,
                                   domains_of(snapshot, ("rack",)))
    assert isinstance(decision, Placement)
    assert all(name.startswith("r2-") for name in assigned(decision).values())


def test_no_node_with_the_label_is_a_reason() -> None:
    snapshot = Snapshot.build([node("n", gpu=8)], [])
    decision = place_in_one_domain(Capacity(snapshot), topology_gang(2), Policy.BINPACK,
                                   domains_of(snapshot, ("rack",)))
    assert isinstance(decision, Unplaceable)
    assert decision.reason == NoDomainLabel(GangKey("ml/train"), "rack")


def test_cycle_keeps_two_topology_gangs_in_separate_whole_domains() -> None:
    snapshot = racks()
    first = Gang(GangKey("ml/a"), 8, tuple(workers("ml/a", 8, gpu=1)), topology_keys=("rack",))
    second = Gang(GangKey("ml/b"), 12, tuple(workers("ml/b", 12, gpu=1)),
                  topology_keys=("rack",), created=1.0)
    result = run_cycle(CycleInput(
        snapshot=snapshot, gangs=(first, second), bound_requests={},
        queues={QueueName("default"): QueueSpec(QueueName("default"))},
        admitted=frozenset(), waiting_since={}, now=0.0, policy=Policy.BINPACK,
    ))
    racks_used = {p.gang: {n.split("-")[0] for n in assigned(p).values()}
                  for p in result.placements}
    assert racks_used == {GangKey("ml/a"): {"r1"}, GangKey("ml/b"): {"r2"}}
    assert sum(len(p.assignments) for p in result.placements) == 20


# ---------------------------------------------------------------- status

def verdict(phase: Phase, reason: str, message: str = "needs 4 GPUs, 2 free") -> GroupStatus:
    return GroupStatus(phase, MemberCounts(pending=4), reason, message)


def body(status: GroupStatus, previous: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return status_body(Flavor.NATIVE, status, observed_generation=2,
                       previous_conditions=previous or [], now=NOW)


def test_waiting_group_is_not_initially_scheduled_with_our_reason() -> None:
    (condition,) = body(verdict(Phase.PENDING, "Unschedulable"))["conditions"]
    assert condition == {
        "type": "PodGroupInitiallyScheduled", "status": "False", "reason": "Unschedulable",
        "message": "needs 4 GPUs, 2 free", "observedGeneration": 2, "lastTransitionTime": NOW,
    }


def test_placed_group_is_scheduled_for_good() -> None:
    waiting = body(verdict(Phase.PENDING, "Unschedulable"))["conditions"]
    placed = body(verdict(Phase.INQUEUE, "Binding", "members placed, binding"), waiting)
    (condition,) = placed["conditions"]
    assert (condition["status"], condition["reason"]) == ("True", "Scheduled")
    # Members lost later do not turn it back, as kube-scheduler keeps it.
    again = body(verdict(Phase.PENDING, "Unschedulable"), placed["conditions"])
    assert again["conditions"] == placed["conditions"]


def test_a_group_waiting_for_members_says_nothing_yet_and_keeps_others_conditions() -> None:
    disruption = {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
                  "message": "preempted", "lastTransitionTime": EARLIER}
    assert body(verdict(Phase.PENDING, "Waiting"), [disruption])["conditions"] == [disruption]


def test_invalid_native_group_reports_a_scheduler_error() -> None:
    (condition,) = invalid_body(Flavor.NATIVE, "bad minCount", NOW)["conditions"]
    assert (condition["type"], condition["status"], condition["reason"]) == (
        "PodGroupInitiallyScheduled", "False", "SchedulerError")
