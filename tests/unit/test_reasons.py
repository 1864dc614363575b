"""Reasons are data; each family's kinds are worded once, in the words users already read.

One golden test per family of reasons (a module of :mod:`gangsched.core.reasons`) holds
the exact lines ``render`` makes of its kinds: every other test asserts codes and figures.
"""

from __future__ import annotations

from gangsched.core.model.objects import (
    GangKey,
    NodeName,
    PodKey,
    PodPlacementRules,
    QueueName,
    VolumeBlock,
    VolumeProblem,
)
from gangsched.core.model.resources import Capability, Resources
from gangsched.core.reasons import (
    AdmissionNoRoom,
    AdmissionOverCapability,
    AwaitingVictims,
    BeingPreempted,
    BindBackoff,
    BoundAcrossDomains,
    CapabilityExceeded,
    ClaimInvalid,
    ClaimNotReady,
    ClaimsProvisioning,
    DevicesShort,
    DoesNotFit,
    DomainRoom,
    Gated,
    GroupInvalid,
    GroupMissing,
    HeldForStarving,
    InDomain,
    InSubGroup,
    LevelHeld,
    MembersMissing,
    NoDomainHolds,
    NoDomainLabel,
    NoNodes,
    NotReclaimable,
    PartlyBound,
    PodRulesUnmet,
    Preempting,
    ProtectedByBudget,
    ProtectedByShare,
    ProvisioningTimedOut,
    QueueClosed,
    QueueInvalid,
    QueueMissing,
    QueueNotLeaf,
    Reason,
    ReservedByAdmitted,
    RuleBlock,
    ShapeFigures,
    ShortOfMembers,
    Starved,
    Starving,
    SubGroupHeld,
    SubGroupUnknown,
    TooBigToHold,
    VolumeBlocked,
    VolumeLimitBound,
    causes,
    code_of,
    render,
)

GANG = GangKey("ns/train")
POD = PodKey("ns/train-0")
Q = QueueName("q")
GPU = "nvidia.com/gpu"


def cpu(cores: int) -> Resources:
    return Resources.of({"cpu": cores * 1000})


def shape(cores: int, wanted: int, room: dict[int, int], short: dict[str, int] | None = None,
          excluded: dict[str, int] | None = None,
          limits: tuple[VolumeLimitBound, ...] = ()) -> ShapeFigures:
    return ShapeFigures(cpu(cores), PodPlacementRules(), wanted, room, short or {},
                        excluded or {}, limits)


FITS = DoesNotFit(GANG, 4, 0, 4, (shape(2, 4, {1: 3}, excluded={"cordoned": 1}),))
CAP = Capability.parse({"cpu": 4})


def worded(cases: list[tuple[Reason, str]]) -> None:
    """Each reason renders as its line, compared whole so a failure shows both."""
    assert [render(reason) for reason, _ in cases] == [text for _, text in cases]


def test_capacity_wording() -> None:
    gpus = ShapeFigures(Resources.of({GPU: 2, "pods": 1}), PodPlacementRules(), 4, {1: 3}, {},
                        {"taint gpu=busy:NoSchedule": 2, "cordoned": 1})
    worded([
        (NoNodes(GANG), "gang ns/train: the cluster has no nodes"),
        (DoesNotFit(GANG, 4, 0, 4, (gpus,)),
         "gang ns/train needs 4 pods \u00d7 2 nvidia.com/gpu; 3 nodes can take 1 each; "
         "nodes excluded: 2 by taint gpu=busy:NoSchedule, 1 cordoned"),
        (FITS, "gang ns/train needs 4 pods \u00d7 2 cpu; 3 nodes can take 1 each; "
               "nodes excluded: 1 cordoned"),
        (DoesNotFit(GANG, 2, 1, 3, (shape(1, 3, {}, short={"cpu": 2}),), search_skipped_over=9),
         "gang ns/train needs 2 pods of 3 pending \u00d7 1 cpu, 1 of minMember 3 already bound; "
         "no node can take one; 2 nodes short of cpu; "
         "exhaustive search skipped for more than 9 pods"),
        (DoesNotFit(GANG, 2, 0, 2, (shape(2, 1, {1: 1}), shape(1, 1, {2: 1}))),
         "gang ns/train needs 2 pods (1 \u00d7 2 cpu, 1 \u00d7 1 cpu); for 2 cpu: 1 node can take "
         "1; for 1 cpu: 1 node can take 1; each kind of pod fits on its own but not all together"),
        (DoesNotFit(GANG, 0, 2, 2, (shape(1, 2, {1: 1}),), search_stopped_after=50),
         "gang ns/train has 2 pending pods \u00d7 1 cpu, 2 of minMember 2 already bound; "
         "1 node can take 1; search stopped after examining 50 node groups"),
        (DoesNotFit(GANG, 4, 0, 4, (shape(1, 4, {1: 3}, limits=(
            VolumeLimitBound("ebs.csi.aws.com", 3, NodeName("node-0"), 3, 0, 2),
            VolumeLimitBound("pd.csi.storage.gke.io", 1, NodeName("node-1"), 2, 1, 2),
        )),)),
         "gang ns/train needs 4 pods \u00d7 1 cpu; 3 nodes can take 1 each; the volume limit of "
         "CSI driver ebs.csi.aws.com holds down the room of 3 nodes: node-0 has 0 of its 3 "
         "attached and a pod attaches 2; the volume limit of CSI driver pd.csi.storage.gke.io "
         "holds down the room of 1 node: 1 more volume of CSI driver pd.csi.storage.gke.io "
         "than node-1's limit of 2 allows"),
    ])


def test_domains_wording() -> None:
    worded([
        (NoDomainLabel(GANG, "rack"),
         "gang ns/train must land in one rack domain, but no node carries the label rack"),
        (BoundAcrossDomains(GANG, "rack"),
         "gang ns/train must land in one rack domain, but its bound members span more than one"),
        (NoDomainHolds("rack", 5, (InDomain("rack=r1", NoNodes(GANG)),)),
         "no single rack domain of 5 holds the whole gang: "
         "in rack=r1: gang ns/train: the cluster has no nodes; 4 more domains too small"),
        (InSubGroup("tp0", ShortOfMembers(GANG, 3, 4)),
         "sub-group tp0: gang ns/train is short of members: it has 3 pods, pending and "
         "bound, and needs 4 (minMember); it holds no room until more exist"),
        (SubGroupUnknown(POD, "tp9", ("tp0", "tp1"), 2),
         "pod ns/train-0 names sub-group 'tp9', which its PodGroup does not list (its "
         "sub-groups: tp0, tp1) (and 2 more pods of the gang)"),
        (SubGroupUnknown(POD, "tp0"),
         "pod ns/train-0 names sub-group 'tp0', but its PodGroup lists no sub-groups"),
    ])
    assert DomainRoom("example.com/rack", "r3", GPU, 6, 8, 16).text() == (
        "rack r3: 6 of 8 nvidia.com/gpu free, 16 asked")
    assert LevelHeld("block", "b0", "", (SubGroupHeld("tp0", "nvlink", "nv1"),
                                         SubGroupHeld("tp1"))).text() == (
        "in block b0; sub-groups tp0 in nvlink nv1, tp1 across domains")


def test_members_wording() -> None:
    worded([
        (MembersMissing(GANG, 3, 4, 1), "gang ns/train waits for its members: it needs 3 more "
                                        "pods to reach minMember 4 (1 bound) and fewer are "
                                        "pending"),
        (ShortOfMembers(GANG, 2, 3), "gang ns/train is short of members: it has 2 pods, "
                                     "pending and bound, and needs 3 (minMember); it holds no "
                                     "room until more exist"),
        (Gated(POD, ("a", "b"), 2),
         "waiting for scheduling gates to be lifted: pod ns/train-0 has a, b "
         "(and 2 more pods of the gang)"),
        (BindBackoff(POD, 403, "denied", 0, 2),
         "binding pod ns/train-0 was refused (HTTP 403: denied); "
         "retrying with backoff after 2 refusals in a row"),
        (BindBackoff(POD, 0, "", 1, 1),
         "binding pod ns/train-0 was refused (no answer) (and 1 more pods of the gang); "
         "retrying with backoff after 1 refusal in a row"),
    ])


def test_queues_wording() -> None:
    worded([
        (QueueMissing(Q), "queue 'q' does not exist"),
        (QueueClosed(Q), "queue 'q' is closed: it admits no new gangs"),
        (QueueInvalid(Q, "ParentMissing", QueueName("team")),
         "queue 'q' is invalid: its parent queue 'team' does not exist (deleted, or not created "
         "yet); it admits no new gangs until this is fixed"),
        (QueueInvalid(QueueName("x"), "ParentCycle", QueueName("z"),
                      (QueueName("x"), QueueName("z"), QueueName("y"))),
         "queue 'x' is invalid: its parents form a cycle: x -> z -> y -> x; it admits no new "
         "gangs until this is fixed"),
        (QueueInvalid(Q, "ParentInvalid", QueueName("x")),
         "queue 'q' is invalid: its parent queue 'x' is invalid; it admits no new gangs until "
         "this is fixed"),
        (QueueInvalid(Q, "WeightBelowOne", weight=0),
         "queue 'q' is invalid: its weight is 0, and a queue needs a weight of at least 1; it "
         "admits no new gangs until this is fixed"),
        (QueueNotLeaf(Q, tuple(QueueName(f"q{i}") for i in range(1, 6))),
         "queue 'q' has child queues (q1, q2, q3 and 2 more): submit to a leaf queue"),
        (CapabilityExceeded(Q, CAP, cpu(4), cpu(0), cpu(1)),
         "queue 'q' capability cpu=4 would be exceeded: allocated cpu=4, "
         "reserved by admitted gangs none, this gang cpu=1"),
        (AdmissionOverCapability(cpu(3), Q, CAP, cpu(1), cpu(2)),
         "waiting for admission: minResources cpu=3 would exceed queue 'q' capability cpu=4 "
         "(allocated cpu=1, reserved cpu=2)"),
        (AdmissionNoRoom(cpu(3), cpu(4), cpu(4), cpu(3)),
         "waiting for admission: minResources cpu=3 do not fit: cpu=4 free on schedulable "
         "nodes, cpu=4 of it reserved by admitted gangs (short cpu=3)"),
        (ReservedByAdmitted(cpu(2), cpu(4), cpu(1)),
         "resources reserved by admitted gangs: cpu=2; placing cpu=4 would leave cpu=1 free"),
        (ReservedByAdmitted(cpu(4), cpu(1), cpu(0), GangKey("ns/big"), cpu(4)),
         "resources reserved by admitted gangs: cpu=4 (cpu=4 of it held for starving gang "
         "ns/big); placing cpu=1 would leave none free"),
    ])


def test_volumes_wording() -> None:
    worded([
        (VolumeBlocked(POD, VolumeBlock("ns/absent", VolumeProblem.MISSING), 0),
         "pod ns/train-0: persistentvolumeclaim ns/absent does not exist"),
        (VolumeBlocked(POD, VolumeBlock("ns/data", VolumeProblem.IN_USE, "ns/a-1"), 1),
         "pod ns/train-0: persistentvolumeclaim ns/data is ReadWriteOncePod and already in use "
         "by another pod (ns/a-1) (and 1 more pods of the gang)"),
        (ClaimsProvisioning(("ns/a", "ns/b"), 1),
         "waiting for 2 claims (ns/a, ns/b) to be provisioned on the 1 node chosen for the gang "
         "before binding it"),
        (ProvisioningTimedOut(("ns/a",), 120.0),
         "1 claim (ns/a) were not provisioned within 120s: their nodes were released and the "
         "gang tries again later"),
    ])


def test_devices_wording() -> None:
    short = DevicesShort(GANG, POD, "ns/c-0", "gpus", "gpu.example.com", 4, 2)
    worded([
        (ClaimInvalid(POD, "ns/bad", "gpus", "DeviceClass 'missing' does not exist"),
         "pod ns/train-0: ResourceClaim ns/bad request gpus cannot be allocated: "
         "DeviceClass 'missing' does not exist"),
        (ClaimInvalid(POD, "ns/bad", "", "no requests"),
         "pod ns/train-0: ResourceClaim ns/bad cannot be allocated: no requests"),
        (ClaimNotReady(POD, "ns/c-0", "is being deleted"),
         "pod ns/train-0: ResourceClaim ns/c-0 is being deleted"),
        (short, "pod ns/train-0: ResourceClaim ns/c-0 request gpus needs 4 devices of class "
                "gpu.example.com: none of the 2 nodes with room for the pod has one"),
        (DevicesShort(GANG, POD, "ns/c-0", "gpus", "gpu.example.com", 4, 0),
         "pod ns/train-0: ResourceClaim ns/c-0 request gpus needs 4 devices of class "
         "gpu.example.com, and no node has room for the pod otherwise"),
        (DevicesShort(GANG, POD, "ns/c-4", "gpus", "gpu.example.com", 4, 1, placed=4, minimum=5,
                      attribute="clique", best_node="n-0", best_free=2, best_total=8,
                      best_group="n-0-b", unreadable="ResourceSlice n1 cannot be read"),
         "gang ns/train found devices for 4 of the 5 members it needs at once; pod ns/train-0: "
         "ResourceClaim ns/c-4 request gpus needs 4 devices of class gpu.example.com in one "
         "clique: of 1 node with room for the pod, the best, n-0, has 2 of 8 free in n-0-b; "
         "ResourceSlice n1 cannot be read"),
        (DevicesShort(GANG, POD, "", "r", "gpu.example.com", 4, 2, best_node="n-0",
                      best_free=3, best_total=8, resource="example.com/gpu"),
         "pod ns/train-0 asks example.com/gpu: 4, which no node lists and devices of class "
         "gpu.example.com serve: of 2 nodes with room for the pod, the best has "
         "example.com/gpu: 3 of 8 devices free on n-0"),
    ])


def test_rules_wording() -> None:
    def block(rule: str, key: str, domain: str, other: str | None = None,
              same: bool = False, skew: int = 0) -> RuleBlock:
        return RuleBlock(NodeName("n1"), rule, key, domain,
                         PodKey(other) if other else None, same, 1 if skew else 0, skew)

    host = "kubernetes.io/hostname"
    zone = "topology.kubernetes.io/zone"
    worded([
        (PodRulesUnmet(GANG, 4, 3, PodKey("ns/train-3"), (("pod anti-affinity", 3),),
                       short=(("cpu", 1),), excluded=(("cordoned", 1),), shown=(
            block("pod anti-affinity", host, "n1", "ns/train-0", same=True),
            block("anti-affinity of a pod already there", zone, "a", "other/x"),
            block("anti-affinity of a pod already there", zone, "a"),
            block("pod affinity", zone, "a"),
            block("pod affinity", zone, ""),
            block("topology spread", zone, "b", skew=2),
            block("topology spread key missing", zone, ""),
            block("host port", "TCP/8080", "n1", "ns/train-0", same=True),
            block("disk", "gce-pd/data", "n1", "other/y"),
        ), search_stopped_after=100),
         "gang ns/train needs 4 pods under their inter-pod rules; 3 placed together, then pod "
         "ns/train-3 finds no node; 3 nodes by pod anti-affinity, 1 node short of cpu; "
         "nodes excluded: 1 cordoned; "
         "n1: anti-affinity with pod train-0 of this gang in kubernetes.io/hostname=n1; "
         "n1: pod other/x's anti-affinity in topology.kubernetes.io/zone=a; "
         "n1: a pod's anti-affinity in topology.kubernetes.io/zone=a; "
         "n1: no pod matching its affinity in topology.kubernetes.io/zone=a; "
         "n1: no topology.kubernetes.io/zone label for its affinity; "
         "zone b would break maxSkew 1 (skew 2); "
         "n1: no topology.kubernetes.io/zone label for its topology spread; "
         "n1: host port TCP/8080 taken by pod train-0 of this gang; "
         "n1: disk gce-pd/data in use by pod other/y; "
         "search stopped after examining 100 nodes"),
        (PodRulesUnmet(GANG, 1, 0, POD, ()),
         "gang ns/train needs 1 pod under their inter-pod rules; pod ns/train-0 finds no node"),
    ])


def test_holding_wording() -> None:
    worded([
        (HeldForStarving(GangKey("ns/big"), cpu(4), tuple(NodeName(f"n{i}") for i in range(4))),
         "it would fit but for cpu=4 held on n0, n1, n2 and 1 more for starving gang ns/big"),
        (Starving(Starved(60.0), cpu(8), QueueClosed(Q)),
         "starving (unplaced over 60s): holding cpu=8 for it; "
         "queue 'q' is closed: it admits no new gangs"),
        (Starving(PartlyBound(1, 3), cpu(2), QueueClosed(Q), (NodeName("n1"),), at=0.0),
         "partly bound (1 of 3): holding cpu=2 for it on n1, reserved from "
         "1970-01-01T00:00:00Z (gangs ending before may use it); "
         "queue 'q' is closed: it admits no new gangs"),
        (TooBigToHold(Starved(7.5), cpu(8), cpu(6), QueueClosed(Q)),
         "starving (unplaced over 7.5s) but needs cpu=8, more than the schedulable nodes have "
         "(cpu=6); queue 'q' is closed: it admits no new gangs"),
    ])


def test_preemption_wording() -> None:
    worded([
        (BeingPreempted(GangKey("ns/urgent")),
         "preempted by gang ns/urgent: waiting for its members to go"),
        (Preempting((GangKey("ns/a"), GangKey("ns/b")), cpu(4), QueueClosed(Q)),
         "preempting 2 gang(s) of lower priority (ns/a, ns/b); holding cpu=4 for it; "
         "queue 'q' is closed: it admits no new gangs"),
        (Preempting((GangKey("ns/a"),), cpu(4), QueueClosed(Q), reclaim_for=QueueName("b")),
         "reclaiming room for queue 'b', below its deserved share: evicting 1 gang(s) of "
         "queues above theirs (ns/a); holding cpu=4 for it; "
         "queue 'q' is closed: it admits no new gangs"),
        (AwaitingVictims((GangKey("ns/a"),), cpu(4), QueueClosed(Q)),
         "preempted 1 gang(s) (ns/a); holding cpu=4 until they are gone; "
         "queue 'q' is closed: it admits no new gangs"),
        (ProtectedByBudget((GangKey("ns/low-0"), GangKey("ns/low-1")), ("ns/all",),
                           QueueClosed(Q)),
         "no preemption: 2 gang(s) of lower priority (ns/low-0, ns/low-1) are protected by "
         "PodDisruptionBudgets (ns/all) that evicting them whole would exceed; "
         "queue 'q' is closed: it admits no new gangs"),
        (NotReclaimable((QueueName("a"),), QueueClosed(Q)),
         "no reclaim: queue 'a' borrows above its deserved share but is not reclaimable; "
         "queue 'q' is closed: it admits no new gangs"),
        (NotReclaimable((QueueName("a"), QueueName("c")), QueueClosed(Q)),
         "no reclaim: queues 'a', 'c' borrow above their deserved shares but are not "
         "reclaimable; queue 'q' is closed: it admits no new gangs"),
        (ProtectedByShare((QueueName("b"),), QueueClosed(Q)),
         "no preemption: the gangs of lower priority that could make room are of queue 'b', "
         "which would fall below its deserved share; queue 'q' is closed: it admits no new "
         "gangs"),
        (ProtectedByShare((QueueName("b"), QueueName("c")), QueueClosed(Q)),
         "no preemption: the gangs of lower priority that could make room are of queues 'b', "
         "'c', which would fall below their deserved share; queue 'q' is closed: it admits no "
         "new gangs"),
    ])


def test_groups_wording() -> None:
    worded([
        (GroupMissing(GangKey("ns/lost")), "waiting for PodGroup ns/lost to exist"),
        (GroupInvalid(GangKey("ns/broken"), "minMember must be at least 1"),
         "PodGroup ns/broken is invalid: minMember must be at least 1"),
    ])


def test_a_wrapped_reason_is_found_among_the_causes() -> None:
    nested = Starving(Starved(60.0), cpu(8),
                      NoDomainHolds("rack", 1, (InDomain("rack=r1", FITS),)))
    assert [code_of(cause) for cause in causes(nested)] == [
        "Starving", "NoDomainHolds", "InDomain", "DoesNotFit"]
