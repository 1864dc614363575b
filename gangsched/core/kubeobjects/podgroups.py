"""PodGroups of every flavour (ours, scheduler-plugins', Volcano's, native ones) read
into one spec, and the labels and annotations that name a pod's group.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from gangsched.core.kubeobjects.fields import (
    ObjectError,
    RawObject,
    list_at,
    mapping_at,
    owner_uids,
    str_at,
    timestamp,
)
from gangsched.core.model.objects import (
    DEFAULT_QUEUE,
    Flavor,
    GangKey,
    GroupClaim,
    GroupSpec,
    LevelRequest,
    Policy,
    QueueName,
    SubGroup,
    gang_key,
)
from gangsched.core.model.quantity import QuantityError
from gangsched.core.model.resources import Resources
from gangsched.core.model.runtimes import read_runtime

__all__ = [
    "COSCHEDULING_LABEL",
    "GROUP_LABEL",
    "POLICY_ANNOTATION",
    "PREEMPTIBLE_ANNOTATIONS",
    "QUEUE_ANNOTATION",
    "SUB_GROUP_LABEL",
    "VOLCANO_ANNOTATION",
    "VOLCANO_QUEUE_ANNOTATION",
    "GroupRecord",
    "annotations_of",
    "group_from_api",
    "group_key_of",
    "group_name_of",
    "group_record_from_api",
    "native_group_name",
    "native_priority",
    "native_topology_keys",
    "parent_name",
]


GROUP_LABEL = "scheduling.gangsched.io/pod-group"
SUB_GROUP_LABEL = "scheduling.gangsched.io/sub-group"
"""On a pod: the sub-group of its PodGroup's ``spec.topology.subGroups`` it is in."""
COSCHEDULING_LABEL = "scheduling.x-k8s.io/pod-group"
VOLCANO_ANNOTATION = "scheduling.k8s.io/group-name"
QUEUE_ANNOTATION = "scheduling.gangsched.io/queue"
"""Picks the Queue of a native PodGroup (or of its Workload): the native API has no queue."""
VOLCANO_QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
"""Volcano's queue annotation, honoured where a PodGroup's own field names no queue."""
PREEMPTIBLE_ANNOTATIONS = ("scheduling.gangsched.io/preemptible", "volcano.sh/preemptable")
"""``"false"`` on a PodGroup keeps its gang from ever being evicted for another."""
POLICY_ANNOTATION = "scheduling.gangsched.io/policy"
"""On a PodGroup: ``binpack`` or ``spread`` instead of the scheduler's policy."""


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


def group_key_of(obj: RawObject) -> GangKey:
    """The key of a PodGroup object, of any flavour, from its metadata."""
    meta = obj.get("metadata") or {}
    return gang_key(str(meta.get("namespace", "")), str(meta.get("name", "")))


def annotations_of(meta: Mapping[str, Any]) -> Mapping[str, Any]:
    annotations = meta.get("annotations") or {}
    return annotations if isinstance(annotations, Mapping) else {}


def _preemptible(meta: Mapping[str, Any]) -> bool:
    annotations = annotations_of(meta)
    return not any(
        str(annotations.get(name, "")).strip().lower() == "false"
        for name in PREEMPTIBLE_ANNOTATIONS
    )


def group_from_api(obj: RawObject, flavor: Flavor) -> GroupSpec:
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
    owners = owner_uids(meta, f"podgroup {key}")
    if flavor is Flavor.NATIVE:
        return replace(_native_group(key, meta, spec, created), owners=owners)
    min_member = spec.get("minMember", 1)
    if min_member is None:
        min_member = 1
    if not isinstance(min_member, int) or isinstance(min_member, bool) or min_member < 0:
        raise ObjectError(f"podgroup {key}: minMember {min_member!r} is not a whole number ≥ 0")
    raw_resources = spec.get("minResources") or {}
    if not isinstance(raw_resources, Mapping):
        raise ObjectError(f"podgroup {key}: minResources is not a map")
    try:
        min_resources = Resources.parse(_requested(raw_resources))
    except QuantityError as error:
        raise ObjectError(f"podgroup {key}: minResources: {error}") from error
    queue = (spec.get("queue") or annotations_of(meta).get(VOLCANO_QUEUE_ANNOTATION)
             or DEFAULT_QUEUE)
    timeout = spec.get("scheduleTimeoutSeconds")
    if timeout is not None and (not isinstance(timeout, int) or timeout < 0):
        raise ObjectError(f"podgroup {key}: scheduleTimeoutSeconds {timeout!r} is not ≥ 0")
    priority_class = spec.get("priorityClassName") or None
    runtime, runtime_problem = read_runtime(annotations_of(meta))
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
        topology=_level_request(spec.get("topology"), key),
        expected_runtime=runtime,
        runtime_problem=runtime_problem,
        owners=owners,
    )


def _requested(raw: Mapping[str, Any]) -> dict[str, Any]:
    """``minResources`` as amounts pods request. Volcano's job controller writes a pod's
    quota usage there: ``requests.cpu`` beside ``cpu``, ``limits.*``, ``count/pods``. A
    ``requests.`` name is the request it names; limits and object counts are no room any
    node holds, and read as resources they would keep the group from admission forever."""
    amounts = {name: value for name, value in raw.items()
               if not str(name).startswith(("requests.", "limits.", "count/"))}
    for name, value in raw.items():
        if str(name).startswith("requests."):
            amounts.setdefault(str(name).removeprefix("requests."), value)
    return amounts


def _level_request(raw: object, key: GangKey) -> LevelRequest | None:
    """``spec.topology``: a Topology's name and the levels, by node label, asked of it."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping) or not isinstance(raw.get("name"), str):
        raise ObjectError(f"podgroup {key}: topology must be an object with a name")
    required, preferred = _levels_asked(raw, f"podgroup {key}: topology")
    subs = raw.get("subGroups") or []
    if not isinstance(subs, list):
        raise ObjectError(f"podgroup {key}: topology.subGroups must be a list")
    wait = raw.get("preferredWaitSeconds", 0)
    if not isinstance(wait, int) or isinstance(wait, bool) or wait < 0:
        raise ObjectError(f"podgroup {key}: topology.preferredWaitSeconds {wait!r} "
                          "is not a whole number ≥ 0")
    if wait and preferred is None:
        raise ObjectError(f"podgroup {key}: topology.preferredWaitSeconds needs a "
                          "preferred level to wait for")
    return LevelRequest(raw["name"], required, preferred,
                        sub_groups=tuple(_sub_group(sub, key, index)
                                         for index, sub in enumerate(subs)),
                        preferred_wait_s=wait)


def _levels_asked(raw: Mapping[str, Any], where: str) -> tuple[str | None, str | None]:
    """The ``required`` and ``preferred`` levels, by node label."""
    labels: list[str | None] = []
    for part in ("required", "preferred"):
        label = raw.get(part)
        if label is not None and (not isinstance(label, str) or not label):
            raise ObjectError(f"{where}.{part} must be a node label name")
        labels.append(label)
    return labels[0], labels[1]


def _sub_group(raw: object, key: GangKey, index: int) -> SubGroup:
    """One of ``spec.topology.subGroups``: a name its pods' label gives, a minMember, and
    the levels it keeps to."""
    where = f"podgroup {key}: topology.subGroups[{index}]"
    if not isinstance(raw, Mapping) or not isinstance(raw.get("name"), str) or not raw["name"]:
        raise ObjectError(f"{where} must be an object with a name")
    min_member = raw.get("minMember", 1)
    if not isinstance(min_member, int) or isinstance(min_member, bool) or min_member < 1:
        raise ObjectError(f"{where}.minMember {min_member!r} is not a whole number ≥ 1")
    required, preferred = _levels_asked(raw, where)
    return SubGroup(raw["name"], min_member, required, preferred)


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
    keys = native_topology_keys(spec, where)
    priority = native_priority(spec, where)
    annotations = annotations_of(meta)
    queue = annotations.get(QUEUE_ANNOTATION) or annotations.get(VOLCANO_QUEUE_ANNOTATION)
    workload_ref = spec.get("workloadRef")
    workload = None
    if not queue and isinstance(workload_ref, Mapping) and workload_ref.get("workloadName"):
        workload = f"{key.split('/', 1)[0]}/{workload_ref['workloadName']}"
    priority_class = spec.get("priorityClassName") or None
    runtime, runtime_problem = read_runtime(annotations)
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
        topology_keys=keys,
        workload=workload,
        preempts=spec.get("preemptionPolicy") != "Never",
        preemptible=_preemptible(meta),
        resource_claims=_group_claims(spec, where),
        uid=str(meta.get("uid") or ""),
        expected_runtime=runtime,
        runtime_problem=runtime_problem,
        parent=parent_name(spec, where),
    )


def native_topology_keys(spec: Mapping[str, Any], where: str) -> tuple[str, ...]:
    """The node labels of a native group's ``schedulingConstraints.topology``."""
    constraints = spec.get("schedulingConstraints") or {}
    topology = constraints.get("topology") if isinstance(constraints, Mapping) else None
    keys: list[str] = []
    for index, entry in enumerate(topology or ()):
        label = entry.get("key") if isinstance(entry, Mapping) else None
        if not isinstance(label, str) or not label:
            raise ObjectError(f"{where}: schedulingConstraints.topology[{index}].key "
                              "must be a node label name")
        keys.append(label)
    return tuple(keys)


def native_priority(spec: Mapping[str, Any], where: str) -> int | None:
    """A native group's ``spec.priority``, which the priority admission plugin fills in."""
    priority = spec.get("priority")
    if priority is not None and (not isinstance(priority, int) or isinstance(priority, bool)):
        raise ObjectError(f"{where}: priority {priority!r} is not an integer")
    return priority


def parent_name(spec: Mapping[str, Any], where: str) -> str | None:
    """``spec.parentCompositePodGroupName``, where the CompositePodGroup API names one."""
    parent = spec.get("parentCompositePodGroupName")
    if parent is None:
        return None
    return str_at(parent, where, "spec.parentCompositePodGroupName")


def _group_claims(spec: Mapping[str, Any], where: str) -> tuple[GroupClaim, ...]:
    """Native ``spec.resourceClaims`` (DRAWorkloadResourceClaims)."""
    found = []
    for index, item in enumerate(list_at(spec.get("resourceClaims"), where,
                                       "spec.resourceClaims")):
        entry = mapping_at(item, where, f"spec.resourceClaims[{index}]")
        claim, template = entry.get("resourceClaimName"), entry.get("resourceClaimTemplateName")
        found.append(GroupClaim(
            str_at(entry.get("name"), where, f"spec.resourceClaims[{index}].name"),
            claim if isinstance(claim, str) and claim else None,
            template if isinstance(template, str) and template else None))
    return tuple(found)


@dataclass(frozen=True, slots=True)
class GroupRecord:
    """A PodGroup as the mirror holds it: its spec, or why it has none, and the status
    it carries (whose conditions a status write keeps)."""

    key: GangKey
    flavor: Flavor
    uid: str
    spec: GroupSpec | None
    error: str | None
    status: Mapping[str, Any]
    policy: Policy | None


def group_record_from_api(body: RawObject, flavor: Flavor) -> GroupRecord:
    """Never raises: a group that cannot be read is held with its error, so its status
    and an Event say why it waits rather than the scheduler stopping.

    An unknown placement policy is not ignored either: the group waits, saying
    so, rather than running with a placement its author did not ask for.
    """
    meta = body.get("metadata") or {}
    key = group_key_of(body)
    spec: GroupSpec | None = None
    error: str | None = None
    try:
        spec = group_from_api(body, flavor)
    except ObjectError as exc:
        error = str(exc)
    policy_text = annotations_of(meta).get(POLICY_ANNOTATION)
    policy = None
    if policy_text:
        try:
            policy = Policy(policy_text)
        except ValueError:
            spec = None
            error = error or (
                f"podgroup {key}: annotation {POLICY_ANNOTATION}={policy_text!r} "
                f"is not one of {', '.join(p.value for p in Policy)}"
            )
    status = body.get("status")
    return GroupRecord(
        key=key, flavor=flavor, uid=str(meta.get("uid", "")), spec=spec, error=error,
        status=dict(status) if isinstance(status, Mapping) else {}, policy=policy,
    )
