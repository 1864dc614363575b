"""Why a gang waits: a reason is a code with its figures, and :func:`render` words it.

As kube-scheduler keeps a failure as a ``Diagnosis`` inside a ``FitError``
and only ``Error()`` makes the "0/5 nodes are available" line, a reason here
is a frozen value, one kind per cause, whose figures stay numbers and
resources until :func:`render` turns it into the line that becomes a
PodGroup condition message, an Event, the ``PodScheduled=False`` message on
each pod, a log field and ``explain``'s "why". So the wording lives in one
place, tests assert on codes and figures, and :func:`reported_reasons` can
tell a reason whose figures moved from a new one without parsing text.

The line is written for the person running ``kubectl describe``: what the
gang asks, how much room the nodes have for it, and which nodes were ruled
out and why. Cluster autoscalers and people both act on it; neither can act
on "does not fit". Reasons that wrap another (a starving gang holding room,
a preemptor) keep it as ``cause``, rendered after their own clause.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from gangsched.core.model import (
    Gang,
    GangKey,
    NodeName,
    PodKey,
    PodPlacementRules,
    QueueName,
    VolumeBlock,
)
from gangsched.core.resources import (
    PODS,
    Capability,
    Resources,
    devices_first,
    format_amount,
    resource_words,
)
from gangsched.core.runtimes import moment_text

__all__ = [
    "AdmissionNoRoom",
    "AdmissionOverCapability",
    "AwaitingVictims",
    "BeingPreempted",
    "BindBackoff",
    "BoundAcrossDomains",
    "CapabilityExceeded",
    "ClaimsProvisioning",
    "DoesNotFit",
    "Gated",
    "HeldForStarving",
    "InDomain",
    "MembersMissing",
    "NoDomainHolds",
    "NoDomainLabel",
    "NoNodes",
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
    "Reported",
    "ReservedByAdmitted",
    "RuleBlock",
    "ShapeFigures",
    "ShortOfMembers",
    "Starved",
    "Starving",
    "TooBigToHold",
    "VolumeBlocked",
    "VolumeLimitBound",
    "causes",
    "code_of",
    "describe_request",
    "render",
    "reported_reasons",
    "unplaceable_reason",
]

_TIMES = "\u00d7"  # the multiplication sign


@dataclass(frozen=True, slots=True)
class VolumeLimitBound:
    """A CSI driver's per-node volume limit, where it holds a kind of pod's room below
    what the node's other resources allow: on how many nodes, and on the nearest of them
    to taking one more pod, its limit and the volumes attached there."""

    driver: str
    nodes: int
    node: NodeName
    limit: int
    attached: int
    wanted: int
    """Volumes of the driver one pod of the kind attaches."""

    @property
    def over(self) -> int:
        """Volumes one more pod would attach beyond the nearest node's limit (0: it fits)."""
        return max(0, self.attached + self.wanted - self.limit)


@dataclass(frozen=True, slots=True)
class ShapeFigures:
    """What the nodes offer to one kind of pod in the gang, counted in nodes."""

    requests: Resources
    rules: PodPlacementRules
    wanted: int
    room: Mapping[int, int]
    """Room (pods of this shape that fit) to number of eligible nodes with that room."""
    short: Mapping[str, int]
    """Resource to number of eligible nodes that lack it for even one pod."""
    excluded: Mapping[str, int]
    """Exclusion reason (taint, cordoned...) to number of nodes."""
    volume_limits: tuple[VolumeLimitBound, ...] = ()
    """The CSI drivers whose node volume limits hold the kind's room down."""

    @property
    def fits_alone(self) -> bool:
        return sum(room * nodes for room, nodes in self.room.items()) >= self.wanted


def describe_request(requests: Resources) -> str:
    """``2 nvidia.com/gpu`` or ``(4 cpu + 16Gi memory)``; the pod slot goes unsaid."""
    parts = [
        f"{format_amount(name, requests.get(name))} {resource_words(name)}"
        for name in sorted(requests.amounts, key=devices_first)
        if name != PODS
    ]
    if not parts:
        return "no resources"
    if len(parts) == 1:
        return parts[0]
    return "(" + " + ".join(parts) + ")"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _room_text(figures: ShapeFigures) -> str:
    room: dict[int, int] = {}
    for fits, nodes in figures.room.items():
        shown = min(fits, figures.wanted)
        room[shown] = room.get(shown, 0) + nodes
    parts = [
        f"{_plural(nodes, 'node')} can take {fits}{' each' if nodes > 1 else ''}"
        for fits, nodes in sorted(room.items(), reverse=True)
    ] or ["no node can take one"]
    if figures.short:
        ordered = sorted(figures.short.items(), key=lambda item: (-item[1], item[0]))
        parts.append(
            ", ".join(
                f"{_plural(nodes, 'node') if position == 0 else nodes} short of "
                f"{resource_words(name)}"
                for position, (name, nodes) in enumerate(ordered)
            )
        )
    parts.extend(_volume_limit_text(limit) for limit in figures.volume_limits)
    return "; ".join(parts)


def _volume_limit_text(limit: VolumeLimitBound) -> str:
    head = (f"the volume limit of CSI driver {limit.driver} holds down the room of "
            f"{_plural(limit.nodes, 'node')}")
    if limit.over:
        return (f"{head}: {_plural(limit.over, 'more volume')} of CSI driver {limit.driver} "
                f"than {limit.node}'s limit of {limit.limit} allows")
    return (f"{head}: {limit.node} has {limit.attached} of its {limit.limit} attached and "
            f"a pod attaches {limit.wanted}")


def _excluded_text(excluded: Mapping[str, int]) -> str:
    if not excluded:
        return ""
    ordered = sorted(excluded.items(), key=lambda item: (-item[1], item[0]))
    return "nodes excluded: " + ", ".join(
        f"{nodes} {reason}" if reason in ("cordoned", "not ready") else f"{nodes} by {reason}"
        for reason, nodes in ordered
    )



# ---- the kinds of reason --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NoNodes:
    """The cluster has no node at all."""

    code: ClassVar[str] = "NoNodes"
    gang: GangKey


@dataclass(frozen=True, slots=True)
class DoesNotFit:
    """The nodes lack room for the gang's pods at once: per kind of pod, what they offer."""

    code: ClassVar[str] = "DoesNotFit"
    gang: GangKey
    need: int
    """Pods that must fit at once (``min_member - bound``); 0 when only extras wait."""
    bound: int
    min_member: int
    shapes: tuple[ShapeFigures, ...]
    search_stopped_after: int | None = None
    """The exhaustive search gave up after examining this many node groups."""
    search_skipped_over: int | None = None
    """The exhaustive search was skipped: the gang has more pods than this."""

    @property
    def pending(self) -> int:
        return sum(shape.wanted for shape in self.shapes)


@dataclass(frozen=True, slots=True)
class MembersMissing:
    """Fewer pods exist than the gang needs; the count pending is left out on purpose,
    since it moves with every pod an operator creates."""

    code: ClassVar[str] = "MembersMissing"
    gang: GangKey
    need: int
    min_member: int
    bound: int


@dataclass(frozen=True, slots=True)
class ShortOfMembers:
    """Fewer pods exist, pending and bound together, than minMember: as it stands the gang
    can never be whole, so more room would not let it run and it holds none (a Job whose
    parallelism is below its PodGroup's minMember waits here, not in everyone's way)."""

    code: ClassVar[str] = "ShortOfMembers"
    gang: GangKey
    has: int
    needs: int


@dataclass(frozen=True, slots=True)
class NoDomainLabel:
    code: ClassVar[str] = "NoDomainLabel"
    gang: GangKey
    label: str


@dataclass(frozen=True, slots=True)
class BoundAcrossDomains:
    code: ClassVar[str] = "BoundAcrossDomains"
    gang: GangKey
    label: str


@dataclass(frozen=True, slots=True)
class InDomain:
    """Why the gang does not fit inside one domain (described as its label values)."""

    code: ClassVar[str] = "InDomain"
    domain: str
    cause: Reason


@dataclass(frozen=True, slots=True)
class NoDomainHolds:
    code: ClassVar[str] = "NoDomainHolds"
    label: str
    domains: int
    """Domains tried."""
    shown: tuple[InDomain, ...]
    """The first domains' refusals; the others are only counted."""


@dataclass(frozen=True, slots=True)
class QueueMissing:
    code: ClassVar[str] = "QueueMissing"
    queue: QueueName


@dataclass(frozen=True, slots=True)
class QueueClosed:
    """``queue`` is Closed: the gang's own queue or one above it, whose subtree admits no
    new gangs."""

    code: ClassVar[str] = "QueueClosed"
    queue: QueueName


@dataclass(frozen=True, slots=True)
class QueueInvalid:
    """The queue has no place in the hierarchy, so no share or cap can be worked out for it:
    its new gangs wait. ``problem`` is one of :data:`QUEUE_PROBLEMS`; ``queue`` is the queue
    the gang names, ``parent`` the queue the problem is about."""

    code: ClassVar[str] = "QueueInvalid"
    queue: QueueName
    problem: str
    parent: QueueName | None = None
    cycle: tuple[QueueName, ...] = ()
    """The queues of a parent cycle, in parent order from ``queue``."""
    weight: int = 1


@dataclass(frozen=True, slots=True)
class QueueNotLeaf:
    """The queue has child queues, and only leaf queues take gangs (as in Volcano and KAI):
    its new gangs wait; those already bound keep running."""

    code: ClassVar[str] = "QueueNotLeaf"
    queue: QueueName
    children: tuple[QueueName, ...]


QUEUE_PROBLEMS = ("ParentMissing", "ParentCycle", "ParentInvalid", "WeightBelowOne")
"""What can make a queue invalid in the hierarchy: also the reason of its Invalid condition."""


@dataclass(frozen=True, slots=True)
class BeingPreempted:
    """Its members are being evicted for ``preemptor``."""

    code: ClassVar[str] = "BeingPreempted"
    preemptor: GangKey


@dataclass(frozen=True, slots=True)
class Gated:
    code: ClassVar[str] = "Gated"
    pod: PodKey
    gates: tuple[str, ...]
    others: int
    """Other pending pods of the gang that are gated too."""


@dataclass(frozen=True, slots=True)
class VolumeBlocked:
    """A pending member's claim keeps it off every node (missing, unbound with an
    Immediate class, lost, ReadWriteOncePod in use...); the gang waits whole."""

    code: ClassVar[str] = "VolumeBlocked"
    pod: PodKey
    block: VolumeBlock
    others: int
    """Other pending pods of the gang blocked by a claim too."""


@dataclass(frozen=True, slots=True)
class ClaimsProvisioning:
    """The gang is placed, and waits for its WaitForFirstConsumer claims to be
    provisioned on the nodes chosen for them before any member is bound."""

    code: ClassVar[str] = "ClaimsProvisioning"
    claims: tuple[str, ...]
    """The claims not bound yet, ``namespace/name``."""
    nodes: int


@dataclass(frozen=True, slots=True)
class ProvisioningTimedOut:
    """Its claims were not provisioned in time: their chosen nodes were taken back and
    the gang tries again after a while."""

    code: ClassVar[str] = "ProvisioningTimedOut"
    claims: tuple[str, ...]
    seconds: float


@dataclass(frozen=True, slots=True)
class ClaimInvalid:
    """A claim of a pending member can be allocated on no node whatever the devices (a
    selector that fails, a DeviceClass that does not exist, a request of an unknown kind);
    the gang waits whole and nothing is allocated."""

    code: ClassVar[str] = "ClaimInvalid"
    pod: PodKey
    claim: str
    request: str
    problem: str


@dataclass(frozen=True, slots=True)
class ClaimNotReady:
    """A pending member's claim is not there to allocate: not yet made from its template,
    gone, or being deleted."""

    code: ClassVar[str] = "ClaimNotReady"
    pod: PodKey
    claim: str
    state: str
    """"not created yet from template X", "does not exist", "is being deleted"."""


@dataclass(frozen=True, slots=True)
class DevicesNotServed:
    """A pending member has ResourceClaims, and the API server does not serve the devices
    API gangsched allocates them through: dynamic resource allocation is off here."""

    code: ClassVar[str] = "DevicesNotServed"
    pod: PodKey
    claims: int
    api: str


@dataclass(frozen=True, slots=True)
class DevicesShort:
    """Too few devices for a member's claim on every node its other rules and room allow,
    with the best offer seen: a figure per node of the kind "2 of 8 free in clique b"."""

    code: ClassVar[str] = "DevicesShort"
    gang: GangKey
    pod: PodKey
    claim: str
    request: str
    device_class: str
    need: int
    """Devices the request asks (all matching ones, for allocationMode All)."""
    nodes: int
    """Nodes the pod's other rules and free room allow."""
    placed: int = 0
    """Members that found their devices before this one, and the gang's minimum."""
    minimum: int = 0
    attribute: str | None = None
    """The attribute a matchAttribute constraint makes the devices share, if any."""
    best_node: str | None = None
    best_free: int = 0
    """Free matching devices on the best node (in its best group, with ``attribute``)."""
    best_total: int = 0
    """Matching devices the best node has, free or not."""
    best_group: str | None = None
    unreadable: str | None = None
    """A slice of one of those nodes that could not be read, and why: its devices are
    not offered until its driver publishes it readable."""
    resource: str = ""
    """The extended resource the request serves, when it is of the claim made for the
    pod's extended resources (``claim`` is then empty: it is not created yet)."""


@dataclass(frozen=True, slots=True)
class BindBackoff:
    code: ClassVar[str] = "BindBackoff"
    pod: PodKey
    status: int
    """HTTP status of the refusal; 0 when the request got no answer."""
    message: str
    others: int
    """Other pending pods of the gang that back off too."""
    refusals: int


@dataclass(frozen=True, slots=True)
class AdmissionOverCapability:
    code: ClassVar[str] = "AdmissionOverCapability"
    min_resources: Resources
    queue: QueueName
    capability: Capability
    allocated: Resources
    reserved: Resources


@dataclass(frozen=True, slots=True)
class AdmissionNoRoom:
    code: ClassVar[str] = "AdmissionNoRoom"
    min_resources: Resources
    free: Resources
    reserved: Resources
    short: Resources


@dataclass(frozen=True, slots=True)
class ReservedByAdmitted:
    """The gang fits on the nodes, but only in room promised to admitted gangs."""

    code: ClassVar[str] = "ReservedByAdmitted"
    reserved: Resources
    placed: Resources
    free_after: Resources
    starving: GangKey | None = None
    starving_held: Resources | None = None
    """Of ``reserved``, what the starving gang ``starving`` holds."""


@dataclass(frozen=True, slots=True)
class HeldForStarving:
    """The gang would fit but for the room a starving gang keeps on the nodes it chose."""

    code: ClassVar[str] = "HeldForStarving"
    starving: GangKey
    held: Resources
    nodes: tuple[NodeName, ...]


@dataclass(frozen=True, slots=True)
class CapabilityExceeded:
    code: ClassVar[str] = "CapabilityExceeded"
    queue: QueueName
    capability: Capability
    allocated: Resources
    reserved: Resources
    placed: Resources


@dataclass(frozen=True, slots=True)
class PartlyBound:
    """Urgent because some members are bound and stranded until the rest is placed."""

    bound: int
    min_member: int


@dataclass(frozen=True, slots=True)
class Starved:
    """Urgent because it has waited past the starvation threshold (named, not the seconds
    waited, so the words do not change every second)."""

    threshold_s: float


Urgency = PartlyBound | Starved


@dataclass(frozen=True, slots=True)
class Starving:
    """The first urgent gang in order holds its room against the gangs after it."""

    code: ClassVar[str] = "Starving"
    urgency: Urgency
    hold: Resources
    cause: Reason
    nodes: tuple[NodeName, ...] = ()
    """The nodes whose free room is kept for it: where it would land first as they free."""
    at: float | None = None
    """Its reservation: the earliest it is expected to start (core.forecast). Gangs expected to
    end before then may use the room kept for it (EASY backfill)."""


@dataclass(frozen=True, slots=True)
class TooBigToHold:
    """Urgent, but it needs more than the schedulable nodes have: holding cannot help."""

    code: ClassVar[str] = "TooBigToHold"
    urgency: Urgency
    need: Resources
    cluster_total: Resources
    cause: Reason


@dataclass(frozen=True, slots=True)
class Preempting:
    """A preemption starts for it this cycle; it holds its room while the victims go."""

    code: ClassVar[str] = "Preempting"
    victims: tuple[GangKey, ...]
    hold: Resources
    cause: Reason
    reclaim_for: QueueName | None = None
    """Set when the victims are evicted to reclaim room for this queue, below its deserved
    share, from queues above theirs, not for priority."""


@dataclass(frozen=True, slots=True)
class AwaitingVictims:
    """Its preemption is under way; it holds its room until the victims are gone."""

    code: ClassVar[str] = "AwaitingVictims"
    victims: tuple[GangKey, ...]
    hold: Resources
    cause: Reason


@dataclass(frozen=True, slots=True)
class ProtectedByBudget:
    """It does not fit and preempts nobody: the gangs of lower priority that could go are
    protected by PodDisruptionBudgets, which evicting them whole would exceed."""

    code: ClassVar[str] = "ProtectedByBudget"
    gangs: tuple[GangKey, ...]
    budgets: tuple[str, ...]
    cause: Reason


@dataclass(frozen=True, slots=True)
class NotReclaimable:
    """Its queue is below its deserved share and evicting gangs of queues above theirs would
    make room, but those queues are not reclaimable (``reclaimable: false``)."""

    code: ClassVar[str] = "NotReclaimable"
    queues: tuple[QueueName, ...]
    cause: Reason


@dataclass(frozen=True, slots=True)
class ProtectedByShare:
    """It does not fit and preempts nobody: with reclaim on, the gangs of lower priority
    that could make room are of other queues that would fall below their deserved
    share, and priority preemption takes from another queue only room it borrows."""

    code: ClassVar[str] = "ProtectedByShare"
    queues: tuple[QueueName, ...]
    cause: Reason


@dataclass(frozen=True, slots=True)
class RuleBlock:
    """One node kept from a pod by an inter-pod rule, with what the rule read there."""

    node: NodeName
    rule: str
    """The rule, as ``interpod.PodRule`` names it."""
    topology_key: str
    domain: str
    """The node's value of ``topology_key``; empty when the node lacks that label."""
    other: PodKey | None = None
    """The pod whose presence (or whose anti-affinity) keeps this one off."""
    same_gang: bool = False
    max_skew: int = 0
    skew: int = 0


@dataclass(frozen=True, slots=True)
class PodRulesUnmet:
    """The gang's inter-pod rules (affinity, anti-affinity, spread) leave a member no node:
    how many were placed together first, and why each node refused the next."""

    code: ClassVar[str] = "PodRulesUnmet"
    gang: GangKey
    need: int
    placed: int
    pod: PodKey
    refused: tuple[tuple[str, int], ...]
    """Rule to the number of nodes it kept the pod off."""
    short: tuple[tuple[str, int], ...] = ()
    excluded: tuple[tuple[str, int], ...] = ()
    shown: tuple[RuleBlock, ...] = ()
    search_stopped_after: int | None = None


Reason = (
    NoNodes | DoesNotFit | MembersMissing | ShortOfMembers | NoDomainLabel | BoundAcrossDomains
    | NoDomainHolds | InDomain | QueueMissing | QueueClosed | QueueInvalid | BeingPreempted
    | QueueNotLeaf | Gated
    | BindBackoff | VolumeBlocked | ClaimsProvisioning | ProvisioningTimedOut
    | ClaimInvalid | ClaimNotReady | DevicesNotServed | DevicesShort
    | AdmissionOverCapability | AdmissionNoRoom | ReservedByAdmitted | HeldForStarving
    | CapabilityExceeded
    | Starving | TooBigToHold | Preempting | AwaitingVictims | ProtectedByBudget | PodRulesUnmet
    | NotReclaimable | ProtectedByShare
    | str
)
"""A reason as data; a plain ``str`` is a reason from a writer not yet turned to data."""


def code_of(reason: Reason) -> str:
    """The reason's kind, as logs and ``explain --output json`` name it."""
    return "Message" if isinstance(reason, str) else reason.code


def causes(reason: Reason) -> Iterator[Reason]:
    """The reason and every reason it wraps, outermost first."""
    yield reason
    match reason:
        case (Starving() | TooBigToHold() | Preempting() | AwaitingVictims() | InDomain()
              | ProtectedByBudget() | NotReclaimable() | ProtectedByShare()):
            yield from causes(reason.cause)
        case NoDomainHolds():
            for shown in reason.shown:
                yield from causes(shown)
        case _:
            pass


# ---- the one place a reason becomes text ------------------------------------------------


def render(reason: Reason) -> str:
    """The one place a reason becomes the text of a condition, an Event, a log line or
    ``explain``: every writer goes through here, so a reason is worded once."""
    match reason:
        case str():
            return reason
        case NoNodes():
            return f"gang {reason.gang}: the cluster has no nodes"
        case DoesNotFit():
            return _does_not_fit_text(reason)
        case MembersMissing():
            return (f"gang {reason.gang} waits for its members: it needs {reason.need} more "
                    f"pods to reach minMember {reason.min_member} ({reason.bound} bound) and "
                    f"fewer are pending")
        case ShortOfMembers():
            return (f"gang {reason.gang} is short of members: it has {reason.has} pods, "
                    f"pending and bound, and needs {reason.needs} (minMember); it holds no room "
                    f"until more exist")
        case NoDomainLabel():
            return (f"gang {reason.gang} must land in one {reason.label} domain, "
                    f"but no node carries the label {reason.label}")
        case BoundAcrossDomains():
            return (f"gang {reason.gang} must land in one {reason.label} domain, "
                    f"but its bound members span more than one")
        case InDomain():
            return f"in {reason.domain}: {render(reason.cause)}"
        case NoDomainHolds():
            return _no_domain_text(reason)
        case QueueMissing():
            return f"queue {reason.queue!r} does not exist"
        case QueueClosed():
            return f"queue {reason.queue!r} is closed: it admits no new gangs"
        case QueueInvalid():
            return _queue_invalid_text(reason)
        case QueueNotLeaf():
            return (f"queue {reason.queue!r} has child queues ({_some(reason.children)}): "
                    f"submit to a leaf queue")
        case BeingPreempted():
            return f"preempted by gang {reason.preemptor}: waiting for its members to go"
        case Gated():
            return (f"waiting for scheduling gates to be lifted: pod {reason.pod} has "
                    f"{', '.join(reason.gates)}{_more_pods(reason.others)}")
        case BindBackoff():
            return _backoff_text(reason)
        case VolumeBlocked() | ClaimsProvisioning() | ProvisioningTimedOut():
            return _volume_text(reason)
        case PodRulesUnmet():
            return _rules_text(reason)
        case ClaimInvalid():
            request = f" request {reason.request}" if reason.request else ""
            return (f"pod {reason.pod}: ResourceClaim {reason.claim}{request} cannot be "
                    f"allocated: {reason.problem}")
        case ClaimNotReady():
            return f"pod {reason.pod}: ResourceClaim {reason.claim} {reason.state}"
        case DevicesNotServed():
            return (f"pod {reason.pod} has {reason.claims} ResourceClaim(s), and the API "
                    f"server does not serve {reason.api}: dynamic resource allocation is "
                    f"off on this cluster")
        case DevicesShort():
            return _devices_short_text(reason)
        case AdmissionOverCapability() | AdmissionNoRoom():
            return _admission_text(reason)
        case ReservedByAdmitted():
            return _reserved_text(reason)
        case HeldForStarving():
            return (f"it would fit but for {reason.held} held on {_some(reason.nodes)} "
                    f"for starving gang {reason.starving}")
        case CapabilityExceeded():
            return (f"queue {reason.queue!r} capability {reason.capability} would be exceeded: "
                    f"allocated {reason.allocated}, reserved by admitted gangs "
                    f"{reason.reserved}, this gang {reason.placed}")
        case Starving() | TooBigToHold() | Preempting() | AwaitingVictims():
            return f"{_holding_text(reason)}; {render(reason.cause)}"
        case ProtectedByBudget():
            return (f"no preemption: {len(reason.gangs)} gang(s) of lower priority "
                    f"({', '.join(reason.gangs)}) are protected by PodDisruptionBudgets "
                    f"({', '.join(reason.budgets)}) that evicting them whole would exceed; "
                    f"{render(reason.cause)}")
        case NotReclaimable():
            return f"{_not_reclaimable_text(reason.queues)}; {render(reason.cause)}"
        case ProtectedByShare():
            return (f"no preemption: the gangs of lower priority that could make room are of "
                    f"{_queues_text(reason.queues)}, which would fall below "
                    f"{'its' if len(reason.queues) == 1 else 'their'} deserved share; "
                    f"{render(reason.cause)}")


def _not_reclaimable_text(queues: Sequence[QueueName]) -> str:
    if len(queues) == 1:
        return (f"no reclaim: queue {queues[0]!r} borrows above its deserved share but is "
                f"not reclaimable")
    return (f"no reclaim: queues {', '.join(repr(q) for q in queues)} borrow above their "
            f"deserved shares but are not reclaimable")


def _queues_text(queues: Sequence[QueueName]) -> str:
    if len(queues) == 1:
        return f"queue {queues[0]!r}"
    return f"queues {', '.join(repr(q) for q in queues)}"


def _queue_invalid_text(reason: QueueInvalid) -> str:
    parent = repr(reason.parent)
    match reason.problem:
        case "ParentMissing":
            why = f"its parent queue {parent} does not exist (deleted, or not created yet)"
        case "ParentCycle":
            why = f"its parents form a cycle: {' -> '.join([*reason.cycle, reason.cycle[0]])}"
        case "ParentInvalid":
            why = f"its parent queue {parent} is invalid"
        case _:
            why = f"its weight is {reason.weight}, and a queue needs a weight of at least 1"
    return (f"queue {reason.queue!r} is invalid: {why}; it admits no new gangs until "
            f"this is fixed")


def _devices_short_text(reason: DevicesShort) -> str:
    text = _devices_offer_text(reason)
    return f"{text}; {reason.unreadable}" if reason.unreadable else text


def _devices_offer_text(reason: DevicesShort) -> str:
    if reason.resource:
        # An extended resource served by devices is said in its own terms: the pod asks
        # ``example.com/gpu: 2``, not a claim it never named.
        head = (f"pod {reason.pod} asks {reason.resource}: {reason.need}, which no node "
                f"lists and devices of class {reason.device_class} serve")
    else:
        where = f" in one {reason.attribute}" if reason.attribute else ""
        head = (f"pod {reason.pod}: ResourceClaim {reason.claim} request {reason.request} "
                f"needs {_plural(reason.need, 'device')} of class {reason.device_class}{where}")
    if reason.minimum:
        head = (f"gang {reason.gang} found devices for {reason.placed} of the "
                f"{reason.minimum} members it needs at once; {head}")
    if not reason.nodes:
        return f"{head}, and no node has room for the pod otherwise"
    if reason.best_node is None:
        return f"{head}: none of the {_plural(reason.nodes, 'node')} with room for the pod has one"
    offer = f"of {_plural(reason.nodes, 'node')} with room for the pod, the best"
    if reason.resource:
        return (f"{head}: {offer} has {reason.resource}: {reason.best_free} of "
                f"{reason.best_total} devices free on {reason.best_node}")
    group = f" in {reason.best_group}" if reason.best_group else ""
    return (f"{head}: {offer}, {reason.best_node}, has {reason.best_free} of "
            f"{reason.best_total} free{group}")


def _more_pods(others: int) -> str:
    return f" (and {others} more pods of the gang)" if others else ""


def _does_not_fit_text(reason: DoesNotFit) -> str:
    shapes = reason.shapes
    pending = reason.pending
    if reason.need == 0:
        head = f"gang {reason.gang} has {_plural(pending, 'pending pod')}"
    else:
        head = f"gang {reason.gang} needs {_plural(reason.need, 'pod')}"
        if reason.need < pending:
            head += f" of {pending} pending"
    if len(shapes) == 1:
        head += f" {_TIMES} {describe_request(shapes[0].requests)}"
    else:
        head += " (" + ", ".join(
            f"{shape.wanted} {_TIMES} {describe_request(shape.requests)}" for shape in shapes
        ) + ")"
    if reason.bound:
        head += f", {reason.bound} of minMember {reason.min_member} already bound"

    parts = [head]
    same_rules = all(shape.rules == shapes[0].rules for shape in shapes)
    for shape in shapes:
        label = "" if len(shapes) == 1 else f"for {describe_request(shape.requests)}: "
        parts.append(label + _room_text(shape))
        if not same_rules and shape.excluded:
            parts.append(label + _excluded_text(shape.excluded))
    if same_rules and shapes[0].excluded:
        parts.append(_excluded_text(shapes[0].excluded))
    if len(shapes) > 1 and all(shape.fits_alone for shape in shapes):
        parts.append("each kind of pod fits on its own but not all together")
    if reason.search_stopped_after is not None:
        parts.append(f"search stopped after examining {reason.search_stopped_after} node groups")
    if reason.search_skipped_over is not None:
        parts.append(f"exhaustive search skipped for more than {reason.search_skipped_over} pods")
    return "; ".join(parts)


def _rules_text(reason: PodRulesUnmet) -> str:
    head = f"gang {reason.gang} needs {_plural(reason.need, 'pod')} under their inter-pod rules"
    if reason.placed:
        head += f"; {reason.placed} placed together, then pod {reason.pod} finds no node"
    else:
        head += f"; pod {reason.pod} finds no node"
    parts = [head]
    counted = [f"{_plural(nodes, 'node')} by {rule}" for rule, nodes in reason.refused]
    counted += [f"{_plural(nodes, 'node')} short of {name}" for name, nodes in reason.short]
    if counted:
        parts.append(", ".join(counted))
    if reason.excluded:
        parts.append(_excluded_text(dict(reason.excluded)))
    parts.extend(_block_text(block) for block in reason.shown)
    if reason.search_stopped_after is not None:
        parts.append(f"search stopped after examining {reason.search_stopped_after} nodes")
    return "; ".join(parts)


def _block_text(block: RuleBlock) -> str:
    """``node-3: anti-affinity with pod w-0 of this gang``, ``zone b would break maxSkew 1``."""
    where = f"{block.topology_key}={block.domain}"
    other = block.other or ""
    if block.same_gang and other:
        other = f"{other.split('/', 1)[1]} of this gang"
    match block.rule:
        case "host port":
            whose = f" by pod {other}" if other else ""
            return f"{block.node}: host port {block.topology_key} taken{whose}"
        case "disk":
            whose = f" by pod {other}" if other else ""
            return f"{block.node}: disk {block.topology_key} in use{whose}"
        case "pod anti-affinity":
            with_whom = f" with pod {other}" if other else ""
            return f"{block.node}: anti-affinity{with_whom} in {where}"
        case "anti-affinity of a pod already there":
            whose = f"pod {other}'s" if other else "a pod's"
            return f"{block.node}: {whose} anti-affinity in {where}"
        case "pod affinity":
            if not block.domain:
                return f"{block.node}: no {block.topology_key} label for its affinity"
            return f"{block.node}: no pod matching its affinity in {where}"
        case "topology spread":
            name = block.topology_key.rsplit("/", 1)[-1]
            return (f"{name} {block.domain} would break maxSkew {block.max_skew} "
                    f"(skew {block.skew})")
        case _:
            return f"{block.node}: no {block.topology_key} label for its topology spread"


def _no_domain_text(reason: NoDomainHolds) -> str:
    shown = "; ".join(render(domain) for domain in reason.shown)
    hidden = reason.domains - len(reason.shown)
    more = f"; {hidden} more domains too small" if hidden > 0 else ""
    return (f"no single {reason.label} domain of {reason.domains} holds the whole gang: "
            f"{shown}{more}")


def _volume_text(reason: VolumeBlocked | ClaimsProvisioning | ProvisioningTimedOut) -> str:
    match reason:
        case VolumeBlocked():
            block = reason.block
            held = f" ({block.other})" if block.other else ""
            return (f"pod {reason.pod}: persistentvolumeclaim {block.claim} "
                    f"{block.problem.value}{held}{_more_pods(reason.others)}")
        case ClaimsProvisioning():
            return (f"waiting for {_plural(len(reason.claims), 'claim')} "
                    f"({', '.join(reason.claims)}) to be provisioned on the "
                    f"{_plural(reason.nodes, 'node')} chosen for the gang before binding it")
        case ProvisioningTimedOut():
            return (f"{_plural(len(reason.claims), 'claim')} ({', '.join(reason.claims)}) "
                    f"were not provisioned within {reason.seconds:g}s: their nodes were "
                    f"released and the gang tries again later")


def _backoff_text(reason: BindBackoff) -> str:
    answer = f"HTTP {reason.status}: " if reason.status else ""
    return (
        f"binding pod {reason.pod} was refused ({answer}{reason.message or 'no answer'})"
        f"{_more_pods(reason.others)}; retrying with backoff after {reason.refusals} refusal"
        f"{'s' if reason.refusals > 1 else ''} in a row"
    )


def _admission_text(reason: AdmissionOverCapability | AdmissionNoRoom) -> str:
    if isinstance(reason, AdmissionOverCapability):
        return (f"waiting for admission: minResources {reason.min_resources} would exceed "
                f"queue {reason.queue!r} capability {reason.capability} "
                f"(allocated {reason.allocated}, reserved {reason.reserved})")
    return (f"waiting for admission: minResources {reason.min_resources} do not fit: "
            f"{reason.free} free on schedulable nodes, {reason.reserved} of it reserved "
            f"by admitted gangs (short {reason.short})")


def _reserved_text(reason: ReservedByAdmitted) -> str:
    starving = ""
    if reason.starving is not None:
        starving = f" ({reason.starving_held} of it held for starving gang {reason.starving})"
    return (f"resources reserved by admitted gangs: {reason.reserved}{starving}; "
            f"placing {reason.placed} would leave {reason.free_after} free")


def _urgency_text(urgency: Urgency) -> str:
    if isinstance(urgency, PartlyBound):
        return f"partly bound ({urgency.bound} of {urgency.min_member})"
    return f"starving (unplaced over {urgency.threshold_s:g}s)"


def _some(names: Sequence[str], shown: int = 3) -> str:
    """A few names, and how many more: a reason stays one readable line."""
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" and {more} more" if more > 0 else "")


def _holding_text(reason: Starving | TooBigToHold | Preempting | AwaitingVictims) -> str:
    """The clause a wrapping reason puts before its cause."""
    match reason:
        case Starving():
            where = f" on {_some(reason.nodes)}" if reason.nodes else ""
            when = (f", reserved from {moment_text(reason.at)} (gangs ending before may use it)"
                    if reason.at is not None else "")
            return f"{_urgency_text(reason.urgency)}: holding {reason.hold} for it{where}{when}"
        case TooBigToHold():
            return (f"{_urgency_text(reason.urgency)} but needs {reason.need}, more than the "
                    f"schedulable nodes have ({reason.cluster_total})")
        case Preempting() if reason.reclaim_for is not None:
            return (f"reclaiming room for queue {reason.reclaim_for!r}, below its deserved "
                    f"share: evicting {len(reason.victims)} gang(s) of queues above theirs "
                    f"({', '.join(reason.victims)}); holding {reason.hold} for it")
        case Preempting():
            return (f"preempting {len(reason.victims)} gang(s) of lower priority "
                    f"({', '.join(reason.victims)}); holding {reason.hold} for it")
        case AwaitingVictims():
            return (f"preempted {len(reason.victims)} gang(s) ({', '.join(reason.victims)}); "
                    f"holding {reason.hold} until they are gone")


def unplaceable_reason(
    gang: Gang,
    shapes: Sequence[ShapeFigures],
    need: int,
    cluster_nodes: int,
    *,
    search_stopped_after: int | None = None,
    search_skipped_over: int | None = None,
) -> NoNodes | DoesNotFit:
    """The reason for an Unplaceable decision of the placement core.

    Rendered, e.g.: ``gang ns/train needs 4 pods \u00d7 2 nvidia.com/gpu; 3 nodes
    can take 1 each; nodes excluded: 2 by taint gpu=busy:NoSchedule, 1 cordoned``.
    """
    if not cluster_nodes:
        return NoNodes(gang.key)
    return DoesNotFit(gang.key, need, gang.bound, gang.min_member, tuple(shapes),
                      search_stopped_after, search_skipped_over)


# ---- what is reported, and when --------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Reported:
    """The reason last reported for a waiting gang, and since when."""

    reason: Reason
    since: float
    text: str = field(init=False, compare=False, repr=False)
    """The reason rendered, once: a reason kept for many cycles is not worded again each."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "text", render(self.reason))


def reported_reasons(
    reported: Mapping[GangKey, Reported],
    reasons: Mapping[GangKey, Reason],
    now: float,
    hold_s: float,
) -> dict[GangKey, Reported]:
    """The reasons to report now: a new reason, unless only its figures moved.

    While other gangs come and go, the room a waiting gang is told about
    ("3 nodes can take 1 each") changes nearly every cycle, and each change
    would rewrite the condition of every waiting pod, send Events and log a
    line: thousands of writes a minute on a busy cluster for nothing anyone
    acts on. So a reason of the same kind whose steady part (see
    :func:`_steady`: what the gang asks, what it holds, what it waits for) is
    unchanged, and whose moving figures differ, keeps the reason reported
    before until that one is ``hold_s`` old. Any other change is reported
    at once.
    """
    settled: dict[GangKey, Reported] = {}
    for gang, reason in reasons.items():
        before = reported.get(gang)
        if before is not None and (before.reason == reason or (
            now - before.since < hold_s and _only_figures_moved(before.reason, reason)
        )):
            settled[gang] = before
        else:
            settled[gang] = Reported(reason, now)
    return settled


def _only_figures_moved(old: Reason, new: Reason) -> bool:
    if isinstance(old, str) or isinstance(new, str):
        if isinstance(old, str) and isinstance(new, str):
            return _same_clause(old, new)
        return False
    steady = _steady(new)
    return steady is not None and type(old) is type(new) and _steady(old) == steady


def _steady(reason: Reason) -> object | None:
    """What of a reason must stay the same for a change to be only its figures moving;
    None for a reason whose every figure matters at once."""
    match reason:
        case DoesNotFit():
            return (reason.gang, reason.need, reason.bound, reason.min_member,
                    tuple((shape.requests, shape.wanted) for shape in reason.shapes))
        case NoDomainHolds():
            return (reason.label, reason.domains)
        case ShortOfMembers():
            return (reason.gang, reason.needs)
        case BindBackoff():
            return (reason.pod, reason.status, reason.message, reason.others)
        case ReservedByAdmitted():
            return (reason.reserved, reason.starving, reason.starving_held)
        case HeldForStarving():
            return (reason.starving, reason.held)
        case DevicesShort():
            # Which member, claim and request, and what it asks: the devices free on the
            # best node move with every gang that comes and goes.
            return (reason.gang, reason.pod, reason.claim, reason.request, reason.need,
                    reason.attribute, reason.minimum, reason.placed, reason.unreadable,
                    reason.resource)
        case Starving():
            return (reason.urgency, reason.hold, code_of(reason.cause), _steady(reason.cause))
        case TooBigToHold():
            return (reason.urgency, reason.need, code_of(reason.cause), _steady(reason.cause))
        case Preempting() | AwaitingVictims():
            return (reason.victims, reason.hold, code_of(reason.cause), _steady(reason.cause))
        case ProtectedByBudget():
            return (reason.gangs, reason.budgets, code_of(reason.cause), _steady(reason.cause))
        case NotReclaimable() | ProtectedByShare():
            return (reason.queues, code_of(reason.cause), _steady(reason.cause))
        case _:
            return None


def _same_clause(old: str, new: str) -> bool:
    head, separator, _ = new.partition("; ")
    return bool(separator) and old.startswith(head + separator)
