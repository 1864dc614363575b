"""Writing the devices a gang was given: claim allocations and reservations, before binds.

kube-scheduler's DynamicResources plugin does this in PreBind, and so do we,
for the whole gang before the first Binding: a pod bound before its claim
says it holds the devices would start with none. For a claim allocated now,
the ``resource.kubernetes.io/delete-protection`` finalizer goes on first (as
kube-scheduler adds it: the claim cannot vanish while its devices are
handed out), then ``status.allocation`` and the consumers in ``status.reservedFor``
(the pods, or a native PodGroup for the claims of its ``spec.resourceClaims``)
in one status patch. Both carry the resourceVersion the decision read: a
claim someone else allocated meanwhile refuses the write (409) instead of
being allocated twice. A claim that had its allocation only gets the pods
added to ``reservedFor`` (merged by UID, so other holders stay).

Pods of two gangs placed in one cycle may share a claim: the first gang's
write allocates it, the second's only reserves it. Both go to the one
pending call of the claim, so the second is merged into the first (the
allocation kept, the consumers united) rather than replace it: alone, a
reservation of a claim with no allocation is refused (422).

A pod's extended resources that devices serve (``example.com/gpu: 2`` on
a node that does not list it) get a claim of the pod's first, made as
kube-scheduler makes it (see :mod:`gangsched.core.dra.extended`): created
with the finalizer, then allocated and reserved like any claim, then named
in the pod's ``status.extendedResourceClaimStatus`` so the kubelet knows
which devices serve which container.

If any claim of a gang cannot be written, the gang is not bound, and what
was written for it is taken back (:meth:`ClaimWriter.undo`): a claim made
for a pod is deleted.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson
import structlog
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from gangsched.binder import FIELD_MANAGER
from gangsched.core.dra.extended import ExtendedClaim, claim_manifest
from gangsched.core.dra.parse import allocation_to_api
from gangsched.core.dra.placing import ClaimWrite
from gangsched.dispatcher import Answer, Call, Dispatcher, Rank, answer_of, status_message

__all__ = ["DELETE_PROTECTION", "ClaimWriter"]

log = structlog.get_logger(__name__)

DELETE_PROTECTION = "resource.kubernetes.io/delete-protection"


def _reserved(write: ClaimWrite) -> list[dict[str, str]]:
    entries = []
    for consumer in write.consumers:
        entry = {"resource": consumer.resource, "name": consumer.name, "uid": consumer.uid}
        if consumer.api_group:
            entry["apiGroup"] = consumer.api_group
        entries.append(entry)
    return entries


@dataclass(frozen=True, slots=True)
class _Sending:
    """A write as the dispatcher holds it until it goes out: known by what it writes,
    so that a later write of the same claim can join it."""

    write: ClaimWrite
    send: Callable[[ClaimWrite], Awaitable[Answer]]

    def __call__(self) -> Awaitable[Answer]:
        return self.send(self.write)


def _merged(later: _Sending, pending: Call) -> _Sending | None:
    """The pending write of the claim and ``later`` as one, or None where the pending
    call is no such write (an undo) or the two cannot be one."""
    earlier = pending.send
    if not isinstance(earlier, _Sending) or earlier.send != later.send:
        return None
    write = earlier.write.merged(later.write)
    return None if write is None else _Sending(write, later.send)


class ClaimWriter:
    """Sends claim writes through the dispatcher (ranked above evictions, below binds)."""

    def __init__(self, api: client.ApiClient, dispatcher: Dispatcher) -> None:
        self._resource = client.ResourceV1Api(api)
        self._core = client.CoreV1Api(api)
        self._dispatcher = dispatcher
        self._created: dict[str, str] = {}
        """Claims made for pods, by their placeholder keys, while :meth:`undo` may still
        have to delete them (a write of the same gang was refused)."""

    async def write(self, writes: Sequence[ClaimWrite]) -> list[Answer]:
        """Write every claim of a gang, concurrently; one answer per write, in order."""
        answers = await self._each(writes, "allocate", self._write_one)
        if all(answer.accepted for answer in answers):
            for write in writes:
                self._created.pop(write.claim, None)
        return answers

    async def _each(self, writes: Sequence[ClaimWrite], verb: str,
                    call: Callable[[ClaimWrite], Awaitable[Answer]]) -> list[Answer]:
        """One dispatcher call per claim, keyed by the claim; their answers, in order. A
        write merges with a write of the claim still pending (see the module docstring)."""
        loop = asyncio.get_running_loop()
        futures: list[asyncio.Future[Answer]] = []
        for write in writes:
            done: asyncio.Future[Answer] = loop.create_future()
            sending = _Sending(write, call)
            self._dispatcher.submit(Call(
                (write.uid or f"claim/{write.claim}", ""), Rank.ALLOCATE,
                f"{verb} {write.claim}", sending, done=done,
                merge=functools.partial(_merged, sending) if call == self._write_one else None))
            futures.append(done)
        return list(await asyncio.gather(*futures))

    async def undo(self, writes: Sequence[ClaimWrite]) -> None:
        """Take back writes that were accepted: our pods out of ``reservedFor``, and the
        allocation cleared where we made it. A failure is logged; the resource-claim
        controller frees a claim whose pods are gone anyway."""
        answers = await self._each(writes, "undo allocation", self._undo_one)
        for write, answer in zip(writes, answers, strict=True):
            if not answer.accepted:
                log.warning("claim_undo_failed", claim=write.claim, status=answer.status,
                            detail=answer.detail[:200])

    async def _write_one(self, write: ClaimWrite) -> Answer:
        if write.create is not None and not write.uid:
            return await self._write_extended(write)
        namespace, name = write.claim.split("/", 1)
        answer = await self._allocate(write, namespace, name)
        if answer.accepted and write.create is not None:
            # A pod's claim an earlier attempt made and left unallocated.
            answer = await self._name_in_pod(namespace, name, write.create)
        return answer

    async def _name_in_pod(self, namespace: str, name: str, claim: ExtendedClaim) -> Answer:
        """The pod's ``status.extendedResourceClaimStatus``: which request of its claim
        serves which container's resource, for the kubelet."""
        return await answer_of(self._core.patch_namespaced_pod_status(
            claim.pod, namespace, {"status": {"extendedResourceClaimStatus": {
                "resourceClaimName": name,
                "requestMappings": [{"containerName": m.container, "resourceName": m.resource,
                                     "requestName": m.request} for m in claim.mappings],
            }}}, field_manager=FIELD_MANAGER, _preload_content=False))

    async def _write_extended(self, write: ClaimWrite) -> Answer:
        """Create the pod's claim, allocate and reserve it, name it in the pod's status; a
        step refused deletes what the earlier ones made, so the answer is all or nothing."""
        create = write.create
        assert create is not None
        namespace = write.claim.split("/", 1)[0]
        body = claim_manifest(namespace, create)
        body["metadata"]["finalizers"] = [DELETE_PROTECTION]  # type: ignore[index]
        answer, made = await self._sent(self._resource.create_namespaced_resource_claim(
            namespace, body, field_manager=FIELD_MANAGER, _preload_content=False))
        if not answer.accepted:
            return answer
        metadata = made.get("metadata") or {}
        name = str(metadata.get("name"))
        log.info("extended_resource_claim_created", claim=f"{namespace}/{name}",
                 pod=create.pod)
        allocated = await self._allocate(write, namespace, name,
                                         str(metadata.get("resourceVersion") or ""))
        if allocated.accepted:
            allocated = await self._name_in_pod(namespace, name, create)
        if not allocated.accepted:
            await self._delete_extended(namespace, name)
            return allocated
        self._created[write.claim] = name
        return allocated

    async def _allocate(self, write: ClaimWrite, namespace: str, name: str,
                        version: str | None = None) -> Answer:
        """The finalizer (for a claim allocated now), then allocation and reservations."""
        version = write.resource_version if version is None else version
        status: dict[str, Any] = {"reservedFor": _reserved(write)}
        if write.allocation is not None:
            if write.create is None or write.uid:  # a claim created now has the finalizer
                answer, version = await self._protect(namespace, name, version)
                if not answer.accepted:
                    return answer
            status["allocation"] = allocation_to_api(write.allocation)
        body: dict[str, Any] = {"status": status}
        if write.allocation is not None and version:
            body["metadata"] = {"resourceVersion": version}
        return await answer_of(self._resource.patch_namespaced_resource_claim_status(
            name, namespace, body, field_manager=FIELD_MANAGER, _preload_content=False))

    async def _protect(self, namespace: str, name: str, version: str) -> tuple[Answer, str]:
        """Add the delete-protection finalizer; the answer and the claim's new version."""
        body: dict[str, Any] = {"metadata": {"finalizers": [DELETE_PROTECTION]}}
        if version:
            body["metadata"]["resourceVersion"] = version
        answer, claim = await self._sent(self._resource.patch_namespaced_resource_claim(
            name, namespace, body, field_manager=FIELD_MANAGER, _preload_content=False))
        metadata = claim.get("metadata") or {}
        return answer, str(metadata.get("resourceVersion") or version)

    @staticmethod
    async def _sent(request: Awaitable[Any]) -> tuple[Answer, dict[str, Any]]:
        """The answer to a request, and the object the API server returned (empty when
        refused)."""
        try:
            response = await request
        except ApiException as error:
            detail = error.body if isinstance(error.body, str) else str(error.reason)
            return Answer(error.status or 0, status_message(detail)[:300]), {}
        except (TimeoutError, aiohttp.ClientError) as error:
            return Answer(0, str(error) or type(error).__name__), {}
        try:
            text = await response.read()
        finally:
            response.release()
        if not 200 <= response.status <= 299:
            return Answer(response.status, status_message(text.decode())[:300]), {}
        return Answer(response.status), orjson.loads(text)

    async def _delete_extended(self, namespace: str, name: str) -> Answer:
        """Delete a claim made for a pod: its finalizer first (it holds only ours), so it
        goes at once. The pod's status may still name it: the API server keeps that
        entry once written (it only ever names a newer claim, on the next attempt), as
        it is after kube-scheduler deletes such a claim."""
        answer = await answer_of(self._resource.patch_namespaced_resource_claim(
            name, namespace, {"metadata": {"finalizers": None}}, field_manager=FIELD_MANAGER,
            _preload_content=False))
        if answer.accepted or answer.status == 404:
            answer = await answer_of(self._resource.delete_namespaced_resource_claim(
                name, namespace, _preload_content=False))
        return answer

    async def _undo_one(self, write: ClaimWrite) -> Answer:
        namespace, name = write.claim.split("/", 1)
        if write.create is not None and not write.uid:
            made = self._created.pop(write.claim, None)
            if made is None:
                return Answer(404, f"no claim was made for pod {write.create.pod}")
            return await self._delete_extended(namespace, made)
        status: dict[str, Any] = {
            "reservedFor": [{"uid": consumer.uid, "$patch": "delete"}
                            for consumer in write.consumers]}
        if write.allocation is not None:
            status["allocation"] = None
        return await answer_of(self._resource.patch_namespaced_resource_claim_status(
            name, namespace, {"status": status}, field_manager=FIELD_MANAGER,
            _preload_content=False))
