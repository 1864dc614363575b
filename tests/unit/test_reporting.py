"""What the reporter asks the dispatcher for: keyed by UID, paced, the latest state whole."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio import client

from gangsched.core.kubeobjects.podgroups import GroupRecord
from gangsched.core.kubeobjects.records import PodRecord, pod_record_from_api
from gangsched.core.kubeobjects.status_bodies import GroupStatus, Phase, QueueStatus
from gangsched.core.model.objects import Flavor, GangKey, MemberCounts, QueueName
from gangsched.core.model.resources import Resources
from gangsched.dispatcher import Call, Dispatcher, Rank
from gangsched.reporting import Reporter


class RecordingDispatcher(Dispatcher):
    """Keeps the calls it is given; sends nothing."""

    def __init__(self) -> None:
        super().__init__(bind_workers=1)
        self.calls: list[Call] = []

    def submit(self, call: Call) -> None:
        self.calls.append(call)


def record(uid: str, condition: str | None = None, reason: str = "Unschedulable") -> PodRecord:
    obj: dict[str, Any] = {
        "metadata": {"name": "worker-0", "namespace": "ns", "uid": uid,
                     "resourceVersion": "7", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"schedulerName": "gang", "containers": [{"name": "c"}]},
        "status": {"phase": "Pending"},
    }
    if condition is not None:
        obj["status"]["conditions"] = [{"type": "PodScheduled", "status": "False",
                                        "reason": reason, "message": condition}]
    return pod_record_from_api(obj, ours=True)


@pytest.fixture
async def dispatcher() -> RecordingDispatcher:
    return RecordingDispatcher()


@pytest.fixture
async def reporter(dispatcher: RecordingDispatcher) -> Reporter:
    return Reporter(client.ApiClient(client.Configuration()), dispatcher, placed=lambda _: False)


def test_a_waiting_pod_gets_its_condition_and_event_keyed_by_its_uid_when_asked(
        reporter: Reporter, dispatcher: RecordingDispatcher) -> None:
    reporter.pod_unschedulable(record("uid-1"), "needs 4 cpu")
    reporter.pod_unschedulable(record("uid-2"), "needs 4 cpu")  # same name, created again
    conditions = [c for c in dispatcher.calls if c.rank is Rank.STATUS]
    events = [c for c in dispatcher.calls if c.rank is Rank.EVENT]
    assert [c.key for c in conditions] == [("uid-1", ""), ("uid-2", "")]
    assert all(c.retry and not c.gap for c in conditions)
    assert {c.state for c in conditions} == {("Unschedulable", "needs 4 cpu")}
    assert [c.key for c in events] == [("uid-1", "event/FailedScheduling"),
                                       ("uid-2", "event/FailedScheduling")]
    # The report plan says when it is due: the dispatcher only coalesces it.
    assert all(c.state is None and not c.gap and c.repeat_s is None for c in events)


def test_a_condition_already_on_the_pod_is_not_written_again_but_its_event_is_asked_for(
        reporter: Reporter, dispatcher: RecordingDispatcher) -> None:
    reporter.pod_unschedulable(record("uid-1", condition="needs 4 cpu"), "needs 4 cpu")
    assert [c.rank for c in dispatcher.calls] == [Rank.EVENT]


def test_a_condition_saying_the_message_under_another_reason_is_written_again(
        reporter: Reporter, dispatcher: RecordingDispatcher) -> None:
    """A gang that stops asking for nodes must stop saying ``Unschedulable`` even when
    its message reads the same: autoscalers read the reason alone."""
    reporter.pod_unschedulable(record("uid-1", condition="short of members"),
                               "short of members", reason="GangWaiting", event=False)
    (condition,) = dispatcher.calls
    assert condition.rank is Rank.STATUS
    assert condition.state == ("GangWaiting", "short of members")


def test_a_condition_asked_for_again_without_its_event_is_written_alone(
        reporter: Reporter, dispatcher: RecordingDispatcher) -> None:
    reporter.pod_unschedulable(record("uid-1"), "needs 4 cpu", event=False)
    assert [c.rank for c in dispatcher.calls] == [Rank.STATUS]


def test_a_lone_pods_unreadable_runtime_is_told_once_per_problem_beside_its_wait(
        reporter: Reporter, dispatcher: RecordingDispatcher) -> None:
    waiting = record("uid-1")
    reporter.pod_unschedulable(waiting, "needs 4 cpu")
    for problem in ("negative", "negative", "not a duration"):  # every cycle tells it
        reporter.pod_runtime_problem(waiting, problem)
    told = [c for c in dispatcher.calls if c.what.startswith("event InvalidRuntime")]
    assert [c.key for c in told] == [("uid-1", "event/InvalidRuntime")] * 2
    assert all(c.key != ("uid-1", "event/paced") for c in told), (
        "the pod's FailedScheduling of the same cycle must not replace it")
    reporter.retain({}, {waiting.pod.key: waiting})
    reporter.pod_runtime_problem(waiting, "not a duration")
    reporter.retain({}, {})  # the pod is gone: forgotten
    reporter.pod_runtime_problem(waiting, "not a duration")
    assert len([c for c in dispatcher.calls if c.what.startswith("event InvalidRuntime")]) == 3


def test_a_waiting_groups_unreadable_runtime_is_not_replaced_by_its_waiting_warning(
        reporter: Reporter, dispatcher: RecordingDispatcher) -> None:
    group = GroupRecord(GangKey("ns/job"), Flavor.GANGSCHED, "uid-g", None, None, {}, None)
    status = GroupStatus(Phase.PENDING, MemberCounts(pending=2), "Unschedulable",
                         "needs 4 cpu", runtime_problem="pod ns/job-0: negative")
    reporter.group_status(group, status, 1)
    events = {c.what.split()[1]: c.key for c in dispatcher.calls if c.rank is Rank.EVENT}
    assert set(events) == {"InvalidRuntime", "Unschedulable"}
    assert events["InvalidRuntime"] != events["Unschedulable"], (
        "in one slot, the warning asked for after it would replace it before it goes out")


def test_a_gated_pod_gets_its_condition_and_no_event(
        reporter: Reporter, dispatcher: RecordingDispatcher) -> None:
    reporter.pod_gated(record("uid-1"), "waits for its scheduling gates")
    [call] = dispatcher.calls
    assert call.state == ("SchedulingGated", "waits for its scheduling gates")


def test_a_queue_status_is_asked_for_once_while_it_holds_and_keeps_its_transition_times(
        reporter: Reporter, dispatcher: RecordingDispatcher) -> None:
    written = [{"type": "Open", "status": "True", "reason": "Open",
                "message": "admits new PodGroups", "lastTransitionTime": "2026-01-01T00:00:00Z"}]
    held = QueueStatus(Resources.of({"cpu": 2000}), 1, 1)
    for _ in range(3):  # every full cycle asks again
        reporter.queue_status(QueueName("research"), held, written)
    [call] = dispatcher.calls
    assert call.key == ("queue/research", "")
    assert body_of(call)["conditions"] == written, "its status held: its time stays"
    reporter.queue_status(QueueName("research"), QueueStatus(Resources.zero(), 0, 0), written)
    assert len(dispatcher.calls) == 2 and body_of(dispatcher.calls[1])["allocated"] == {}


def body_of(call: Call) -> dict[str, Any]:
    assert isinstance(call.state, dict)
    return call.state
