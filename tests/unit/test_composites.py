"""Native CompositePodGroups: a composite with a gang policy and its child PodGroups are
one gang, each child inside one domain of its key, all inside one of the composite's."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest
from kubernetes_asyncio import client

from gangsched.core.actions import Bind, MarkGroupInvalid, WriteGroupStatus
from gangsched.core.kubeobjects.composites import composite_gang_key, composite_record_from_api
from gangsched.core.model.objects import Flavor, GangKey
from gangsched.core.reasons import InSubGroup, NoDomainHolds, ShortOfMembers
from gangsched.core.state import State
from gangsched.core.step import StepConfig, Stepped, step
from gangsched.core.view import StepView
from gangsched.events import Events
from gangsched.feed import Feed
from gangsched.mirror import Mirror
from tests.unit.test_reporting import RecordingDispatcher

NS = "ml"
BLOCK, RACK, GPU = "example.com/block", "example.com/rack", "nvidia.com/gpu"
CREATED = "2026-01-01T00:00:00Z"
JOB = composite_gang_key(NS, "job")


def node(name: str, block: str, rack: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {BLOCK: block, RACK: rack,
                                                  "kubernetes.io/hostname": name}},
            "spec": {},
            "status": {"allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110", GPU: "8"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


NODES = [node(f"{block}-{rack}-{index}", block, f"{block}-{rack}")
         for block in ("b1", "b2") for rack in ("r1", "r2") for index in (1, 2)]
"""Two blocks of two racks of two 8-GPU nodes."""


def composite(name: str = "job", *, gang: int | None = 2, key: str | None = BLOCK,
              parent: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "workloadRef": {"name": "w"},
        "schedulingPolicy": {"gang": {"minGroupCount": gang}} if gang is not None
        else {"basic": {}}}
    if key:
        spec["schedulingConstraints"] = {"topology": [{"key": key}]}
    if parent:
        spec["parentCompositePodGroupName"] = parent
    return {"apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "CompositePodGroup",
            "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}",
                         "creationTimestamp": CREATED}, "spec": spec}


def child(name: str, parent: str = "job", min_count: int = 2,
          key: str | None = RACK) -> dict[str, Any]:
    spec: dict[str, Any] = {"parentCompositePodGroupName": parent, "workloadRef": {"name": "w"},
                            "schedulingPolicy": {"gang": {"minCount": min_count}}}
    if key:
        spec["schedulingConstraints"] = {"topology": [{"key": key}]}
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}",
                         "creationTimestamp": CREATED}, "spec": spec}


def pods(group: str, count: int = 2, gpus: int = 8) -> list[dict[str, Any]]:
    return [{"metadata": {"name": f"{group}-{index}", "namespace": NS,
                          "uid": f"uid-{group}-{index}", "creationTimestamp": CREATED},
             "spec": {"schedulerName": "gang", "schedulingGroup": {"podGroupName": group},
                      "containers": [{"name": "c", "resources": {
                          "requests": {"cpu": "1", GPU: str(gpus)},
                          "limits": {GPU: str(gpus)}}}]},
             "status": {"phase": "Pending"}} for index in range(count)]


def blocker(node_name: str) -> dict[str, Any]:
    """Another scheduler's pod holding all eight GPUs of a node."""
    return {"metadata": {"name": f"hold-{node_name}", "namespace": "other", "uid": node_name,
                         "creationTimestamp": CREATED},
            "spec": {"schedulerName": "default-scheduler", "nodeName": node_name,
                     "containers": [{"name": "c", "resources": {
                         "requests": {GPU: "8"}, "limits": {GPU: "8"}}}]},
            "status": {"phase": "Running"}}


def stepped(composites: Iterable[dict[str, Any]], groups: Iterable[dict[str, Any]],
            members: Iterable[dict[str, Any]], nodes: list[dict[str, Any]] = NODES) -> Stepped:
    mirror = Mirror(scheduler_names=frozenset({"gang"}))
    feed = Feed(mirror)
    feed.replace("nodes", nodes)
    feed.replace("pods", list(members))
    feed.replace("compositepodgroups", list(composites))
    for group in groups:
        feed.upsert_group(Flavor.NATIVE, group)
    return step(State(), StepView(mirror.view()), 1_800_000_000.0, StepConfig())


def placed(result: Stepped) -> dict[str, dict[str, str]]:
    """Each bound pod's block and rack, by pod name."""
    labels = {n["metadata"]["name"]: n["metadata"]["labels"] for n in NODES}
    return {pod.split("/", 1)[1]: {"block": labels[str(where)][BLOCK],
                                   "rack": labels[str(where)][RACK]}
            for action in result.actions if isinstance(action, Bind)
            for pod, where in action.placement.assignments}


def statuses(result: Stepped) -> dict[GangKey, WriteGroupStatus]:
    return {a.group: a for a in result.actions if isinstance(a, WriteGroupStatus)}


def test_each_child_lands_in_one_rack_and_the_composite_in_one_block_whole() -> None:
    result = stepped([composite()], [child("a"), child("b")], [*pods("a"), *pods("b")])
    where = placed(result)
    assert len(where) == 4
    assert len({where[f"a-{i}"]["rack"] for i in range(2)}) == 1
    assert len({where[f"b-{i}"]["rack"] for i in range(2)}) == 1
    assert len({spot["block"] for spot in where.values()}) == 1
    assert [action.placement.gang for action in result.actions if isinstance(action, Bind)] \
        == [JOB]
    written = statuses(result)
    assert set(written) == {GangKey(f"{NS}/a"), GangKey(f"{NS}/b")}  # the children, not JOB
    assert {w.status.reason for w in written.values()} == {"Binding"}


def test_a_block_with_room_for_one_child_binds_nothing_of_the_gang() -> None:
    # Every block keeps one rack free, not two: each child would fit alone.
    busy = [blocker(name) for name in ("b1-r2-1", "b1-r2-2", "b2-r2-1", "b2-r2-2")]
    result = stepped([composite()], [child("a"), child("b")],
                     [*pods("a"), *pods("b"), *busy])
    assert placed(result) == {}
    (waiting,) = [u for u in result.result.unplaceable if u.gang == JOB]
    reason = waiting.reason
    assert isinstance(reason, NoDomainHolds)
    assert (reason.label, reason.domains) == (BLOCK, 2)
    assert {w.status.reason for w in statuses(result).values()} == {"Unschedulable"}


def test_without_the_composite_each_child_would_bind_alone() -> None:
    """The proof's control: the same cluster lets a lone rack gang bind."""
    busy = [blocker(name) for name in ("b1-r2-1", "b1-r2-2", "b2-r2-1", "b2-r2-2")]
    lone = child("a")
    del lone["spec"]["parentCompositePodGroupName"]
    result = stepped([], [lone], [*pods("a"), *busy])
    assert len(placed(result)) == 2


@pytest.mark.parametrize("key", [RACK, None])
def test_a_child_short_of_its_min_count_keeps_the_whole_gang_waiting(key: str | None) -> None:
    """Though its sibling has a pod more than it needs: each child's minCount holds."""
    result = stepped([composite(key=key and BLOCK)], [child("a", key=key), child("b", key=key)],
                     [*pods("a", 3), *pods("b", 1)])
    assert placed(result) == {}
    (waiting,) = [u for u in result.result.unplaceable if u.gang == JOB]
    assert waiting.reason == InSubGroup("b", ShortOfMembers(JOB, 1, 2))


def test_fewer_children_than_min_group_count_wait_for_the_rest() -> None:
    result = stepped([composite(gang=3)], [child("a"), child("b")], [*pods("a"), *pods("b")])
    assert placed(result) == {}
    assert JOB in {u.gang for u in result.result.unplaceable}


def test_a_basic_composite_leaves_its_children_gangs_of_their_own() -> None:
    busy = [blocker(name) for name in ("b1-r2-1", "b1-r2-2", "b2-r1-1", "b2-r1-2",
                                       "b2-r2-1", "b2-r2-2")]
    result = stepped([composite(gang=None)], [child("a"), child("b")],
                     [*pods("a"), *pods("b"), *busy])
    gangs = {action.placement.gang for action in result.actions if isinstance(action, Bind)}
    assert len(gangs) == 1 and gangs <= {GangKey(f"{NS}/a"), GangKey(f"{NS}/b")}


@pytest.mark.parametrize(("composites", "named"), [
    ([], "job"),  # the parent does not exist (yet)
    ([composite(parent="top"), composite("top", parent="job")], "Invalid"),  # a cycle
    ([composite(parent="top"), composite("top")], "top"),  # deeper than gangsched places
    ([composite(gang=0)], "minGroupCount"),  # unreadable
])
def test_a_child_whose_composite_cannot_place_it_waits_saying_why(
        composites: list[dict[str, Any]], named: str) -> None:
    mirror = Mirror(scheduler_names=frozenset({"gang"}))
    feed = Feed(mirror)
    feed.replace("nodes", NODES)
    feed.replace("pods", pods("a"))
    feed.replace("compositepodgroups", composites)
    feed.upsert_group(Flavor.NATIVE, child("a"))
    view = mirror.view()
    result = step(State(), StepView(view), 1_800_000_000.0, StepConfig())
    assert placed(result) == {}
    assert GangKey(f"{NS}/a") in {a.group for a in result.actions
                                  if isinstance(a, MarkGroupInvalid)}
    error = view.groups[GangKey(f"{NS}/a")].error
    assert error is not None and named in error


def test_composite_read_never_raises() -> None:
    good = composite_record_from_api(composite(gang=3))
    assert good.composite is not None
    assert (good.composite.min_groups, good.composite.topology_key) == (3, BLOCK)
    bad = composite_record_from_api(composite(gang=0))
    assert bad.composite is None and bad.error is not None


async def test_events_about_a_composite_gang_go_on_the_composite_pod_group() -> None:
    """The gang has no PodGroup of its own: an Event on one would name no object."""
    mirror = Mirror(scheduler_names=frozenset({"gang"}))
    feed = Feed(mirror)
    feed.replace("compositepodgroups", [composite()])
    for group in (child("a"), child("b")):
        feed.upsert_group(Flavor.NATIVE, group)
    dispatcher = RecordingDispatcher()
    events = Events(client.CoreV1Api(client.ApiClient(client.Configuration())), dispatcher)
    events.preempted(GangKey(f"{NS}/other"), {JOB: ()}, mirror.view().groups, {}, ())
    assert [(call.key, call.what) for call in dispatcher.calls] == [
        (("uid-job", "event/Preempted"), f"event Preempted {NS}/job")]
