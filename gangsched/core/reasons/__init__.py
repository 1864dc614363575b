"""Why a gang waits: a reason is a code with its figures, and :func:`render` words it.

As kube-scheduler keeps a failure as a ``Diagnosis`` inside a ``FitError``
and only ``Error()`` makes the "0/5 nodes are available" line, a reason here
is a frozen value, one kind per cause, whose figures stay numbers and
resources until :func:`render` turns it into the line that becomes a
PodGroup condition message, an Event, the ``PodScheduled=False`` message on
each pod, a log field and ``explain``'s "why".

Each family of reasons is a module holding its kinds, each kind's wording
beside its figures (its ``text``): capacity (room on the nodes), domains
(one topology domain), members (the gang's own pods), queues (queue and
admission), volumes, devices, rules (inter-pod rules), holding (room held
for urgent gangs), preemption, kueue (its admission awaited), groups (the pod's
PodGroup) and nodepools (asking Karpenter for nodes). Tests assert on codes and
figures; the report plan (:mod:`gangsched.core.reports.report_plan`) decides
when a reason is said again.

The line is written for the person running ``kubectl describe``: what the
gang asks, how much room the nodes have for it, and which nodes were ruled
out and why. Cluster autoscalers and people both act on it; neither can act
on "does not fit". Reasons that wrap another (a starving gang holding room,
a preemptor) keep it as ``cause``, rendered after their own clause.
"""

from __future__ import annotations

from collections.abc import Iterator

from gangsched.core.reasons.capacity import (
    DoesNotFit,
    NoNodes,
    ShapeFigures,
    VolumeLimitBound,
    unplaceable_reason,
)
from gangsched.core.reasons.devices import (
    ClaimInvalid,
    ClaimNotReady,
    DevicesNotServed,
    DevicesShort,
)
from gangsched.core.reasons.domains import (
    BoundAcrossDomains,
    DomainRoom,
    InDomain,
    InSubGroup,
    LevelHeld,
    NoDomainHolds,
    NoDomainLabel,
    SubGroupHeld,
    SubGroupUnknown,
    TopologyUnknown,
    WaitsForPreferred,
)
from gangsched.core.reasons.groups import GroupInvalid, GroupMissing
from gangsched.core.reasons.holding import (
    HeldForStarving,
    PartlyBound,
    Starved,
    Starving,
    TooBigToHold,
    Urgency,
)
from gangsched.core.reasons.kueue import KUEUE_GATE, GatedByKueue, SuspendedByKueue
from gangsched.core.reasons.members import BindBackoff, Gated, MembersMissing, ShortOfMembers
from gangsched.core.reasons.nodepools import (
    AskingForNodes,
    AskingPaused,
    NodePoolLimit,
    NodesComing,
)
from gangsched.core.reasons.preemption import (
    AwaitingVictims,
    BeingPreempted,
    NotReclaimable,
    Preempting,
    ProtectedByBudget,
    ProtectedByShare,
)
from gangsched.core.reasons.queues import (
    QUEUE_PROBLEMS,
    AdmissionNoRoom,
    AdmissionOverCapability,
    CapabilityExceeded,
    QueueClosed,
    QueueInvalid,
    QueueMissing,
    QueueNotLeaf,
    ReservedByAdmitted,
)
from gangsched.core.reasons.rules import PodRulesUnmet, RuleBlock
from gangsched.core.reasons.volumes import (
    ClaimsProvisioning,
    ProvisioningTimedOut,
    VolumeBlocked,
)
from gangsched.core.reasons.wording import describe_request

__all__ = [
    "KUEUE_GATE",
    "QUEUE_PROBLEMS",
    "AdmissionNoRoom",
    "AdmissionOverCapability",
    "AskingForNodes",
    "AskingPaused",
    "AwaitingVictims",
    "BeingPreempted",
    "BindBackoff",
    "BoundAcrossDomains",
    "CapabilityExceeded",
    "ClaimInvalid",
    "ClaimNotReady",
    "ClaimsProvisioning",
    "DevicesNotServed",
    "DevicesShort",
    "DoesNotFit",
    "DomainRoom",
    "Gated",
    "GatedByKueue",
    "GroupInvalid",
    "GroupMissing",
    "HeldForStarving",
    "InDomain",
    "InSubGroup",
    "LevelHeld",
    "MembersMissing",
    "NoDomainHolds",
    "NoDomainLabel",
    "NoNodes",
    "NodePoolLimit",
    "NodesComing",
    "NotReclaimable",
    "PartlyBound",
    "PodRulesUnmet",
    "Preempting",
    "ProtectedByBudget",
    "ProtectedByShare",
    "ProvisioningTimedOut",
    "QueueClosed",
    "QueueInvalid",
    "QueueMissing",
    "QueueNotLeaf",
    "Reason",
    "ReservedByAdmitted",
    "RuleBlock",
    "ShapeFigures",
    "ShortOfMembers",
    "Starved",
    "Starving",
    "SubGroupHeld",
    "SubGroupUnknown",
    "SuspendedByKueue",
    "TooBigToHold",
    "TopologyUnknown",
    "Urgency",
    "VolumeBlocked",
    "VolumeLimitBound",
    "WaitsForPreferred",
    "causes",
    "code_of",
    "describe_request",
    "render",
    "unplaceable_reason",
]

Reason = (
    NoNodes | DoesNotFit
    | NoDomainLabel | BoundAcrossDomains | NoDomainHolds | InDomain | TopologyUnknown
    | WaitsForPreferred
    | InSubGroup | SubGroupUnknown
    | MembersMissing | ShortOfMembers | Gated | BindBackoff
    | SuspendedByKueue | GatedByKueue
    | QueueMissing | QueueClosed | QueueInvalid | QueueNotLeaf | CapabilityExceeded
    | AdmissionOverCapability | AdmissionNoRoom | ReservedByAdmitted
    | VolumeBlocked | ClaimsProvisioning | ProvisioningTimedOut
    | ClaimInvalid | ClaimNotReady | DevicesNotServed | DevicesShort
    | PodRulesUnmet
    | HeldForStarving | Starving | TooBigToHold
    | BeingPreempted | Preempting | AwaitingVictims | ProtectedByBudget | NotReclaimable
    | ProtectedByShare
    | GroupMissing | GroupInvalid
    | AskingForNodes | NodesComing | NodePoolLimit | AskingPaused
)
"""A reason as data: every kind has its code, its figures and its wording."""


def code_of(reason: Reason) -> str:
    """The reason's kind, as logs and ``explain --output json`` name it."""
    return reason.code


def causes(reason: Reason) -> Iterator[Reason]:
    """The reason and every reason it wraps, outermost first."""
    yield reason
    match reason:
        case (Starving() | TooBigToHold() | Preempting() | AwaitingVictims() | InDomain()
              | InSubGroup() | WaitsForPreferred() | ProtectedByBudget() | NotReclaimable()
              | ProtectedByShare()
              | AskingForNodes() | NodesComing() | NodePoolLimit() | AskingPaused()):
            yield from causes(reason.cause)
        case NoDomainHolds():
            for shown in reason.shown:
                yield from causes(shown)
        case _:
            pass


def render(reason: Reason) -> str:
    """The one place a reason becomes the text of a condition, an Event, a log line or
    ``explain``: each kind words itself, beside its figures in its family's module."""
    return reason.text()
