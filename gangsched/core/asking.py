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

Nodes bought for a gang go to that gang (:func:`nodes_coming`): a node a
NodePool made after the gang began asking, whose labels its pods accept, is
held for it whole (as a starving gang's room is held) until it is placed or
stops asking, so a smaller gang arriving meanwhile cannot take the first
node up and leave the big one short for ever. The gangs that asked first
take the nodes first, each only as many as cover what it needs. A gang that
has asked keeps asking, for what its nodes do not yet cover
(``NodesComing``), without its NodePool's limits being read again: they
already count the nodes launched for it.
Pure: the step passes in what was asked and when, and the clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gangsched.core.fit.nodefit import selector_ok
from gangsched.core.model.objects import (
    Gang,
    GangKey,
    NodeName,
    NodePool,
    Pod,
    PodKey,
    PodPlacementRules,
    SelectorRequirement,
    Toleration,
)
from gangsched.core.model.resources import Resources
from gangsched.core.placement.holds import Hold
from gangsched.core.placement.snapshot import Snapshot
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
    NodesComing,
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

__all__ = ["AskLimits", "Coming", "ask_for_nodes", "asking_gangs", "bought_holds",
           "nodes_coming", "wants_room"]

MADE_BY_NODEPOOL = "karpenter.sh/nodepool"
"""The label Karpenter gives every node it launches: the NodePool that made it."""
CLOCK_SLACK_S = 1.0
"""Creation times are whole seconds: a node made in the second the gang began asking
counts as made for it."""


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
        case AskingForNodes() | NodesComing():
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
    coming: Mapping[GangKey, Coming] | None = None,
) -> tuple[dict[GangKey, Reason], dict[GangKey, Asked]]:
    """Each waiting gang's reason, in gangsched's order, with those that want room told
    whether they ask (``AskingForNodes``, ``NodesComing`` once nodes were made for it) or
    why not; and what to remember of asking. Without NodePools the reasons are returned
    as they are: nothing is looked up."""
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
        came = (coming or {}).get(key)
        if came is not None:
            need = need.short_of(came.room)
        pool = next((pool for pool in usable if pool.holds(need, taken.get(pool.name))), None)
        if pool is None and state is not None and usable:
            pool = usable[0]  # asking already: its limits count what was launched for it
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
        told[key] = AskingForNodes(len(gang.pending), need, reason) if came is None \
            else NodesComing(came.nodes, need, reason)
    return told, remembered


@dataclass(frozen=True, slots=True)
class Coming:
    """The nodes made for an asking gang since it asked, and their free room in all."""

    nodes: tuple[NodeName, ...]
    room: Resources


def nodes_coming(
    asked: Mapping[GangKey, Asked], gangs: Sequence[Gang], snapshot: Snapshot, now: float,
    limits: AskLimits,
) -> dict[GangKey, Coming]:
    """The nodes held for each gang that asked last cycle (in the order it asked in).

    A node counts when a NodePool made it (:data:`MADE_BY_NODEPOOL`) no earlier than the
    gang began asking and some of the gang's pods accept its labels; oldest first, each
    gang takes nodes until their free room covers its pending pods, and a node goes to
    one gang only. A paused gang holds nothing, nor one that pauses now: what was bought
    for it goes back.
    """
    made = sorted((usage.node.created, name) for name, usage in snapshot.nodes.items()
                  if any(key == MADE_BY_NODEPOOL for key, _ in usage.node.labels))
    if not made or not asked:
        return {}
    by_key = {gang.key: gang for gang in gangs}
    taken: set[NodeName] = set()
    coming: dict[GangKey, Coming] = {}
    for key, state in asked.items():
        gang = by_key.get(key)
        if (gang is None or not gang.pending or state.paused_until is not None
                or now - state.since >= limits.node_hold_s):
            continue
        need = Resources.sum(pod.requests for pod in gang.pending)
        room, nodes = Resources.zero(), []
        for created, name in made:
            if need.fits(room):
                break
            node = snapshot.nodes[name].node
            if (name in taken or created < state.since - CLOCK_SLACK_S
                    or not any(selector_ok(pod.rules, node) for pod in gang.pending)):
                continue
            taken.add(name)
            nodes.append(name)
            room = room + _room_left(snapshot, name)
        if nodes:
            coming[key] = Coming(tuple(nodes), room)
    return coming


TOLERATES_ALL = (Toleration("", "Exists", "", ""),)


def bought_holds(coming: Mapping[GangKey, Coming], snapshot: Snapshot,
                 asked: Mapping[GangKey, Asked], limits: AskLimits) -> tuple[Hold, ...]:
    """The free room of every node made for a gang, held for it on that node until the
    gang stops asking (see :attr:`Hold.bought`)."""
    return tuple(
        Hold(gang, "", Pod(PodKey(f"{node}#made-for"), _room_left(snapshot, node),
                           PodPlacementRules(tolerations=TOLERATES_ALL), node_name=node),
             asked[gang].since + limits.node_hold_s, bought=True)
        for gang, came in coming.items() for node in came.nodes)


def _room_left(snapshot: Snapshot, node: NodeName) -> Resources:
    """The node's free room, an overcommitted resource counted as none rather than as a
    debt that holding would turn into room."""
    return Resources.of({name: amount for name, amount in snapshot.free(node).items()
                         if amount > 0})


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
