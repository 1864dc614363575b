"""Devices held through ResourceClaims are resources of the one ledger queue policies read:
caps, usage, shares, admission and Queue status count them as they count ``nvidia.com/gpu``
asked as an extended resource."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from fractions import Fraction
from typing import Any

import pytest

from devcluster import fakedriver
from gangsched.core.actions import Bind, WriteQueueStatus
from gangsched.core.dra.devices import AllocatedDevice, Allocation, ClaimKey, DeviceRef, Inventory
from gangsched.core.dra.parse import (
    allocation_to_api,
    device_class_from_api,
    resource_claim_from_api,
    slice_from_api,
)
from gangsched.core.dra.usage import claim_devices, device_totals
from gangsched.core.kubeobjects.groups import Flavor, GroupSpec
from gangsched.core.model.objects import GangKey, NodeName, Pod, PodClaim, QueueName, QueueSpec
from gangsched.core.model.resources import DEVICE_CLASS_PREFIX, Capability, Resources
from gangsched.core.placement.capacity import Snapshot
from gangsched.core.reasons import (
    AdmissionOverCapability,
    CapabilityExceeded,
    Reason,
    Starving,
    causes,
)
from gangsched.core.stages.gangs import Member
from gangsched.core.state import State
from gangsched.core.step import StepConfig, Stepped, step
from gangsched.core.view import StepView
from gangsched.devicecache import DeviceCache
from tests.unit.test_cycle import DEFAULT, node, pod
from tests.unit.test_dra import claim_obj, request
from tests.unit.test_step import Cluster, Group, Record

GPU = "nvidia.com/gpu"
IMPLICIT = DEVICE_CLASS_PREFIX + fakedriver.DEVICE_CLASS
CONFIG = StepConfig(starvation_s=60.0)


def inventory(nodes: Iterable[str], claims: Iterable[Mapping[str, Any]]) -> Inventory:
    """Eight fake GPUs per node, of a class that maps ``nvidia.com/gpu``."""
    devices = {}
    for index, name in enumerate(nodes):
        node_name, found = slice_from_api(fakedriver.slice_manifest(name, index))
        assert node_name is not None
        devices[node_name] = found
    manifest = fakedriver.device_class_manifest()
    manifest["spec"] = {**manifest["spec"], "extendedResourceName": GPU}
    spec = device_class_from_api(manifest)
    parsed = [resource_claim_from_api(obj) for obj in claims]
    return Inventory.build(devices, {spec.name: spec}, {c.key: c for c in parsed})


def held(name: str, count: int, node_name: str = "n-0", *, first: int = 0,
         admin: bool = False, users: Iterable[str] = ()) -> dict[str, Any]:
    """A claim allocated ``count`` devices of ``node_name`` and reserved for ``users``."""
    allocation = Allocation(tuple(
        AllocatedDevice("gpus", DeviceRef(fakedriver.DRIVER, node_name, f"gpu-{i}"),
                        admin_access=admin)
        for i in range(first, first + count)), NodeName(node_name))
    status = {"allocation": allocation_to_api(allocation),
              "reservedFor": [{"resource": "pods", "name": u, "uid": f"uid-ns/{u}"}
                              for u in users]}
    return claim_obj(name, request(count=count, adminAccess=admin or None), status=status)


def member(key: str, *claims: str, on: str | None = None, cores: int = 1) -> Pod:
    base = pod(key, cores, gang=key.rsplit("-", 1)[0], on=on)
    return replace(base, uid=f"uid-{key}",
                   resource_claims=tuple(PodClaim(c, ClaimKey(f"ns/{c}")) for c in claims))


def group(name: str, min_member: int = 1, *, min_resources: Resources | None = None,
          queue: str = DEFAULT) -> Group:
    key = GangKey(f"ns/{name}")
    spec = GroupSpec(key, Flavor.GANGSCHED, min_member=min_member,
                     min_resources=min_resources or Resources.zero(), queue=QueueName(queue),
                     created=0.0, generation=1)
    return Group(key, Flavor.GANGSCHED, f"uid-{name}", spec)


def view(pods: list[Pod], groups: list[Group], claims: Iterable[Mapping[str, Any]],
         cap: Mapping[str, int] | None = None, nodes: int = 2,
         queues: Iterable[str | QueueSpec] = (), cores: int = 16) -> StepView:
    names = [f"n-{i}" for i in range(nodes)]
    snapshot = replace(Snapshot.build([node(n, cores) for n in names], pods),
                       devices=inventory(names, claims))
    capability = Capability.parse(cap) if cap is not None else None
    return StepView(Cluster(
        snapshot=snapshot,
        members=tuple(Member(p, p.gang, running=p.node_name is not None) for p in pods),
        groups={g.key: g for g in groups},
        queues={DEFAULT: QueueSpec(DEFAULT, capability=capability),
                **{spec.name: spec for spec in (
                    q if isinstance(q, QueueSpec) else QueueSpec(QueueName(q)) for q in queues)}},
        pods={p.key: Record(p, p.uid) for p in pods},
    ))


def reason_of(stepped: Stepped, gang: str) -> Reason:
    (found,) = [u.reason for u in stepped.result.unplaceable if u.gang == gang]
    return found


def binds(stepped: Stepped) -> list[str]:
    return sorted(a.placement.gang for a in stepped.actions if isinstance(a, Bind))


def queue_status(stepped: Stepped) -> WriteQueueStatus:
    (found,) = [a for a in stepped.actions
                if isinstance(a, WriteQueueStatus) and a.queue == DEFAULT]
    return found


@pytest.mark.parametrize("name", [GPU, IMPLICIT])
def test_a_queue_capped_at_two_gpus_keeps_an_eight_gpu_claim_waiting_and_binds_a_two_gpu_one(
        name: str) -> None:
    """The cap names the class's extended resource or its implicit name: either caps the
    devices claims ask, as it caps ``nvidia.com/gpu`` asked as an extended resource."""
    pods = [member("ns/big-0", "eight"), member("ns/small-0", "two")]
    claims = [claim_obj("eight", request(count=8)), claim_obj("two", request(count=2))]
    stepped = step(State(), view(pods, [group("big"), group("small")], claims, {name: 2}),
                   1000.0, CONFIG)
    assert binds(stepped) == ["ns/small"]
    reason = reason_of(stepped, "ns/big")
    assert isinstance(reason, CapabilityExceeded)
    assert reason.placed.get(GPU) == 8
    assert reason.capability == Capability.parse({GPU: 2})


def test_a_bound_gang_counts_each_claim_its_pods_hold_once_and_admin_access_not_at_all() -> None:
    """Two running pods share a claim of four GPUs and each holds an admin-access claim of
    the same devices: the queue holds 4 GPUs, of the 16 the slices publish."""
    claims = [held("shared", 4, users=["job-0", "job-1"]),
              held("watch", 4, admin=True, users=["job-0", "job-1"])]
    pods = [member(f"ns/job-{i}", "shared", "watch", on="n-0") for i in range(2)]
    stepped = step(State(), view(pods, [group("job", 2)], claims), 1000.0, CONFIG)
    status = queue_status(stepped)
    assert status.status.allocated.get(GPU) == 4
    assert status.dominant_share == Fraction(4, 16)


def test_a_pending_gang_beside_its_running_members_needs_only_the_claims_they_do_not_hold(
) -> None:
    """A running member holds a claim of 2; its waiting member shares it and asks 2 more:
    under a cap of 4 the gang's extra member fits (2 + 2), under a cap of 3 it does not."""
    claims = [held("shared", 2, users=["job-0"]), claim_obj("more", request(count=2))]
    pods = [member("ns/job-0", "shared", on="n-0"), member("ns/job-1", "shared", "more")]
    for cap, placed in ((4, ["ns/job"]), (3, [])):
        stepped = step(State(), view(pods, [group("job", 1)], claims, {GPU: cap}), 1000.0,
                       CONFIG)
        assert binds(stepped) == placed


def test_min_resources_naming_the_implicit_class_name_are_admitted_against_the_gpu_cap(
) -> None:
    claims = [claim_obj("c", request(count=2))]
    spec = group("job", 1, min_resources=Resources.of({IMPLICIT: 8}))
    stepped = step(State(), view([member("ns/job-0", "c")], [spec], claims, {GPU: 4}),
                   1000.0, CONFIG)
    reason = reason_of(stepped, "ns/job")
    assert isinstance(reason, AdmissionOverCapability)
    assert reason.capability == Capability.parse({GPU: 4})


def test_a_starving_gang_holding_devices_leaves_room_for_gangs_that_need_no_devices() -> None:
    """The starving gang's need counts its 16 claimed GPUs; node room has no such name, so
    its hold must not keep a CPU-only gang out of free CPUs."""
    claims = [held("theirs", 4, users=["other-0"]),
              *(claim_obj(f"g-{i}", request(count=8)) for i in range(2))]
    pods = [member("ns/other-0", "theirs", on="n-0"),
            member("ns/big-0", "g-0"), member("ns/big-1", "g-1"),
            replace(pod("ns/cpu-0", 1, gang="ns/cpu"), uid="uid-cpu-0")]
    cluster = view(pods, [group("other"), group("big", 2), group("cpu")], claims)
    state = step(State(), cluster, 1000.0, CONFIG).state
    stepped = step(state, cluster, 2000.0, CONFIG)
    starving = [cause for cause in causes(reason_of(stepped, "ns/big"))
                if isinstance(cause, Starving)]
    assert starving and starving[0].hold.get(GPU) == 16
    assert "ns/cpu" in binds(step(State(), cluster, 1000.0, CONFIG))
    assert "ns/cpu" in binds(stepped)


def test_what_claims_take_counts_allocations_requests_and_all_mode_by_the_class_name() -> None:
    all_mode = claim_obj("all", {"name": "gpus", "exactly": {
        "deviceClassName": fakedriver.DEVICE_CLASS, "allocationMode": "All"}})
    inv = inventory(["n-0", "n-1"], [held("two", 2), claim_obj("three", request(count=3)),
                                     all_mode, held("admin", 8, admin=True)])
    claims = inv.claims
    assert claim_devices([claims[ClaimKey("ns/two")]], inv) == Resources.of({GPU: 2})
    assert claim_devices([claims[ClaimKey("ns/three")]], inv) == Resources.of({GPU: 3})
    assert claim_devices([claims[ClaimKey("ns/all")]], inv) == Resources.of({GPU: 8})
    assert claim_devices([claims[ClaimKey("ns/admin")]], inv).is_zero


@pytest.mark.parametrize(("first", "reclaims"), [(8, True), (6, False)])
def test_reclaim_weighs_the_devices_queues_hold_through_claims(first: int, reclaims: bool) -> None:
    """Queue a holds ``first`` GPUs of n-0 and 4 of n-1 through claims, and 17 of each
    node's 32 cpu; b (same weight) asks 4 GPUs and 16 cpu, which no node has free. Either
    of a's gangs evicted makes room (its claim let go), but a keeps its half only by its
    GPUs: holding 12 of 16, it gives back its gang on n-1 and keeps 8; holding 10 it
    would fall to 6 of 16, under its half, so nothing is reclaimed. Its gang on n-0 is
    never taken: a would keep 4 GPUs and a quarter of the cpu."""
    claims = [held("a0", first, "n-0", users=["a0-0"]), held("a1", 4, "n-1", users=["a1-0"]),
              claim_obj("b", request(count=4))]
    pods = [member("ns/a0-0", "a0", on="n-0", cores=17),
            member("ns/a1-0", "a1", on="n-1", cores=17), member("ns/b-0", "b", cores=16)]
    groups = [group("a0", queue="a"), group("a1", queue="a"), group("b", queue="b")]
    config = replace(CONFIG, preemption=True, reclaim=True)
    stepped = step(State(), view(pods, groups, claims, queues=("a", "b"), cores=32), 1000.0,
                   config)
    chosen = [p.victims for p in stepped.result.preemptions if p.reclaim_for == "b"]
    assert chosen == ([(GangKey("ns/a1"),)] if reclaims else [])


def test_the_device_totals_follow_the_slices_and_classes_the_cache_is_given() -> None:
    """The mirror's inventories share what selectors said of unchanged devices; a slice
    or a class that changes is read again."""
    cache = DeviceCache()
    for index, name in enumerate(("n-0", "n-1")):
        node_name, found = slice_from_api(fakedriver.slice_manifest(name, index))
        cache.set_slice(name, node_name, found)
    cache.set_class(device_class_from_api(fakedriver.device_class_manifest()))
    nodes = {NodeName("n-0"), NodeName("n-1")}
    assert device_totals(cache.inventory(), nodes) == Resources.of({IMPLICIT: 16})
    node_name, found = slice_from_api(fakedriver.slice_manifest("n-1", 1, per_node=4))
    cache.set_slice("n-1", node_name, found)
    assert device_totals(cache.inventory(), nodes) == Resources.of({IMPLICIT: 12})
    narrow = fakedriver.device_class_manifest()
    narrow["spec"] = {"selectors": [{"cel": {"expression": 'device.attributes["gpu.example.com"]'
                                             '.index < 2'}}],
                      "extendedResourceName": GPU}
    cache.set_class(device_class_from_api(narrow))
    assert device_totals(cache.inventory(), nodes) == Resources.of({GPU: 4})


def test_a_parents_gpu_cap_bounds_the_devices_its_queues_claim_together() -> None:
    """A team capped at 4 GPUs: its queue's running gang claims 2, a waiting one 4 more."""
    org = QueueSpec(QueueName("org"), capability=Capability.parse({GPU: 4}))
    team = QueueSpec(QueueName("team"), parent=QueueName("org"))
    claims = [held("run", 2, users=["run-0"]), claim_obj("four", request(count=4))]
    pods = [member("ns/run-0", "run", on="n-0"), member("ns/wait-0", "four")]
    groups = [group("run", queue="team"), group("wait", queue="team")]
    stepped = step(State(), view(pods, groups, claims, queues=(org, team)), 1000.0, CONFIG)
    reason = reason_of(stepped, "ns/wait")
    assert isinstance(reason, CapabilityExceeded)
    assert (reason.queue, reason.allocated.get(GPU), reason.placed.get(GPU)) == ("org", 2, 4)
