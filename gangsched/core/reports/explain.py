"""Why one gang waits, in more depth than the one-line reason: for ``gangsched explain``.

The one-line reason (``reasons``) is what every waiting pod carries. A person
asking about one gang wants the figures behind it: what each kind of pod
lacks, node by node, which nodes came closest, which reservations and queue
caps stand in the way, and what would let the gang run. Computed from the
same cycle input and result the scheduler's step acts on, so the
explanation cannot disagree with the decision.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from fractions import Fraction

from gangsched.core.fit.nodefit import node_excluded_reason
from gangsched.core.model.objects import (
    Gang,
    GangKey,
    NodeName,
    PodKey,
    PodPlacementRules,
    QueueName,
)
from gangsched.core.model.resources import PODS, Capability, Resources
from gangsched.core.placement.room import UNBOUNDED, fit_count
from gangsched.core.reasons import (
    AdmissionNoRoom,
    AdmissionOverCapability,
    CapabilityExceeded,
    Gated,
    NotReclaimable,
    PodRulesUnmet,
    ProtectedByShare,
    QueueClosed,
    QueueInvalid,
    QueueMissing,
    QueueNotLeaf,
    Reason,
    ReservedByAdmitted,
    ShortOfMembers,
    Starved,
    Starving,
    TooBigToHold,
    TopologyUnknown,
    causes,
    describe_request,
)
from gangsched.core.stages.cycle import CycleInput, CycleResult, outstanding
from gangsched.core.state import State

__all__ = ["Explanation", "NodeFit", "ShapeNeed", "Verdict", "explain_gang"]

CLOSEST = 3
"""Nodes shown per kind of pod: the ones that came closest."""


class Verdict(StrEnum):
    PLACED = "placed"
    """The cycle places it now."""
    WAITING = "waiting"
    """It has pending pods the cycle could not place."""
    NOT_ADMITTED = "not admitted"
    """A PodGroup with no pods yet whose minResources cannot be admitted."""
    IDLE = "nothing to place"
    """No pending pods: running, or admitted and waiting for its pods to be created."""


@dataclass(frozen=True, slots=True)
class NodeFit:
    node: NodeName
    fits: int
    """Pods of this kind that fit on the node now, each counted alone."""
    lacks: Resources
    """What the node lacks for one more such pod; zero when one fits."""


@dataclass(frozen=True, slots=True)
class ShapeNeed:
    """One kind of pod of the gang (same requests and rules) and the nodes' room for it."""

    requests: Resources
    rules: PodPlacementRules
    pending: int
    room: int
    """How many of these pods the nodes they may use can take now, summed."""
    closest: tuple[NodeFit, ...]
    """The nodes that came closest: most room first, then least lacking."""
    nearest_short: NodeFit | None
    """Of the nodes that cannot take one more such pod, the one lacking least."""
    excluded: Mapping[str, int]
    """Why the other nodes may not take these pods at all, with how many nodes each."""

    @property
    def short(self) -> int:
        return max(0, self.pending - self.room)


@dataclass(frozen=True, slots=True)
class Explanation:
    gang: GangKey
    verdict: Verdict
    reason: Reason | None
    """The cycle's reason, as written (rendered) to the pods and the PodGroup."""
    min_member: int
    bound: int
    pending: int
    queue: QueueName
    shapes: tuple[ShapeNeed, ...]
    assignments: tuple[tuple[PodKey, NodeName], ...]
    """Where the cycle places its pods, when it does."""
    reserved_by_others: tuple[tuple[GangKey, Resources], ...]
    """Room admitted gangs hold for pods they have not bound yet."""
    queue_capability: Capability | None
    queue_allocated: Resources
    remedies: tuple[str, ...]
    """What would let it run, most direct first."""
    preempts: tuple[GangKey, ...] = ()
    """The gangs the step evicts whole to make its room, when it preempts for it."""


def _lack_ratio(lacks: Resources, requests: Resources) -> Fraction:
    """How far a node is from taking one pod: the missing share of each request, summed."""
    return sum(
        (Fraction(amount, requests.get(name)) for name, amount in lacks.items()
         if requests.get(name) > 0),
        Fraction(0),
    )


def _shapes(gang: Gang, inp: CycleInput) -> tuple[ShapeNeed, ...]:
    kinds: dict[tuple[Resources, PodPlacementRules], int] = {}
    for pod in gang.pending:
        kinds[(pod.requests, pod.rules)] = kinds.get((pod.requests, pod.rules), 0) + 1
    shapes: list[ShapeNeed] = []
    for (requests, rules), pending in kinds.items():
        items = tuple(sorted(requests.amounts.items()))
        fits: list[NodeFit] = []
        excluded: dict[str, int] = {}
        for name in sorted(inp.snapshot.nodes):
            usage = inp.snapshot.nodes[name]
            reason = node_excluded_reason(rules, usage.node)
            if reason is not None:
                excluded[reason] = excluded.get(reason, 0) + 1
                continue
            count = fit_count(usage.free, items)
            fits.append(NodeFit(name, min(count, pending) if count < UNBOUNDED else pending,
                                requests.short_of(usage.free)))
        fits.sort(key=lambda f: (-f.fits, _lack_ratio(f.lacks, requests), f.node))
        shapes.append(ShapeNeed(
            requests=requests, rules=rules, pending=pending,
            room=sum(f.fits for f in fits), closest=tuple(fits[:CLOSEST]),
            nearest_short=next((f for f in fits if f.fits == 0), None), excluded=excluded,
        ))
    return tuple(shapes)


def _without_pods(resources: Resources) -> Resources:
    return Resources.of({name: amount for name, amount in resources.items() if name != PODS})


def _remedies(
    explanation_shapes: tuple[ShapeNeed, ...],
    verdict: Verdict,
    reason: Reason | None,
    reserved: tuple[tuple[GangKey, Resources], ...],
    queue: QueueName,
    capability: Capability | None,
) -> tuple[str, ...]:
    if verdict is Verdict.PLACED:
        return ("it fits now: a running gangsched binds it in its next cycle",)
    remedies: list[str] = []
    kinds = {type(cause) for cause in causes(reason)} if reason is not None else set()
    if Gated in kinds:
        remedies.append("its pods wait for their scheduling gates to be removed by whatever "
                        "set them (the reason names the gates): more room would not let it run")
    if ShortOfMembers in kinds:
        remedies.append("fewer of its pods exist than its minMember: it runs once the rest "
                        "are created, or minMember is lowered; more room would not let it run")
    if isinstance(reason, TopologyUnknown):
        remedies.append(f"create Topology {reason.topology} with the level its spec.topology "
                        f"names, or name an existing one: more room would not let it run")
    if not kinds & {Gated, ShortOfMembers, TopologyUnknown}:
        remedies.extend(_room_remedies(explanation_shapes))
    if reserved and kinds & {ReservedByAdmitted, AdmissionOverCapability, AdmissionNoRoom}:
        holders = ", ".join(str(key) for key, _ in reserved)
        remedies.append(f"room is held for admitted gangs ({holders}): it runs once their "
                        f"pods are bound or they finish")
    if capability is not None and kinds & {CapabilityExceeded, AdmissionOverCapability}:
        remedies.append(f"queue {queue} is at its capability {capability}: raise "
                        f"spec.capability, or wait for its running gangs to finish")
    if QueueClosed in kinds:
        remedies.append(f"queue {queue} is Closed: set its spec.state to Open")
    if QueueMissing in kinds:
        remedies.append(f"create Queue {queue}, or point the PodGroup at an existing queue")
    if QueueInvalid in kinds:
        remedies.append(f"fix queue {queue}'s spec.parent or spec.weight as its Invalid "
                        f"condition says (kubectl describe queue {queue})")
    if QueueNotLeaf in kinds:
        remedies.append(f"queue {queue} has child queues and only leaf queues take gangs: "
                        f"submit it to one of them (the PodGroup's spec.queue, or a lone pod's "
                        f"scheduling.gangsched.io/queue annotation)")
    if NotReclaimable in kinds:
        remedies.append(f"queue {queue} is below its deserved share, and the queues holding "
                        f"room above theirs are not reclaimable: it runs once their gangs "
                        f"finish, or once they allow reclaim (spec.reclaimable: true)")
    if ProtectedByShare in kinds:
        remedies.append("priority preemption takes from another queue only room that queue "
                        "holds above its deserved share: it runs once room frees, or once "
                        "gangs of lower priority in its own queue or in queues above their "
                        "share can make room")
    if PodRulesUnmet in kinds:
        remedies.append("its pods' inter-pod rules (affinity, anti-affinity, topology spread) "
                        "leave a member no node, as the reason says: nodes in more topology "
                        "domains, or fewer pods the rules select there, would let it run")
    if _held_for_a_starving_gang(reason) and not remedies:
        remedies.append("a gang that waited longer holds the room first: it runs after that one")
    if not remedies and verdict is Verdict.WAITING:
        remedies.append("every kind of pod fits on its own but not all together: the gang "
                        "needs more room on the nodes at once")
    return tuple(remedies)


def _room_remedies(explanation_shapes: tuple[ShapeNeed, ...]) -> list[str]:
    """What room would let each kind of pod that does not fit run: a node none may use,
    or the room missing (freeing on the nearest node places one pod, a new node all)."""
    remedies: list[str] = []
    for shape in explanation_shapes:
        what = describe_request(shape.requests)
        if not shape.closest:
            excluded = ", ".join(f"{n} {r}" for r, n in sorted(shape.excluded.items()))
            remedies.append(
                f"no node may take pods of {what} ({excluded}): add a node they may use, "
                f"or change their nodeSelector, affinity or tolerations"
            )
        elif shape.short:
            near = shape.nearest_short
            lack = _without_pods(near.lacks) if near is not None else Resources.zero()
            some = "it" if shape.short == 1 else "one of them"
            freeing = (f"{describe_request(lack)} freed on {near.node} (it lacks only that) "
                       f"would make room for {some}; "
                       if near is not None and not lack.is_zero else "")
            remedies.append(
                f"room for {shape.short} more pod(s) of {what} is missing: {freeing}a new "
                f"node with {describe_request(shape.requests.scale(shape.short))} "
                f"would let it run"
            )
    return remedies


def explain_gang(inp: CycleInput, result: CycleResult, key: GangKey) -> Explanation | None:
    """Explain one gang of the cycle; None when the cycle did not consider it."""
    gang = next((g for g in inp.gangs if g.key == key), None)
    if gang is None:
        return None
    placement = next((p for p in result.placements if p.gang == key), None)
    reasons = {u.gang: u.reason for u in (*result.unplaceable, *result.unadmitted)}
    reason = reasons.get(key)
    if placement is not None:
        verdict = Verdict.PLACED
    elif gang.pending:
        verdict = Verdict.WAITING
    elif reason is not None:
        verdict = Verdict.NOT_ADMITTED
    else:
        verdict = Verdict.IDLE
    reserved = tuple(
        (other.key, held)
        for other in inp.gangs
        if other.key != key and other.key in result.admitted
        and not (held := outstanding(other.min_resources,
                                     inp.bound_requests.get(other.key, Resources.zero()))).is_zero
    )
    queue = inp.queues.get(gang.queue)
    allocated = Resources.zero()
    for other in inp.gangs:
        if other.queue == gang.queue:
            allocated = allocated + inp.bound_requests.get(other.key, Resources.zero())
    shapes = _shapes(gang, inp) if verdict is not Verdict.PLACED else ()
    capability = queue.capability if queue is not None else None
    return Explanation(
        gang=key,
        verdict=verdict,
        reason=reason,
        min_member=gang.min_member,
        bound=gang.bound,
        pending=len(gang.pending),
        queue=gang.queue,
        shapes=shapes,
        assignments=placement.assignments if placement is not None else (),
        reserved_by_others=reserved,
        queue_capability=capability,
        queue_allocated=allocated,
        remedies=_remedies(shapes, verdict, reason, reserved, gang.queue, capability),
        preempts=next((p.victims for p in result.preemptions if p.preemptor == key), ()),
    )


def as_said(explanation: Explanation | None, state: State) -> Explanation | None:
    """The explanation with the gang's reason as its pods and PodGroup say it: where
    Karpenter's NodePools are served, asking for nodes or why not (core.asking)."""
    if explanation is None or explanation.reason is None:
        return explanation
    said = state.reported.get(explanation.gang)
    return explanation if said is None else replace(explanation, reason=said.reason)


def _held_for_a_starving_gang(reason: Reason | None) -> bool:
    """Whether starvation is in play: the room is held for a starving gang, or this gang
    starves and its turn to hold room comes after those that waited longer."""
    if reason is None:
        return False
    return any(
        (isinstance(cause, Starving | TooBigToHold) and isinstance(cause.urgency, Starved))
        or (isinstance(cause, ReservedByAdmitted) and cause.starving is not None)
        for cause in causes(reason)
    )
