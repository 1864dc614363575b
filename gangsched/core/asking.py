"""Which waiting gangs ask for nodes: only those that more nodes would let run.

Cluster autoscalers (Karpenter, cluster-autoscaler) add nodes for every pod
whose ``PodScheduled`` condition is ``False`` with reason ``Unschedulable``
and no nominated node; they know nothing of gangs. A gang short of members,
gated, over its queue's cap, held behind a starving gang or backing off
would not run on new nodes either: nodes bought for it sit idle. So only a
gang whose reason is a want of room (nodes, devices, a domain, room for its
rules) asks; every other waiting pod says why it waits under another
reason, which autoscalers do not act on.

The answer follows the reason's kind, never its wording, so the signal
changes only when the gang's state does (an autoscaler relaunches nodes on
every flip back to ``Unschedulable``).

Where Karpenter is installed its NodePools say what more nodes can be had
(:func:`ask_for_nodes`): a gang that no NodePool whose nodes its pods may use
can launch whole under its limits does not ask (``NodePoolLimit``); when the
limits bind, only the gangs at the head of gangsched's own order ask, as
many as the room left holds, so Karpenter buys one whole gang at a time
rather than half of two; and a gang that asked ``node_hold_s`` without
being placed pauses ``backoff_s`` (``AskingPaused``) so what was bought for
it goes back to consolidation. Without NodePools nothing of this applies.
Pure: the step passes in what was asked and when, and the clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gangsched.core.model.objects import (
    Gang,
    GangKey,
    NodePool,
    PodPlacementRules,
    SelectorRequirement,
)
from gangsched.core.model.resources import Resources
from gangsched.core.reasons import (
    AdmissionNoRoom,
    AskingForNodes,
    AskingPaused,
    DevicesNotServed,
    DevicesShort,
    DoesNotFit,
    InDomain,
    InSubGroup,
    NodePoolLimit,
    NoDomainHolds,
    NoDomainLabel,
    NoNodes,
    NotReclaimable,
    PodRulesUnmet,
    ProtectedByBudget,
    ProtectedByShare,
    Reason,
    ReservedByAdmitted,
    Starving,
    TooBigToHold,
    VolumeBlocked,
)
from gangsched.core.state import Asked, Reported

__all__ = ["AskLimits", "ask_for_nodes", "asking_gangs", "wants_room"]


@dataclass(frozen=True, slots=True)
class AskLimits:
    node_hold_s: float = 300.0
    """A gang asking this long without being placed stops asking..."""
    backoff_s: float = 300.0
    """...for this long (its nodes go back to consolidation), then asks again."""


def wants_room(reason: Reason) -> bool:
    """Whether more nodes would let the gang waiting for ``reason`` be placed.

    A reason that wraps another (a starving gang holding room, a preemption
    refused, one domain's refusal) wants room when what it wraps does; a
    preemption under way or awaited does not: room is being freed for it,
    as kube-scheduler's nominated node tells autoscalers to wait.
    """
    match reason:
        case AskingForNodes():
            return True
        case NodePoolLimit() | AskingPaused():
            return False
        case (Starving() | TooBigToHold() | InDomain() | InSubGroup() | ProtectedByBudget()
              | NotReclaimable() | ProtectedByShare()):
            return wants_room(reason.cause)
        case (NoNodes() | DoesNotFit() | NoDomainHolds() | NoDomainLabel() | DevicesShort()
              | DevicesNotServed() | PodRulesUnmet() | VolumeBlocked() | AdmissionNoRoom()
              | ReservedByAdmitted()):
            return True
        case _:
            return False


def asking_gangs(reported: Mapping[GangKey, Reported]) -> frozenset[GangKey]:
    """The waiting gangs whose pods say ``Unschedulable``: decided on the reason reported
    (the one their pods show), not a newer one held back by the report plan."""
    return frozenset(gang for gang, said in reported.items() if wants_room(said.reason))


def ask_for_nodes(
    reasons: dict[GangKey, Reason],
    gangs: Sequence[Gang],
    nodepools: Sequence[NodePool],
    asked: Mapping[GangKey, Asked],
    now: float,
    limits: AskLimits,
) -> tuple[dict[GangKey, Reason], dict[GangKey, Asked]]:
    """Each waiting gang's reason, in gangsched's order, with those that want room told
    whether they ask (``AskingForNodes``) or why not; and what to remember of asking.
    Without NodePools the reasons are returned as they are: nothing is looked up."""
    if not nodepools:
        return reasons, {}
    by_key = {gang.key: gang for gang in gangs}
    told: dict[GangKey, Reason] = {}
    remembered: dict[GangKey, Asked] = {}
    taken: dict[str, Resources] = {}
    takers: dict[str, list[GangKey]] = {}
    for key, reason in reasons.items():
        gang = by_key.get(key)
        if gang is None or not gang.pending or not wants_room(reason):
            told[key] = reason
            continue
        state = asked.get(key)
        if state is not None and state.paused_until is not None:
            if now < state.paused_until:
                told[key], remembered[key] = AskingPaused(
                    limits.node_hold_s, state.paused_until, reason), state
                continue
            state = None  # the pause is over: it asks afresh
        need = Resources.sum(pod.requests for pod in gang.pending)
        usable = [pool for pool in nodepools
                  if all(makes_nodes_for(pool, pod.rules) for pod in gang.pending)]
        pool = next((pool for pool in usable if pool.holds(need, taken.get(pool.name))), None)
        if pool is None:
            ahead = sorted({first for p in usable if p.holds(need)
                            for first in takers.get(p.name, ())})
            told[key] = NodePoolLimit(need, tuple((p.name, _left(p)) for p in usable),
                                      tuple(ahead), reason)
            continue
        since = state.since if state is not None else now
        if now - since >= limits.node_hold_s:
            paused = Asked(since, now + limits.backoff_s)
            told[key], remembered[key] = AskingPaused(
                limits.node_hold_s, now + limits.backoff_s, reason), paused
            continue
        taken[pool.name] = need + taken.get(pool.name, Resources.zero())
        takers.setdefault(pool.name, []).append(key)
        remembered[key] = Asked(since)
        told[key] = AskingForNodes(len(gang.pending), need, reason)
    return told, remembered


def _left(pool: NodePool) -> Resources:
    return Resources.of(dict(pool.headroom or ()))


WELL_KNOWN = frozenset({
    "topology.kubernetes.io/zone", "topology.kubernetes.io/region", "kubernetes.io/arch",
    "kubernetes.io/os", "node.kubernetes.io/instance-type", "karpenter.sh/capacity-type",
    "kubernetes.io/hostname",
})
"""Labels every node Karpenter launches has, whatever values its NodePool allows."""


def makes_nodes_for(pool: NodePool, rules: PodPlacementRules) -> bool:
    """Whether the NodePool can launch a node the pod's node selector and required node
    affinity accept, by its template's labels and requirements (as Karpenter matches a
    pod to a NodePool: a label neither names, and no node has, fails the pod)."""
    if not all(_accepts(pool, SelectorRequirement(key, "In", (value,)))
               for key, value in rules.node_selector):
        return False
    return not rules.required_affinity or any(
        all(_accepts(pool, requirement) for requirement in term.match_expressions)
        for term in rules.required_affinity)


def _accepts(pool: NodePool, wanted: SelectorRequirement) -> bool:
    """Whether some node of the NodePool can meet one requirement of a pod."""
    fixed = dict(pool.labels)
    if wanted.key == "karpenter.sh/nodepool":
        fixed[wanted.key] = pool.name
    own = [r for r in pool.requirements if r.key == wanted.key]
    if wanted.key in fixed:
        return _holds(wanted, fixed[wanted.key])
    if not own:
        defined = wanted.key in WELL_KNOWN
        return wanted.operator in ("NotIn", "DoesNotExist") or (defined and wanted.operator in (
            "In", "Exists", "Gt", "Lt"))
    return all(_compatible(r, wanted) for r in own)


def _holds(wanted: SelectorRequirement, value: str) -> bool:
    match wanted.operator:
        case "In":
            return value in wanted.values
        case "NotIn":
            return value not in wanted.values
        case "DoesNotExist":
            return False
        case _:
            return True


def _compatible(pool: SelectorRequirement, wanted: SelectorRequirement) -> bool:
    """Whether a value the NodePool's requirement allows meets the pod's."""
    match pool.operator, wanted.operator:
        case "In", "In":
            return bool(set(pool.values) & set(wanted.values))
        case "In", "NotIn":
            return bool(set(pool.values) - set(wanted.values))
        case "In" | "Exists", "DoesNotExist":
            return False
        case "DoesNotExist", "In" | "Exists":
            return False
        case _:
            return True
