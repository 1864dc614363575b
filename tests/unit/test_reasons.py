"""Reasons are data; ``render`` words each kind once, in the words users already read."""

from __future__ import annotations

import pytest

from gangsched.core.model import GangKey, PodKey, PodPlacementRules, QueueName
from gangsched.core.reasons import (
    AdmissionNoRoom,
    AdmissionOverCapability,
    AwaitingVictims,
    BeingPreempted,
    BindBackoff,
    BoundAcrossDomains,
    CapabilityExceeded,
    DoesNotFit,
    Gated,
    InDomain,
    MembersMissing,
    NoDomainHolds,
    NoDomainLabel,
    NoNodes,
    NotReclaimable,
    PartlyBound,
    Preempting,
    ProtectedByShare,
    QueueClosed,
    QueueInvalid,
    QueueMissing,
    QueueNotLeaf,
    Reason,
    ReservedByAdmitted,
    ShapeFigures,
    ShortOfMembers,
    Starved,
    Starving,
    TooBigToHold,
    causes,
    code_of,
    render,
)
from gangsched.core.resources import Capability, Resources

GANG = GangKey("ns/train")
Q = QueueName("q")


def cpu(cores: int) -> Resources:
    return Resources.of({"cpu": cores * 1000})


def shape(cores: int, wanted: int, room: dict[int, int], short: dict[str, int] | None = None,
          excluded: dict[str, int] | None = None) -> ShapeFigures:
    return ShapeFigures(cpu(cores), PodPlacementRules(), wanted, room, short or {},
                        excluded or {})


FITS = DoesNotFit(GANG, 4, 0, 4, (shape(2, 4, {1: 3}, excluded={"cordoned": 1}),))
CAP = Capability.parse({"cpu": 4})

WORDED: list[tuple[Reason, str]] = [
    (NoNodes(GANG), "gang ns/train: the cluster has no nodes"),
    (FITS, "gang ns/train needs 4 pods \u00d7 2 cpu; 3 nodes can take 1 each; "
           "nodes excluded: 1 cordoned"),
    (DoesNotFit(GANG, 2, 1, 3, (shape(1, 3, {}, short={"cpu": 2}),), search_skipped_over=9),
     "gang ns/train needs 2 pods of 3 pending \u00d7 1 cpu, 1 of minMember 3 already bound; "
     "no node can take one; 2 nodes short of cpu; "
     "exhaustive search skipped for more than 9 pods"),
    (DoesNotFit(GANG, 2, 0, 2, (shape(2, 1, {1: 1}), shape(1, 1, {2: 1}))),
     "gang ns/train needs 2 pods (1 \u00d7 2 cpu, 1 \u00d7 1 cpu); for 2 cpu: 1 node can take 1; "
     "for 1 cpu: 1 node can take 1; each kind of pod fits on its own but not all together"),
    (MembersMissing(GANG, 3, 4, 1), "gang ns/train waits for its members: it needs 3 more pods "
                                    "to reach minMember 4 (1 bound) and fewer are pending"),
    (ShortOfMembers(GANG, 2, 3), "gang ns/train is short of members: it has 2 pods, pending and "
                                 "bound, and needs 3 (minMember); it holds no room until more "
                                 "exist"),
    (NoDomainLabel(GANG, "rack"),
     "gang ns/train must land in one rack domain, but no node carries the label rack"),
    (BoundAcrossDomains(GANG, "rack"),
     "gang ns/train must land in one rack domain, but its bound members span more than one"),
    (NoDomainHolds("rack", 5, (InDomain("rack=r1", NoNodes(GANG)),)),
     "no single rack domain of 5 holds the whole gang: "
     "in rack=r1: gang ns/train: the cluster has no nodes; 4 more domains too small"),
    (QueueMissing(Q), "queue 'q' does not exist"),
    (QueueClosed(Q), "queue 'q' is closed: it admits no new gangs"),
    (QueueInvalid(Q, "ParentMissing", QueueName("team")),
     "queue 'q' is invalid: its parent queue 'team' does not exist (deleted, or not created "
     "yet); it admits no new gangs until this is fixed"),
    (QueueInvalid(Q, "WeightBelowOne", weight=0),
     "queue 'q' is invalid: its weight is 0, and a queue needs a weight of at least 1; it "
     "admits no new gangs until this is fixed"),
    (QueueNotLeaf(Q, (QueueName("q1"), QueueName("q2"))),
     "queue 'q' has child queues (q1, q2): submit to a leaf queue"),
    (BeingPreempted(GangKey("ns/urgent")),
     "preempted by gang ns/urgent: waiting for its members to go"),
    (Gated(PodKey("ns/train-0"), ("a", "b"), 2),
     "waiting for scheduling gates to be lifted: pod ns/train-0 has a, b "
     "(and 2 more pods of the gang)"),
    (BindBackoff(PodKey("ns/train-0"), 403, "denied", 0, 2),
     "binding pod ns/train-0 was refused (HTTP 403: denied); "
     "retrying with backoff after 2 refusals in a row"),
    (BindBackoff(PodKey("ns/train-0"), 0, "", 1, 1),
     "binding pod ns/train-0 was refused (no answer) (and 1 more pods of the gang); "
     "retrying with backoff after 1 refusal in a row"),
    (AdmissionOverCapability(cpu(3), Q, CAP, cpu(1), cpu(2)),
     "waiting for admission: minResources cpu=3 would exceed queue 'q' capability cpu=4 "
     "(allocated cpu=1, reserved cpu=2)"),
    (AdmissionNoRoom(cpu(3), cpu(4), cpu(4), cpu(3)),
     "waiting for admission: minResources cpu=3 do not fit: cpu=4 free on schedulable nodes, "
     "cpu=4 of it reserved by admitted gangs (short cpu=3)"),
    (ReservedByAdmitted(cpu(2), cpu(4), cpu(1)),
     "resources reserved by admitted gangs: cpu=2; placing cpu=4 would leave cpu=1 free"),
    (ReservedByAdmitted(cpu(4), cpu(1), cpu(0), GangKey("ns/big"), cpu(4)),
     "resources reserved by admitted gangs: cpu=4 (cpu=4 of it held for starving gang ns/big); "
     "placing cpu=1 would leave none free"),
    (CapabilityExceeded(Q, CAP, cpu(4), cpu(0), cpu(1)),
     "queue 'q' capability cpu=4 would be exceeded: allocated cpu=4, "
     "reserved by admitted gangs none, this gang cpu=1"),
    (Starving(Starved(60.0), cpu(8), QueueClosed(Q)),
     "starving (unplaced over 60s): holding cpu=8 for it; "
     "queue 'q' is closed: it admits no new gangs"),
    (Starving(PartlyBound(1, 3), cpu(2), QueueClosed(Q)),
     "partly bound (1 of 3): holding cpu=2 for it; queue 'q' is closed: it admits no new gangs"),
    (TooBigToHold(Starved(7.5), cpu(8), cpu(6), QueueClosed(Q)),
     "starving (unplaced over 7.5s) but needs cpu=8, more than the schedulable nodes have "
     "(cpu=6); queue 'q' is closed: it admits no new gangs"),
    (Preempting((GangKey("ns/a"), GangKey("ns/b")), cpu(4), QueueClosed(Q)),
     "preempting 2 gang(s) of lower priority (ns/a, ns/b); holding cpu=4 for it; "
     "queue 'q' is closed: it admits no new gangs"),
    (AwaitingVictims((GangKey("ns/a"),), cpu(4), QueueClosed(Q)),
     "preempted 1 gang(s) (ns/a); holding cpu=4 until they are gone; "
     "queue 'q' is closed: it admits no new gangs"),
    (NotReclaimable((QueueName("a"), QueueName("c")), QueueClosed(Q)),
     "no reclaim: queues 'a', 'c' borrow above their deserved shares but are not reclaimable; "
     "queue 'q' is closed: it admits no new gangs"),
    (ProtectedByShare((QueueName("b"),), QueueClosed(Q)),
     "no preemption: the gangs of lower priority that could make room are of queue 'b', "
     "which would fall below its deserved share; queue 'q' is closed: it admits no new gangs"),
]


@pytest.mark.parametrize(("reason", "text"), WORDED, ids=[code_of(r) for r, _ in WORDED])
def test_each_kind_is_worded_as_users_read_it(reason: Reason, text: str) -> None:
    assert render(reason) == text


def test_a_wrapped_reason_is_found_among_the_causes() -> None:
    nested = Starving(Starved(60.0), cpu(8),
                      NoDomainHolds("rack", 1, (InDomain("rack=r1", FITS),)))
    assert [code_of(cause) for cause in causes(nested)] == [
        "Starving", "NoDomainHolds", "InDomain", "DoesNotFit"]
