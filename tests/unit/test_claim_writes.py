"""Claims written before binds: the actuator binds a gang only once every claim of it was
accepted, and takes back what it wrote when one was not; the mirror counts claims as
allocated from the decision until the watch shows them."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import cast

from kubernetes_asyncio.client import ApiClient

from devcluster import fakedriver
from gangsched.allocations import ClaimWriter
from gangsched.core.actions import Bind
from gangsched.core.dra.devices import AllocatedDevice, Allocation, ClaimKey, DeviceRef
from gangsched.core.dra.extended import CLAIM_ANNOTATION, ExtendedClaim
from gangsched.core.dra.placing import ClaimWrite, Consumer
from gangsched.core.kubeobjects.pods import pod_from_api
from gangsched.core.model.objects import Gang, NodeName, PodClaim, PodKey
from gangsched.core.placement.capacity import Capacity, Placement, Unplaceable
from gangsched.core.reasons import DevicesShort
from gangsched.dispatcher import Answer, Dispatcher
from gangsched.feed import Feed
from tests.unit.test_actuator import JOB, Shell, shell
from tests.unit.test_scheduler_reuse import pod as job_pod_obj


def job_pod() -> dict[str, object]:
    return job_pod_obj("job-9", "job", 0)

GPU = DeviceRef("gpu.example.com", "n1", "gpu-0")
WRITES = (
    ClaimWrite(ClaimKey("ns/a"), "uid-a", "3", Allocation((AllocatedDevice("gpus", GPU),),
                                                          NodeName("n1")),
               (Consumer("job-0", "uid-job-0"),)),
    ClaimWrite(ClaimKey("ns/b"), "uid-b", "4", None, (Consumer("job-1", "uid-job-1"),)),
)
PLACEMENT = Placement(JOB, ((PodKey("ns/job-0"), NodeName("n1")),
                            (PodKey("ns/job-1"), NodeName("n1"))), WRITES)


@dataclass
class AnsweringClaims:
    """Accepts the claims not named in ``refuse``; notes what was written and undone."""

    refuse: frozenset[str] = frozenset()
    written: list[str] = field(default_factory=list)
    undone: list[str] = field(default_factory=list)

    async def write(self, writes: Sequence[ClaimWrite]) -> list[Answer]:
        self.written += [w.claim for w in writes]
        return [Answer(409, "the object has been modified") if w.claim in self.refuse
                else Answer(200) for w in writes]

    async def undo(self, writes: Sequence[ClaimWrite]) -> None:
        self.undone += [w.claim for w in writes]


def claim_obj(name: str, *, allocated: bool = False) -> dict[str, object]:
    status: dict[str, object] = {}
    if allocated:
        status = {"allocation": {"devices": {"results": [
            {"request": "gpus", "driver": GPU.driver, "pool": GPU.pool, "device": GPU.name}]}},
            "reservedFor": [{"resource": "pods", "name": "job-0", "uid": "uid-job-0"}]}
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
            "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {
                "deviceClassName": "gpu.example.com"}}]}},
            "status": status}


def with_claims(claims: AnsweringClaims) -> Shell:
    made = shell(201)
    made.actuator.claims = cast(ClaimWriter, claims)
    Feed(made.mirror).replace("resourceclaims", [claim_obj("a"), claim_obj("b")])
    return made


def carry(made: Shell) -> None:
    async def run() -> None:
        made.actuator.carry_out([Bind(PLACEMENT, first_created=None)], made.mirror.view(),
                                500.0, cycle=1, cycle_ms=1.0)
        await made.actuator.drain()
    asyncio.run(run())


def test_every_claim_is_written_before_the_gang_is_bound() -> None:
    claims = AnsweringClaims()
    made = with_claims(claims)
    carry(made)
    assert claims.written == ["ns/a", "ns/b"] and claims.undone == []
    assert made.binder.asked == [PLACEMENT]


def test_a_claim_refused_binds_nothing_and_takes_back_what_was_written() -> None:
    claims = AnsweringClaims(refuse=frozenset({"ns/b"}))
    made = with_claims(claims)
    carry(made)
    assert made.binder.asked == [], "no pod is bound without its devices"
    assert claims.undone == ["ns/a"], "only the write that went through is taken back"
    assert not made.mirror.is_placed(PodKey("ns/job-0"))
    refusal = made.state.bind_refusals[PodKey("ns/job-1")]
    assert refusal.status == 409 and "ResourceClaim ns/b" in refusal.message
    inventory = made.mirror.view().snapshot.devices
    assert inventory.claims[ClaimKey("ns/a")].allocation is None, "the assumption is gone"
    assert made.woken == 1


def test_claims_count_as_allocated_from_the_decision_until_the_watch_shows_them() -> None:
    made = with_claims(AnsweringClaims())
    made.mirror.assume(PLACEMENT, 500.0)
    inventory = made.mirror.view().snapshot.devices
    assert inventory.in_use == frozenset({GPU})
    assert inventory.claims[ClaimKey("ns/b")].reserved_for == ("uid-job-1",)
    Feed(made.mirror).upsert("resourceclaims", claim_obj("a", allocated=True))
    assert ClaimKey("ns/a") not in made.mirror.devices.assumed, "the watch confirmed it"
    assert ClaimKey("ns/b") in made.mirror.devices.assumed
    Feed(made.mirror).delete("resourceclaims", claim_obj("b"))
    assert made.mirror.devices.assumed == {}


def test_a_slice_that_cannot_be_read_offers_nothing_and_the_waiting_pod_says_so() -> None:
    made = with_claims(AnsweringClaims())
    broken = fakedriver.slice_manifest("n1", 0)
    broken["spec"]["devices"][3]["capacity"]["memory"] = {"value": "lots"}
    Feed(made.mirror).replace("deviceclasses", [fakedriver.device_class_manifest()])
    Feed(made.mirror).replace("resourceslices", [broken])
    inventory = made.mirror.view().snapshot.devices
    assert inventory.devices == {}
    pod = replace(pod_from_api(job_pod()), resource_claims=(
        PodClaim("gpus", ClaimKey("ns/a")),))
    decision = Capacity(made.mirror.view().snapshot).place(Gang(JOB, 1, (pod,)))
    assert isinstance(decision, Unplaceable) and isinstance(decision.reason, DevicesShort)
    unreadable = decision.reason.unreadable
    assert unreadable is not None
    assert "ResourceSlice n1-gpu.example.com" in unreadable and "capacity.memory" in unreadable


def test_a_claim_being_made_for_a_pod_holds_its_devices_until_the_watch_shows_it() -> None:
    made = with_claims(AnsweringClaims())
    create = ExtendedClaim("job-0", "uid-job-0", (), ())
    placeholder = ClaimKey("ns/job-0-extended-resources-")
    write = ClaimWrite(placeholder, "", "", WRITES[0].allocation,
                       (Consumer("job-0", "uid-job-0"),), create)
    made.mirror.assume(replace(PLACEMENT, claims=(write,)), 500.0)
    assert made.mirror.view().snapshot.devices.in_use == frozenset({GPU})
    created = claim_obj("job-0-extended-resources-x7f2k")
    created["metadata"] = {**created["metadata"],  # type: ignore[dict-item]
                           "annotations": {CLAIM_ANNOTATION: "true"},
                           "ownerReferences": [{"apiVersion": "v1", "kind": "Pod",
                                                "name": "job-0", "uid": "uid-job-0",
                                                "controller": True}]}
    Feed(made.mirror).upsert("resourceclaims", created)
    devices = made.mirror.devices
    assert list(devices.assumed) == [ClaimKey("ns/job-0-extended-resources-x7f2k")]
    inventory = made.mirror.view().snapshot.devices
    assert inventory.in_use == frozenset({GPU}), "created, not allocated yet: still held"
    assert inventory.extended_claims == {"uid-job-0": "ns/job-0-extended-resources-x7f2k"}
    allocated = claim_obj("job-0-extended-resources-x7f2k", allocated=True)
    allocated["metadata"] = created["metadata"]
    Feed(made.mirror).upsert("resourceclaims", allocated)
    assert devices.assumed == {}


class RecordingWriter(ClaimWriter):
    """A claim writer whose writes reach no server: each is noted and accepted, once the
    gate opens (so that writes made meanwhile wait in the dispatcher)."""

    def __init__(self, api: ApiClient, dispatcher: Dispatcher) -> None:
        super().__init__(api, dispatcher)
        self.sent: list[ClaimWrite] = []
        self.gate = asyncio.Event()

    async def _write_one(self, write: ClaimWrite) -> Answer:
        await self.gate.wait()
        self.sent.append(write)
        return Answer(200)


SHARED = WRITES[0]
"""The claim's first write this cycle: allocated now, reserved for job-0."""
JOINING = replace(SHARED, allocation=None, consumers=(Consumer("solo", "uid-solo"),))
"""A second gang's write of the same claim, placed after the first in the cycle: the claim
is allocated already, so it only reserves it for its pod."""


async def test_two_gangs_writing_one_claim_allocate_it_once_and_reserve_it_for_both() -> None:
    async with ApiClient() as api:
        writer = RecordingWriter(api, Dispatcher(bind_workers=1))
        first = asyncio.create_task(writer.write([SHARED]))
        second = asyncio.create_task(writer.write([JOINING]))
        await asyncio.sleep(0.01)
        writer.gate.set()
        answers = await asyncio.gather(first, second)
    assert [answer.status for answers_of in answers for answer in answers_of] == [200, 200]
    [sent] = writer.sent
    assert sent.allocation == SHARED.allocation, "the allocation is kept"
    assert [consumer.uid for consumer in sent.consumers] == ["uid-job-0", "uid-solo"]


async def test_a_claim_written_while_its_first_write_is_out_is_reserved_after_it() -> None:
    async with ApiClient() as api:
        writer = RecordingWriter(api, Dispatcher(bind_workers=1))
        first = asyncio.create_task(writer.write([SHARED]))
        await asyncio.sleep(0.01)  # out, awaiting its answer
        second = asyncio.create_task(writer.write([JOINING]))
        await asyncio.sleep(0.01)
        writer.gate.set()
        await asyncio.gather(first, second)
    assert writer.sent == [SHARED, JOINING]


def test_a_later_write_of_a_claim_keeps_the_allocation_and_unites_the_consumers() -> None:
    both = SHARED.merged(JOINING)
    assert both is not None and both.allocation == SHARED.allocation
    assert both.resource_version == SHARED.resource_version
    assert [c.uid for c in both.consumers] == ["uid-job-0", "uid-solo"]
    assert JOINING.merged(SHARED) == replace(SHARED, consumers=(
        Consumer("solo", "uid-solo"), Consumer("job-0", "uid-job-0")))
    assert SHARED.merged(SHARED) == SHARED
    made = replace(SHARED, create=ExtendedClaim("job-0", "uid-job-0", (), ()))
    assert made.merged(JOINING) is None, "a claim made for a pod is its alone"
