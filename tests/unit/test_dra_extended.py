"""Extended resources served by devices: a pod asking ``example.com/gpu: 2`` on nodes that
do not list it gets a claim of its own, allocated with its gang's nodes, whole."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from devcluster import fakedriver
from gangsched.core.dra.devices import ClaimRequest, Inventory, Request
from gangsched.core.dra.extended import RequestMapping, claim_manifest
from gangsched.core.dra.parse import device_class_from_api, resource_claim_from_api, slice_from_api
from gangsched.core.dra.placing import Consumer
from gangsched.core.kubeobjects.pods import pod_from_api
from gangsched.core.model.objects import Gang, GangKey, Node, NodeName, Pod, Policy
from gangsched.core.model.resources import Resources
from gangsched.core.placement.capacity import Capacity, Placement, Snapshot, Unplaceable
from gangsched.core.reasons import ClaimNotReady, DevicesShort, DoesNotFit
from gangsched.core.stages.cycle import CycleInput, run_cycle
from tests.unit.clusters import gang, node

RESOURCE = "example.com/gpu"


def device_class(name: str = fakedriver.DEVICE_CLASS, resource: str | None = RESOURCE,
                 created: str = "2026-01-01T00:00:00Z") -> dict[str, Any]:
    manifest = fakedriver.device_class_manifest()
    manifest["metadata"] = {"name": name, "creationTimestamp": created}
    if resource is not None:
        manifest["spec"] = {**manifest["spec"], "extendedResourceName": resource}
    return manifest


def snapshot(names: Iterable[str], *, classes: Iterable[Mapping[str, Any]] = (),
             claims: Iterable[Mapping[str, Any]] = (), gpus: Mapping[str, int] | None = None
             ) -> Snapshot:
    names = list(names)
    listed = gpus or {}
    nodes = [_node(n, listed.get(n, 0)) for n in names]
    devices = {}
    for index, name in enumerate(names):
        if name in listed:
            continue
        node_name, found = slice_from_api(fakedriver.slice_manifest(name, index))
        assert node_name is not None
        devices[node_name] = found
    specs = [device_class_from_api(obj) for obj in (classes or [device_class()])]
    parsed = [resource_claim_from_api(obj) for obj in claims]
    inventory = Inventory.build(devices, {spec.name: spec for spec in specs},
                                {claim.key: claim for claim in parsed})
    return replace(Snapshot.build(nodes, []), devices=inventory)


def _node(name: str, listed: int) -> Node:
    """A node with 16 CPUs, listing ``listed`` of the resource in its allocatable."""
    base = node(name, cpu="16", memory="64Gi")
    return replace(base, allocatable=base.allocatable + Resources.of({RESOURCE: listed}))


def gpu_pod(name: str, count: int = 2, *, resource: str = RESOURCE,
            init: int = 0) -> Pod:
    containers = [{"name": "main", "resources": {"requests": {"cpu": "1", resource: count},
                                                 "limits": {resource: count}}}]
    spec: dict[str, Any] = {"containers": containers}
    if init:
        spec["initContainers"] = [{"name": "setup", "resources": {
            "requests": {resource: init}, "limits": {resource: init}}}]
    return pod_from_api({"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
                         "spec": spec})


def test_a_gang_of_four_asking_two_gpus_each_gets_claims_with_devices_on_its_nodes() -> None:
    pods = [gpu_pod(f"w-{i}") for i in range(4)]
    decision = Capacity(snapshot(["n-0", "n-1"])).place(gang("ns/g", pods))
    assert isinstance(decision, Placement)
    nodes = dict(decision.assignments)
    assert len(decision.claims) == 4
    every = []
    for write in decision.claims:
        assert write.create is not None and write.allocation is not None
        pod = f"ns/{write.create.pod}"
        assert write.claim == f"{pod}-extended-resources-"
        assert write.consumers == (Consumer(write.create.pod, f"uid-{write.create.pod}"),)
        assert write.create.requests == (ClaimRequest("container-0-request-1", (Request(
            "container-0-request-1", fakedriver.DEVICE_CLASS, count=2),)),)
        assert write.create.mappings == (RequestMapping("main", RESOURCE,
                                                        "container-0-request-1"),)
        assert write.allocation.node == nodes[pod]  # type: ignore[index]
        refs = [d.device for d in write.allocation.devices]
        assert len(refs) == 2 and {ref.pool for ref in refs} == {nodes[pod]}  # type: ignore[index]
        every += refs
    assert len(set(every)) == 8


def test_a_gang_that_cannot_all_be_served_takes_nothing_and_names_the_devices_free() -> None:
    capacity = Capacity(snapshot(["n-0", "n-1"]))
    decision = capacity.place(gang("ns/big", [gpu_pod(f"w-{i}", 4) for i in range(5)]))
    assert isinstance(decision, Unplaceable)
    reason = decision.reason
    assert isinstance(reason, DevicesShort)
    assert (reason.resource, reason.need, reason.placed, reason.minimum) == (RESOURCE, 4, 4, 5)
    assert (reason.best_free, reason.best_total) == (0, 8)
    assert reason.best_node in ("n-0", "n-1")
    # Nothing was kept: four such pods still find all 16 devices.
    decision = capacity.place(gang("ns/fits", [gpu_pod(f"v-{i}", 4) for i in range(4)]))
    assert isinstance(decision, Placement) and len(decision.claims) == 4


def test_one_pod_short_of_devices_names_the_best_node_it_saw() -> None:
    capacity = Capacity(snapshot(["n-0"]))
    assert isinstance(capacity.place(gang("ns/a", [gpu_pod("a", 5)])), Placement)
    decision = capacity.place(gang("ns/b", [gpu_pod("b", 4)]))
    assert isinstance(decision, Unplaceable)
    reason = decision.reason
    assert isinstance(reason, DevicesShort)
    assert (reason.resource, reason.need, reason.best_node, reason.best_free,
            reason.best_total) == (RESOURCE, 4, "n-0", 3, 8)


def test_a_node_that_lists_the_resource_serves_it_itself_and_no_claim_is_made() -> None:
    decision = Capacity(snapshot(["n-0"], gpus={"n-0": 4})).place(gang("ns/g", [gpu_pod("p")]))
    assert isinstance(decision, Placement)
    assert decision.assignments == (("ns/p", "n-0"),) and decision.claims == ()


def test_nodes_of_both_kinds_serve_one_gang() -> None:
    pods = [gpu_pod(f"w-{i}", 4) for i in range(3)]
    decision = Capacity(snapshot(["n-0", "n-1"], gpus={"n-1": 4})).place(gang("ns/g", pods))
    assert isinstance(decision, Placement)
    on = sorted(node for _, node in decision.assignments)
    assert on == [NodeName("n-0"), NodeName("n-0"), NodeName("n-1")]
    assert len(decision.claims) == 2


def test_every_class_serves_its_implicit_name() -> None:
    implicit = f"deviceclass.resource.kubernetes.io/{fakedriver.DEVICE_CLASS}"
    decision = Capacity(snapshot(["n-0"], classes=[device_class(resource=None)])).place(
        gang("ns/g", [gpu_pod("p", 3, resource=implicit)]))
    assert isinstance(decision, Placement)
    (write,) = decision.claims
    assert write.allocation is not None and len(write.allocation.devices) == 3


def test_without_a_class_naming_it_the_resource_is_simply_short() -> None:
    decision = Capacity(snapshot(["n-0"], classes=[device_class(resource="other.com/gpu")])
                        ).place(gang("ns/g", [gpu_pod("p")]))
    assert isinstance(decision, Unplaceable) and isinstance(decision.reason, DoesNotFit)
    assert decision.reason.shapes[0].short == {RESOURCE: 1}


def test_of_two_classes_naming_the_resource_the_newer_serves_it() -> None:
    older = device_class("old-gpus", created="2026-01-01T00:00:00Z")
    newer = device_class(fakedriver.DEVICE_CLASS, created="2026-02-01T00:00:00Z")
    old_only = {**older, "spec": {"selectors": [{"cel": {"expression": "false"}}],
                                  "extendedResourceName": RESOURCE}}
    decision = Capacity(snapshot(["n-0"], classes=[old_only, newer])).place(
        gang("ns/g", [gpu_pod("p")]))
    assert isinstance(decision, Placement)
    (write,) = decision.claims
    assert write.create is not None
    assert write.create.requests[0].alternatives[0].device_class == fakedriver.DEVICE_CLASS
    newest_selects_nothing = {**old_only, "metadata": {"name": "old-gpus",
                                                      "creationTimestamp": "2026-03-01T00:00:00Z"}}
    decision = Capacity(snapshot(["n-0"], classes=[newest_selects_nothing, newer])).place(
        gang("ns/g", [gpu_pod("p")]))
    assert isinstance(decision, Unplaceable)


def test_an_init_container_reuses_the_devices_of_the_containers_after_it() -> None:
    """As kube-scheduler names them: the main container's request, and the init
    container's own request only for what the main one lacks."""
    decision = Capacity(snapshot(["n-0"])).place(gang("ns/g", [gpu_pod("p", 2, init=3)]))
    assert isinstance(decision, Placement)
    (write,) = decision.claims
    assert write.create is not None
    assert [(r.name, r.alternatives[0].count) for r in write.create.requests] == [
        ("container-0-request-0", 1), ("container-1-request-1", 2)]
    assert write.create.mappings == (
        RequestMapping("main", RESOURCE, "container-1-request-1"),
        RequestMapping("setup", RESOURCE, "container-1-request-1"),
        RequestMapping("setup", RESOURCE, "container-0-request-0"))
    assert write.allocation is not None and len(write.allocation.devices) == 3


def made_claim(status: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The claim made for pod ``p`` by an earlier attempt."""
    return {"metadata": {"name": "p-extended-resources-x1", "namespace": "ns", "uid": "c",
                         "annotations": {"resource.kubernetes.io/extended-resource-claim": "true"},
                         "ownerReferences": [{"kind": "Pod", "name": "p", "uid": "uid-p",
                                              "controller": True, "apiVersion": "v1"}]},
            "spec": {"devices": {"requests": [{"name": "container-0-request-1", "exactly": {
                "deviceClassName": fakedriver.DEVICE_CLASS, "count": 2}}]}},
            "status": dict(status or {})}


def test_a_claim_made_for_the_pod_and_left_unallocated_is_allocated_rather_than_a_second(
) -> None:
    """An attempt stopped between making the claim and allocating it (a restart): the
    next one allocates that claim, reserves it, and names it in the pod's status."""
    decision = Capacity(snapshot(["n-0"], claims=[made_claim()])).place(
        gang("ns/g", [gpu_pod("p")]))
    assert isinstance(decision, Placement)
    (write,) = decision.claims
    assert (write.claim, write.uid) == ("ns/p-extended-resources-x1", "c")
    assert write.allocation is not None and len(write.allocation.devices) == 2
    assert write.consumers == (Consumer("p", "uid-p"),)
    assert write.create is not None and write.create.mappings == (
        RequestMapping("main", RESOURCE, "container-0-request-1"),)


def test_a_claim_made_for_the_pod_and_being_deleted_makes_it_wait() -> None:
    going = made_claim()
    going["metadata"] = {**going["metadata"], "deletionTimestamp": "2026-01-01T00:00:00Z"}
    decision = Capacity(snapshot(["n-0"], claims=[going])).place(gang("ns/g", [gpu_pod("p")]))
    assert isinstance(decision, Unplaceable) and isinstance(decision.reason, ClaimNotReady)
    assert (decision.reason.pod, decision.reason.claim, decision.reason.state) == (
        "ns/p", "ns/p-extended-resources-x1", "is being deleted")


def test_a_claim_made_and_allocated_for_the_pod_keeps_it_on_its_node_with_no_new_write() -> None:
    """A bind refused after the claim was written: the next attempt binds where the
    devices are, as with any allocated claim."""
    status = {"allocation": {"devices": {"results": [
        {"request": "container-0-request-1", "driver": fakedriver.DRIVER, "pool": "n-1",
         "device": f"gpu-{i}"} for i in range(2)]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["n-1"]}]}]}},
        "reservedFor": [{"resource": "pods", "name": "p", "uid": "uid-p"}]}
    decision = Capacity(snapshot(["n-0", "n-1"], claims=[made_claim(status)])).place(
        gang("ns/g", [gpu_pod("p")]))
    assert isinstance(decision, Placement)
    assert decision.assignments == (("ns/p", "n-1"),) and decision.claims == ()


def test_releasing_the_placement_gives_the_devices_back() -> None:
    capacity = Capacity(snapshot(["n-0"]))
    first = capacity.place(gang("ns/a", [gpu_pod("a", 8)]))
    assert isinstance(first, Placement)
    assert isinstance(capacity.place(gang("ns/b", [gpu_pod("b", 1)])), Unplaceable)
    capacity.release(first)
    assert isinstance(capacity.place(gang("ns/b", [gpu_pod("b", 8)])), Placement)


def test_the_claim_is_created_as_kube_scheduler_creates_it_and_reads_back_as_the_pods() -> None:
    decision = Capacity(snapshot(["n-0"])).place(gang("ns/g", [gpu_pod("p")]))
    assert isinstance(decision, Placement)
    (write,) = decision.claims
    assert write.create is not None
    manifest = claim_manifest("ns", write.create)
    assert manifest["metadata"] == {
        "namespace": "ns", "generateName": "p-extended-resources-",
        "annotations": {"resource.kubernetes.io/extended-resource-claim": "true"},
        "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "uid-p",
                             "controller": True}]}
    created = {**manifest, "metadata": {**manifest["metadata"],
                                        "name": "p-extended-resources-abcde"}}
    claim = resource_claim_from_api(created)
    assert claim.extended_for == "uid-p"
    assert claim.requests == write.create.requests


def test_a_gang_whose_min_resources_name_the_extended_resource_is_admitted_and_placed() -> None:
    """minResources as operators write them (the sum of the pods' requests): no node's
    room holds example.com/gpu, so admission leaves it to the devices, found whole."""
    def waiting(key: str, pods: int) -> Gang:
        members = [gpu_pod(f"{key}-{i}") for i in range(pods)]
        return Gang(GangKey(f"ns/{key}"), pods, tuple(members), min_resources=Resources.of(
            {RESOURCE: 2 * pods, "cpu": 1000 * pods}))

    result = run_cycle(CycleInput(
        snapshot=snapshot(["n-0", "n-1"]), gangs=(waiting("a", 4), waiting("b", 4)),
        bound_requests={}, queues={}, admitted=frozenset(), waiting_since={}, now=0.0,
        policy=Policy.BINPACK))
    assert sorted(p.gang for p in result.placements) == ["ns/a", "ns/b"]
    assert sum(len(p.claims) for p in result.placements) == 8
    result = run_cycle(CycleInput(
        snapshot=snapshot(["n-0", "n-1"]), gangs=(waiting("c", 9),),
        bound_requests={}, queues={}, admitted=frozenset(), waiting_since={}, now=0.0,
        policy=Policy.BINPACK))
    assert result.placements == ()
    assert [u.gang for u in result.unplaceable] == ["ns/c"]
    assert isinstance(result.unplaceable[0].reason, DevicesShort)
