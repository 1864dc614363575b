"""Kueue admits, gangsched places: a gang whose job Kueue has not admitted holds no room."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gangsched.core.kubeobjects.queues import kueue_workload_from_api
from gangsched.core.model.objects import Flavor, Gang, GangKey, PodKey
from gangsched.core.reasons import Gated, GatedByKueue, ReservedByAdmitted, SuspendedByKueue
from gangsched.feed import Feed
from gangsched.mirror import Mirror
from tests.unit.test_cycle import SIX_CPU, cycle, gang, placed, reasons
from tests.unit.test_gates import gated


def job(i: int, *, pods: int = 0, kueue: bool = True) -> Gang:
    """Job i: a PodGroup with minResources 3 CPU, whose pods come once Kueue admits it."""
    key = f"ns/job-{i}"
    made = gang(key, pods, min_member=1, min_cpu=3, created=i)
    return replace(made, kueue_workload=f"ns/job-{i}-wl") if kueue else made


def unadmitted(result: Any) -> dict[str, object]:
    return {u.gang: u.reason for u in result.unadmitted}


def test_podgroups_of_jobs_kueue_keeps_suspended_reserve_nothing_for_the_one_it_admits() -> None:
    # The reversed order: gangsched saw job-0 and job-1 first, Kueue admits job-2.
    result = cycle(SIX_CPU, [job(0), job(1), job(2, pods=3, kueue=False)])
    assert result.admitted == {"ns/job-2"}
    assert placed(result) == ["ns/job-2"]
    assert unadmitted(result) == {
        "ns/job-0": SuspendedByKueue(GangKey("ns/job-0"), "ns/job-0-wl"),
        "ns/job-1": SuspendedByKueue(GangKey("ns/job-1"), "ns/job-1-wl"),
    }


def test_a_podgroup_admitted_before_its_workload_appeared_lets_its_room_go() -> None:
    result = cycle(SIX_CPU, [job(0), job(1), job(2, pods=3, kueue=False)],
                   admitted=["ns/job-0", "ns/job-1"])
    assert result.admitted == {"ns/job-2"}
    assert placed(result) == ["ns/job-2"]
    assert not any(isinstance(r, ReservedByAdmitted) for r in reasons(result).values())


def test_a_gang_kueue_suspends_neither_starves_others_nor_is_placed() -> None:
    waiting = replace(gang("ns/big", 6), kueue_workload="ns/big-wl")
    result = cycle(SIX_CPU, [waiting, gang("ns/small", 2, created=5)],
                   waiting_since={"ns/big": 0.0}, now=10_000.0)
    assert placed(result) == ["ns/small"]
    assert reasons(result)["ns/big"] == SuspendedByKueue(GangKey("ns/big"), "ns/big-wl")
    assert "ns/big" not in result.admitted


def test_once_kueue_admits_it_the_job_is_admitted_and_placed_whole() -> None:
    result = cycle(SIX_CPU, [job(0, pods=3, kueue=False)])
    assert result.admitted == {"ns/job-0"}
    assert len(result.placements[0].assignments) == 3


def test_pods_behind_kueues_gate_are_said_to_be_gated_by_kueue_and_hold_no_room() -> None:
    big = gated(gang("ns/big", 6), 0, 3, gate="kueue.x-k8s.io/admission")
    result = cycle(SIX_CPU, [big, gang("ns/small", 2, created=5)],
                   waiting_since={"ns/big": 0.0}, now=10_000.0)
    assert placed(result) == ["ns/small"]
    assert reasons(result)["ns/big"] == GatedByKueue(PodKey("ns/big-0"), 1)
    other = cycle(SIX_CPU, [gated(gang("ns/a", 2), 1)])
    assert reasons(other)["ns/a"] == Gated(PodKey("ns/a-1"), ("example.com/hold",), 0)


def workload(admitted: bool | None, owner: str = "job-uid") -> dict[str, Any]:
    conditions = [] if admitted is None else [
        {"type": "QuotaReserved", "status": "True"},
        {"type": "Admitted", "status": "True" if admitted else "False"}]
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": "job-wl", "namespace": "ns", "uid": "wl-uid",
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job",
                                              "name": "job", "uid": owner,
                                              "controller": True}]},
            "status": {"conditions": conditions}}


def test_a_workload_is_admitted_only_by_its_admitted_condition() -> None:
    assert kueue_workload_from_api(workload(True)).admitted
    assert not kueue_workload_from_api(workload(False)).admitted
    assert not kueue_workload_from_api(workload(None)).admitted
    assert kueue_workload_from_api(workload(None)).owners == ("job-uid",)


def test_the_mirror_holds_a_podgroup_of_a_job_while_its_workload_is_not_admitted() -> None:
    mirror = Mirror(scheduler_names=frozenset({"gang"}))
    feed = Feed(mirror)
    feed.upsert_group(Flavor.GANGSCHED, {
        "apiVersion": "scheduling.gangsched.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": "job", "namespace": "ns", "uid": "pg-uid",
                     "creationTimestamp": "2026-01-01T00:00:00Z",
                     "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job",
                                          "name": "job", "uid": "job-uid"}]},
        "spec": {"minMember": 1, "minResources": {"cpu": "3"}}})

    def waits_for() -> str | None:
        spec = mirror.view().groups[GangKey("ns/job")].spec
        assert spec is not None
        return spec.kueue_workload

    assert waits_for() is None
    assert feed.upsert("kueueworkloads", workload(None))
    assert waits_for() == "ns/job-wl"
    assert feed.upsert("kueueworkloads", workload(True))
    assert waits_for() is None
    feed.upsert("kueueworkloads", workload(False))
    assert waits_for() == "ns/job-wl"
    feed.delete("kueueworkloads", workload(False))
    assert waits_for() is None
    feed.upsert("kueueworkloads", workload(None, owner="another-job"))
    assert waits_for() is None
