"""WaitForFirstConsumer claims provisioned for a whole gang before any member is bound.

A WaitForFirstConsumer claim is provisioned where its first pod goes: the
scheduler names the node in the claim's ``volume.kubernetes.io/selected-node``
annotation, the provisioner makes a volume there and the persistent-volume
controller binds the claim to it. kube-scheduler does this pod by pod in its
PreBind stage, so a job's first workers are bound while the volumes of the
others are still being made, or fail to be.

Here a placed gang with such claims is not bound at all in the cycle that
places it: each claim is given its pod's node (an action carried out before
any Binding), and the gang waits, saying so. Its claims then pin its pods to
those nodes (:mod:`gangsched.core.fit.volumes`), so the next cycles place it on
the same nodes and its room stays taken in each cycle's placement; once every
claim is bound the gang is placed as any other and bound whole. If the claims
are not all bound within a timeout, the nodes given to the claims still
unbound are taken back, and the gang backs off before it is tried again.

Pure: the step passes in what it remembered and the clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from gangsched.core.actions import SelectClaimNode
from gangsched.core.fit.volumes import Provisioning, Storage
from gangsched.core.model.objects import Gang, GangKey, NodeName, Pod
from gangsched.core.placement.capacity import Placement, Unplaceable
from gangsched.core.reasons import ClaimsProvisioning, ProvisioningTimedOut
from gangsched.core.stages.session import CycleResult

__all__ = ["ProvisionLimits", "Provisioning", "provision_first"]


@dataclass(frozen=True, slots=True)
class ProvisionLimits:
    timeout_s: float = 120.0
    backoff_s: float = 30.0


def provision_first(
    result: CycleResult,
    gangs: Sequence[Gang],
    storage: Storage,
    provisioning: Mapping[GangKey, Provisioning],
    now: float,
    limits: ProvisionLimits,
) -> tuple[CycleResult, list[SelectClaimNode], dict[GangKey, Provisioning]]:
    """The cycle's result with placed gangs that have unbound claims turned into waits,
    the claim writes that go before their Bindings, and what to remember of them."""
    pending = {pod.key: pod for gang in gangs for pod in gang.pending}
    placements: list[Placement] = []
    waits: list[Unplaceable] = []
    writes: list[SelectClaimNode] = []
    remembered: dict[GangKey, Provisioning] = {}
    for placement in result.placements:
        waiting = [(pending[key], node) for key, node in placement.assignments
                   if key in pending and pending[key].unbound_claims]
        if not waiting:
            placements.append(placement)
            continue
        gang = placement.gang
        claims = tuple(sorted({claim for pod, _ in waiting for claim in pod.unbound_claims}))
        state = provisioning.get(gang)
        if state is None or (state.backoff_until is not None and now >= state.backoff_until):
            state = Provisioning(since=now)
        remembered[gang] = state
        if state.backoff_until is not None:
            waits.append(Unplaceable(gang, ProvisioningTimedOut(claims, limits.timeout_s)))
        elif now - state.since >= limits.timeout_s:
            remembered[gang] = replace(state, backoff_until=now + limits.backoff_s)
            writes.extend(_release(claims, storage))
            waits.append(Unplaceable(gang, ProvisioningTimedOut(claims, limits.timeout_s)))
        else:
            writes.extend(_select(waiting, storage))
            nodes = len({node for _, node in waiting})
            waits.append(Unplaceable(gang, ClaimsProvisioning(claims, nodes)))
    remembered.update(_unplaced(gangs, provisioning, remembered, storage, now, limits, writes))
    changed = replace(result, placements=tuple(placements),
                      unplaceable=(*result.unplaceable, *waits))
    return changed, writes, remembered


def _select(waiting: Sequence[tuple[Pod, NodeName]], storage: Storage) -> list[SelectClaimNode]:
    """Each unbound claim given its pod's node, unless it already has that node."""
    return [
        SelectClaimNode(claim, node)
        for pod, node in waiting for claim in pod.unbound_claims
        if (known := storage.claims.get(claim)) is None or known.selected_node != node
    ]


def _release(claims: Sequence[str], storage: Storage) -> list[SelectClaimNode]:
    """The nodes given to claims still unbound, taken back: the provisioner may give up
    on them, and the gang may be placed elsewhere next time."""
    return [
        SelectClaimNode(claim, None) for claim in claims
        if (known := storage.claims.get(claim)) is not None and known.selected_node is not None
        and not known.bound
    ]


def _unplaced(
    gangs: Sequence[Gang], provisioning: Mapping[GangKey, Provisioning],
    placed: Mapping[GangKey, Provisioning], storage: Storage, now: float,
    limits: ProvisionLimits, writes: list[SelectClaimNode],
) -> dict[GangKey, Provisioning]:
    """Gangs provisioning that this cycle did not place (no room, a member gone): their
    clock runs on while they still have unbound claims, and their time out too."""
    by_key = {gang.key: gang for gang in gangs}
    kept: dict[GangKey, Provisioning] = {}
    for key, state in provisioning.items():
        gang = by_key.get(key)
        if key in placed or gang is None:
            continue
        claims = tuple(sorted({c for pod in gang.pending for c in pod.unbound_claims}))
        if not claims:
            continue
        if state.backoff_until is None and now - state.since >= limits.timeout_s:
            writes.extend(_release(claims, storage))
            state = replace(state, backoff_until=now + limits.backoff_s)
        if state.backoff_until is None or now < state.backoff_until:
            kept[key] = state
    return kept
