"""Extended resources that devices serve: a pod asking ``example.com/gpu: 2`` where no
node lists that resource, but a DeviceClass names it.

As kube-scheduler (``DRAExtendedResource``, GA in 1.37) reads it: a
DeviceClass serves the resource its ``spec.extendedResourceName`` names, and
every class serves ``deviceclass.resource.kubernetes.io/<class>``. On a node
whose allocatable lists the resource, the node's count serves it the classic
way; on a node that does not, devices of the class do: the scheduler makes a
ResourceClaim for the pod (one request per container, ``container-<i>-request-<j>``),
allocates it with the pod's node, and tells the pod which request serves which
container in ``status.extendedResourceClaimStatus``. Here that claim is one more
claim of the pod, allocated in the same all-or-nothing placement as its gang.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gangsched.core.dra.devices import (
    Claim,
    ClaimKey,
    ClaimRequest,
    Request,
)
from gangsched.core.model.objects import ExtendedRequest, Pod
from gangsched.core.model.resources import Resources

__all__ = [
    "CLAIM_ANNOTATION",
    "ExtendedClaim",
    "RequestMapping",
    "claim_manifest",
    "extended_claim",
    "left_to_devices",
    "placeholder_key",
    "served_by_devices",
]

CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
"""Marks the claim made for a pod's extended resources (value ``"true"``)."""


@dataclass(frozen=True, slots=True)
class RequestMapping:
    """Which request of the claim serves a container's resource (an entry of the pod's
    ``status.extendedResourceClaimStatus.requestMappings``)."""

    container: str
    resource: str
    request: str


@dataclass(frozen=True, slots=True)
class ExtendedClaim:
    """The claim to create for a pod's extended resources served by devices on its node,
    and what the pod's status says of it."""

    pod: str
    """The pod's name (the claim is in its namespace, named after it)."""
    pod_uid: str
    requests: tuple[ClaimRequest, ...]
    mappings: tuple[RequestMapping, ...]


def served_by_devices(pod: Pod, extended: Mapping[str, str], allocatable: Resources
                      ) -> tuple[str, ...]:
    """The pod's resources that devices serve on a node with this allocatable: a class
    names them and the node lists none (a node that lists one serves it itself)."""
    found: list[str] = []
    for entry in pod.extended_requests:
        name = entry.resource
        if name in extended and not allocatable.get(name) and name not in found:
            found.append(name)
    return tuple(sorted(found))


def left_to_devices(amount: Resources, extended: Mapping[str, str], listed: Resources
                    ) -> Resources:
    """The amount less the extended resources devices serve: a class names them and no
    node lists them (``listed``: what nodes list), so no node's room can hold them; their
    devices are found when the gang is placed, whole."""
    if not extended:
        return amount
    served = {name: value for name, value in amount.items()
              if name in extended and not listed.get(name)}
    return amount - Resources.of(served) if served else amount


def placeholder_key(pod: Pod) -> ClaimKey:
    """The claim's key until it is created: its generated name's prefix, which no claim
    can have (a name never ends with ``-``)."""
    namespace, name = pod.key.split("/", 1)
    return ClaimKey(f"{namespace}/{name}-extended-resources-")


def extended_claim(pod: Pod, resources: Sequence[str], extended: Mapping[str, str]
                   ) -> tuple[Claim, ExtendedClaim]:
    """The claim for the resources devices serve, as the core allocates it, and what to
    create for it."""
    requests: list[tuple[str, str, int]] = []
    mappings: list[RequestMapping] = []
    for resource in resources:
        found, mapped = _requests_of(pod.extended_requests, resource)
        requests += [(name, extended[resource], count) for name, count in found]
        mappings += mapped
    asked = tuple(ClaimRequest(name, (Request(name, device_class, count=count),))
                  for name, device_class, count in sorted(requests))
    key = placeholder_key(pod)
    return (Claim(key, requests=asked),
            ExtendedClaim(pod.key.split("/", 1)[1], pod.uid, asked, tuple(mappings)))


def _request_name(entry: ExtendedRequest) -> str:
    return f"container-{entry.index}-request-{entry.slot}"


def _requests_of(entries: Sequence[ExtendedRequest], resource: str
                 ) -> tuple[list[tuple[str, int]], list[RequestMapping]]:
    """The device requests one resource needs, and which container each serves.

    Containers that run together each get their own request. An init container
    that runs to completion first reuses the devices of the containers after it,
    and asks only for what they lack; of those, one request (the largest) serves
    every such init container, since they run one at a time.
    """
    mine = [entry for entry in entries if entry.resource == resource]
    lasting = {entry.index: (_request_name(entry), entry.count)
               for entry in mine if not entry.init}
    lasting_mappings = [RequestMapping(entry.container, resource, _request_name(entry))
                        for entry in mine if not entry.init]
    largest: tuple[str, int] | None = None
    short_names: set[str] = set()
    short_mappings: list[RequestMapping] = []
    for entry in (entry for entry in mine if entry.init):
        reused = 0
        own: tuple[str, int] | None = None
        for index in sorted(i for i in lasting if i >= entry.index):
            name, count = lasting[index]
            reused += count
            short_mappings.append(RequestMapping(entry.container, resource, name))
            if reused >= entry.count:
                break
        else:
            own = (_request_name(entry), entry.count - reused)
            short_mappings.append(RequestMapping(entry.container, resource, own[0]))
        if own is not None:
            short_names.add(own[0])
            if largest is None or largest[1] < own[1]:
                largest = own
    if largest is not None and len(short_names) > 1:
        short_mappings = [
            RequestMapping(m.container, m.resource, largest[0]) if m.request in short_names
            else m for m in short_mappings]
    requests = ([largest] if largest is not None else []) + [lasting[i] for i in sorted(lasting)]
    return requests, lasting_mappings + short_mappings


def claim_manifest(namespace: str, claim: ExtendedClaim) -> dict[str, object]:
    """The ResourceClaim to create, as kube-scheduler creates it: a name generated from
    the pod's, owned by the pod (so it goes with it), marked as the pod's extended
    resource claim; ``finalizers`` keep it while its devices are handed out."""
    requests = [{"name": request.name, "exactly": {
        "deviceClassName": request.alternatives[0].device_class,
        "allocationMode": "ExactCount", "count": request.alternatives[0].count}}
        for request in claim.requests]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "namespace": namespace,
            "generateName": f"{claim.pod}-extended-resources-",
            "annotations": {CLAIM_ANNOTATION: "true"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": claim.pod,
                                 "uid": claim.pod_uid, "controller": True}],
        },
        "spec": {"devices": {"requests": requests}},
    }
