"""A Queue's whole status body: what it holds, its gangs, and conditions that do not churn."""

from __future__ import annotations

from gangsched.core.kubeobjects.status_bodies import (
    QueueStatus,
    queue_conditions_current,
    queue_status_body,
)
from gangsched.core.model.resources import Resources
from tests.unit.test_cycle import cpu

EARLIER = "2026-01-01T00:00:00Z"
NOW = "2026-01-01T01:00:00Z"


def conditions(body: dict[str, object]) -> dict[str, tuple[str, str, str]]:
    listed = body["conditions"]
    assert isinstance(listed, list)
    return {c["type"]: (c["status"], c["reason"], c["lastTransitionTime"]) for c in listed}


def test_an_open_queue_says_so_beside_what_it_holds() -> None:
    body = queue_status_body(QueueStatus(cpu(2) + Resources.of({"memory": 2**30}), 1, 3), (), NOW)
    assert (body["allocated"], body["pending"], body["running"]) == (
        {"cpu": "2", "memory": "1Gi"}, 1, 3)
    assert conditions(body) == {"Open": ("True", "Open", NOW)}


def test_a_condition_keeps_its_transition_time_until_its_status_changes() -> None:
    first = queue_status_body(QueueStatus(cpu(1), 0, 1), (), EARLIER)
    again = queue_status_body(QueueStatus(cpu(1), 0, 1), first["conditions"], NOW)
    assert again == first, "an unchanged queue gives an unchanged body: no write"
    closed = queue_status_body(QueueStatus(cpu(1), 0, 1, open=False), again["conditions"], NOW)
    assert conditions(closed) == {"Open": ("False", "Closed", NOW)}


def test_an_unreadable_spec_is_named_by_an_invalid_condition_while_it_lasts() -> None:
    invalid = QueueStatus(Resources.zero(), 0, 0, error="weight: 'x'")
    body = queue_status_body(invalid, (), EARLIER)
    assert conditions(body)["Invalid"] == ("True", "InvalidSpec", EARLIER)
    (named,) = [c for c in body["conditions"] if c["type"] == "Invalid"]
    assert "weight: 'x'" in named["message"]
    fixed = queue_status_body(QueueStatus(Resources.zero(), 0, 0), body["conditions"], NOW)
    assert conditions(fixed) == {"Open": ("True", "Open", EARLIER)}, "gone once it reads well"


def test_a_queue_with_no_place_in_the_tree_says_why_and_is_current_only_while_it_says_so(
) -> None:
    orphan = QueueStatus(Resources.zero(), 1, 0, problem="ParentMissing",
                         problem_message="queue 'q' is invalid: its parent queue 'team' ...",
                         error="weight: 0")
    body = queue_status_body(orphan, (), EARLIER)
    assert conditions(body)["Invalid"] == ("True", "ParentMissing", EARLIER)
    (named,) = [c for c in body["conditions"] if c["type"] == "Invalid"]
    assert named["message"].startswith("queue 'q' is invalid") and "weight: 0" in named["message"]
    said = body["conditions"]
    assert queue_conditions_current(True, "weight: 0", said, "ParentMissing")
    assert not queue_conditions_current(True, "weight: 0", said, "ParentCycle")
    assert not queue_conditions_current(True, None, said, None), "fixed: to be written again"
