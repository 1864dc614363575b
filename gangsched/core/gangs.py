"""Gangs as the cycle sees them, gathered from the pods and PodGroups of a snapshot.

Pure: the shell's mirror hands in what it holds; this decides which pods form
which gang, which gangs cannot be considered yet (their PodGroup is missing
or invalid) and what each group's members are doing, for its status.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from gangsched.core.cycle import DEFAULT_QUEUE
from gangsched.core.groups import GroupSpec, MemberCounts, solo_gang_key
from gangsched.core.model import Gang, GangKey, Pod, Policy
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


def gather(
    members: Iterable[Member],
    groups: Mapping[GangKey, GroupSpec],
    policies: Mapping[GangKey, Policy] | None = None,
    finished_before: frozenset[GangKey] = frozenset(),
    priority_classes: Mapping[str, int] | None = None,
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
    """
    pending: dict[GangKey, list[Pod]] = defaultdict(list)
    bound_requests: dict[GangKey, Resources] = defaultdict(Resources.zero)
    counts: dict[GangKey, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    orphans: dict[GangKey, list[Pod]] = defaultdict(list)
    priority: dict[GangKey, int] = {}
    for member in members:
        pod = member.pod
        key = member.group or solo_gang_key(pod.key)
        if member.group is not None and member.group not in groups:
            if pod.node_name is None and not pod.terminal:
                orphans[key].append(pod)
            continue
        tally = counts[key]
        if member.succeeded:
            tally["succeeded"] += 1
        elif member.failed:
            tally["failed"] += 1
        elif pod.node_name is not None:
            tally["scheduled"] += 1
            bound_requests[key] = bound_requests[key] + pod.requests
            if member.running:
                tally["running"] += 1
        else:
            tally["pending"] += 1
            pending[key].append(replace(pod, gang=key))
            priority[key] = max(priority.get(key, pod.priority), pod.priority)

    gangs: list[Gang] = []
    finished: set[GangKey] = set()
    keys = set(pending) | set(groups)
    for key in sorted(keys):
        tally = counts.get(key, {})
        spec = groups.get(key)
        pods = tuple(sorted(pending.get(key, ()), key=lambda p: (p.created, p.key)))
        live = tally.get("scheduled", 0)
        done = tally.get("succeeded", 0) + tally.get("failed", 0)
        if spec is not None and not pods and live == 0 and (
            done >= spec.min_member or key in finished_before
        ):
            finished.add(key)
            continue
        gangs.append(
            Gang(
                key=key,
                min_member=spec.min_member if spec else 1,
                pending=pods,
                bound=live + tally.get("succeeded", 0),
                queue=spec.queue if spec else DEFAULT_QUEUE,
                min_resources=spec.min_resources if spec else Resources.zero(),
                priority=max(
                    priority.get(key, 0),
                    (priority_classes or {}).get(spec.priority_class or "", 0) if spec else 0,
                ),
                created=spec.created if spec else (pods[0].created if pods else 0.0),
                policy=(policies or {}).get(key),
            )
        )
    return Gathered(
        gangs=tuple(gangs),
        bound_requests=dict(bound_requests),
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
    )
