"""PodGroups of every flavour read alike; phases follow members; gangs gather by group."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gangsched.core.kubeobjects.fields import ObjectError
from gangsched.core.kubeobjects.podgroups import group_from_api, group_name_of
from gangsched.core.kubeobjects.status_bodies import Phase, group_status
from gangsched.core.model.objects import (
    Flavor,
    GangKey,
    GroupSpec,
    MemberCounts,
    NodeName,
    Pod,
    PodKey,
    QueueName,
)
from gangsched.core.model.resources import Resources
from gangsched.core.stages.gangs import Member, gather


def test_membership_markers_in_order_of_precedence() -> None:
    assert group_name_of({"scheduling.gangsched.io/pod-group": "a",
                          "scheduling.x-k8s.io/pod-group": "b"}, {}) == "a"
    assert group_name_of({"scheduling.x-k8s.io/pod-group": "b"}, {}) == "b"
    assert group_name_of({}, {"scheduling.k8s.io/group-name": "c"}) == "c"
    assert group_name_of({}, {}) is None


@pytest.mark.parametrize("flavor", list(Flavor))
def test_empty_spec_means_min_member_one(flavor: Flavor) -> None:
    spec = group_from_api({"metadata": {"name": "spark", "namespace": "ns"}}, flavor)
    assert spec.min_member == 1
    assert spec.queue == QueueName("default")
    assert spec.min_resources.is_zero


def test_min_resources_and_queue_are_read() -> None:
    spec = group_from_api(
        {"metadata": {"name": "g", "namespace": "ns", "generation": 3,
                      "creationTimestamp": "2026-01-01T00:00:00Z"},
         "spec": {"minMember": 4, "minResources": {"cpu": "3", "nvidia.com/gpu": 2},
                  "queue": "research", "scheduleTimeoutSeconds": 30}},
        Flavor.VOLCANO,
    )
    assert (spec.min_member, spec.queue, spec.timeout_seconds, spec.generation) == (
        4, "research", 30, 3)
    assert spec.min_resources == Resources.of({"cpu": 3000, "nvidia.com/gpu": 2})
    assert spec.created == 1767225600.0  # age orders gangs of equal priority


def test_min_resources_written_as_quota_usage_are_the_requests_alone() -> None:
    """What Volcano's job controller writes for three workers of 1 CPU and 2 GPUs."""
    spec = group_from_api(
        {"metadata": {"name": "g", "namespace": "ns",
                      "creationTimestamp": "2026-01-01T00:00:00Z"},
         "spec": {"minMember": 3, "minResources": {
             "cpu": "3", "memory": "3Gi", "nvidia.com/gpu": "6", "pods": "3",
             "count/pods": "3", "requests.cpu": "3", "requests.memory": "3Gi",
             "requests.nvidia.com/gpu": "6", "limits.nvidia.com/gpu": "6",
             "requests.example.com/fpga": "1"}}},
        Flavor.VOLCANO,
    )
    assert spec.min_resources == Resources.of({
        "cpu": 3000, "memory": 3 * 2**30, "nvidia.com/gpu": 6, "pods": 3,
        "example.com/fpga": 1})


@pytest.mark.parametrize("spec", [
    {"minMember": "two"},
    {"minResources": {"cpu": "lots"}},
    {"minResources": ["cpu"]},
    {"scheduleTimeoutSeconds": -1},
])
def test_bad_spec_is_an_object_error_naming_the_group(spec: dict[str, object]) -> None:
    with pytest.raises(ObjectError, match="podgroup ns/g"):
        group_from_api({"metadata": {"name": "g", "namespace": "ns"}, "spec": spec},
                       Flavor.VOLCANO)


SPEC = GroupSpec(GangKey("ns/g"), Flavor.GANGSCHED, 2, Resources.zero(), QueueName("default"),
                 0.0, timeout_seconds=10)


def status(counts: MemberCounts, *, admitted: bool = False, reason: str | None = None,
           waited: float = 0.0) -> Phase:
    return group_status(SPEC, counts, admitted=admitted, waiting_reason=reason,
                        waited_seconds=waited).phase


def test_phases_follow_members() -> None:
    assert status(MemberCounts(pending=2)) is Phase.PENDING
    assert status(MemberCounts(pending=2), admitted=True) is Phase.INQUEUE
    assert status(MemberCounts(scheduled=2, running=2)) is Phase.RUNNING
    assert status(MemberCounts(succeeded=2)) is Phase.SUCCEEDED
    assert status(MemberCounts(failed=2)) is Phase.FAILED


def test_timeout_turns_unschedulable_only_after_it_passes() -> None:
    assert status(MemberCounts(pending=2), reason="no room", waited=9) is Phase.PENDING
    assert status(MemberCounts(pending=2), reason="no room", waited=10) is Phase.UNSCHEDULABLE


def _pod(name: str, node: str | None = None) -> Pod:
    return Pod(PodKey(f"ns/{name}"), Resources.of({"cpu": 1000, "pods": 1}),
               node_name=None if node is None else NodeName(node))


def test_gather_counts_bound_members_and_keeps_empty_groups() -> None:
    g, empty = GangKey("ns/g"), GangKey("ns/empty")
    specs = {g: SPEC, empty: GroupSpec(empty, Flavor.GANGSCHED, 1, Resources.of({"cpu": 3000}),
                                       QueueName("default"), 0.0)}
    gathered = gather([Member(_pod("a", "n1"), g, running=True), Member(_pod("b"), g)], specs)
    by_key = {gang.key: gang for gang in gathered.gangs}
    assert by_key[g].bound == 1 and [p.key for p in by_key[g].pending] == ["ns/b"]
    assert by_key[empty].pending == () and not by_key[empty].min_resources.is_zero
    assert gathered.bound_requests[g] == Resources.of({"cpu": 1000, "pods": 1})


def test_pods_of_a_missing_group_wait_as_orphans() -> None:
    gathered = gather([Member(_pod("a"), GangKey("ns/later"))], {})
    assert gathered.gangs == ()
    assert [p.key for p in gathered.orphans[GangKey("ns/later")]] == ["ns/a"]


def test_finished_group_leaves_the_cycle() -> None:
    g = GangKey("ns/g")
    done = [Member(_pod("a", "n1"), g, succeeded=True), Member(_pod("b", "n1"), g, succeeded=True)]
    gathered = gather(done, {g: SPEC})
    assert gathered.gangs == () and gathered.finished == {g}


def test_finished_group_stays_finished_once_its_pods_are_deleted() -> None:
    g = GangKey("ns/g")
    # Its pods gone, a finished group looks like one whose pods are yet to come...
    assert [gang.key for gang in gather([], {g: SPEC}).gangs] == [g]
    # ...unless its status says it finished: then it holds nothing again.
    gathered = gather([], {g: SPEC}, finished_before=frozenset({g}))
    assert gathered.gangs == () and gathered.finished == {g}
    # A new pod brings it back.
    revived = gather([Member(_pod("c"), g)], {g: SPEC}, finished_before=frozenset({g}))
    assert [gang.key for gang in revived.gangs] == [g] and revived.finished == set()


def test_podgroup_priority_class_orders_the_gang_even_before_its_pods() -> None:
    urgent = GangKey("ns/urgent")
    spec = GroupSpec(urgent, Flavor.VOLCANO, 1, Resources.zero(), QueueName("default"), 0.0,
                     priority_class="high")
    before = gather([], {urgent: spec}, priority_classes={"high": 1000})
    assert before.gangs[0].priority == 1000
    admitted = replace(_pod("a"), priority=1000)
    gathered = gather([Member(admitted, urgent)], {urgent: spec},
                      priority_classes={"high": 1000})
    assert gathered.gangs[0].priority == 1000
    unknown = gather([Member(_pod("a"), urgent)], {urgent: spec}, priority_classes={})
    assert unknown.gangs[0].priority == 0


def test_a_gang_being_bound_reads_binding_until_the_watch_confirms_it() -> None:
    being_bound = group_status(SPEC, MemberCounts(pending=2), admitted=True,
                               waiting_reason=None, waited_seconds=0, binding=True)
    assert (being_bound.phase, being_bound.reason) == (Phase.INQUEUE, "Binding")
    confirmed = group_status(SPEC, MemberCounts(scheduled=2, running=2), admitted=True,
                             waiting_reason=None, waited_seconds=0, binding=True)
    assert confirmed.phase is Phase.RUNNING
