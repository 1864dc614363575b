"""Native CompositePodGroups (``scheduling.k8s.io/v1alpha3``) folded into gangs.

Kubernetes 1.37 keeps a native PodGroup's ``schedulingConstraints.topology``
to one node label. Two levels are said with a CompositePodGroup: its child
PodGroups name it in ``spec.parentCompositePodGroupName``, it requires one
domain of its own label (a block) and each child one of the child's (a rack).
That is a gangsched gang with sub-groups, and it is read as one: the
composite's gang holds the pods of every child, each child is a sub-group
(its ``gang.minCount`` the sub-group's minMember, its topology key the
sub-group's required level) and the composite's key is the gang's required
level, so the whole is placed all-or-nothing with each child inside one
domain of its key and all of them inside one domain of the composite's.

What the model does not hold is read the simplest way that stays correct:

- ``minGroupCount`` below the number of children: every child present is
  placed with the others, never a part of them (kube-scheduler may start with
  ``minGroupCount`` of them). With fewer children than ``minGroupCount`` the
  gang counts a member missing for each child still to come, and waits.
- a ``basic`` composite schedules its children independently, which is what
  basic means: each stays a gang of its own.
- a composite with a parent composite (depth beyond two), a cycle of
  composites, or a parent that does not exist: the child PodGroup waits, and
  its status and its pods' Events say why.

Pure: the mirror folds what it holds into every view.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from gangsched.core.kubeobjects.fields import ObjectError, RawObject, timestamp
from gangsched.core.kubeobjects.podgroups import (
    QUEUE_ANNOTATION,
    GroupRecord,
    annotations_of,
    group_key_of,
    native_priority,
    native_topology_keys,
    parent_name,
)
from gangsched.core.model.objects import (
    Flavor,
    GangKey,
    GroupSpec,
    LevelRequest,
    QueueName,
    SubGroup,
    gang_key,
)
from gangsched.core.model.resources import Resources

__all__ = [
    "COMPOSITE_API",
    "COMPOSITE_PREFIX",
    "Composite",
    "CompositeRecord",
    "Folded",
    "composite_gang_key",
    "composite_record_from_api",
    "fold_composites",
]

COMPOSITE_API = "scheduling.k8s.io/v1alpha3"
COMPOSITE_PREFIX = "composite:"
"""Before a composite's name in its gang's key: apart from a PodGroup of the same name."""


def composite_gang_key(namespace: str, name: str) -> GangKey:
    return gang_key(namespace, f"{COMPOSITE_PREFIX}{name}")


@dataclass(frozen=True, slots=True)
class Composite:
    """A CompositePodGroup as folding reads it."""

    key: str
    """``namespace/name``."""
    uid: str
    created: float
    generation: int = 0
    parent: str | None = None
    """``spec.parentCompositePodGroupName``: a composite above it, in its namespace."""
    min_groups: int | None = None
    """``schedulingPolicy.gang.minGroupCount``; None for ``basic``."""
    topology_key: str | None = None
    """The node label of its one ``schedulingConstraints.topology`` entry."""
    queue: QueueName | None = None
    priority_class: str | None = None
    priority: int | None = None
    preempts: bool = True


@dataclass(frozen=True, slots=True)
class CompositeRecord:
    """A CompositePodGroup held by the mirror: read, or why it could not be."""

    key: str
    composite: Composite | None
    error: str | None = None


def composite_record_from_api(body: RawObject) -> CompositeRecord:
    """Never raises: an unreadable composite is held with its error, which its children's
    status then says."""
    key = str(group_key_of(body))
    try:
        return CompositeRecord(key, _composite(key, body))
    except ObjectError as error:
        return CompositeRecord(key, None, str(error))


def _composite(key: str, body: RawObject) -> Composite:
    where = f"compositepodgroup {key}"
    meta = body.get("metadata") or {}
    spec = body.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise ObjectError(f"{where}: spec is not an object")
    policy = spec.get("schedulingPolicy") or {}
    gang = policy.get("gang") if isinstance(policy, Mapping) else None
    min_groups = None
    if gang is not None:
        count = gang.get("minGroupCount") if isinstance(gang, Mapping) else None
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise ObjectError(f"{where}: schedulingPolicy.gang.minGroupCount {count!r} "
                              "is not a whole number ≥ 1")
        min_groups = count
    labels = native_topology_keys(spec, where)
    if len(labels) > 1:
        raise ObjectError(f"{where}: schedulingConstraints.topology holds one key, "
                          f"not {len(labels)}")
    queue = annotations_of(meta).get(QUEUE_ANNOTATION)
    return Composite(
        key=key, uid=str(meta.get("uid") or ""),
        created=timestamp(meta.get("creationTimestamp"), where, "metadata.creationTimestamp"),
        generation=int(meta.get("generation") or 0),
        parent=parent_name(spec, where),
        min_groups=min_groups,
        topology_key=labels[0] if labels else None,
        queue=QueueName(str(queue)) if queue else None,
        priority_class=str(spec.get("priorityClassName") or "") or None,
        priority=native_priority(spec, where),
        preempts=spec.get("preemptionPolicy") != "Never",
    )


@dataclass(frozen=True, slots=True)
class Folded:
    """The groups with each gang-policy composite's children folded into one gang."""

    groups: Mapping[GangKey, GroupRecord]
    parts: Mapping[GangKey, GangKey] = field(default_factory=dict)
    """Each folded child PodGroup to the composite's gang that holds its pods."""


def fold_composites(
    groups: Mapping[GangKey, GroupRecord], composites: Mapping[str, CompositeRecord]
) -> Folded:
    """The composite gangs and their children, with every child whose composite cannot be
    read, found or placed held with the error that says so."""
    if not composites and not any(
            g.spec is not None and g.spec.parent is not None for g in groups.values()):
        return Folded(groups)
    folded = dict(groups)
    children: dict[str, list[GroupRecord]] = {}
    for key, record in groups.items():
        spec = record.spec
        if spec is None or spec.parent is None:
            continue
        namespace = key.split("/", 1)[0]
        problem = _problem(namespace, spec.parent, composites)
        if problem is not None:
            folded[key] = replace(record, spec=None, error=f"podgroup {key}: {problem}")
            continue
        parent = composites[f"{namespace}/{spec.parent}"]  # found and read: no problem
        if parent.composite is not None and parent.composite.min_groups is not None:
            children.setdefault(parent.key, []).append(record)
        # a basic composite leaves its children gangs of their own
    parts: dict[GangKey, GangKey] = {}
    for composite_key, records in children.items():
        composite = composites[composite_key].composite
        assert composite is not None
        gang = _gang_record(composite, sorted(records, key=lambda r: r.key))
        folded[gang.key] = gang
        for record in records:
            assert record.spec is not None
            folded[record.key] = replace(record, spec=replace(record.spec, composite=gang.key))
            parts[record.key] = gang.key
    return Folded(folded, parts)


def _problem(namespace: str, name: str, composites: Mapping[str, CompositeRecord]
             ) -> str | None:
    """Why the composite a child names cannot place it, or None: it does not exist (yet),
    it cannot be read, or it sits under another composite (a cycle, or deeper than
    gangsched places)."""
    record = composites.get(f"{namespace}/{name}")
    if record is None:
        return f"its parent CompositePodGroup {name} does not exist"
    if record.composite is None:
        return f"its parent CompositePodGroup cannot be read: {record.error}"
    chain = [name]
    above = record.composite.parent
    while above is not None:
        if above in chain:
            loop = " → ".join([*chain[chain.index(above):], above])
            return f"Invalid: CompositePodGroups {loop} form a cycle"
        chain.append(above)
        upper = composites.get(f"{namespace}/{above}")
        above = upper.composite.parent if upper is not None and upper.composite else None
    if len(chain) > 1:
        return (f"its parent CompositePodGroup {name} has a parent of its own "
                f"({' → '.join(chain)}): gangsched places a CompositePodGroup only directly "
                "above its PodGroups")
    return None


def _gang_record(composite: Composite, children: list[GroupRecord]) -> GroupRecord:
    """The gang of a gang-policy composite: every child a sub-group inside the composite's
    domain; a member counted missing for each child ``minGroupCount`` still waits for."""
    specs = [record.spec for record in children if record.spec is not None]
    namespace, name = composite.key.split("/", 1)
    key = composite_gang_key(namespace, name)
    keys = [label for label in (composite.topology_key, *(s.topology_keys[0] for s in specs
                                                           if s.topology_keys))
            if label is not None]
    levels = tuple(dict.fromkeys(keys))
    subs = tuple(SubGroup(spec.key.split("/", 1)[1], spec.min_member,
                          spec.topology_keys[0] if spec.topology_keys else None)
                 for spec in specs)
    missing = max(0, (composite.min_groups or 0) - len(specs))
    return GroupRecord(
        key=key, flavor=Flavor.NATIVE, uid=composite.uid,
        spec=GroupSpec(
            key=key, flavor=Flavor.NATIVE,
            min_member=sum(spec.min_member for spec in specs) + missing,
            min_resources=Resources.zero(),
            queue=composite.queue or specs[0].queue,
            created=composite.created, generation=composite.generation,
            priority_class=composite.priority_class, priority=composite.priority,
            # Sub-groups even with no level: each child's minCount holds on its own.
            topology=LevelRequest(f"CompositePodGroup {name}", composite.topology_key,
                                  levels=levels, sub_groups=subs),
            preempts=composite.preempts and all(spec.preempts for spec in specs),
            preemptible=all(spec.preemptible for spec in specs),
            resource_claims=tuple(c for spec in specs for c in spec.resource_claims),
            uid=composite.uid, parts=tuple(spec.key for spec in specs),
        ),
        error=None, status={}, policy=next((r.policy for r in children if r.policy), None),
    )
