"""Raw API objects into the mirror: the one way in, for every watched kind (pods and
nodes, storage and devices, PodGroups of every flavour, Queues, native and Kueue
Workloads) and for the CLI's listings.

Each watched kind is one entry of :data:`KINDS`: how to key an object of it, and
which of the mirror's typed verbs a watch event, a deletion and the end of a list
become. Objects are read once, here, with :mod:`gangsched.core.kubeobjects`; the
mirror itself only ever holds parsed objects. A new kind to watch is a new
entry (and the verbs it calls), not a new branch in every method.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import structlog

from gangsched.core.dra.devices import Claim as ResourceClaim
from gangsched.core.dra.parse import (
    device_class_from_api,
    resource_claim_from_api,
    slice_from_api,
)
from gangsched.core.kubeobjects.composites import composite_record_from_api
from gangsched.core.kubeobjects.fields import ObjectError, RawObject, object_name, object_ref
from gangsched.core.kubeobjects.nodepools import nodepool_from_api
from gangsched.core.kubeobjects.nodes import namespace_from_api, node_from_api
from gangsched.core.kubeobjects.podgroups import GroupRecord, group_key_of, group_record_from_api
from gangsched.core.kubeobjects.queues import (
    disruption_budget_from_api,
    kueue_workload_from_api,
    priority_class_from_api,
    queue_from_api,
    topology_levels_from_api,
    workload_queue_from_api,
)
from gangsched.core.kubeobjects.records import pod_header, pod_record_from_api
from gangsched.core.kubeobjects.storage import (
    claim_from_api,
    csi_driver_from_api,
    csi_node_from_api,
    storage_capacity_from_api,
    storage_class_from_api,
    volume_attachment_from_api,
    volume_from_api,
)
from gangsched.core.model.objects import ClaimKey, DisruptionBudget, Flavor, NodeName, QueueName
from gangsched.mirror import BudgetsAndStorage, Mirror

__all__ = ["CUSTOM_KINDS", "KINDS", "Feed", "Kind", "group_kind"]

T = TypeVar("T")

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class Kind:
    """How the objects of one watched kind reach the mirror.

    ``upsert`` and ``delete`` return whether the change may alter a scheduling
    decision (the watch then wakes the scheduler); ``keep`` is told every key a
    complete list returned, and drops what the list did not.
    """

    key: Callable[[RawObject], str]
    upsert: Callable[[Mirror, RawObject], bool]
    delete: Callable[[Mirror, RawObject], bool]
    keep: Callable[[Mirror, set[str]], None]


def _upsert_pod(mirror: Mirror, obj: RawObject) -> bool:
    header = pod_header(obj)
    ours = mirror.ours(header)
    try:
        record = pod_record_from_api(obj, ours=ours)
    except ObjectError as error:
        return mirror.set_bad_pod(header, str(error), ours=ours)
    old = mirror.pods.get(record.pod.key)
    return mirror.add_pod(record) if old is None else mirror.update_pod(old, record)


def _upsert_node(mirror: Mirror, obj: RawObject) -> bool:
    try:
        node = node_from_api(obj)
    except ObjectError as error:
        log.warning("node_invalid", error=str(error))
        return False
    old = mirror.nodes.get(node.name)
    return mirror.add_node(node) if old is None else mirror.update_node(old, node)


def _upsert_priority_class(mirror: Mirror, obj: RawObject) -> bool:
    priority_class = priority_class_from_api(obj)
    return (priority_class is not None
            and mirror.groups_and_queues.set_priority_class(priority_class))


def _upsert_budget(mirror: Mirror, obj: RawObject) -> bool:
    """A budget that cannot be read allows nothing, so it protects rather than lets
    preemption stop half-way on the Eviction API's refusal."""
    try:
        budget = disruption_budget_from_api(obj)
    except ObjectError as error:
        log.warning("disruption_budget_invalid", error=str(error))
        ref = object_ref(obj)
        budget = DisruptionBudget(ref.key, ref.namespace)
    return mirror.budgets_and_storage.set_budget(budget)


def _upsert_storage(
    read: Callable[[RawObject], T], put: Callable[[BudgetsAndStorage, T], bool]
) -> Callable[[Mirror, RawObject], bool]:
    """A claim, volume, class or CSI object read and held; one that cannot be read is left
    out (a pod naming a claim or class then waits, saying it is missing)."""
    def upsert(mirror: Mirror, obj: RawObject) -> bool:
        try:
            return put(mirror.budgets_and_storage, read(obj))
        except ObjectError as error:
            log.warning("storage_object_invalid", error=str(error))
            return False
    return upsert


def _stored(
    read: Callable[[RawObject], T], put: Callable[[BudgetsAndStorage, T], bool],
    table: Callable[[BudgetsAndStorage], dict[str, Any]],
) -> Kind:
    """A cluster-scoped storage kind, held by name in the mirror's ``table`` of it."""
    return Kind(
        key=object_name,
        upsert=_upsert_storage(read, put),
        delete=lambda mirror, obj: mirror.budgets_and_storage.remove_stored(
            table(mirror.budgets_and_storage), object_name(obj)),
        keep=lambda mirror, seen: mirror.budgets_and_storage.keep_stored(
            table(mirror.budgets_and_storage), seen),
    )


def _upsert_slice(mirror: Mirror, obj: RawObject) -> bool:
    """A slice that cannot be read offers no device; its node, if it names one, says why."""
    name = object_ref(obj).name
    try:
        node, devices = slice_from_api(obj)
    except ObjectError as error:
        log.warning("resource_slice_invalid", error=str(error))
        spec = obj.get("spec")
        node_name = spec.get("nodeName") if isinstance(spec, dict) else None
        node = NodeName(node_name) if isinstance(node_name, str) and node_name else None
        return mirror.devices_changed(mirror.devices.set_bad_slice(name, node, str(error)))
    return mirror.devices_changed(mirror.devices.set_slice(name, node, devices))


def _upsert_device_class(mirror: Mirror, obj: RawObject) -> bool:
    try:
        spec = device_class_from_api(obj)
    except ObjectError as error:
        log.warning("device_class_invalid", error=str(error))
        return mirror.devices_changed(mirror.devices.remove_class(object_ref(obj).name))
    return mirror.devices_changed(mirror.devices.set_class(spec))


def _upsert_claim(mirror: Mirror, obj: RawObject) -> bool:
    """A claim that cannot be read is kept with its error: its pods wait naming it."""
    try:
        claim = resource_claim_from_api(obj)
    except ObjectError as error:
        ref = object_ref(obj)
        claim = ResourceClaim(ClaimKey(ref.key), ref.uid, error=str(error))
    return mirror.devices_changed(mirror.devices.set_claim(claim))


def _ref_key(obj: RawObject) -> str:
    return object_ref(obj).key


def _pod_key(obj: RawObject) -> str:
    return pod_header(obj).key


def group_kind(flavor: Flavor) -> str:
    """The watched kind of one PodGroup flavour, named as kubectl names it."""
    return f"podgroups.{flavor.group}"


def _decides(group: GroupRecord | None) -> tuple[object, ...] | None:
    """What of a group a scheduling decision reads (not its status, not its generation)."""
    if group is None:
        return None
    spec = replace(group.spec, generation=0) if group.spec is not None else None
    return (group.flavor, group.uid, spec, group.error, group.policy)


def _upsert_group(flavor: Flavor) -> Callable[[Mirror, RawObject], bool]:
    """Our own status writes come back as events; they change nothing a cycle decides
    from, and waking the scheduler for them would loop it on itself."""
    def upsert(mirror: Mirror, obj: RawObject) -> bool:
        if not mirror.in_scope(object_ref(obj).namespace):
            return False  # not a namespace this scheduler serves
        record = group_record_from_api(obj, flavor)
        held = mirror.groups_and_queues
        before = _decides(held.groups.get(record.key))
        held.set_group(record)
        return before != _decides(held.groups.get(record.key))
    return upsert


def _group_kind(flavor: Flavor) -> Kind:
    return Kind(
        key=group_key_of,
        upsert=_upsert_group(flavor),
        delete=lambda mirror, obj: mirror.groups_and_queues.remove_group(group_key_of(obj), flavor),
        keep=lambda mirror, seen: mirror.groups_and_queues.keep_groups(flavor, seen),
    )


def _upsert_workload(mirror: Mirror, obj: RawObject) -> bool:
    """A native Workload's queue annotation, which its PodGroups inherit."""
    workload = workload_queue_from_api(obj)
    held = mirror.groups_and_queues
    return mirror.in_scope(object_ref(obj).namespace) and held.set_workload_queue(workload)


def _upsert_kueue_workload(mirror: Mirror, obj: RawObject) -> bool:
    """Whether Kueue admitted a job: until it does, its PodGroup waits (core.stages.triage)."""
    try:
        workload = kueue_workload_from_api(obj)
    except ObjectError as error:
        log.warning("kueue_workload_unreadable", workload=object_ref(obj).key, error=str(error))
        return False
    held = mirror.groups_and_queues
    return mirror.in_scope(object_ref(obj).namespace) and held.set_kueue_workload(workload)


KINDS: dict[str, Kind] = {
    "pods": Kind(
        key=_pod_key,
        upsert=_upsert_pod,
        delete=lambda mirror, obj: mirror.remove_pod(pod_header(obj).key),
        keep=lambda mirror, seen: mirror.keep_pods(seen),
    ),
    "nodes": Kind(
        key=_ref_key,
        upsert=_upsert_node,
        delete=lambda mirror, obj: mirror.remove_node(NodeName(object_ref(obj).name)),
        keep=lambda mirror, seen: mirror.keep_nodes(seen),
    ),
    # Cluster-scoped; their labels are what inter-pod terms select namespaces by.
    "namespaces": Kind(
        key=object_name,
        upsert=lambda mirror, obj: mirror.set_namespace(namespace_from_api(obj)),
        delete=lambda mirror, obj: mirror.remove_namespace(object_name(obj)),
        keep=lambda mirror, seen: mirror.keep_namespaces(seen),
    ),
    "priorityclasses": Kind(
        key=_ref_key,
        upsert=_upsert_priority_class,
        delete=lambda mirror, obj: mirror.groups_and_queues.remove_priority_class(
            object_ref(obj).name),
        keep=lambda mirror, seen: mirror.groups_and_queues.keep_priority_classes(seen),
    ),
    "resourceslices": Kind(
        key=_ref_key,
        upsert=_upsert_slice,
        delete=lambda mirror, obj: mirror.devices_changed(
            mirror.devices.remove_slice(object_ref(obj).name)),
        keep=lambda mirror, seen: mirror.devices.keep_slices(seen),
    ),
    "deviceclasses": Kind(
        key=_ref_key,
        upsert=_upsert_device_class,
        delete=lambda mirror, obj: mirror.devices_changed(
            mirror.devices.remove_class(object_ref(obj).name)),
        keep=lambda mirror, seen: mirror.devices.keep_classes(seen),
    ),
    "resourceclaims": Kind(
        key=_ref_key,
        upsert=_upsert_claim,
        delete=lambda mirror, obj: mirror.devices_changed(
            mirror.devices.remove_claim(ClaimKey(object_ref(obj).key))),
        keep=lambda mirror, seen: mirror.devices.keep_claims(seen),
    ),
    "poddisruptionbudgets": Kind(
        key=_ref_key,
        upsert=_upsert_budget,
        delete=lambda mirror, obj: mirror.budgets_and_storage.remove_budget(object_ref(obj).key),
        keep=lambda mirror, seen: mirror.budgets_and_storage.keep_budgets(seen),
    ),
    "persistentvolumeclaims": Kind(
        key=_ref_key,
        upsert=_upsert_storage(claim_from_api, BudgetsAndStorage.set_claim),
        delete=lambda mirror, obj: mirror.budgets_and_storage.remove_stored(
            mirror.budgets_and_storage.claims, object_ref(obj).key),
        keep=lambda mirror, seen: mirror.budgets_and_storage.keep_stored(
            mirror.budgets_and_storage.claims, seen),
    ),
    # Cluster-scoped: known by name alone, whatever namespace a file gave them.
    "persistentvolumes": _stored(volume_from_api, BudgetsAndStorage.set_volume,
                                 lambda m: m.volumes),
    "storageclasses": _stored(storage_class_from_api, BudgetsAndStorage.set_storage_class,
                              lambda m: m.storage_classes),
    # CSI volume limits: the drivers on each node with their limits, the volumes attached
    # there, and the drivers pods may need registered on their node.
    "csinodes": _stored(csi_node_from_api, BudgetsAndStorage.set_csi_node, lambda m: m.csi_nodes),
    "volumeattachments": _stored(volume_attachment_from_api, BudgetsAndStorage.set_attachment,
                                 lambda m: m.attachments),
    "csidrivers": _stored(csi_driver_from_api, BudgetsAndStorage.set_csi_driver,
                          lambda m: m.csi_drivers),
    # Where a driver publishing its storage capacity can still make a volume of a class:
    # namespaced, though the namespace says nothing.
    "csistoragecapacities": Kind(
        key=_ref_key,
        upsert=_upsert_storage(storage_capacity_from_api, BudgetsAndStorage.set_capacity),
        delete=lambda mirror, obj: mirror.budgets_and_storage.remove_stored(
            mirror.budgets_and_storage.capacities, object_ref(obj).key),
        keep=lambda mirror, seen: mirror.budgets_and_storage.keep_stored(
            mirror.budgets_and_storage.capacities, seen),
    ),
    # Karpenter's NodePools, where it is installed: what waiting gangs may ask for.
    "nodepools": _stored(nodepool_from_api, BudgetsAndStorage.set_nodepool,
                         lambda m: m.nodepools),
    **{group_kind(flavor): _group_kind(flavor) for flavor in Flavor},
    # Cluster-scoped; in the mirror by name.
    "queues": Kind(
        key=object_name,
        upsert=lambda mirror, obj: mirror.groups_and_queues.set_queue(queue_from_api(obj)),
        delete=lambda mirror, obj: mirror.groups_and_queues.remove_queue(
            QueueName(object_name(obj))),
        keep=lambda mirror, seen: mirror.groups_and_queues.keep_queues(seen),
    ),
    "topologies": Kind(
        key=object_name,
        upsert=lambda mirror, obj: mirror.groups_and_queues.set_topology(
            object_name(obj), topology_levels_from_api(obj)),
        delete=lambda mirror, obj: mirror.groups_and_queues.remove_topology(object_name(obj)),
        keep=lambda mirror, seen: mirror.groups_and_queues.keep_topologies(seen),
    ),
    "workloads": Kind(
        key=_ref_key,
        upsert=_upsert_workload,
        delete=lambda mirror, obj: mirror.groups_and_queues.remove_workload(object_ref(obj).key),
        keep=lambda mirror, seen: mirror.groups_and_queues.keep_workloads(seen),
    ),
    # Native CompositePodGroups, where the API server serves them: a gang of PodGroups.
    "compositepodgroups": Kind(
        key=_ref_key,
        upsert=lambda mirror, obj: mirror.in_scope(object_ref(obj).namespace) and (
            mirror.groups_and_queues.set_composite(composite_record_from_api(obj))),
        delete=lambda mirror, obj: mirror.groups_and_queues.remove_composite(
            object_ref(obj).key),
        keep=lambda mirror, seen: mirror.groups_and_queues.keep_composites(seen),
    ),
    "kueueworkloads": Kind(
        key=_ref_key,
        upsert=_upsert_kueue_workload,
        delete=lambda mirror, obj: mirror.groups_and_queues.remove_kueue_workload(
            object_ref(obj).key),
        keep=lambda mirror, seen: mirror.groups_and_queues.keep_kueue_workloads(seen),
    ),
}
"""Every kind a reflector watches, by the name the reflector gives it."""


CUSTOM_KINDS: dict[str, tuple[str, str, str]] = {
    **{group_kind(flavor): (flavor.group, flavor.version, "podgroups") for flavor in Flavor},
    "queues": ("scheduling.gangsched.io", "v1alpha1", "queues"),
    "topologies": ("scheduling.gangsched.io", "v1alpha1", "topologies"),
    "workloads": ("scheduling.k8s.io", "v1beta1", "workloads"),
    "compositepodgroups": ("scheduling.k8s.io", "v1alpha3", "compositepodgroups"),
    "nodepools": ("karpenter.sh", "v1", "nodepools"),
    "kueueworkloads": ("kueue.x-k8s.io", "v1beta2", "workloads"),
}
"""The kinds listed as custom objects, each with its API group, version and plural: no
generated client covers them all."""


@dataclass(frozen=True, slots=True)
class Feed:
    """The mirror's entry points for raw objects: what a reflector's sink and the CLI's
    listings hand over."""

    mirror: Mirror

    def replace(self, kind: str, objects: Sequence[RawObject]) -> None:
        """Hold exactly ``objects`` of this kind: a list read whole."""
        seen: set[str] = set()
        self.listed(kind, objects, seen)
        self.list_done(kind, seen)

    def listed(self, kind: str, page: Sequence[RawObject], seen: set[str]) -> None:
        """One page of a (re-)list, each object taken as a watch would report it.

        Page by page, so a list of many thousand pods is never held raw all at
        once; a cycle between two pages sees some objects newer than others,
        as it may while any watch runs behind.
        """
        entry = KINDS[kind]
        for obj in page:
            seen.add(entry.key(obj))
            entry.upsert(self.mirror, obj)

    def list_done(self, kind: str, seen: set[str]) -> None:
        """The list is complete: what it did not return was deleted meanwhile."""
        self.mirror.relisted()
        KINDS[kind].keep(self.mirror, seen)

    def upsert(self, kind: str, obj: RawObject) -> bool:
        """Apply a watch event; True when it may change a scheduling decision.

        Most events cannot: a heartbeat of a node, a pod of another scheduler
        landing (it only takes room), the watch confirming our own bind. Those
        update the mirror without waking the scheduler, so a busy cluster does
        not run a cycle per event.
        """
        return KINDS[kind].upsert(self.mirror, obj)

    def delete(self, kind: str, obj: RawObject) -> bool:
        return KINDS[kind].delete(self.mirror, obj)

    # ---- shorthands for the CLI's listings and tests ----------------------------------
    def upsert_group(self, flavor: Flavor, body: RawObject) -> bool:
        return self.upsert(group_kind(flavor), body)

    def upsert_queue(self, body: RawObject) -> bool:
        return self.upsert("queues", body)

    def upsert_workload(self, body: RawObject) -> bool:
        return self.upsert("workloads", body)
