"""Who may preempt and who may be preempted, read from PodGroups, pods and classes."""

from __future__ import annotations

from typing import Any

import pytest

from gangsched.core.kubeobjects.groups import Flavor, GroupSpec, group_from_api
from gangsched.core.kubeobjects.pods import pod_from_api
from gangsched.core.model.objects import GangKey, NodeName, Pod, PodKey, QueueName
from gangsched.core.model.resources import Resources
from gangsched.core.stages.gangs import Member, gather


def group(flavor: Flavor, spec: dict[str, Any] | None = None,
          annotations: dict[str, str] | None = None) -> GroupSpec:
    return group_from_api({"metadata": {"name": "g", "namespace": "ns",
                                        "annotations": annotations or {}},
                           "spec": spec or {}}, flavor)


def test_native_preemption_policy_never_is_read() -> None:
    never = group(Flavor.NATIVE, {"schedulingPolicy": {"gang": {"minCount": 2}},
                                  "preemptionPolicy": "Never"})
    assert not never.preempts
    assert group(Flavor.NATIVE, {"schedulingPolicy": {"gang": {"minCount": 2}}}).preempts


@pytest.mark.parametrize("annotation", ["scheduling.gangsched.io/preemptible",
                                        "volcano.sh/preemptable"])
@pytest.mark.parametrize("flavor", list(Flavor))
def test_annotation_opts_a_group_out_of_being_evicted(flavor: Flavor, annotation: str) -> None:
    spec = {"schedulingPolicy": {"gang": {"minCount": 1}}} if flavor is Flavor.NATIVE else {}
    assert not group(flavor, spec, {annotation: "false"}).preemptible
    assert group(flavor, spec, {annotation: "true"}).preemptible
    assert group(flavor, spec).preemptible


@pytest.mark.parametrize("flavor", [Flavor.VOLCANO, Flavor.GANGSCHED, Flavor.COSCHEDULING])
def test_volcano_queue_annotation_names_the_queue(flavor: Flavor) -> None:
    named = group(flavor, {}, {"scheduling.volcano.sh/queue-name": "research"})
    assert named.queue == QueueName("research")
    # The spec's own field wins: it is what the group says of itself.
    both = group(flavor, {"queue": "infra"}, {"scheduling.volcano.sh/queue-name": "research"})
    assert both.queue == QueueName("infra")


def test_volcano_queue_annotation_on_a_native_group() -> None:
    named = group(Flavor.NATIVE, {"schedulingPolicy": {"gang": {"minCount": 1}}},
                  {"scheduling.volcano.sh/queue-name": "research"})
    assert named.queue == QueueName("research")


def test_pod_preemption_policy_never_is_read() -> None:
    def body(policy: str) -> dict[str, Any]:
        return {"metadata": {"name": "p", "namespace": "ns"},
                "spec": {"containers": [], "preemptionPolicy": policy}}

    assert not pod_from_api(body("Never")).preempts
    assert pod_from_api(body("PreemptLowerPriority")).preempts


def spec_of(**changes: Any) -> GroupSpec:
    base = GroupSpec(GangKey("ns/g"), Flavor.GANGSCHED, 1, Resources.zero(),
                     QueueName("default"), 0.0)
    return GroupSpec(**{**{f: getattr(base, f) for f in base.__slots__}, **changes})


def pending(name: str, *, preempts: bool = True, priority: int = 0) -> Member:
    return Member(Pod(PodKey(f"ns/{name}"), Resources.of({"pods": 1}), preempts=preempts,
                      priority=priority), GangKey("ns/g"))


def test_gang_preempts_unless_group_class_or_pod_says_never() -> None:
    def gang_of(spec: GroupSpec, *members: Member, never: frozenset[str] = frozenset()) -> Any:
        return gather(members, {spec.key: spec}, never_preempting_classes=never).gangs[0]

    assert gang_of(spec_of(), pending("a")).preempts
    assert not gang_of(spec_of(preempts=False), pending("a")).preempts
    assert not gang_of(spec_of(), pending("a", preempts=False)).preempts
    assert not gang_of(spec_of(priority_class="batch"), pending("a"),
                       never=frozenset({"batch"})).preempts
    assert not gang_of(spec_of(preemptible=False), pending("a")).preemptible


def test_a_running_gang_keeps_its_pods_priority_and_lists_its_pods() -> None:
    bound = Pod(PodKey("ns/a"), Resources.of({"pods": 1}), node_name=NodeName("n1"),
                priority=50)
    gathered = gather([Member(bound, GangKey("ns/g"), running=True)], {GangKey("ns/g"): spec_of()})
    assert gathered.gangs[0].priority == 50
    assert gathered.bound_pods[GangKey("ns/g")] == (bound,)
