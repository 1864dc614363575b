"""Devices placed with their gangs: the allocator and the gang placement over fake GPUs
published as the fake driver publishes them (8 per node, cliques of 4)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

import pytest

from devcluster import fakedriver
from gangsched.core.dra.devices import (
    AllocatedDevice,
    Allocation,
    Claim,
    ClaimKey,
    DeviceConfig,
    DeviceRef,
    Inventory,
)
from gangsched.core.dra.parse import (
    allocation_to_api,
    device_class_from_api,
    resource_claim_from_api,
    slice_from_api,
)
from gangsched.core.dra.placing import Consumer
from gangsched.core.kubeobjects.pods import pod_from_api
from gangsched.core.model.objects import (
    DEFAULT_QUEUE,
    Gang,
    GroupClaim,
    NodeName,
    Pod,
    PodClaim,
    PodKey,
    Policy,
    QueueSpec,
    Taint,
)
from gangsched.core.model.resources import Resources
from gangsched.core.placement.capacity import Capacity, Placement, Snapshot, Unplaceable
from gangsched.core.reasons import ClaimInvalid, ClaimNotReady, DevicesShort
from gangsched.core.stages.cycle import CycleInput
from tests.unit.clusters import gang, node
from tests.unit.clusters import pod as plain_pod

DRIVER = fakedriver.DRIVER
CLIQUE = f"{DRIVER}/clique"


def request(name: str = "gpus", count: int = 1, *, selector: str | None = None,
            device_class: str = fakedriver.DEVICE_CLASS, **extra: Any) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": device_class, "count": count, **extra}
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    return {"name": name, "exactly": exactly}


def claim_obj(name: str, *requests: dict[str, Any], one_clique: bool = False,
              status: Mapping[str, Any] | None = None) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": list(requests) or [request()]}
    if one_clique:
        devices["constraints"] = [{"matchAttribute": CLIQUE}]
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}",
                         "resourceVersion": "7"},
            "spec": {"devices": devices}, "status": dict(status or {})}


def inventory(nodes: Iterable[str], claims: Iterable[dict[str, Any]] = (),
              *, clique_nodes: int = 0) -> Inventory:
    devices = {}
    for index, name in enumerate(nodes):
        node_name, found = slice_from_api(fakedriver.slice_manifest(
            name, index, clique_nodes=clique_nodes))
        assert node_name is not None
        devices[node_name] = found
    device_class = device_class_from_api(fakedriver.device_class_manifest())
    parsed = [resource_claim_from_api(obj) for obj in claims]
    return Inventory.build(devices, {device_class.name: device_class},
                           {claim.key: claim for claim in parsed})


def snapshot(names: Iterable[str], claims: Iterable[dict[str, Any]] = (), **kw: Any) -> Snapshot:
    names = list(names)
    base = Snapshot.build([node(n, cpu="16", memory="64Gi") for n in names], [])
    return replace(base, devices=inventory(names, claims, **kw))


def claiming(key: str, *claims: str, uid: str | None = None) -> Pod:
    return replace(plain_pod(key), uid=uid or f"uid-{key}",
                   resource_claims=tuple(PodClaim(c, ClaimKey(f"ns/{c}")) for c in claims))


def held_by(node: str, gpus: Iterable[int], *pods: str) -> dict[str, Any]:
    """A claim's status: allocated those GPUs of the node, reserved for the pods (names)."""
    allocation = Allocation(tuple(AllocatedDevice("gpus", DeviceRef(DRIVER, node, f"gpu-{i}"))
                                  for i in gpus), NodeName(node))
    return {"allocation": allocation_to_api(allocation),
            "reservedFor": [{"resource": "pods", "name": pod, "uid": f"uid-ns/{pod}"}
                            for pod in pods]}


def gpu_cluster(names: Iterable[str], claims: Iterable[dict[str, Any]],
                running: Iterable[tuple[Gang, Iterable[Pod]]], waiting: Iterable[Gang],
                **kw: Any) -> CycleInput:
    """A cycle's input over nodes of eight fake GPUs each: ``running`` gangs with their pods
    bound, ``waiting`` gangs after them (``kw`` sets any other field)."""
    names = list(names)
    bound = {group.key: tuple(pods) for group, pods in running}
    base = Snapshot.build([node(n, cpu="16", memory="64Gi") for n in names],
                          [pod for pods in bound.values() for pod in pods])
    fields: dict[str, Any] = {
        "queues": {DEFAULT_QUEUE: QueueSpec(DEFAULT_QUEUE)}, "admitted": frozenset(bound),
        "waiting_since": {}, "now": 1000.0, "policy": Policy.BINPACK, **kw}
    return CycleInput(
        snapshot=replace(base, devices=inventory(names, claims)),
        gangs=(*(group for group, _ in running), *waiting),
        bound_requests={key: Resources.sum(pod.requests for pod in pods)
                        for key, pods in bound.items()},
        bound_pods=bound, **fields)


def devices_of(placement: Placement) -> dict[str, list[DeviceRef]]:
    return {write.claim: [d.device for d in write.allocation.devices]
            for write in placement.claims if write.allocation is not None}


def cliques(refs: Iterable[DeviceRef]) -> set[str]:
    # Fake driver: gpu-0..3 are clique a, gpu-4..7 clique b of their node.
    return {f"{ref.pool}-{'a' if int(ref.name.split('-')[1]) < 4 else 'b'}" for ref in refs}


def test_a_fake_slice_reads_as_eight_gpus_with_qualified_attributes() -> None:
    node_name, devices = slice_from_api(fakedriver.slice_manifest("n-0", 0))
    assert node_name == "n-0" and len(devices) == 8
    first = devices[0]
    assert first.ref == DeviceRef(DRIVER, "n-0", "gpu-0")
    assert first.attribute(CLIQUE) == "n-0-a"
    assert dict(first.capacity)[f"{DRIVER}/memory"] == 80 * 2**30


def test_a_gang_of_four_each_claiming_two_gpus_gets_eight_distinct_devices() -> None:
    claims = [claim_obj(f"c-{i}", request(count=2)) for i in range(4)]
    pods = [claiming(f"ns/w-{i}", f"c-{i}") for i in range(4)]
    decision = Capacity(snapshot(["n-0", "n-1"], claims)).place(gang("ns/g", pods))
    assert isinstance(decision, Placement)
    allocated = devices_of(decision)
    assert sorted(allocated) == [f"ns/c-{i}" for i in range(4)]
    every = [ref for refs in allocated.values() for ref in refs]
    assert len(set(every)) == 8
    nodes = dict(decision.assignments)
    for i in range(4):
        assert {ref.pool for ref in allocated[f"ns/c-{i}"]} == {nodes[PodKey(f"ns/w-{i}")]}
    write = next(w for w in decision.claims if w.claim == "ns/c-0")
    assert write.consumers == (Consumer("w-0", "uid-ns/w-0"),)
    assert write.resource_version == "7"


def test_a_gang_whose_claims_cannot_all_be_met_takes_nothing() -> None:
    claims = [claim_obj(f"c-{i}", request(count=4)) for i in range(5)]
    capacity = Capacity(snapshot(["n-0", "n-1"], claims))
    decision = capacity.place(gang("ns/big", [claiming(f"ns/w-{i}", f"c-{i}") for i in range(5)]))
    assert isinstance(decision, Unplaceable)
    reason = decision.reason
    assert isinstance(reason, DevicesShort)
    assert (reason.placed, reason.minimum, reason.need) == (4, 5, 4)
    # Nothing was kept: a gang of four such pods still finds all 16 GPUs free.
    decision = capacity.place(gang("ns/fits", [claiming(f"ns/v-{i}", f"c-{i}")
                                               for i in range(4)]))
    assert isinstance(decision, Placement)


def test_devices_allocated_to_other_claims_are_never_reused() -> None:
    """A claim kube-scheduler allocated holds its devices, whoever placed its pod."""
    held = {"allocation": allocation_to_api(Allocation(tuple(
        AllocatedDevice("gpus", DeviceRef(DRIVER, "n-0", f"gpu-{i}")) for i in range(6)),
        NodeName("n-0")))}
    claims = [claim_obj("theirs", request(count=6), status=held),
              claim_obj("mine", request(count=2))]
    decision = Capacity(snapshot(["n-0"], claims)).place(gang("ns/g", [claiming("ns/p", "mine")]))
    assert isinstance(decision, Placement)
    assert devices_of(decision)["ns/mine"] == [DeviceRef(DRIVER, "n-0", "gpu-6"),
                                                DeviceRef(DRIVER, "n-0", "gpu-7")]
    more = Capacity(snapshot(["n-0"], [*claims, claim_obj("more", request(count=3))]))
    refused = more.place(gang("ns/h", [claiming("ns/q", "more")]))
    assert isinstance(refused, Unplaceable) and isinstance(refused.reason, DevicesShort)
    assert (refused.reason.best_free, refused.reason.best_total) == (2, 8)


def test_a_claim_constrained_to_one_clique_gets_one_and_the_reason_names_the_clique() -> None:
    # Two GPUs of each clique of n-0 taken: four free, but never four in one clique.
    taken = {"allocation": allocation_to_api(Allocation(tuple(
        AllocatedDevice("gpus", DeviceRef(DRIVER, "n-0", f"gpu-{i}")) for i in (0, 1, 4, 5)),
        NodeName("n-0")))}
    claims = [claim_obj("other", request(count=4), status=taken),
              claim_obj("four", request(count=4), one_clique=True)]
    decision = Capacity(snapshot(["n-0"], claims)).place(gang("ns/g", [claiming("ns/p", "four")]))
    assert isinstance(decision, Unplaceable)
    reason = decision.reason
    assert isinstance(reason, DevicesShort) and reason.attribute == CLIQUE
    assert (reason.best_node, reason.best_free, reason.best_total, reason.need) == (
        "n-0", 2, 8, 4)
    assert reason.best_group is not None and reason.best_group.startswith("n-0-")
    decision = Capacity(snapshot(["n-0", "n-1"], claims)).place(
        gang("ns/g", [claiming("ns/p", "four")]))
    assert isinstance(decision, Placement)
    assert len(cliques(devices_of(decision)["ns/four"])) == 1


def test_single_gpu_claims_fill_one_clique_before_breaking_another() -> None:
    """Fragmentation avoided: four one-GPU jobs leave a whole clique for a four-GPU job."""
    claims = [claim_obj(f"one-{i}", request()) for i in range(4)]
    claims.append(claim_obj("four", request(count=4), one_clique=True))
    capacity = Capacity(snapshot(["n-0"], claims))
    used: list[DeviceRef] = []
    for i in range(4):
        decision = capacity.place(gang(f"ns/j-{i}", [claiming(f"ns/p-{i}", f"one-{i}")]))
        assert isinstance(decision, Placement)
        used += devices_of(decision)[f"ns/one-{i}"]
    assert len(cliques(used)) == 1
    decision = capacity.place(gang("ns/big", [claiming("ns/big-0", "four")]))
    assert isinstance(decision, Placement)


def test_a_shared_claim_is_allocated_once_and_reserved_for_every_member() -> None:
    claims = [claim_obj("shared", request(count=2))]
    pods = [claiming(f"ns/w-{i}", "shared") for i in range(3)]
    decision = Capacity(snapshot(["n-0", "n-1"], claims)).place(gang("ns/g", pods))
    assert isinstance(decision, Placement)
    assert len({node for _, node in decision.assignments}) == 1
    [write] = decision.claims
    assert write.allocation is not None and len(write.allocation.devices) == 2
    assert [consumer.name for consumer in write.consumers] == [f"w-{i}" for i in range(3)]


def test_a_claim_already_allocated_binds_its_pod_to_its_node() -> None:
    held = {"allocation": allocation_to_api(Allocation(
        (AllocatedDevice("gpus", DeviceRef(DRIVER, "n-1", "gpu-3")),), NodeName("n-1")))}
    claims = [claim_obj("ready", status=held)]
    decision = Capacity(snapshot(["n-0", "n-1"], claims)).place(
        gang("ns/g", [claiming("ns/p", "ready")]))
    assert isinstance(decision, Placement)
    assert decision.assignments == ((PodKey("ns/p"), NodeName("n-1")),)
    [write] = decision.claims
    assert write.allocation is None and write.consumers == (Consumer("p", "uid-ns/p"),)


@pytest.mark.parametrize(("requested", "problem"), [
    (request(selector="device.attributes[\"gpu.example.com\"].model =="), "does not compile"),
    (request(selector="device.attributes[\"gpu.example.com\"].nope == 1"), "no such member"),
    (request(device_class="missing.example.com"), "DeviceClass 'missing.example.com'"),
])
def test_a_claim_that_can_never_be_allocated_names_itself_and_others_still_bind(
    requested: dict[str, Any], problem: str
) -> None:
    claims = [claim_obj("bad", requested), claim_obj("good")]
    capacity = Capacity(snapshot(["n-0"], claims))
    decision = capacity.place(gang("ns/bad", [claiming("ns/p", "bad")]))
    assert isinstance(decision, Unplaceable) and isinstance(decision.reason, ClaimInvalid)
    assert decision.reason.claim == "ns/bad" and problem in decision.reason.problem
    assert (decision.reason.pod, decision.reason.request) == ("ns/p", "gpus")
    assert isinstance(capacity.place(gang("ns/good", [claiming("ns/q", "good")])), Placement)


def test_a_selector_over_attributes_and_capacity_picks_matching_devices() -> None:
    expression = ('device.attributes["gpu.example.com"].index >= 6 && '
                  'device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) > 0')
    claims = [claim_obj("c", request(count=2, selector=expression))]
    decision = Capacity(snapshot(["n-0"], claims)).place(gang("ns/g", [claiming("ns/p", "c")]))
    assert isinstance(decision, Placement)
    assert [ref.name for ref in devices_of(decision)["ns/c"]] == ["gpu-6", "gpu-7"]


def test_first_available_takes_the_first_alternative_that_fits() -> None:
    first = {"name": "eight", "deviceClassName": fakedriver.DEVICE_CLASS, "count": 8}
    second = {"name": "four", "deviceClassName": fakedriver.DEVICE_CLASS, "count": 4}
    claims = [claim_obj("pick", {"name": "gpus", "firstAvailable": [first, second]}),
              claim_obj("one")]
    capacity = Capacity(snapshot(["n-0"], claims))
    assert isinstance(capacity.place(gang("ns/a", [claiming("ns/a", "one")])), Placement)
    decision = capacity.place(gang("ns/g", [claiming("ns/p", "pick")]))
    assert isinstance(decision, Placement)
    [write] = decision.claims
    assert write.allocation is not None
    assert {d.request for d in write.allocation.devices} == {"gpus/four"}


def test_all_devices_across_two_cliques_of_a_one_clique_claim_end_the_claim_on_the_node(
) -> None:
    """kube-scheduler's allocator calls it an error and tries no other alternative: the
    second one, two devices of one clique, would fit, but is not taken."""
    every = {"name": "all", "deviceClassName": fakedriver.DEVICE_CLASS, "allocationMode": "All"}
    two = {"name": "two", "deviceClassName": fakedriver.DEVICE_CLASS, "count": 2}
    claims = [claim_obj("pick", {"name": "gpus", "firstAvailable": [every, two]},
                        one_clique=True),
              claim_obj("two", request(count=2), one_clique=True)]
    capacity = Capacity(snapshot(["n-0"], claims))
    assert isinstance(capacity.place(gang("ns/g", [claiming("ns/p", "pick")])), Unplaceable)
    assert isinstance(capacity.place(gang("ns/h", [claiming("ns/q", "two")])), Placement)


def test_all_devices_mode_needs_every_matching_device_free() -> None:
    every = request(allocationMode="All")
    del every["exactly"]["count"]
    claims = [claim_obj("all", every), claim_obj("one")]
    capacity = Capacity(snapshot(["n-0", "n-1"], claims))
    assert isinstance(capacity.place(gang("ns/a", [claiming("ns/a", "one")])), Placement)
    decision = capacity.place(gang("ns/g", [claiming("ns/p", "all")]))
    assert isinstance(decision, Placement)
    assert decision.assignments[0][1] == "n-1"
    assert len(devices_of(decision)["ns/all"]) == 8


def test_a_tainted_device_is_taken_only_by_a_request_that_tolerates_it() -> None:
    snap = snapshot(["n-0"], [claim_obj("c", request(count=8)), claim_obj(
        "tolerant", request(count=8, tolerations=[{"key": "broken", "operator": "Exists"}]))])
    devices = {NodeName("n-0"): tuple(
        replace(d, taints=(Taint("broken", "", "NoSchedule"),)) if d.ref.name == "gpu-0" else d
        for d in snap.devices.devices[NodeName("n-0")])}
    tainted = Inventory.build(devices, snap.devices.classes, snap.devices.claims)
    snap = replace(snap, devices=tainted)
    refused = Capacity(snap).place(gang("ns/g", [claiming("ns/p", "c")]))
    assert isinstance(refused, Unplaceable)
    assert isinstance(Capacity(snap).place(gang("ns/t", [claiming("ns/t", "tolerant")])),
                      Placement)


def test_admin_access_may_use_devices_in_use_and_leaves_them_taken_by_their_owner() -> None:
    held = {"allocation": allocation_to_api(Allocation(tuple(
        AllocatedDevice("gpus", DeviceRef(DRIVER, "n-0", f"gpu-{i}")) for i in range(8)),
        NodeName("n-0")))}
    claims = [claim_obj("theirs", request(count=8), status=held),
              claim_obj("watch", request(count=8, adminAccess=True))]
    decision = Capacity(snapshot(["n-0"], claims)).place(gang("ns/g", [claiming("ns/p", "watch")]))
    assert isinstance(decision, Placement)
    [write] = decision.claims
    assert write.allocation is not None and all(d.admin_access for d in write.allocation.devices)


@pytest.mark.parametrize("held_before", [True, False], ids=["held-before", "placed-in-pass"])
def test_a_placement_with_admin_access_released_frees_no_device_another_claim_holds(
    held_before: bool,
) -> None:
    """A monitoring claim given the 8 GPUs another claim holds, then released (refused by
    a cap, a reservation, a probe): the GPUs stay taken, and a third claim gets none."""
    owner = Allocation(tuple(AllocatedDevice("gpus", DeviceRef(DRIVER, "n-0", f"gpu-{i}"))
                             for i in range(8)), NodeName("n-0"))
    theirs = claim_obj("theirs", request(count=8),
                       status={"allocation": allocation_to_api(owner)} if held_before else None)
    claims = [theirs, claim_obj("watch", request(count=8, adminAccess=True)),
              claim_obj("more", request(count=8))]
    capacity = Capacity(snapshot(["n-0"], claims))
    if not held_before:
        assert isinstance(capacity.place(gang("ns/t", [claiming("ns/t", "theirs")])), Placement)
    watcher = capacity.place(gang("ns/w", [claiming("ns/w", "watch")]))
    assert isinstance(watcher, Placement)
    capacity.release(watcher)
    refused = capacity.place(gang("ns/m", [claiming("ns/m", "more")]))
    assert isinstance(refused, Unplaceable) and isinstance(refused.reason, DevicesShort)
    assert (refused.reason.claim, refused.reason.best_free) == ("ns/more", 0)


def test_a_claim_two_gangs_share_is_allocated_by_the_first_and_reserved_by_the_second() -> None:
    """Two lone pods naming one claim, placed one after the other in a pass: one allocation,
    the second pod on its node, and a write that only reserves the claim for it (which the
    shell merges with the first write, see gangsched.allocations)."""
    capacity = Capacity(snapshot(["n-0", "n-1"], [claim_obj("shared", request(count=2))]))
    first = capacity.place(gang("ns/a", [claiming("ns/a", "shared")]))
    second = capacity.place(gang("ns/b", [claiming("ns/b", "shared")]))
    assert isinstance(first, Placement) and isinstance(second, Placement)
    [allocating], [reserving] = first.claims, second.claims
    assert allocating.allocation is not None and reserving.allocation is None
    assert (allocating.consumers, reserving.consumers) == (
        (Consumer("a", "uid-ns/a"),), (Consumer("b", "uid-ns/b"),))
    assert dict(first.assignments)[PodKey("ns/a")] == dict(second.assignments)[PodKey("ns/b")]


def test_releasing_a_placement_gives_its_devices_back() -> None:
    claims = [claim_obj("a", request(count=8)), claim_obj("b", request(count=8))]
    capacity = Capacity(snapshot(["n-0"], claims))
    first = capacity.place(gang("ns/a", [claiming("ns/a", "a")]))
    assert isinstance(first, Placement)
    assert isinstance(capacity.place(gang("ns/b", [claiming("ns/b", "b")])), Unplaceable)
    capacity.release(first)
    assert isinstance(capacity.place(gang("ns/b", [claiming("ns/b", "b")])), Placement)


def test_a_pod_whose_claim_is_not_made_from_its_template_yet_waits_saying_so() -> None:
    obj = {"metadata": {"name": "p", "namespace": "ns", "uid": "u"},
           "spec": {"containers": [], "resourceClaims": [
               {"name": "gpus", "resourceClaimTemplateName": "two"}]}}
    waiting = pod_from_api(obj)
    assert waiting.resource_claims == (PodClaim("gpus", None, "two"),)
    decision = Capacity(snapshot(["n-0"])).place(gang("ns/g", [waiting]))
    assert isinstance(decision, Unplaceable) and isinstance(decision.reason, ClaimNotReady)
    obj["status"] = {"resourceClaimStatuses": [{"name": "gpus", "resourceClaimName": "p-gpus"}]}
    made = PodClaim("gpus", ClaimKey("ns/p-gpus"), "two")
    assert pod_from_api(obj).resource_claims == (made,)


def test_an_allocation_written_reads_back_the_same() -> None:
    allocation = Allocation((AllocatedDevice("gpus", DeviceRef(DRIVER, "n-0", "gpu-1")),),
                            NodeName("n-0"))
    status = {"allocation": allocation_to_api(allocation)}
    claim = resource_claim_from_api(claim_obj("c", status=status))
    assert claim == replace(claim, allocation=allocation)
    assert isinstance(claim, Claim)


def test_a_native_podgroup_claim_is_allocated_once_and_reserved_for_the_podgroup() -> None:
    claims = [claim_obj("shared", request(count=2)), claim_obj("own-0"), claim_obj("own-1")]
    pods = [replace(claiming(f"ns/w-{i}", f"own-{i}"), resource_claims=(
        PodClaim("nvlink", ClaimKey("ns/shared")), PodClaim(f"own-{i}", ClaimKey(f"ns/own-{i}"))))
        for i in range(2)]
    group = replace(gang("ns/train", pods), group_uid="uid-train",
                    group_claims=(GroupClaim("nvlink", claim="shared"),))
    decision = Capacity(snapshot(["n-0", "n-1"], claims)).place(group)
    assert isinstance(decision, Placement)
    writes = {str(write.claim): write for write in decision.claims}
    assert writes["ns/shared"].consumers == (
        Consumer("train", "uid-train", "podgroups", "scheduling.k8s.io"),)
    assert writes["ns/own-1"].consumers == (Consumer("w-1", "uid-ns/w-1"),)
    assert len({node for _, node in decision.assignments}) == 1, "one claim, node-local GPUs"


def test_the_allocation_carries_class_and_claim_configuration_to_the_driver() -> None:
    obj = claim_obj("c", request("r0"), request("r1"))
    obj["spec"]["devices"]["config"] = [
        {"requests": ["r1"], "opaque": {"driver": DRIVER, "parameters": {"mig": "1g.10gb"}}}]
    snap = snapshot(["n-0"], [obj])
    device_class = snap.devices.classes[fakedriver.DEVICE_CLASS]
    configured = replace(device_class, config=(DeviceConfig(DRIVER, '{"sharing": "time"}'),))
    inventory = Inventory.build(snap.devices.devices, {device_class.name: configured},
                                snap.devices.claims)
    decision = Capacity(replace(snap, devices=inventory)).place(
        gang("ns/g", [claiming("ns/p", "c")]))
    assert isinstance(decision, Placement)
    [write] = decision.claims
    assert write.allocation is not None
    written = allocation_to_api(write.allocation)["devices"]
    assert isinstance(written, dict)
    assert written["config"] == [
        {"source": "FromClass", "opaque": {"driver": DRIVER, "parameters": {"sharing": "time"}}},
        {"source": "FromClaim", "requests": ["r1"],
         "opaque": {"driver": DRIVER, "parameters": {"mig": "1g.10gb"}}},
    ]


def test_partitions_of_shared_counters_and_devices_awaiting_binding_conditions_are_not_offered(
) -> None:
    """Their rules are not applied: offering them could split one GPU's counters twice or
    bind a pod before its device is ready, so a claim for them waits short of devices."""
    manifest = fakedriver.slice_manifest("n-0", 0)
    devices = manifest["spec"]["devices"]
    devices[0]["consumesCounters"] = [{"counterSet": "gpu-0", "counters": {"mem": {"value": "1"}}}]
    devices[1]["bindingConditions"] = ["attached"]
    _, offered = slice_from_api(manifest)
    assert len(offered) == len(devices) - 2
    assert {d.ref.name for d in offered}.isdisjoint({devices[0]["name"], devices[1]["name"]})
