"""Pods with scheduling gates: read from the API, and their gang waits whole until lifted."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from gangsched.core.kubeobjects.fields import ObjectError
from gangsched.core.kubeobjects.pods import pod_from_api
from gangsched.core.model.objects import Gang, PodKey
from gangsched.core.reasons import Gated
from tests.unit.test_cycle import SIX_CPU, cycle, gang, placed, reasons


def api_pod(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "x", "namespace": "ns",
                     "creationTimestamp": "2024-05-01T12:00:00Z"},
        "spec": {"containers": [{"name": "main"}], **spec},
        "status": {"phase": "Pending"},
    }


def test_gates_are_read_by_name() -> None:
    pod = pod_from_api(api_pod(schedulingGates=[{"name": "kueue.x-k8s.io/admission"},
                                                {"name": "example.com/b"}]))
    assert pod.gates == ("kueue.x-k8s.io/admission", "example.com/b")
    assert pod_from_api(api_pod()).gates == ()


@pytest.mark.parametrize("gates", [{"name": "a"}, ["a"], [{"name": 1}]])
def test_malformed_gates_are_an_object_error(gates: object) -> None:
    with pytest.raises(ObjectError, match="schedulingGates"):
        pod_from_api(api_pod(schedulingGates=gates))


def gated(g: Gang, *which: int, gate: str = "example.com/hold") -> Gang:
    pods = tuple(replace(p, gates=(gate,)) if i in which else p for i, p in enumerate(g.pending))
    return replace(g, pending=pods)


def test_one_gated_member_keeps_its_whole_gang_waiting_and_says_which_gate() -> None:
    result = cycle(SIX_CPU, [gated(gang("ns/a", 3), 2)])
    assert placed(result) == []
    assert reasons(result)["ns/a"] == Gated(PodKey("ns/a-2"), ("example.com/hold",), 0)


def test_a_gang_above_min_member_still_waits_for_its_gated_member() -> None:
    result = cycle(SIX_CPU, [gated(gang("ns/a", 3, min_member=2), 0, 1)])
    assert placed(result) == []
    reason = reasons(result)["ns/a"]
    assert isinstance(reason, Gated) and (reason.pod, reason.others) == ("ns/a-0", 1)


def test_a_gated_gang_holds_no_room_however_long_it_waited() -> None:
    giant = gated(gang("ns/giant", 6), 0)
    result = cycle(SIX_CPU, [giant, gang("ns/small", 2, created=5)],
                   waiting_since={"ns/giant": 0.0}, now=10_000.0)
    assert placed(result) == ["ns/small"]
    assert isinstance(reasons(result)["ns/giant"], Gated)


def test_once_every_gate_is_lifted_the_gang_binds_whole() -> None:
    result = cycle(SIX_CPU, [gang("ns/a", 3)])
    assert placed(result) == ["ns/a"]
    assert len(result.placements[0].assignments) == 3
