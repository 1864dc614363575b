"""Each PodGroup API gets the status shape and phase names its readers expect."""

from __future__ import annotations

from typing import Any

import pytest

from gangsched.core.kubeobjects.status_bodies import (
    EVENT_MESSAGE_LIMIT,
    GroupStatus,
    Phase,
    QueueStatus,
    group_status,
    invalid_body,
    queue_status_body,
    scheduled_message,
    status_body,
)
from gangsched.core.model.objects import (
    Flavor,
    GangKey,
    GroupSpec,
    MemberCounts,
    NodeName,
    PodKey,
    QueueName,
)
from gangsched.core.model.resources import Resources

NOW, EARLIER = "2026-01-01T00:00:10Z", "2026-01-01T00:00:00Z"


def verdict(phase: Phase, reason: str = "Unschedulable", message: str = "no room") -> GroupStatus:
    return GroupStatus(phase, MemberCounts(pending=1, scheduled=2, running=2, succeeded=1),
                       reason, message)


def body(flavor: Flavor, status: GroupStatus, previous: list[dict[str, str]] | None = None
         ) -> dict[str, Any]:
    return status_body(flavor, status, observed_generation=3,
                       previous_conditions=previous or [], now=NOW)


@pytest.mark.parametrize(("phase", "volcano", "coscheduling"), [
    (Phase.PENDING, "Pending", "Pending"),
    (Phase.INQUEUE, "Inqueue", "Scheduling"),
    (Phase.RUNNING, "Running", "Running"),
    (Phase.SUCCEEDED, "Completed", "Finished"),
    (Phase.UNSCHEDULABLE, "Pending", "Pending"),
])
def test_foreign_phase_names(phase: Phase, volcano: str, coscheduling: str) -> None:
    assert body(Flavor.VOLCANO, verdict(phase))["phase"] == volcano
    assert body(Flavor.COSCHEDULING, verdict(phase))["phase"] == coscheduling


def test_ours_carries_counts_generation_and_a_scheduled_condition() -> None:
    out = body(Flavor.GANGSCHED, verdict(Phase.RUNNING, "GangScheduled", "placed"))
    assert (out["phase"], out["scheduled"], out["running"], out["succeeded"]) == (
        "Running", 3, 2, 1)
    assert out["observedGeneration"] == 3
    (condition,) = out["conditions"]
    assert (condition["type"], condition["status"], condition["reason"]) == (
        "Scheduled", "True", "GangScheduled")


def test_transition_time_is_kept_while_the_condition_holds() -> None:
    held = [{"type": "Scheduled", "status": "False", "lastTransitionTime": EARLIER}]
    waiting = body(Flavor.GANGSCHED, verdict(Phase.PENDING), held)
    assert waiting["conditions"][0]["lastTransitionTime"] == EARLIER
    running = body(Flavor.GANGSCHED, verdict(Phase.RUNNING, "GangScheduled"), held)
    assert running["conditions"][0]["lastTransitionTime"] == NOW


def test_volcano_says_why_a_group_waits_but_not_when_all_is_well() -> None:
    waiting = body(Flavor.VOLCANO, verdict(Phase.INQUEUE, "Unschedulable", "needs 4 GPUs"))
    assert waiting["conditions"][0]["message"] == "needs 4 GPUs"
    admitted = body(Flavor.VOLCANO, verdict(Phase.INQUEUE, "Admitted", "admitted"))
    assert admitted["conditions"] == []


@pytest.mark.parametrize("phase", [Phase.RUNNING, Phase.SUCCEEDED, Phase.FAILED])
def test_volcano_conditions_are_always_written_whole_so_none_outlives_its_truth(
    phase: Phase,
) -> None:
    """Merge-patched in place (no status subresource): a list left out would keep the old one."""
    was = [{"type": "Unschedulable", "status": "True", "lastTransitionTime": EARLIER}]
    out = body(Flavor.VOLCANO, verdict(phase, "GangScheduled", "4 members placed"), was)
    (condition,) = out["conditions"]
    assert (condition["type"], condition["status"]) == ("Scheduled", "True")
    assert condition["lastTransitionTime"] == NOW


def test_long_messages_are_cut_to_what_the_api_keeps() -> None:
    out = body(Flavor.GANGSCHED, verdict(Phase.PENDING, message="x" * 5000))
    assert len(out["conditions"][0]["message"]) == 1024


def test_invalid_group_body_per_flavour() -> None:
    assert invalid_body(Flavor.GANGSCHED, "bad", NOW)["conditions"][0]["reason"] == "InvalidSpec"
    assert invalid_body(Flavor.VOLCANO, "bad", NOW)["conditions"][0]["message"] == "bad"
    assert invalid_body(Flavor.COSCHEDULING, "bad", NOW) == {"phase": "Pending"}


def test_a_gang_s_scheduled_event_names_each_pod_s_node_and_fits_an_event() -> None:
    bound = [(PodKey("ns/w-1"), NodeName("b")), (PodKey("ns/w-0"), NodeName("a")),
             (PodKey("ns/w-2"), NodeName("a"))]
    assert scheduled_message(bound) == "Successfully assigned 3 pods: a: w-0, w-2; b: w-1"
    many = [(PodKey(f"ns/worker-{i}"), NodeName(f"node-{i % 40}")) for i in range(500)]
    message = scheduled_message(many)
    assert message.startswith("Successfully assigned 500 pods: node-0: worker-0, ")
    assert len(message) == EVENT_MESSAGE_LIMIT and message.endswith("…")


def test_the_whole_body_comes_from_one_verdict_generation_included() -> None:
    spec = GroupSpec(GangKey("ns/g"), Flavor.GANGSCHED, 2, Resources.zero(), QueueName("q"),
                     0.0, generation=7)
    status = group_status(spec, MemberCounts(scheduled=2, running=2), admitted=True,
                          waiting_reason=None, waited_seconds=0.0)
    written = status_body(Flavor.GANGSCHED, status, previous_conditions=[], now=NOW)
    assert (written["phase"], written["running"], written["observedGeneration"]) == (
        "Running", 2, 7)
    assert written["conditions"][0]["observedGeneration"] == 7


def test_a_queue_status_without_counts_says_only_the_conditions() -> None:
    """What a scheduler with no gang in a queue writes: a merge patch of the conditions,
    which leaves the counts another scheduler wrote."""
    status = QueueStatus(Resources.of({"cpu": 2000}), pending=1, running=1, open=False)
    whole = queue_status_body(status, (), "2026-01-01T00:00:00Z")
    bare = queue_status_body(status, (), "2026-01-01T00:00:00Z", counts=False)
    assert set(whole) == {"allocated", "pending", "running", "conditions"}
    assert bare == {"conditions": whole["conditions"]}


@pytest.mark.parametrize(("scheduled", "succeeded", "min_member", "volcano"), [
    (5, 0, 7, "Unknown"),   # some members run, fewer than minMember: Volcano's Unknown
    (0, 0, 7, "Inqueue"),   # none placed yet: admitted and waiting
    (7, 0, 7, "Running"),
    (4, 3, 7, "Running"),   # the finished ones count toward minMember
])
def test_volcano_phase_follows_its_api_for_a_partly_running_group(
    scheduled: int, succeeded: int, min_member: int, volcano: str,
) -> None:
    spec = GroupSpec(GangKey("ns/g"), Flavor.VOLCANO, min_member, Resources.zero(),
                     QueueName("q"), 0.0)
    counts = MemberCounts(pending=min_member - scheduled - succeeded, scheduled=scheduled,
                          running=scheduled, succeeded=succeeded)
    status = group_status(spec, counts, admitted=True, waiting_reason=None, waited_seconds=0)
    assert body(Flavor.VOLCANO, status)["phase"] == volcano
    assert body(Flavor.COSCHEDULING, status)["phase"] != "Unknown"


def test_a_queue_status_removes_what_the_queue_no_longer_holds() -> None:
    # status.allocated showed cpu, pods and GPUs; now only one cpu is held.
    status = QueueStatus(allocated=Resources.parse({"cpu": 1, "nvidia.com/gpu": 0}),
                         pending=0, running=1)
    written = queue_status_body(status, (), NOW, shown={"cpu", "pods", "nvidia.com/gpu"})
    # null removes a key under a JSON merge patch; a figure of zero is not kept either
    assert written["allocated"] == {"cpu": "1", "pods": None, "nvidia.com/gpu": None}
    assert queue_status_body(status, (), NOW, shown={"cpu"})["allocated"] == {"cpu": "1"}
