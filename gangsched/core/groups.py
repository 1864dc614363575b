"""PodGroups of every flavour we honour, reduced to one spec, and their status.

gangsched's own PodGroup, scheduler-plugins' (``scheduling.x-k8s.io``),
Volcano's (``scheduling.volcano.sh``) and Kubernetes' own (``scheduling.k8s.io``,
1.37's native gang API) say the same thing with different fields; operators
such as Kubeflow's training-operator or Spark create the Volcano and
scheduler-plugins ones, the Job controller the native one, so honouring them
all is what lets those users switch by changing only ``schedulerName``.
Membership of a pod is read from any of the markers below, or from the native
``spec.schedulingGroup.podGroupName``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from gangsched.core.kubeobjects import ObjectError, timestamp
from gangsched.core.model import DEFAULT_QUEUE, GangKey, PodKey, QueueName
from gangsched.core.quantity import QuantityError
from gangsched.core.resources import Resources

GROUP_LABEL = "scheduling.gangsched.io/pod-group"
COSCHEDULING_LABEL = "scheduling.x-k8s.io/pod-group"
VOLCANO_ANNOTATION = "scheduling.k8s.io/group-name"
QUEUE_ANNOTATION = "scheduling.gangsched.io/queue"
"""Picks the Queue of a native PodGroup (or of its Workload): the native API has no queue."""
VOLCANO_QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
"""Volcano's queue annotation, honoured where a PodGroup's own field names no queue."""
PREEMPTIBLE_ANNOTATIONS = ("scheduling.gangsched.io/preemptible", "volcano.sh/preemptable")
"""``"false"`` on a PodGroup keeps its gang from ever being evicted for another."""


class Flavor(StrEnum):
    """Which API a PodGroup came from; status is written back in that API's shape."""

    GANGSCHED = "scheduling.gangsched.io/v1alpha1"
    COSCHEDULING = "scheduling.x-k8s.io/v1alpha1"
    VOLCANO = "scheduling.volcano.sh/v1beta1"
    NATIVE = "scheduling.k8s.io/v1beta1"

    @property
    def group(self) -> str:
        return self.value.split("/")[0]

    @property
    def version(self) -> str:
        return self.value.split("/")[1]


class Phase(StrEnum):
    PENDING = "Pending"
    INQUEUE = "Inqueue"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNSCHEDULABLE = "Unschedulable"

    @property
    def finished(self) -> bool:
        return self in (Phase.SUCCEEDED, Phase.FAILED)


FINISHED_PHASES = frozenset({"Succeeded", "Failed", "Completed", "Finished"})
"""Status phases that mean a group's job is over, in any flavour: ours, Volcano's
(``Completed``) and scheduler-plugins' (``Finished``, ``Failed``)."""


def group_name_of(labels: Mapping[str, str], annotations: Mapping[str, str]) -> str | None:
    """The PodGroup a pod belongs to, by gangsched label, scheduler-plugins label or
    Volcano annotation, in that order; None for a pod that is a gang of its own."""
    for value in (
        labels.get(GROUP_LABEL),
        labels.get(COSCHEDULING_LABEL),
        annotations.get(VOLCANO_ANNOTATION),
    ):
        if value:
            return value
    return None


def native_group_name(spec: Mapping[str, Any]) -> str | None:
    """The native PodGroup a pod names in ``spec.schedulingGroup.podGroupName``, if any."""
    group = spec.get("schedulingGroup")
    if not isinstance(group, Mapping):
        return None
    name = group.get("podGroupName")
    return name if isinstance(name, str) and name else None


def gang_key(namespace: str, group: str) -> GangKey:
    return GangKey(f"{namespace}/{group}")


def group_key_of(obj: Mapping[str, Any]) -> GangKey:
    """The key of a PodGroup object, of any flavour, from its metadata."""
    meta = obj.get("metadata") or {}
    return gang_key(str(meta.get("namespace", "")), str(meta.get("name", "")))


def solo_gang_key(pod: PodKey) -> GangKey:
    """A pod without a group is a gang of one; the prefix keeps it apart from group names."""
    namespace, name = pod.split("/", 1)
    return GangKey(f"{namespace}/pod:{name}")


@dataclass(frozen=True, slots=True)
class GroupSpec:
    key: GangKey
    flavor: Flavor
    min_member: int
    min_resources: Resources
    queue: QueueName
    created: float
    generation: int = 0
    timeout_seconds: int | None = None
    priority_class: str | None = None
    priority: int | None = None
    """A priority value given on the group itself (native ``spec.priority``)."""
    basic: bool = False
    """Native ``schedulingPolicy.basic``: each pod is placed on its own, the group only
    counts and reports them."""
    topology_keys: tuple[str, ...] = ()
    """Node labels every member must share one value of (native topology constraints)."""
    workload: str | None = None
    """``namespace/name`` of the native Workload whose queue annotation applies when the
    PodGroup names none itself."""
    preempts: bool = True
    """False for native ``spec.preemptionPolicy: Never``: the gang waits for room."""
    preemptible: bool = True
    """False when an annotation of :data:`PREEMPTIBLE_ANNOTATIONS` says ``"false"``."""


def _annotations(meta: Mapping[str, Any]) -> Mapping[str, Any]:
    annotations = meta.get("annotations") or {}
    return annotations if isinstance(annotations, Mapping) else {}


def _preemptible(meta: Mapping[str, Any]) -> bool:
    annotations = _annotations(meta)
    return not any(
        str(annotations.get(name, "")).strip().lower() == "false"
        for name in PREEMPTIBLE_ANNOTATIONS
    )


def group_from_api(obj: Mapping[str, Any], flavor: Flavor) -> GroupSpec:
    """Read a PodGroup of any flavour; an empty spec (Spark's default) means minMember 1.

    Raises ObjectError naming the group and field, so one bad group is reported
    on its own status and never stops the scheduler.
    """
    meta = obj.get("metadata") or {}
    key = group_key_of(obj)
    created = timestamp(meta.get("creationTimestamp"), f"podgroup {key}",
                        "metadata.creationTimestamp")
    spec = obj.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise ObjectError(f"podgroup {key}: spec is not an object")
    if flavor is Flavor.NATIVE:
        return _native_group(key, meta, spec, created)
    min_member = spec.get("minMember", 1)
    if min_member is None:
        min_member = 1
    if not isinstance(min_member, int) or isinstance(min_member, bool) or min_member < 0:
        raise ObjectError(f"podgroup {key}: minMember {min_member!r} is not a whole number ≥ 0")
    raw_resources = spec.get("minResources") or {}
    if not isinstance(raw_resources, Mapping):
        raise ObjectError(f"podgroup {key}: minResources is not a map")
    try:
        min_resources = Resources.parse(raw_resources)
    except QuantityError as error:
        raise ObjectError(f"podgroup {key}: minResources: {error}") from error
    queue = (spec.get("queue") or _annotations(meta).get(VOLCANO_QUEUE_ANNOTATION)
             or DEFAULT_QUEUE)
    timeout = spec.get("scheduleTimeoutSeconds")
    if timeout is not None and (not isinstance(timeout, int) or timeout < 0):
        raise ObjectError(f"podgroup {key}: scheduleTimeoutSeconds {timeout!r} is not ≥ 0")
    priority_class = spec.get("priorityClassName") or None
    return GroupSpec(
        key=key,
        flavor=flavor,
        min_member=max(1, min_member),
        min_resources=min_resources,
        queue=QueueName(str(queue)),
        created=created,
        generation=int(meta.get("generation") or 0),
        timeout_seconds=timeout,
        priority_class=str(priority_class) if priority_class else None,
        preemptible=_preemptible(meta),
    )


def _native_group(
    key: GangKey, meta: Mapping[str, Any], spec: Mapping[str, Any], created: float
) -> GroupSpec:
    """A ``scheduling.k8s.io/v1beta1`` PodGroup, read as kube-scheduler reads it.

    ``gang.minCount`` is the minMember; ``basic`` places each pod alone; a
    missing policy is what the API server rejects, read here as basic so a
    group written around the schema still schedules its pods.
    """
    where = f"podgroup {key}"
    policy = spec.get("schedulingPolicy") or {}
    if not isinstance(policy, Mapping):
        raise ObjectError(f"{where}: schedulingPolicy is not an object")
    gang = policy.get("gang")
    min_member = 1
    if gang is not None:
        count = gang.get("minCount") if isinstance(gang, Mapping) else None
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise ObjectError(f"{where}: schedulingPolicy.gang.minCount {count!r} "
                              "is not a whole number ≥ 1")
        min_member = count
    constraints = spec.get("schedulingConstraints") or {}
    topology = constraints.get("topology") if isinstance(constraints, Mapping) else None
    keys: list[str] = []
    for index, entry in enumerate(topology or ()):
        label = entry.get("key") if isinstance(entry, Mapping) else None
        if not isinstance(label, str) or not label:
            raise ObjectError(f"{where}: schedulingConstraints.topology[{index}].key "
                              "must be a node label name")
        keys.append(label)
    priority = spec.get("priority")
    if priority is not None and (not isinstance(priority, int) or isinstance(priority, bool)):
        raise ObjectError(f"{where}: priority {priority!r} is not an integer")
    annotations = _annotations(meta)
    queue = annotations.get(QUEUE_ANNOTATION) or annotations.get(VOLCANO_QUEUE_ANNOTATION)
    workload_ref = spec.get("workloadRef")
    workload = None
    if not queue and isinstance(workload_ref, Mapping) and workload_ref.get("workloadName"):
        workload = f"{key.split('/', 1)[0]}/{workload_ref['workloadName']}"
    priority_class = spec.get("priorityClassName") or None
    return GroupSpec(
        key=key,
        flavor=Flavor.NATIVE,
        min_member=min_member,
        min_resources=Resources.zero(),
        queue=QueueName(str(queue or DEFAULT_QUEUE)),
        created=created,
        generation=int(meta.get("generation") or 0),
        priority_class=str(priority_class) if priority_class else None,
        priority=priority,
        basic=gang is None,
        topology_keys=tuple(keys),
        workload=workload,
        preempts=spec.get("preemptionPolicy") != "Never",
        preemptible=_preemptible(meta),
    )


@dataclass(frozen=True, slots=True)
class MemberCounts:
    """Members of one group by state; ``scheduled`` counts pods with a node, assumed or bound."""

    pending: int = 0
    scheduled: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0


@dataclass(frozen=True, slots=True)
class GroupStatus:
    phase: Phase
    counts: MemberCounts
    reason: str
    message: str


def group_status(
    spec: GroupSpec,
    counts: MemberCounts,
    *,
    admitted: bool,
    waiting_reason: str | None,
    waited_seconds: float,
    binding: bool = False,
    holding: str | None = None,
) -> GroupStatus:
    """The phase a group is in and why, from its members and the last cycle's verdict.

    ``binding``: this cycle placed the gang and its binds are under way; its
    members are not counted as placed until the watch confirms them.

    ``holding``: the gang lost members while it ran and holds their room for
    their replacements; it still runs, one short, and says so.

    A group that outlived ``scheduleTimeoutSeconds`` without being placed turns
    Unschedulable but keeps waiting: the timeout tells people, it does not
    give up on their job.
    """
    live = counts.scheduled  # non-terminal members with a node
    done = counts.succeeded + counts.failed
    total = counts.pending + live + done
    if total > 0 and counts.pending == 0 and live == 0 and done >= spec.min_member:
        if counts.failed and counts.succeeded < spec.min_member:
            return GroupStatus(Phase.FAILED, counts, "MembersFailed",
                               f"{counts.failed} of {total} members failed")
        return GroupStatus(Phase.SUCCEEDED, counts, "MembersSucceeded",
                           f"{counts.succeeded} of {total} members succeeded")
    if live + counts.succeeded >= spec.min_member and live > 0:
        return GroupStatus(Phase.RUNNING, counts, "GangScheduled",
                           f"{live} members placed, minMember {spec.min_member}")
    if holding and live > 0:
        return GroupStatus(Phase.RUNNING, counts, "ReplacementHeld",
                           f"{live} of minMember {spec.min_member} members placed; {holding}")
    if binding:
        return GroupStatus(Phase.INQUEUE, counts, "Binding", "members placed, binding")
    if waiting_reason and spec.timeout_seconds is not None and (
        waited_seconds >= spec.timeout_seconds
    ):
        return GroupStatus(
            Phase.UNSCHEDULABLE, counts, "ScheduleTimeout",
            f"not placed within {spec.timeout_seconds}s: {waiting_reason}",
        )
    if admitted:
        message = waiting_reason or (
            f"admitted; {live} of {spec.min_member} members placed"
        )
        return GroupStatus(Phase.INQUEUE, counts, "Admitted" if not waiting_reason
                           else "Unschedulable", message)
    return GroupStatus(Phase.PENDING, counts, "Unschedulable" if waiting_reason else "Waiting",
                       waiting_reason or "waiting for its members")
