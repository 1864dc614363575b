"""Extended resources served by devices (``DRAExtendedResource``): pods ask
``example.com/gpu`` in their container requests, no node lists it, and a DeviceClass
naming it lets the fake driver's GPUs serve it; the claims are made for the pods the way
kube-scheduler makes them."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Any

import pykube
import pytest

from devcluster import fakedriver
from devcluster.controlplane import LocalCluster
from gangsched.allocations import ClaimWriter
from gangsched.app import api_client
from gangsched.core.dra.devices import ClaimRequest, Request
from gangsched.core.dra.extended import ExtendedClaim, claim_manifest
from gangsched.core.kubeobjects.nodes import node_from_api
from gangsched.core.kubeobjects.pods import pod_from_api
from gangsched.core.model.objects import Gang, GangKey
from gangsched.core.placement.capacity import Capacity, Placement, Snapshot
from gangsched.dispatcher import Dispatcher
from gangsched.kubeconfig import connection
from tests.e2e import dra_oracle
from tests.e2e.test_dra import claims, condition_message, devices_of, gpu_nodes, members
from tests.e2e.test_explain_status import gangsched_cli
from tests.e2e.test_gated_pods import set_gates
from tests.e2e.workspace import Workspace, bound, node_of, wait_for

__all__ = ["gpu_nodes"]  # the fixture, shared with the claims' tests

RESOURCE = "example.com/gpu"
CLASS = "extended-gpu.example.com"
ANNOTATION = "resource.kubernetes.io/extended-resource-claim"


@pytest.fixture
def extended_class(cluster: LocalCluster, gpu_nodes: list[str]) -> Iterator[str]:
    """A DeviceClass of the fake driver's GPUs that serves ``example.com/gpu``."""
    manifest = fakedriver.device_class_manifest()
    manifest["metadata"] = {"name": CLASS}
    manifest["spec"] = {**manifest["spec"], "extendedResourceName": RESOURCE}
    cls = pykube.object_factory(cluster.client, fakedriver.API_VERSION, "DeviceClass")
    existing = cls.objects(cluster.client).get_or_none(name=CLASS)
    if existing is None:
        cls(cluster.client, manifest).create()
    yield CLASS
    cls(cluster.client, manifest).delete()


def asking(pod: dict[str, Any], count: int) -> dict[str, Any]:
    """The pod, its container asking ``count`` of the extended resource."""
    resources = pod["spec"]["containers"][0]["resources"]
    resources["requests"][RESOURCE] = str(count)
    resources["limits"][RESOURCE] = str(count)
    return pod


def gang_asking(ws: Workspace, name: str, size: int, count: int) -> None:
    ws.create(ws.podgroup(name, min_member=size))
    ws.create(*(asking(ws.pod(f"{name}-{i}", group=name), count) for i in range(size)))


def made_for(ws: Workspace, pod: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The claims made for the pod's extended resources: marked so, owned by it."""
    uid = pod["metadata"]["uid"]
    return [claim for claim in claims(ws)
            if claim["metadata"].get("annotations", {}).get(ANNOTATION) == "true"
            and any(ref["uid"] == uid and ref.get("controller")
                    for ref in claim["metadata"].get("ownerReferences", []))]


@pytest.mark.usefixtures("extended_class", "gangsched")
def test_a_gang_of_four_asking_two_gpus_each_is_bound_whole_with_claims_made_for_it(
    ws: Workspace,
) -> None:
    gang_asking(ws, "train", 4, 2)
    wait_for(lambda: len(bound(members(ws, "train"))) == 4, timeout=30, what="the gang bound")
    every = []
    for pod in members(ws, "train"):
        [claim] = made_for(ws, pod)
        name = pod["metadata"]["name"]
        assert claim["metadata"]["name"].startswith(f"{name}-extended-resources-")
        assert "resource.kubernetes.io/delete-protection" in claim["metadata"]["finalizers"]
        [request] = claim["spec"]["devices"]["requests"]
        assert request["name"] == "container-0-request-0"
        assert (request["exactly"]["deviceClassName"], request["exactly"]["count"]) == (CLASS, 2)
        devices = devices_of(claim)
        assert len(devices) == 2 and {pool for pool, _ in devices} == {node_of(pod)}
        [holder] = claim["status"]["reservedFor"]
        assert holder["uid"] == pod["metadata"]["uid"]
        assert pod["status"]["extendedResourceClaimStatus"] == {
            "resourceClaimName": claim["metadata"]["name"],
            "requestMappings": [{"containerName": "main", "resourceName": RESOURCE,
                                 "requestName": "container-0-request-0"}]}
        every += devices
    assert len(set(every)) == 8, "no device is given twice"
    # The pods gone, their claims go with them (they own them) and free the devices.
    for pod in members(ws, "train"):
        ws.delete_pod(pod["metadata"]["name"])
    wait_for(lambda: not claims(ws), timeout=60, what="the pods' claims to go with them")


@pytest.mark.usefixtures("extended_class", "gangsched")
def test_a_gang_that_cannot_all_be_served_waits_whole_and_makes_no_claim(
    ws: Workspace, cluster: LocalCluster,
) -> None:
    """Five pods of four GPUs on two nodes of eight: four would fit, the gang needs five."""
    gang_asking(ws, "big", 5, 4)
    wait_for(lambda: all("found devices for 4 of the 5 members" in condition_message(p)
                         for p in members(ws, "big")),
             timeout=30, what="every member to say the gang's devices fall short")
    said = condition_message(members(ws, "big")[0])
    assert f"asks {RESOURCE}: 4, which no node lists and devices of class {CLASS}" in said, said
    assert bound(members(ws, "big")) == []
    assert claims(ws) == [], "no claim is made for a gang that is not placed"
    explained = gangsched_cli(cluster, "explain", "podgroup/big", "-n", ws.name, expect=3)
    assert f"{RESOURCE}: 0 of 8 devices free on dra-" in explained, explained


@pytest.mark.usefixtures("extended_class", "gangsched")
def test_devices_kube_scheduler_gave_a_pod_for_the_same_resource_are_never_reused(
    ws: Workspace,
) -> None:
    ws.create(asking(ws.pod("theirs", scheduler="kube"), 6))
    wait_for(lambda: bound([ws.pods()["theirs"]]), timeout=30, what="kube-scheduler's pod")
    theirs_pod = ws.pods()["theirs"]
    [their_claim] = made_for(ws, theirs_pod)
    theirs = set(devices_of(their_claim))
    assert len(theirs) == 6
    gang_asking(ws, "pair", 2, 4)
    wait_for(lambda: len(bound(members(ws, "pair"))) == 2, timeout=30, what="the pair bound")
    ours = {d for pod in members(ws, "pair") for claim in made_for(ws, pod)
            for d in devices_of(claim)}
    assert len(ours) == 8 and not ours & theirs
    gang_asking(ws, "late", 1, 3)  # two GPUs are left, on kube-scheduler's node
    wait_for(lambda: "2 of 8 devices free" in condition_message(members(ws, "late")[0]),
             timeout=30, what="the late pod to say why it waits")
    assert bound(members(ws, "late")) == [] and made_for(ws, members(ws, "late")[0]) == []


def _placed(cluster: LocalCluster, ws: Workspace, pods: list[dict[str, Any]],
            nodes: list[str]) -> Placement:
    """The core's placement of the pods as one gang, over what the API server holds."""
    inventory = dra_oracle.inventory_of(cluster, ws.name, nodes)
    snapshot = replace(Snapshot.build(
        [node_from_api(pykube.Node.objects(cluster.client).get(name=n).obj) for n in nodes],
        []), devices=inventory)
    parsed = [pod_from_api(pod) for pod in pods]
    decision = Capacity(snapshot).place(Gang(GangKey(f"{ws.name}/g"), len(parsed),
                                             tuple(parsed)))
    assert isinstance(decision, Placement), decision
    return decision


async def test_a_write_refused_half_way_leaves_nothing_and_undo_takes_back_the_rest(
    ws: Workspace, cluster: LocalCluster, extended_class: str, gpu_nodes: list[str],
) -> None:
    """The claim writer against the API server, with no scheduler for the pods: a pod that is
    gone by the time its status is written gets its claim deleted at once; the claim of
    the other member, written whole, is deleted by undo, and a later attempt makes a new
    one that the pod's status then names."""
    # A scheduler name nobody serves: a scheduler left running by earlier tests must not
    # place these pods itself.
    ws.create(asking(ws.pod("kept", scheduler="nobody"), 2))
    kept = ws.pods()["kept"]
    ghost = asking(ws.pod("ghost", scheduler="nobody"), 2)
    ghost["metadata"]["uid"] = "00000000-0000-0000-0000-000000000001"
    placement = _placed(cluster, ws, [kept, ghost], gpu_nodes)
    api = await api_client(connection(str(cluster.kubeconfig)), bind_concurrency=4)
    try:
        writer = ClaimWriter(api, Dispatcher(bind_workers=4))
        answers = await writer.write(placement.claims)
        by_pod = {write.create.pod: answer for write, answer in
                  zip(placement.claims, answers, strict=True) if write.create is not None}
        # The ghost's write is refused at whichever step meets its absence first: its
        # pod's status (404), or the claim's allocation after the garbage collector,
        # finding no owner, began to delete the claim (409).
        assert by_pod["kept"].accepted and by_pod["ghost"].status in (404, 409), by_pod
        [claim] = claims(ws)
        assert made_for(ws, ws.pods()["kept"]) == [claim] and len(devices_of(claim)) == 2
        assert ws.pods()["kept"]["status"]["extendedResourceClaimStatus"][
            "resourceClaimName"] == claim["metadata"]["name"]
        mine = [w for w in placement.claims if w.create is not None and w.create.pod == "kept"]
        await writer.undo(mine)
        assert claims(ws) == []
        assert [answer.accepted for answer in await writer.write(mine)] == [True]
    finally:
        await api.close()
    [again] = claims(ws)
    assert again["metadata"]["name"] != claim["metadata"]["name"]
    assert ws.pods()["kept"]["status"]["extendedResourceClaimStatus"][
        "resourceClaimName"] == again["metadata"]["name"]


@pytest.mark.usefixtures("extended_class", "gangsched")
def test_a_claim_left_unallocated_for_a_pod_is_allocated_and_no_second_is_made(
    ws: Workspace,
) -> None:
    """An attempt stopped between making a pod's claim and allocating it (a restart):
    the scheduler allocates that claim for the pod and names it in the pod's status."""
    manifest = asking(ws.pod("solo"), 2)
    manifest["spec"]["schedulingGates"] = [{"name": "example.com/hold"}]
    ws.create(manifest)
    pod = ws.pods()["solo"]
    left = claim_manifest(ws.name, ExtendedClaim("solo", pod["metadata"]["uid"], (
        ClaimRequest("container-0-request-0", (Request("container-0-request-0", CLASS,
                                                       count=2),)),), ()))
    left["metadata"] = {**left["metadata"],  # type: ignore[dict-item]
                        "name": "solo-extended-resources-left"}
    ws.create(left)
    set_gates(ws, "solo")
    wait_for(lambda: bound([ws.pods()["solo"]]), timeout=30, what="the pod bound")
    [claim] = claims(ws)
    assert claim["metadata"]["name"] == "solo-extended-resources-left"
    assert {pool for pool, _ in devices_of(claim)} == {node_of(ws.pods()["solo"])}
    assert len(devices_of(claim)) == 2
    assert ws.pods()["solo"]["status"]["extendedResourceClaimStatus"] == {
        "resourceClaimName": "solo-extended-resources-left",
        "requestMappings": [{"containerName": "main", "resourceName": RESOURCE,
                             "requestName": "container-0-request-0"}]}
