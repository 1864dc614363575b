"""Expected runtimes: only what the author stated, never past a deadline, bad ones refused."""

from __future__ import annotations

from gangsched.core.kubeobjects.podgroups import group_from_api
from gangsched.core.kubeobjects.pods import pod_from_api
from gangsched.core.model.objects import Flavor, Gang, GangKey, Pod, PodKey
from gangsched.core.model.resources import Resources
from gangsched.core.model.runtimes import (
    RUNTIME_ANNOTATION,
    expected_end,
    gang_runtime,
    pod_runtime,
    read_runtime,
)


def member(name: str, *, runtime: float | None = None, deadline: float | None = None,
           started: float | None = None) -> Pod:
    return Pod(PodKey(f"ns/{name}"), Resources.zero(), expected_runtime=runtime,
               active_deadline=deadline, started=started)


def test_an_annotation_reads_as_seconds() -> None:
    assert read_runtime({RUNTIME_ANNOTATION: "15m"}) == (900.0, None)
    assert read_runtime({RUNTIME_ANNOTATION: "1h30m"}) == (5400.0, None)
    assert read_runtime({}) == (None, None)


def test_a_negative_or_unreadable_annotation_is_refused_with_a_reason() -> None:
    value, problem = read_runtime({RUNTIME_ANNOTATION: "-5m"})
    assert value is None and problem is not None and "negative" in problem
    value, problem = read_runtime({RUNTIME_ANNOTATION: "soon"})
    assert value is None and problem is not None and "not a duration" in problem


def test_a_deadline_caps_what_the_pod_or_its_group_states() -> None:
    assert pod_runtime(member("a", runtime=600.0, deadline=60.0), None) == 60.0
    assert pod_runtime(member("a", deadline=60.0), 30.0) == 30.0
    assert pod_runtime(member("a"), 30.0) == 30.0
    assert pod_runtime(member("a", runtime=10.0), 30.0) == 10.0
    assert pod_runtime(member("a"), None) is None


def test_a_gang_runs_as_long_as_its_longest_member_and_unknown_if_any_is() -> None:
    gang = Gang(GangKey("ns/g"), 2, (member("a", runtime=10.0), member("b", runtime=20.0)))
    assert gang_runtime(gang) == 20.0
    assert gang_runtime(Gang(GangKey("ns/g"), 2, (member("a", runtime=10.0), member("b")))) \
        is None


def test_running_pods_end_from_when_they_started_and_never_in_the_past() -> None:
    assert expected_end([member("a", runtime=100.0, started=50.0)], None, now=60.0) == 150.0
    assert expected_end([member("a", runtime=100.0)], None, now=60.0) == 160.0
    assert expected_end([member("a", runtime=5.0, started=0.0)], None, now=60.0) == 60.0
    assert expected_end([member("a"), member("b", runtime=1.0)], None, now=0.0) is None


def test_the_api_objects_carry_runtime_deadline_and_start() -> None:
    pod = pod_from_api({
        "metadata": {"name": "p", "namespace": "ns",
                     "annotations": {RUNTIME_ANNOTATION: "2m"}},
        "spec": {"activeDeadlineSeconds": 600, "containers": []},
        "status": {"startTime": "2026-01-01T00:00:00Z"},
    })
    assert (pod.expected_runtime, pod.active_deadline, pod.runtime_problem) == (120.0, 600.0, None)
    assert pod.started is not None
    bad = pod_from_api({"metadata": {"name": "p", "namespace": "ns",
                                     "annotations": {RUNTIME_ANNOTATION: "-1h"}},
                        "spec": {"containers": []}})
    assert bad.expected_runtime is None and bad.runtime_problem is not None
    group = group_from_api({"metadata": {"name": "g", "namespace": "ns",
                                         "annotations": {RUNTIME_ANNOTATION: "later"}},
                            "spec": {"minMember": 2}}, Flavor.GANGSCHED)
    assert group.min_member == 2  # nothing else disturbed
    assert group.expected_runtime is None and group.runtime_problem is not None
