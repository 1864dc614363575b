"""The scheduler's mirror of the cluster: nodes, pods, PodGroups, Queues, assumed binds.

Watches write into it; each cycle reads one frozen ``View`` of it. Both run on
the one event loop and neither awaits while touching it, so a view is never
torn by an event arriving half-way.

It holds parsed objects only. Raw API objects reach it through
:class:`gangsched.feed.Feed`, which reads them once with
:mod:`gangsched.core.kubeobjects` and calls the typed verbs here, named as
kube-scheduler's cache names them: add / update / remove a pod or a node,
assume, finish binding, forget, expire.

Assume → finish binding → confirm / forget / expire, as kube-scheduler's
cache: a pod being bound is assumed on its node at once, so the next cycle
cannot hand its room to another gang; the watch reporting ``nodeName``
confirms it; a failed bind forgets it; an assumption the watch never confirms
expires a bounded time after its bind finished. Never before: a bind may wait
behind others and take long itself, and an assumption expired meanwhile
would hand the same room out twice.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, TypeVar

import structlog

from gangsched.core.fit.namespaces import resolve_pod, selects_by_labels
from gangsched.core.fit.volumes import Storage
from gangsched.core.kubeobjects.composites import (
    CompositeRecord,
    fold_composites,
)
from gangsched.core.kubeobjects.podgroups import GroupRecord
from gangsched.core.kubeobjects.queues import (
    KueueWorkload,
    PriorityClass,
    QueueObject,
    WorkloadQueue,
)
from gangsched.core.kubeobjects.records import PodHeader, PodRecord
from gangsched.core.model.objects import (
    DEFAULT_QUEUE,
    Claim,
    ClaimKey,
    CsiDriver,
    CsiNode,
    DisruptionBudget,
    Flavor,
    GangKey,
    Namespace,
    Node,
    NodeName,
    NodePool,
    PodAffinityTerm,
    PodKey,
    QueueName,
    QueueSpec,
    StorageCapacity,
    StorageClassSpec,
    Volume,
    VolumeAttachmentSpec,
)
from gangsched.core.model.resources import Resources
from gangsched.core.placement.capacity import Placement, Snapshot
from gangsched.core.placement.snapshot import NodeUsage
from gangsched.core.stages.gangs import Member, fold_members
from gangsched.core.view import seated_pods
from gangsched.devicecache import DeviceCache

__all__ = ["Assumption", "GroupRecord", "Mirror", "PodRecord", "View"]

V = TypeVar("V")

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class Assumption:
    """A pod placed on ``node`` before the API server confirmed it."""

    node: NodeName
    since: float
    """When it was assumed: how long its bind has been waiting, for logs."""
    bound_at: float | None = None
    """When its bind call returned; None while the bind is queued or under way."""


@dataclass(frozen=True, slots=True)
class View:
    """One cycle's frozen view of the mirror."""

    snapshot: Snapshot
    members: tuple[Member, ...]
    groups: Mapping[GangKey, GroupRecord]
    queues: Mapping[QueueName, QueueSpec]
    pods: Mapping[PodKey, PodRecord]
    storage: Storage = field(default_factory=Storage)
    named_by_others: frozenset[GangKey] = frozenset()
    """The groups some pod of another scheduler names: with no pod of ours in them,
    they are that scheduler's (core.stages.gangs.gather)."""
    topologies: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Each Topology's levels, widest first, by name."""


def _matters(old: PodRecord | None, new: PodRecord, assumed_on: NodeName | None) -> bool:
    """Whether a pod's change can alter a decision.

    Pods of other schedulers matter only when they free room (finish) or
    change their requests; ours also when they arrive, change group, have a
    scheduling gate lifted, or land somewhere other than where we assumed
    them.
    """
    if old is None:
        return new.ours
    if new.pod.terminal != old.pod.terminal or new.pod.requests != old.pod.requests:
        return True
    if not new.ours:
        return False
    if new.pod.terminating != old.pod.terminating:
        return True  # it leaves its gang
    moved = new.pod.node_name != old.pod.node_name and new.pod.node_name != assumed_on
    lifted = new.pod.gates != old.pod.gates
    return moved or lifted or new.group != old.group


def _reported(old: PodRecord | None, new: PodRecord) -> bool:
    """Whether a change that alters no decision still changes what a status says:
    a member of ours started running (its group's running count)."""
    return old is not None and new.ours and new.phase != old.phase


@dataclass(kw_only=True)
class Versioned:
    """Counts the changes to what a part of the mirror holds: equal versions, equal views."""

    changes: int = 0

    def _changed(self, changed: bool = True) -> bool:
        if changed:
            self.changes += 1
        return changed


@dataclass(kw_only=True)
class GroupsAndQueues(Versioned):
    """What gangs are scheduled by rather than what occupies nodes: PodGroups, Queues,
    native Workloads' queues and PriorityClasses, each kept by a watch through
    :mod:`gangsched.feed`.
    """

    groups: dict[GangKey, GroupRecord] = field(default_factory=dict)
    queues: dict[QueueName, QueueSpec] = field(default_factory=dict)
    queue_conditions: dict[QueueName, tuple[Mapping[str, Any], ...]] = field(
        default_factory=dict)
    """Each Queue's status conditions as last read: a rewrite keeps their transition times."""
    queue_allocated: dict[QueueName, frozenset[str]] = field(default_factory=dict)
    """The resource names each Queue's ``status.allocated`` showed when last read."""
    priority_classes: dict[str, int] = field(default_factory=dict)
    """PriorityClass values by name: a PodGroup's priorityClassName orders its gang."""
    never_preempting_classes: set[str] = field(default_factory=set)
    """PriorityClasses with ``preemptionPolicy: Never``: their gangs wait, never evict."""
    workload_queues: dict[str, QueueName] = field(default_factory=dict)
    """Queue annotations of native Workloads by ``namespace/name``: their PodGroups'
    queue when a PodGroup names none itself."""
    topologies: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Each Topology's levels (node labels, widest first) by name."""
    composites: dict[str, CompositeRecord] = field(default_factory=dict)
    """Native CompositePodGroups by ``namespace/name``: their children are placed as one
    gang (core.kubeobjects.composites)."""
    kueue_workloads: dict[str, KueueWorkload] = field(default_factory=dict)
    """Kueue's Workloads by ``namespace/name``: whether Kueue admitted each job."""
    kueue_waiting: dict[str, str] = field(default_factory=dict)
    """The owners of Workloads Kueue has not admitted, by UID, to each such Workload:
    a PodGroup owned by one waits for Kueue."""

    # ---- PriorityClasses (watched with pods and nodes) ----------------------------
    def set_priority_class(self, priority_class: PriorityClass) -> bool:
        name = priority_class.name
        old = self.priority_classes.get(name)
        self.priority_classes[name] = priority_class.value
        changed = priority_class.never_preempts != (name in self.never_preempting_classes)
        if priority_class.never_preempts:
            self.never_preempting_classes.add(name)
        else:
            self.never_preempting_classes.discard(name)
        return self._changed(old != priority_class.value or changed)

    def remove_priority_class(self, name: str) -> bool:
        never = name in self.never_preempting_classes
        self.never_preempting_classes.discard(name)
        return self._changed(self.priority_classes.pop(name, None) is not None or never)

    def keep_priority_classes(self, names: set[str]) -> None:
        """A list returned exactly ``names``: the others were deleted meanwhile."""
        for class_name in [n for n in self.priority_classes if n not in names]:
            del self.priority_classes[class_name]
        self.never_preempting_classes &= names

    # ---- PodGroups, Queues and Workloads (watched, one watch per PodGroup flavour) -------

    def set_group(self, record: GroupRecord) -> GroupRecord:
        """Hold the group, unless a valid group of another flavour holds its key: the
        same job may be described by two APIs, and the first readable one wins."""
        current = self.groups.get(record.key)
        if current is None or current.flavor == record.flavor or current.spec is None:
            self.groups[record.key] = record
            self._changed(current != record)
        return record


    def remove_group(self, key: GangKey, flavor: Flavor | None = None) -> bool:
        """Drop a group by key; with ``flavor``, only a group of that flavour: another
        API's group of the same name stays."""
        current = self.groups.get(key)
        if current is None or (flavor is not None and current.flavor != flavor):
            return False
        del self.groups[key]
        return self._changed()

    def keep_groups(self, flavor: Flavor, keys: set[str]) -> None:
        """A list of ``flavor``'s PodGroups returned exactly ``keys``: its others were
        deleted meanwhile (another flavour's groups are its own list's to keep)."""
        for key in [k for k, g in self.groups.items() if g.flavor == flavor and k not in keys]:
            self.remove_group(key)

    def set_queue(self, queue: QueueObject) -> bool:
        """Mirror a Queue; a part the schema should have rejected is logged and left out."""
        spec = queue.spec
        for problem in queue.problems:
            log.warning("queue_invalid", queue=spec.name, field=problem.field,
                        error=problem.error)
        changed = self._changed(self.queues.get(spec.name) != spec)
        self.queues[spec.name] = spec
        self.queue_conditions[spec.name] = queue.conditions
        self.queue_allocated[spec.name] = queue.allocated
        return changed


    def remove_queue(self, name: QueueName) -> bool:
        self.queue_conditions.pop(name, None)
        self.queue_allocated.pop(name, None)
        return self._changed(self.queues.pop(name, None) is not None)

    def keep_queues(self, names: set[str]) -> None:
        for name in [n for n in self.queues if n not in names]:
            self.remove_queue(name)

    def set_workload_queue(self, workload: WorkloadQueue) -> bool:
        before = self.workload_queues.get(workload.key)
        if workload.queue:
            self.workload_queues[workload.key] = workload.queue
        else:
            self.workload_queues.pop(workload.key, None)
        return self._changed(before != self.workload_queues.get(workload.key))


    def remove_workload(self, key: str) -> bool:
        """Drop a Workload's queue annotation by ``namespace/name``."""
        return self._changed(self.workload_queues.pop(key, None) is not None)

    def keep_workloads(self, keys: set[str]) -> None:
        for key in [k for k in self.workload_queues if k not in keys]:
            self.remove_workload(key)

    def set_kueue_workload(self, workload: KueueWorkload) -> bool:
        old = self.kueue_workloads.get(workload.key)
        self._unindex_kueue(old)
        self.kueue_workloads[workload.key] = workload
        if not workload.admitted:
            self.kueue_waiting.update(dict.fromkeys(workload.owners, workload.key))
        return self._changed(old != workload)

    def remove_kueue_workload(self, key: str) -> bool:
        old = self.kueue_workloads.pop(key, None)
        self._unindex_kueue(old)
        return self._changed(old is not None)

    def keep_kueue_workloads(self, keys: set[str]) -> None:
        for key in [k for k in self.kueue_workloads if k not in keys]:
            self.remove_kueue_workload(key)

    def _unindex_kueue(self, workload: KueueWorkload | None) -> None:
        if workload is None:
            return
        for owner in workload.owners:
            if self.kueue_waiting.get(owner) == workload.key:
                del self.kueue_waiting[owner]

    def set_topology(self, name: str, levels: tuple[str, ...]) -> bool:
        changed = self._changed(self.topologies.get(name) != levels)
        self.topologies[name] = levels
        return changed

    def remove_topology(self, name: str) -> bool:
        return self._changed(self.topologies.pop(name, None) is not None)

    def keep_topologies(self, names: set[str]) -> None:
        for name in [n for n in self.topologies if n not in names]:
            self.remove_topology(name)

    def set_composite(self, record: CompositeRecord) -> bool:
        return self._changed(_put(self.composites, record.key, record))

    def remove_composite(self, key: str) -> bool:
        return self._changed(self.composites.pop(key, None) is not None)

    def keep_composites(self, keys: set[str]) -> None:
        for key in [k for k in self.composites if k not in keys]:
            self.remove_composite(key)

    def with_workloads(self, record: GroupRecord) -> GroupRecord:
        """The group with what Workloads say of it: a native Workload's queue, and the
        Kueue Workload of its owner that Kueue has not admitted."""
        spec = record.spec
        if spec is None:
            return record
        queue = self.workload_queues.get(spec.workload) if spec.workload else None
        kueue = next((self.kueue_waiting[uid] for uid in spec.owners
                      if uid in self.kueue_waiting), None)
        if queue is None and kueue is None:
            return record
        return replace(record, spec=replace(spec, queue=queue or spec.queue,
                                            kueue_workload=kueue))


@dataclass(kw_only=True)
class BudgetsAndStorage(Versioned):
    """What placement and preemption read besides nodes and pods: PodDisruptionBudgets,
    claims, volumes and storage classes, and devices."""

    budgets: dict[str, DisruptionBudget] = field(default_factory=dict)
    """PodDisruptionBudgets by ``namespace/name``: preemption chooses only victims they
    let go whole."""
    claims: dict[str, Claim] = field(default_factory=dict)
    """PersistentVolumeClaims by ``namespace/name``."""
    volumes: dict[str, Volume] = field(default_factory=dict)
    storage_classes: dict[str, StorageClassSpec] = field(default_factory=dict)
    csi_nodes: dict[str, CsiNode] = field(default_factory=dict)
    """CSINodes by node name: the CSI drivers on each node and their volume limits."""
    attachments: dict[str, VolumeAttachmentSpec] = field(default_factory=dict)
    """VolumeAttachments by name: volumes held on nodes, with or without a pod."""
    csi_drivers: dict[str, CsiDriver] = field(default_factory=dict)
    capacities: dict[str, StorageCapacity] = field(default_factory=dict)
    """CSIStorageCapacity objects by ``namespace/name``."""
    nodepools: dict[str, NodePool] = field(default_factory=dict)
    """Karpenter NodePools by name: which waiting gangs ask for nodes (core.asking)."""

    # ---- PodDisruptionBudgets -------------------------------------------------------------
    def set_budget(self, budget: DisruptionBudget) -> bool:
        changed = self.budgets.get(budget.key) != budget
        self.budgets[budget.key] = budget
        return self._changed(changed)

    def remove_budget(self, key: str) -> bool:
        return self._changed(self.budgets.pop(key, None) is not None)

    def keep_budgets(self, keys: set[str]) -> None:
        """A list returned exactly ``keys``: the others were deleted meanwhile."""
        for key in [k for k in self.budgets if k not in keys]:
            del self.budgets[key]

    # ---- claims, volumes and storage classes ---------------------------------------------
    def set_claim(self, claim: Claim) -> bool:
        return self._changed(_put(self.claims, claim.key, claim))

    def set_volume(self, volume: Volume) -> bool:
        return self._changed(_put(self.volumes, volume.name, volume))

    def set_storage_class(self, storage_class: StorageClassSpec) -> bool:
        return self._changed(_put(self.storage_classes, storage_class.name, storage_class))

    def set_csi_node(self, csi_node: CsiNode) -> bool:
        return self._changed(_put(self.csi_nodes, csi_node.node, csi_node))

    def set_attachment(self, attachment: VolumeAttachmentSpec) -> bool:
        return self._changed(_put(self.attachments, attachment.name, attachment))

    def set_csi_driver(self, driver: CsiDriver) -> bool:
        return self._changed(_put(self.csi_drivers, driver.name, driver))

    def set_capacity(self, capacity: StorageCapacity) -> bool:
        return self._changed(_put(self.capacities, capacity.key, capacity))

    def set_nodepool(self, nodepool: NodePool) -> bool:
        return self._changed(_put(self.nodepools, nodepool.name, nodepool))

    def assume_claim_node(self, key: str, node: NodeName | None) -> None:
        """A claim's selected node was asked for: the next view shows it at once, as an
        assumed bind shows its pod placed, so the next cycle pins the gang to the same
        nodes rather than choose again before the watch brings the claim back. The watch
        then replaces the claim with what the API server holds."""
        claim = self.claims.get(key)
        if claim is not None and claim.selected_node != node:
            self.claims[key] = replace(claim, selected_node=node)
            self._changed()

    def remove_stored(self, table: dict[str, Any], key: str) -> bool:
        """Drop a claim, volume, class, CSINode, VolumeAttachment, CSIDriver or
        CSIStorageCapacity (``table``
        is the mirror's table of its kind)."""
        return self._changed(table.pop(key, None) is not None)

    def keep_stored(self, table: dict[str, Any], keys: set[str]) -> None:
        """A list of objects of the kind of ``table`` returned exactly ``keys``."""
        for key in [k for k in table if k not in keys]:
            del table[key]

    def storage(self) -> Storage:
        """The claims, volumes and storage objects, as a cycle reads them."""
        return Storage(dict(self.claims), dict(self.volumes), dict(self.storage_classes),
                       csi_nodes={NodeName(k): v for k, v in self.csi_nodes.items()},
                       attachments=dict(self.attachments),
                       csi_drivers=dict(self.csi_drivers),
                       capacities=dict(self.capacities))


@dataclass(kw_only=True)
class Mirror(Versioned):
    """Pods and nodes, with the assumptions of binds under way, beside the groups and
    queues they are scheduled by, the budgets and storage, and the devices."""

    scheduler_names: frozenset[str]
    """Every ``spec.schedulerName`` whose pods are ours."""
    namespaces: frozenset[str] = frozenset()
    """Namespaces whose pods are ours; empty means every namespace."""
    nodes: dict[NodeName, Node] = field(default_factory=dict)
    pods: dict[PodKey, PodRecord] = field(default_factory=dict)
    assumed: dict[PodKey, Assumption] = field(default_factory=dict)
    bad_pods: dict[PodKey, str] = field(default_factory=dict)
    namespace_labels: dict[str, dict[str, str]] = field(default_factory=dict)
    """Each namespace's labels: what inter-pod terms select namespaces by."""
    on_status_change: Callable[[], None] = lambda: None
    """Called for a change that alters no decision but what a status reports."""
    groups_and_queues: GroupsAndQueues = field(default_factory=GroupsAndQueues)
    budgets_and_storage: BudgetsAndStorage = field(default_factory=BudgetsAndStorage)
    devices: DeviceCache = field(default_factory=DeviceCache)
    """ResourceSlices, DeviceClasses and ResourceClaims, with the claims we assumed."""
    index: PodIndex = field(init=False)

    def __post_init__(self) -> None:
        self.index = PodIndex(nodes=self.nodes)

    @property
    def version(self) -> int:
        """Counts the changes to what the mirror holds: equal versions, equal views."""
        return self.changes + self.groups_and_queues.changes + self.budgets_and_storage.changes

    def in_scope(self, namespace: str) -> bool:
        """Whether objects of ``namespace`` are this scheduler's to act on."""
        return not self.namespaces or namespace in self.namespaces

    def ours(self, header: PodHeader) -> bool:
        """Whether the pod is this scheduler's: its name, in a namespace served."""
        return header.scheduler_name in self.scheduler_names and self.in_scope(header.namespace)

    def relisted(self) -> None:
        """A list completed: the view changes even when no object did (a cycle that
        reused an answer must look again)."""
        self._changed()

    # ---- nodes ---------------------------------------------------------------------------
    def add_node(self, node: Node) -> bool:
        self.nodes[node.name] = node
        self.index.add_node(node)
        return self._changed()

    def update_node(self, old: Node, new: Node) -> bool:
        """True only when the node changed in what the core reads (not a heartbeat)."""
        if old == new:
            return False
        return self.add_node(new)

    def remove_node(self, name: NodeName) -> bool:
        self.index.remove_node(name)
        return self._changed(self.nodes.pop(name, None) is not None)

    def keep_nodes(self, names: set[str]) -> None:
        """A list returned exactly ``names``: the others were deleted meanwhile."""
        for name in [n for n in self.nodes if n not in names]:
            self.remove_node(name)

    # ---- namespaces -------------------------------------------------------------------
    def set_namespace(self, namespace: Namespace) -> bool:
        """A namespace's labels, new or changed: true when a pod's term selects anew."""
        labels = dict(namespace.labels)
        if self.namespace_labels.get(namespace.name) == labels:
            return False
        self.namespace_labels[namespace.name] = labels
        return self._reselect()

    def remove_namespace(self, name: str) -> bool:
        if self.namespace_labels.pop(name, None) is None:
            return False
        return self._reselect()

    def keep_namespaces(self, names: set[str]) -> None:
        """A list returned exactly ``names``: the others were deleted meanwhile."""
        for name in [n for n in self.namespace_labels if n not in names]:
            self.remove_namespace(name)

    def _reselect(self) -> bool:
        """Resolve again every term selecting namespaces by labels; whether one changed."""
        changed = False
        for key in list(self.index.by_namespace_labels):
            record = self.pods[key]
            resolved = self._resolved(record)
            if resolved != record:
                self.pods[key] = resolved
                self._derive(key)
                changed = True
        return self._changed(changed)

    def _resolved(self, record: PodRecord) -> PodRecord:
        pod = resolve_pod(record.pod, self.namespace_labels)
        return record if pod is record.pod else replace(record, pod=pod)

    # ---- pods -------------------------------------------------------------------------
    def add_pod(self, record: PodRecord) -> bool:
        """A pod seen for the first time: true when it is ours, frees or takes room that
        matters (see :func:`_matters`), or is the first of another scheduler to name its
        group (the group becomes that scheduler's)."""
        return self._put_pod(None, record)

    def update_pod(self, old: PodRecord, new: PodRecord) -> bool:
        """A pod that changed; its ``nodeName`` appearing confirms its assumption."""
        return self._put_pod(old, new)

    def _put_pod(self, old: PodRecord | None, record: PodRecord) -> bool:
        key = record.pod.key
        record = self._resolved(record)
        self.pods[key] = record
        assumed = self.assumed.get(key)
        if record.pod.node_name is not None:
            self.assumed.pop(key, None)  # confirmed by the watch
        owners_changed = self._derive(key)
        was_bad = self.bad_pods.pop(key, None) is not None
        confirmed = assumed is not None and record.pod.node_name is not None
        self._changed(old != record or confirmed or was_bad)
        if owners_changed or _matters(old, record, assumed.node if assumed else None):
            return True
        if _reported(old, record):
            self.on_status_change()
        return False

    def keep_pods(self, keys: set[str]) -> None:
        """A list returned exactly ``keys``: the others were deleted meanwhile, and an
        assumption whose pod is gone, or unreadable, holds no room."""
        for key in {*self.pods, *self.bad_pods} - keys:
            self.remove_pod(PodKey(key))
        for key in [k for k in self.assumed if k not in self.pods]:
            self.forget(key)

    def set_bad_pod(self, header: PodHeader, error: str, *, ours: bool) -> bool:
        """A pod that cannot be read holds nothing; one of ours not yet bound is kept
        aside with its error, to be reported on."""
        self._changed()
        self.pods.pop(header.key, None)
        owners_changed = self._derive(header.key)
        if ours and not header.bound:
            self.bad_pods[header.key] = error
        return ours or owners_changed

    def remove_pod(self, key: PodKey) -> bool:
        """The pod is gone: its room, its assumption and its place in its gang with it."""
        old = self.pods.pop(key, None)
        assumed = self.assumed.pop(key, None)
        bad = self.bad_pods.pop(key, None)
        owners_changed = self._derive(key)
        self._changed(old is not None or assumed is not None or bad is not None)
        # Gone from a node frees room; gone from a gang changes the gang; the last pod
        # of another scheduler gone from a group leaves it ours.
        return owners_changed or bad is not None or (old is not None and (
            old.ours or (old.pod.node_name is not None and not old.pod.terminal)))

    # ---- assume / finish binding / forget / expire ----------------------------
    def assume(self, placement: Placement, now: float) -> None:
        """Seat the placed pods where the placement put them, before any bind is sent.

        ``now`` is not when the assumption may expire: only a finished bind starts
        that clock (see :meth:`finish_binding`).
        """
        for pod_key, node in placement.assignments:
            self.assumed[pod_key] = Assumption(node, now)
            self._derive(pod_key)
        self.devices.assume(placement.claims)
        self._changed(bool(placement.assignments))

    def finish_binding(self, pod_key: PodKey, now: float) -> None:
        """The pod's bind call returned: from now on its assumption may expire.

        An assumption whose bind has not finished never expires, as
        kube-scheduler's cache keeps it: the bind may still wait for a worker.
        """
        assumption = self.assumed.get(pod_key)
        if assumption is not None and assumption.bound_at is None:
            self.assumed[pod_key] = replace(assumption, bound_at=now)

    def is_placed(self, pod_key: PodKey) -> bool:
        """Assumed or bound: a pod whose "cannot be placed" report would now be a lie."""
        record = self.pods.get(pod_key)
        return pod_key in self.assumed or (record is not None and record.pod.node_name is not None)

    def forget(self, pod_key: PodKey) -> None:
        self._changed(self.assumed.pop(pod_key, None) is not None)
        self._derive(pod_key)

    def expire(self, now: float, ttl: float) -> list[PodKey]:
        """Drop assumptions the watch has not confirmed ``ttl`` after their bind finished."""
        stale = [key for key, assumption in self.assumed.items()
                 if assumption.bound_at is not None and now - assumption.bound_at > ttl]
        for key in stale:
            del self.assumed[key]
            self._derive(key)
        self._changed(bool(stale))
        return stale

    def next_expiry(self, ttl: float) -> float | None:
        """When the oldest assumption whose bind finished expires, if any."""
        finished = [a.bound_at for a in self.assumed.values() if a.bound_at is not None]
        return min(finished) + ttl if finished else None

    def _derive(self, key: PodKey) -> bool:
        return self.index.derive(key, self.pods.get(key), self.assumed.get(key))

    # ---- devices (dynamic resource allocation) --------------------------------------------
    def devices_changed(self, changed: bool) -> bool:
        """A slice, class or claim in ``devices`` changed: so does the view."""
        return self._changed(changed)

    def forget_claims(self, claims: tuple[ClaimKey, ...]) -> None:
        """Claim writes that failed or were undone: the claims are what the watch says."""
        self.devices.forget(claims)
        self._changed(bool(claims))

    # ---- the per-cycle view -------------------------------------------------
    def view(self) -> View:
        scheduling, index = self.groups_and_queues, self.index
        queues = dict(scheduling.queues)
        queues.setdefault(DEFAULT_QUEUE, QueueSpec(name=DEFAULT_QUEUE))
        folded = fold_composites({key: scheduling.with_workloads(g)
                                  for key, g in scheduling.groups.items()},
                                 scheduling.composites)
        members, pods = fold_members(index.members.values(), folded.parts), dict(self.pods)
        return View(
            snapshot=Snapshot(index.usage, seated=partial(seated_pods, members, pods),
                              devices=self.devices.inventory(),
                              anti_affinity_terms=tuple(index.holder_terms)),
            members=members,
            groups=folded.groups,
            queues=queues,
            pods=pods,
            storage=self.budgets_and_storage.storage(),
            named_by_others=index.named_by_others_now(),
            topologies=dict(scheduling.topologies),
        )


@dataclass(kw_only=True)
class PodIndex:
    """What a view is made of, kept as pods and assumptions change, so a view costs no
    pass over every pod."""

    nodes: Mapping[NodeName, Node]
    """The mirror's nodes: the ones whose usage is kept."""
    members: dict[PodKey, Member] = field(default_factory=dict)
    """Our pods as the cycle gathers them, placed where they are assumed."""
    seated: dict[PodKey, tuple[NodeName, Resources]] = field(default_factory=dict)
    """Each live pod on a node (bound or assumed): where, and what it requests."""
    requested: dict[NodeName, Resources] = field(default_factory=dict)
    """What the seated pods request, by node name (known to us or not)."""
    usage: dict[NodeName, NodeUsage] = field(default_factory=dict)
    """Each known node with the sum of what its seated pods request."""
    holders: dict[PodKey, tuple[PodAffinityTerm, ...]] = field(default_factory=dict)
    """Seated pods with required anti-affinity terms (host ports make them too), and
    the terms; ``holder_terms`` counts each distinct term. Gangs without inter-pod
    rules ask only whether one of these terms selects them, never read every pod."""
    holder_terms: dict[PodAffinityTerm, int] = field(default_factory=dict)
    by_namespace_labels: set[PodKey] = field(default_factory=set)
    """Pods with an inter-pod term that selects namespaces by their labels: the ones
    to resolve again when a namespace's labels change."""
    others_group: dict[PodKey, GangKey] = field(default_factory=dict)
    """Each pod of another scheduler that names a group, and the group, finished or
    not: while it exists, a group without a pod of ours is that scheduler's."""
    named_by_others: dict[GangKey, int] = field(default_factory=dict)
    """How many of those pods name each group; ``named_frozen`` is its keys, made
    again only when a group gains its first such pod or loses its last."""
    named_frozen: frozenset[GangKey] | None = None

    def add_node(self, node: Node) -> None:
        self.usage[node.name] = NodeUsage(node, self.requested.get(node.name, Resources.zero()))

    def remove_node(self, name: NodeName) -> None:
        self.usage.pop(name, None)

    def derive(self, key: PodKey, record: PodRecord | None, assumed: Assumption | None) -> bool:
        """Bring the pod's member and seat in line with its record and assumption;
        whether a group began or ceased to be named by pods of other schedulers."""
        owners_changed = self._name_group(
            key, record.group if record is not None and not record.ours else None)
        if record is None:
            self.members.pop(key, None)
            self._unseat(key)
            self.by_namespace_labels.discard(key)
            return owners_changed
        pod = record.pod
        if selects_by_labels(pod):
            self.by_namespace_labels.add(key)
        else:
            self.by_namespace_labels.discard(key)
        if assumed is not None and pod.node_name is None:
            pod = replace(pod, node_name=assumed.node)
        # A terminating pod keeps its seat below but leaves its gang: to the cycle, and
        # to the room held for a running gang's replacements, it departed already.
        if record.ours and not pod.terminating:
            self.members[key] = Member(
                pod=pod,
                group=record.group,
                running=record.phase == "Running",
                succeeded=record.phase == "Succeeded",
                failed=record.phase == "Failed",
            )
        else:
            self.members.pop(key, None)
        # Terminal pods hold nothing; the node's kubelet has released them.
        if pod.terminal or pod.node_name is None:
            self._unseat(key)
        else:
            if self.seated.get(key) != (pod.node_name, pod.requests):
                self._unseat(key)
                self.seated[key] = (pod.node_name, pod.requests)
                self._add_requested(pod.node_name, pod.requests, +1)
            self._hold_terms(key, pod.anti_affinity)
        return owners_changed

    def _name_group(self, key: PodKey, group: GangKey | None) -> bool:
        """Count the pod ``key`` of another scheduler as naming ``group`` (None: it names
        none, is ours or is gone); whether a group gained its first or lost its last."""
        before = self.others_group.pop(key, None)
        if before == group:
            if group is not None:
                self.others_group[key] = group
            return False
        changed = False
        if before is not None:
            left = self.named_by_others[before] - 1
            if left:
                self.named_by_others[before] = left
            else:
                del self.named_by_others[before]
                changed = True
        if group is not None:
            self.others_group[key] = group
            self.named_by_others[group] = self.named_by_others.get(group, 0) + 1
            changed = changed or self.named_by_others[group] == 1
        if changed:
            self.named_frozen = None
        return changed

    def _hold_terms(self, key: PodKey, terms: tuple[PodAffinityTerm, ...]) -> None:
        """Count the anti-affinity terms of the seated pod ``key`` (none: it holds none)."""
        before = self.holders.pop(key, ())
        if before == terms:
            if terms:
                self.holders[key] = terms
            return
        for term in before:
            self.holder_terms[term] -= 1
            if not self.holder_terms[term]:
                del self.holder_terms[term]
        for term in terms:
            self.holder_terms[term] = self.holder_terms.get(term, 0) + 1
        if terms:
            self.holders[key] = terms

    def _unseat(self, key: PodKey) -> None:
        self._hold_terms(key, ())
        seat = self.seated.pop(key, None)
        if seat is not None:
            self._add_requested(seat[0], seat[1], -1)

    def _add_requested(self, name: NodeName, requests: Resources, sign: int) -> None:
        before = self.requested.get(name, Resources.zero())
        total = before + requests if sign > 0 else before - requests
        if total.is_zero:
            self.requested.pop(name, None)
        else:
            self.requested[name] = total
        node = self.nodes.get(name)
        if node is not None:
            self.usage[name] = NodeUsage(node, total)

    def named_by_others_now(self) -> frozenset[GangKey]:
        if self.named_frozen is None:
            self.named_frozen = frozenset(self.named_by_others)
        return self.named_frozen


def _put(table: dict[str, V], key: str, value: V) -> bool:
    """Hold ``value`` under ``key``; whether that changed anything."""
    changed = table.get(key) != value
    table[key] = value
    return changed
