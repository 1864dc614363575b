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
every flip back to ``Unschedulable``). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping

from gangsched.core.model.objects import GangKey
from gangsched.core.reasons import (
    AdmissionNoRoom,
    DevicesNotServed,
    DevicesShort,
    DoesNotFit,
    InDomain,
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
from gangsched.core.state import Reported

__all__ = ["asking_gangs", "wants_room"]


def wants_room(reason: Reason) -> bool:
    """Whether more nodes would let the gang waiting for ``reason`` be placed.

    A reason that wraps another (a starving gang holding room, a preemption
    refused, one domain's refusal) wants room when what it wraps does; a
    preemption under way or awaited does not: room is being freed for it,
    as kube-scheduler's nominated node tells autoscalers to wait.
    """
    match reason:
        case (Starving() | TooBigToHold() | InDomain() | ProtectedByBudget()
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
