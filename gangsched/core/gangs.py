"""Gangs as the cycle sees them, gathered from the pods and PodGroups of a snapshot.

Pure: the shell's mirror hands in what it holds; this decides which pods form
which gang, which gangs cannot be considered yet (their PodGroup is missing
or invalid) and what each group's members are doing, for its status.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from gangsched.core.model import (
    DEFAULT_QUEUE,
    Flavor,
    Gang,
    GangKey,
    GroupSpec,
    MemberCounts,
    NodeName,
    Pod,
    Policy,
    solo_gang_key,
)
from gangsched.core.resources import Resources


@dataclass(frozen=True, slots=True)
class Member:
    """A pod of ours (``schedulerName`` matches) with the group it names, if any."""

    pod: Pod
    group: GangKey | None
    running: bool = False
    succeeded: bool = False
    failed: bool = False


@dataclass(frozen=True, slots=True)
class Gathered:
    gangs: tuple[Gang, ...]
    bound_requests: Mapping[GangKey, Resources]
    counts: Mapping[GangKey, MemberCounts]
    orphans: Mapping[GangKey, tuple[Pod, ...]]
    """Pending pods naming a PodGroup that does not exist (yet): they wait, saying so."""
    finished: frozenset[GangKey] = field(default_factory=frozenset)
    solo_of: Mapping[GangKey, GangKey] = field(default_factory=dict)
    """The one-pod gangs of basic-policy groups, to the group they are counted in."""
    bound_pods: Mapping[GangKey, tuple[Pod, ...]] = field(default_factory=dict)
    """Each gang's live pods on nodes: what evicting the gang whole would free."""


def gather(
    members: Iterable[Member],
    groups: Mapping[GangKey, GroupSpec],
    policies: Mapping[GangKey, Policy] | None = None,
    finished_before: frozenset[GangKey] = frozenset(),
    priority_classes: Mapping[str, int] | None = None,
    never_preempting_classes: frozenset[str] = frozenset(),
) -> Gathered:
    """Group our pods into gangs; every unfinished PodGroup is a gang even with no pods.

    A group with no pods yet still takes part: it may need admission (Volcano
    groups move to Inqueue before training-operator creates any pod) or hold a
    reservation (a Spark job between driver and executors).

    A gang's priority is the higher of its PodGroup's ``priorityClassName``
    and its pods' own priorities, so a group can be ordered before its pods exist.

    ``finished_before`` are groups whose status already says they finished. Once
    their pods are deleted nothing else tells them from a group whose pods are
    yet to come, and taken for one they would be admitted again and hold their
    ``minResources`` for a job that is over. A new pending pod revives them.

    A native PodGroup is ours only through pods of ours that name it: with
    kube-scheduler running beside us, the others are its groups, not ours.

    A basic-policy group (native ``schedulingPolicy.basic``) is no gang: each
    of its pending pods is a gang of one, in the group's queue and at its
    priority, while the group still counts its members for its status.

    A gang may preempt unless its group or class says ``preemptionPolicy:
    Never`` or one of its pods does (their class set it); its priority counts
    its bound pods too, so a running gang is never taken for a lower one.

    A terminating pod (``deletionTimestamp`` set) is no member: it still holds
    its node's room (the snapshot counts it) but not its gang's place, so a
    new generation created while the old one terminates is placed whole or
    not at all, and preemption victims still terminating never make their
    gang look running again.
    """
    pending: dict[GangKey, list[Pod]] = defaultdict(list)
    counts: dict[GangKey, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    orphans: dict[GangKey, list[Pod]] = defaultdict(list)
    priority: dict[GangKey, int] = {}
    bound_on: dict[GangKey, set[NodeName]] = defaultdict(set)
    bound_pods: dict[GangKey, list[Pod]] = defaultdict(list)
    never: set[GangKey] = set()
    solo_of: dict[GangKey, GangKey] = {}
    for member in members:
        pod = member.pod
        if pod.terminating:
            continue
        key = member.group or solo_gang_key(pod.key)
        if member.group is not None and member.group not in groups:
            if pod.node_name is None and not pod.terminal:
                orphans[key].append(pod)
            continue
        spec = groups.get(key)
        if spec is not None and spec.basic and pod.node_name is None and not (
            member.succeeded or member.failed
        ):
            solo = solo_gang_key(pod.key)
            solo_of[solo] = key
            counts[key]["pending"] += 1
            pending[solo].append(pod if pod.gang == solo else replace(pod, gang=solo))
            priority[solo] = pod.priority
            if not pod.preempts:
                never.add(solo)
            continue
        tally = counts[key]
        if member.succeeded:
            tally["succeeded"] += 1
        elif member.failed:
            tally["failed"] += 1
        elif pod.node_name is not None:
            tally["scheduled"] += 1
            bound_on[key].add(pod.node_name)
            bound_pods[key].append(pod)
            priority[key] = max(priority.get(key, pod.priority), pod.priority)
            if member.running:
                tally["running"] += 1
        else:
            tally["pending"] += 1
            pending[key].append(pod if pod.gang == key else replace(pod, gang=key))
            priority[key] = max(priority.get(key, pod.priority), pod.priority)
            if not pod.preempts:
                never.add(key)

    gangs: list[Gang] = []
    finished: set[GangKey] = set()
    keys = set(pending) | set(groups)
    for key in sorted(keys):
        tally = counts.get(key, {})
        spec = groups.get(key)
        pods = tuple(sorted(pending.get(key, ()), key=lambda p: (p.created, p.key)))
        live = tally.get("scheduled", 0)
        done = tally.get("succeeded", 0) + tally.get("failed", 0)
        if spec is not None and not pods and not tally.get("pending") and live == 0 and (
            done >= spec.min_member or key in finished_before
        ):
            finished.add(key)
            continue
        if spec is not None and spec.basic:
            continue  # its pods are gangs of their own
        if spec is not None and spec.flavor is Flavor.NATIVE and key not in counts:
            continue  # no pod of ours in it: another scheduler's group, or none yet
        owner = groups.get(solo_of[key]) if key in solo_of else None
        if owner is not None:
            spec = owner
        if owner is not None or spec is None:
            created = pods[0].created if pods else 0.0
        else:
            created = spec.created
        gangs.append(
            Gang(
                key=key,
                min_member=1 if owner else spec.min_member if spec else 1,
                pending=pods,
                bound=live + tally.get("succeeded", 0),
                queue=spec.queue if spec else DEFAULT_QUEUE,
                min_resources=spec.min_resources if spec else Resources.zero(),
                priority=max(priority.get(key, 0), _group_priority(spec, priority_classes)),
                created=created,
                policy=(policies or {}).get(solo_of.get(key, key)),
                topology_keys=spec.topology_keys if spec and not owner else (),
                bound_on=frozenset(bound_on.get(key, ())),
                preempts=key not in never and (spec is None or (
                    spec.preempts and spec.priority_class not in never_preempting_classes)),
                preemptible=spec is None or spec.preemptible,
            )
        )
    return Gathered(
        gangs=tuple(gangs),
        bound_requests={key: Resources.sum(pod.requests for pod in pods)
                        for key, pods in bound_pods.items()},
        counts={
            key: MemberCounts(
                pending=t.get("pending", 0),
                scheduled=t.get("scheduled", 0),
                running=t.get("running", 0),
                succeeded=t.get("succeeded", 0),
                failed=t.get("failed", 0),
            )
            for key, t in counts.items()
        },
        orphans={key: tuple(pods) for key, pods in orphans.items()},
        finished=frozenset(finished),
        solo_of=solo_of,
        bound_pods={key: tuple(pods) for key, pods in bound_pods.items()},
    )


def _group_priority(spec: GroupSpec | None, classes: Mapping[str, int] | None) -> int:
    """The priority a group gives its gang: its own value, or its class's."""
    if spec is None:
        return 0
    if spec.priority is not None:
        return spec.priority
    return (classes or {}).get(spec.priority_class or "", 0)
