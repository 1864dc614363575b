"""What one step reads of the cluster, and the gangs it finds there.

The shell's mirror holds parsed objects; the step needs only some of their
fields. They are named here as protocols, so the core reads the mirror's
records without importing the shell, and a test builds a view from plain
values.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Protocol

from gangsched.core.dra.devices import ClaimKey, Inventory
from gangsched.core.dra.usage import claim_devices, claims_of, in_ledger, renames
from gangsched.core.fit.volumes import Storage, claims_in_use, with_volumes
from gangsched.core.kubeobjects.groups import FINISHED_PHASES, Flavor, GroupSpec
from gangsched.core.model.objects import (
    DisruptionBudget,
    Gang,
    GangKey,
    NodePool,
    Pod,
    PodKey,
    Policy,
    QueueName,
    QueueSpec,
    VolumeLimits,
)
from gangsched.core.model.resources import Resources
from gangsched.core.placement.capacity import Snapshot
from gangsched.core.placement.holds import Hold
from gangsched.core.placement.topology import with_levels
from gangsched.core.placement.volumelimits import limit_volumes, limited_snapshot
from gangsched.core.stages.backoff import BindRefusal
from gangsched.core.stages.cycle import CycleInput
from gangsched.core.stages.gangs import Gathered, Member, gather


class GroupFacts(Protocol):
    """What a step reads of a PodGroup (any flavour)."""

    @property
    def key(self) -> GangKey: ...
    @property
    def flavor(self) -> Flavor: ...
    @property
    def uid(self) -> str: ...
    @property
    def spec(self) -> GroupSpec | None: ...
    @property
    def error(self) -> str | None: ...
    @property
    def status(self) -> Mapping[str, object]: ...
    @property
    def policy(self) -> Policy | None: ...


class PodFacts(Protocol):
    """What a step reads of a pod beyond its parsed spec: its UID (a pod created again
    under the same name is another pod), and what its ``PodScheduled=False`` condition
    says (a waiting pod whose condition does not say its reason yet is told again)."""

    @property
    def pod(self) -> Pod: ...
    @property
    def uid(self) -> str: ...
    @property
    def scheduled_message(self) -> str | None: ...
    @property
    def scheduled_reason(self) -> str | None: ...


class ClusterView(Protocol):
    """One cycle's frozen view of the cluster, as the mirror gives it."""

    @property
    def snapshot(self) -> Snapshot: ...
    @property
    def members(self) -> tuple[Member, ...]: ...
    @property
    def groups(self) -> Mapping[GangKey, GroupFacts]: ...
    @property
    def queues(self) -> Mapping[QueueName, QueueSpec]: ...
    @property
    def pods(self) -> Mapping[PodKey, PodFacts]: ...
    @property
    def storage(self) -> Storage: ...
    @property
    def named_by_others(self) -> AbstractSet[GangKey]: ...
    @property
    def topologies(self) -> Mapping[str, tuple[str, ...]]: ...


@dataclass(frozen=True, slots=True)
class StepView:
    """Everything a step reads of the cluster: the view and the mirror's tables beside it."""

    cluster: ClusterView
    priority_classes: Mapping[str, int] = field(default_factory=dict)
    never_preempting_classes: frozenset[str] = frozenset()
    bad_pods: Mapping[PodKey, str] = field(default_factory=dict)
    """Pods of ours the core cannot read, and why."""
    budgets: tuple[DisruptionBudget, ...] = ()
    """PodDisruptionBudgets, which preemption may not exceed."""
    nodepools: tuple[NodePool, ...] = ()
    """Karpenter's NodePools, where it is installed (core.asking)."""
    queues_settled: frozenset[QueueName] = frozenset()
    """Queues whose status conditions, as last read, already say what their spec does:
    a scheduler with no gang in one has nothing to write there (another may)."""


@dataclass(frozen=True, slots=True)
class Gathering:
    groups: Mapping[GangKey, GroupSpec]
    """The valid groups of the view, by key."""
    gathered: Gathered
    finished_uids: frozenset[str]
    """UIDs of groups known to have finished, to pass to the next gathering."""


def gather_view(
    view: ClusterView,
    finished_uids: frozenset[str],
    priority_classes: Mapping[str, int],
    never_preempting_classes: frozenset[str] = frozenset(),
) -> Gathering:
    """The view's pods and groups as gangs.

    A finished group whose pods were deleted must stay finished. Its own
    status says so after a restart; until the watch brings that status back,
    ``finished_uids`` (what this process saw finish) says so.
    """
    groups = {k: g.spec for k, g in view.groups.items() if g.spec is not None}
    policies = {k: g.policy for k, g in view.groups.items() if g.policy is not None}
    finished_before = frozenset(
        k for k, g in view.groups.items()
        if g.uid in finished_uids or g.status.get("phase") in FINISHED_PHASES
    )
    gathered = gather(view.members, groups, policies, finished_before, priority_classes,
                      never_preempting_classes, view.named_by_others)
    gangs, limits = _with_volumes(
        view, tuple(with_levels(gang, view.topologies) for gang in gathered.gangs))
    if gangs is not gathered.gangs:
        gathered = replace(gathered, gangs=gangs, volume_limits=limits)
    gathered = _with_devices(view.snapshot.devices, gathered)
    still_finished = frozenset(
        g.uid for k, g in view.groups.items()
        if k in gathered.finished or (g.uid in finished_uids and k not in gathered.counts)
    )
    return Gathering(groups=groups, gathered=gathered, finished_uids=still_finished)


def _with_volumes(view: ClusterView, gangs: tuple[Gang, ...]) -> tuple[tuple[Gang, ...],
                                                                        VolumeLimits]:
    """The gangs with their pending pods' claims resolved (core.fit.volumes) and their volumes
    counted against CSI limits (core.placement.volumelimits); a cycle with no pending pod using a
    volume reads nothing more of the view for them."""
    claiming = []
    inline = False
    for gang in gangs:
        for pod in gang.pending:
            if pod.claims:
                claiming.append(pod.key)
            inline = inline or bool(pod.inline_volumes)
    if not claiming and not inline:
        return gangs, VolumeLimits()
    if claiming:
        uids = {key: view.pods[key].uid for key in claiming if key in view.pods}
        # Members are placed where they are assumed: a claim of a pod whose bind is under
        # way is in use already, as kube-scheduler counts its assumed pods.
        users = (*(record.pod for record in view.pods.values() if record.pod.claims),
                 *(member.pod for member in view.members if member.pod.claims))
        gangs = with_volumes(gangs, view.storage, uids, claims_in_use(users))
    return limit_volumes(gangs, view.storage)


def _with_devices(inventory: Inventory, gathered: Gathered) -> Gathered:
    """The gangs' usage and needs with the devices of their pods' claims (core.dra.usage):
    a bound gang's usage counts each claim its bound pods hold once, a waiting gang's
    need the claims of its pending pods that its bound pods do not hold."""
    if not inventory.claims and not inventory.classes:
        return gathered
    names = renames(inventory)
    bound: dict[GangKey, Resources] = dict(gathered.bound_requests)
    held: dict[GangKey, frozenset[ClaimKey]] = {}
    for key, pods in gathered.bound_pods.items():
        claims = claims_of(pods, inventory)
        held[key] = frozenset(claims)
        bound[key] = (in_ledger(bound.get(key, Resources.zero()), names)
                      + claim_devices(claims.values(), inventory))
    gangs = []
    for gang in gathered.gangs:
        claims = claims_of(gang.pending, inventory)
        mine = held.get(gang.key, frozenset())
        claimed = claim_devices(
            (claim for key, claim in claims.items() if key not in mine), inventory)
        floor = in_ledger(gang.min_resources, names)
        gangs.append(gang if claimed.is_zero and floor is gang.min_resources else replace(
            gang, claimed=claimed, min_resources=floor))
    return replace(gathered, gangs=tuple(gangs), bound_requests=bound)


def cycle_input(
    view: ClusterView,
    gathered: Gathered,
    *,
    admitted: frozenset[GangKey],
    waiting_since: Mapping[GangKey, float],
    now: float,
    policy: Policy,
    starvation_s: float,
    holds: tuple[Hold, ...] = (),
    preemption: bool = False,
    preempting: Mapping[GangKey, frozenset[GangKey]] | None = None,
    unevictable: frozenset[GangKey] = frozenset(),
    bind_refusals: Mapping[PodKey, BindRefusal] | None = None,
    budgets: tuple[DisruptionBudget, ...] = (),
    estimated_starts: Mapping[GangKey, float] | None = None,
    backfill: bool = True,
) -> CycleInput:
    """The cycle's input; preemption is the running scheduler's alone (it evicts), so the
    CLI's answers say what placement does without it."""
    keys = {gang.key for gang in gathered.gangs}
    snapshot = view.snapshot if view.snapshot.seated is not None else replace(
        view.snapshot, seated=partial(seated_pods, view.members, view.pods))
    return CycleInput(
        snapshot=limited_snapshot(snapshot, gathered.volume_limits, view.storage),
        gangs=gathered.gangs,
        bound_requests=gathered.bound_requests,
        queues=view.queues,
        admitted=admitted & keys,
        waiting_since={k: v for k, v in waiting_since.items() if k in keys},
        now=now,
        policy=policy,
        starvation_seconds=starvation_s,
        holds=holds,
        bound_pods=gathered.bound_pods,
        preemption=preemption,
        preempting=preempting or {},
        unevictable=unevictable,
        bind_refusals=bind_refusals or {},
        budgets=budgets,
        estimated_starts=estimated_starts or {},
        backfill=backfill,
    )


def seated_pods(members: Iterable[Member], pods: Mapping[PodKey, PodFacts]) -> Iterator[Pod]:
    """Every pod as inter-pod rules read it: ours where they are assumed (the watch may
    not have reported their node yet), the others where the API puts them."""
    placed = [member.pod for member in members if member.pod.node_name is not None]
    yield from placed
    ours = {pod.key for pod in placed}
    for key, record in pods.items():
        if key not in ours:
            yield record.pod
