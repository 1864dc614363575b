"""Estimated starts of gangs that claim devices: the forecast lets go of an ended gang's
claims and keeps those of a gang it places (one node of eight fake GPUs)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from gangsched.core.dra.devices import AllocatedDevice, Allocation, DeviceRef
from gangsched.core.dra.parse import allocation_to_api
from gangsched.core.forecast import Estimate, Unknown, forecast
from gangsched.core.model.objects import (
    DEFAULT_QUEUE,
    Gang,
    GangKey,
    NodeName,
    Pod,
    Policy,
    QueueSpec,
)
from gangsched.core.placement.capacity import Snapshot
from gangsched.core.stages.cycle import CycleInput, run_cycle
from tests.unit.clusters import node
from tests.unit.clusters import pod as plain_pod
from tests.unit.test_dra import DRIVER, claim_obj, claiming, request, snapshot

NOW = 10.0


def held_by(*pods: str) -> dict[str, object]:
    """A claim's status: allocated the eight GPUs of n-0, reserved for the pods."""
    allocation = Allocation(tuple(AllocatedDevice("gpus", DeviceRef(DRIVER, "n-0", f"gpu-{i}"))
                                  for i in range(8)), NodeName("n-0"))
    return {"allocation": allocation_to_api(allocation),
            "reservedFor": [{"resource": "pods", "name": pod, "uid": f"uid-ns/{pod}"}
                            for pod in pods]}


def running(key: str, pod: Pod, runtime: float) -> tuple[Gang, Pod]:
    bound = replace(pod, node_name=NodeName("n-0"), started=0.0, expected_runtime=runtime)
    return Gang(GangKey(key), min_member=1, pending=(), bound=1), bound


def waiting(key: str, pod: Pod, runtime: float) -> Gang:
    return Gang(GangKey(key), min_member=1,
                pending=(replace(pod, expected_runtime=runtime),), created=NOW)


def cluster(claims: Sequence[dict[str, object]], runs: Sequence[tuple[Gang, Pod]],
            waits: Sequence[Gang]) -> CycleInput:
    devices = snapshot(["n-0"], claims).devices
    base = Snapshot.build([node("n-0", cpu="16", memory="64Gi")], [pod for _, pod in runs])
    return CycleInput(
        snapshot=replace(base, devices=devices),
        gangs=(*(gang for gang, _ in runs), *waits),
        bound_requests={gang.key: pod.requests for gang, pod in runs},
        bound_pods={gang.key: (pod,) for gang, pod in runs},
        queues={DEFAULT_QUEUE: QueueSpec(DEFAULT_QUEUE)},
        admitted=frozenset(gang.key for gang, _ in runs),
        waiting_since={gang.key: NOW for gang in waits},
        now=NOW, policy=Policy.BINPACK, starvation_seconds=3600.0,
    )


def estimates(inp: CycleInput) -> dict[str, Estimate]:
    return {str(key): value for key, value in forecast(inp, run_cycle(inp)).items()}


def test_a_gang_waiting_for_devices_starts_when_the_gang_holding_them_ends() -> None:
    """All eight GPUs are allocated to a running gang's claim: once it ends, the
    resource-claim controller deallocates the claim, and the waiting gang gets them."""
    inp = cluster([claim_obj("train", request(count=8), status=held_by("r-0")),
                   claim_obj("next", request(count=8))],
                  [running("ns/train", claiming("ns/r-0", "train"), 100.0)],
                  [waiting("ns/next", claiming("ns/w-0", "next"), 50.0)])
    assert estimates(inp) == {"ns/next": Estimate(100.0)}


def test_devices_a_placed_gang_was_given_stay_taken_until_it_ends() -> None:
    """"a" gets the eight GPUs at 100 s and runs 50 s. A gang without devices ends at
    120 s in between: "b", which needs the same eight, starts when "a" ends, not then."""
    inp = cluster([claim_obj("train", request(count=8), status=held_by("r-0")),
                   claim_obj("a", request(count=8)), claim_obj("b", request(count=8))],
                  [running("ns/train", claiming("ns/r-0", "train"), 100.0),
                   running("ns/cpu", replace(plain_pod("ns/c-0"), uid="uid-c"), 120.0)],
                  [waiting("ns/a", claiming("ns/a-0", "a"), 50.0),
                   waiting("ns/b", replace(claiming("ns/b-0", "b"), created=1.0), 50.0)])
    assert estimates(inp) == {"ns/a": Estimate(100.0), "ns/b": Estimate(150.0)}


def test_a_claim_still_held_by_a_running_consumer_keeps_its_devices() -> None:
    """A claim shared by two running gangs' pods is deallocated only when both ended;
    the waiting gang starts when the longer of them ends."""
    inp = cluster([claim_obj("shared", request(count=8), status=held_by("r-0", "s-0")),
                   claim_obj("next", request(count=8))],
                  [running("ns/short", claiming("ns/r-0", "shared"), 60.0),
                   running("ns/long", claiming("ns/s-0", "shared"), 200.0)],
                  [waiting("ns/next", claiming("ns/w-0", "next"), 50.0)])
    assert estimates(inp) == {"ns/next": Estimate(200.0)}


def test_devices_no_gang_gives_back_leave_the_start_unknown() -> None:
    """The GPUs are held by a claim no running gang of ours holds: nothing frees them."""
    inp = cluster([claim_obj("theirs", request(count=8), status=held_by("x-0")),
                   claim_obj("next", request(count=8))],
                  [running("ns/cpu", replace(plain_pod("ns/c-0"), uid="uid-c"), 100.0)],
                  [waiting("ns/next", claiming("ns/w-0", "next"), 50.0)])
    assert estimates(inp) == {"ns/next": Estimate(None, Unknown.NOT_PLACED)}
