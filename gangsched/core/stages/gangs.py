"""Gangs as the cycle sees them, gathered from the pods and PodGroups of a snapshot.

Pure: the shell's mirror hands in what it holds; this decides which pods form
which gang, which gangs cannot be considered yet (their PodGroup is missing
or invalid) and what each group's members are doing, for its status.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace

from gangsched.core.model.objects import (
    DEFAULT_QUEUE,
    Flavor,
    Gang,
    GangKey,
    GroupSpec,
    MemberCounts,
    NodeName,
    Pod,
    Policy,
    VolumeLimits,
    solo_gang_key,
)
from gangsched.core.model.resources import Resources


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
    invalid: Mapping[GangKey, str] = field(default_factory=dict)
    """Groups whose spec is readable but contradicts their pods, and why: they are
    reported invalid and their pods wait as those of any invalid group."""
    volume_limits: VolumeLimits = field(default_factory=VolumeLimits)
    """What the pending pods' volumes ask of the nodes' CSI limits and drivers: the
    cycle's snapshot is made to offer it (core.placement.volumelimits)."""
    theirs: frozenset[GangKey] = field(default_factory=frozenset)
    """Groups named by pods of other schedulers and by none of ours: another scheduler's
    groups, which get no gang, no status and no count from this one."""


def fold_members(members: Iterable[Member], parts: Mapping[GangKey, GangKey]
                 ) -> tuple[Member, ...]:
    """The members with each child PodGroup folded into a CompositePodGroup's gang
    (``parts``, core.kubeobjects.composites) in that gang, in the child's sub-group."""
    if not parts:
        return tuple(members)
    return tuple(
        member if member.group is None or (gang := parts.get(member.group)) is None
        else replace(member, group=gang,
                     pod=replace(member.pod, sub_group=member.group.split("/", 1)[1]))
        for member in members)


def gather(
    members: Iterable[Member],
    groups: Mapping[GangKey, GroupSpec],
    policies: Mapping[GangKey, Policy] | None = None,
    finished_before: frozenset[GangKey] = frozenset(),
    priority_classes: Mapping[str, int] | None = None,
    never_preempting_classes: frozenset[str] = frozenset(),
    named_by_others: AbstractSet[GangKey] = frozenset(),
) -> Gathered:
    """Group our pods into gangs; every unfinished PodGroup is a gang even with no pods.

    A group with no pods yet still takes part: it may need admission (Volcano
    groups move to Inqueue before training-operator creates any pod) or hold a
    reservation (a Spark job between driver and executors).

    A gang's priority is its PodGroup's ``priorityClassName`` value when the
    class is known, else the lowest priority the API server admitted on its
    live members, pending and bound (their ``spec.priority``). The class is
    safe to take because it is checked against every member: a group naming
    a known PriorityClass whose value is not its pods' priority is invalid
    (``invalid``), and its pods wait; a PodGroup is no pod, so no
    ResourceQuota priority scope nor the Priority admission plugin checks the
    class it names. Without one, the lowest member decides, so that one pod
    of a high class (a 10m sidecar job of a quota-limited class) cannot lift
    a whole gang of low-priority pods over others and preempt with it. The
    group's own ``spec.priority`` only orders a group with no pods yet.

    ``finished_before`` are groups whose status already says they finished. Once
    their pods are deleted nothing else tells them from a group whose pods are
    yet to come, and taken for one they would be admitted again and hold their
    ``minResources`` for a job that is over. A new pending pod revives them.

    A PodGroup of any flavour that pods of other schedulers name
    (``named_by_others``) and no pod of ours does is theirs (``theirs``): a
    second scheduler sharing the PodGroup API (scheduler-plugins'
    coscheduling, another gangsched by another name) places it and writes its
    status. It is ours again as soon as a pod of ours names it. A native
    PodGroup is ours only once a pod of ours names it, not before: with
    kube-scheduler running beside us, the others are its groups.

    A pod in no PodGroup is a gang of one of its queue (its
    ``scheduling.gangsched.io/queue`` annotation, else ``default``) for its whole
    life, pending and bound: once bound it still counts in its queue's usage and
    caps, and may be evicted by priority preemption and by reclaim, as any gang.

    A basic-policy group (native ``schedulingPolicy.basic``) is no gang: each
    of its pending pods is a gang of one, in the group's queue and at its
    priority, while the group still counts its members for its status.

    A gang may preempt unless its group or class says ``preemptionPolicy:
    Never`` or one of its pods does (their class set it); its priority counts
    its bound pods too, so a running gang is ranked by every member it has.

    A terminating pod (``deletionTimestamp`` set) is no member: it still holds
    its node's room (the snapshot counts it) but not its gang's place, so a
    new generation created while the old one terminates is placed whole or
    not at all, and preemption victims still terminating never make their
    gang look running again.
    """
    members = tuple(members)
    invalid = _priority_mismatches(members, groups, priority_classes or {})
    if invalid:
        groups = {key: spec for key, spec in groups.items() if key not in invalid}
    tally = _Tally()
    for member in members:
        tally.add(member, groups)
    theirs = frozenset(key for key in named_by_others if key not in tally.named)
    gangs, finished = _gangs(tally, groups, theirs, finished_before, policies or {},
                             priority_classes or {}, never_preempting_classes)
    return tally.gathered(gangs, finished, invalid, theirs)


def _gangs(
    tally: _Tally, groups: Mapping[GangKey, GroupSpec], theirs: frozenset[GangKey],
    finished_before: frozenset[GangKey], policies: Mapping[GangKey, Policy],
    priority_classes: Mapping[str, int], never_preempting_classes: frozenset[str],
) -> tuple[tuple[Gang, ...], frozenset[GangKey]]:
    """The gangs of the tally's pods and of the groups, and the groups that finished (see
    :func:`gather`)."""
    gangs: list[Gang] = []
    finished: set[GangKey] = set()
    lone_bound = {key for key in tally.bound_pods if key not in groups}
    for key in sorted(set(tally.pending) | set(groups) | lone_bound):
        if key in theirs:
            continue  # another scheduler's group
        spec = groups.get(key)
        if spec is not None and tally.done(key, spec.min_member, key in finished_before):
            finished.add(key)
            continue
        if spec is not None and spec.basic:
            continue  # its pods are gangs of their own
        if spec is not None and spec.flavor is Flavor.NATIVE and key not in tally.counts:
            continue  # no pod of ours in it: another scheduler's group, or none yet
        owner = groups.get(tally.solo_of[key]) if key in tally.solo_of else None
        gang = tally.gang(key, owner or spec, solo=owner is not None,
                          priority_classes=priority_classes,
                          never_preempting_classes=never_preempting_classes)
        policy = policies.get(tally.solo_of.get(key, key))
        gangs.append(gang if policy is None else replace(gang, policy=policy))
    return tuple(gangs), frozenset(finished)


def _priority_mismatches(
    members: Iterable[Member], groups: Mapping[GangKey, GroupSpec],
    priority_classes: Mapping[str, int],
) -> dict[GangKey, str]:
    """Groups whose ``priorityClassName`` names a class of another value than a member's
    admitted priority. A class not known (yet) is not judged: the gang's priority
    comes from its pods either way."""
    found: dict[GangKey, str] = {}
    for member in members:
        key = member.group
        spec = groups.get(key) if key is not None else None
        if key is None or spec is None or spec.priority_class is None or member.pod.terminating:
            continue
        value = priority_classes.get(spec.priority_class)
        if value is None or value == member.pod.priority or key in found:
            continue
        found[key] = (
            f"priorityClassName {spec.priority_class} (value {value}) does not match the "
            f"priority its pods were admitted with (pod {member.pod.key} has "
            f"{member.pod.priority}): set the same class on the pods, or none on the PodGroup")
    return found


@dataclass
class _Tally:
    """Our pods sorted by gang in one pass: pending, bound, finished, orphaned."""

    named: set[GangKey] = field(default_factory=set)
    """Every group a member names, whether it exists, is valid or is done."""
    pending: dict[GangKey, list[Pod]] = field(default_factory=lambda: defaultdict(list))
    counts: dict[GangKey, dict[str, int]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(int)))
    orphans: dict[GangKey, list[Pod]] = field(default_factory=lambda: defaultdict(list))
    priority: dict[GangKey, int] = field(default_factory=dict)
    """The lowest priority of each gang's live members, pending and bound."""
    bound_on: dict[GangKey, set[NodeName]] = field(default_factory=lambda: defaultdict(set))
    bound_pods: dict[GangKey, list[Pod]] = field(default_factory=lambda: defaultdict(list))
    never: set[GangKey] = field(default_factory=set)
    """Gangs with a pod that may not preempt."""
    solo_of: dict[GangKey, GangKey] = field(default_factory=dict)

    def gathered(self, gangs: tuple[Gang, ...], finished: frozenset[GangKey],
                 invalid: dict[GangKey, str], theirs: frozenset[GangKey]) -> Gathered:
        """The gangs made of this tally, with what the tally counted of every gang."""
        return Gathered(
            gangs=gangs,
            bound_requests={key: Resources.sum(pod.requests for pod in pods)
                            for key, pods in self.bound_pods.items()},
            counts={key: MemberCounts(**t) for key, t in self.counts.items()},
            orphans={key: tuple(pods) for key, pods in self.orphans.items()},
            finished=finished,
            solo_of=self.solo_of,
            bound_pods={key: tuple(pods) for key, pods in self.bound_pods.items()},
            invalid=invalid,
            theirs=theirs,
        )

    def add(self, member: Member, groups: Mapping[GangKey, GroupSpec]) -> None:
        pod = member.pod
        if pod.terminating:
            return
        if member.group is not None:
            self.named.add(member.group)
        key = member.group or solo_gang_key(pod.key)
        if member.group is not None and member.group not in groups:
            if pod.node_name is None and not pod.terminal:
                self.orphans[key].append(pod)
            return
        spec = groups.get(key)
        if spec is not None and spec.basic and pod.node_name is None and not (
            member.succeeded or member.failed
        ):
            solo = solo_gang_key(pod.key)
            self.solo_of[solo] = key
            self.counts[key]["pending"] += 1
            self._pend(solo, pod)
            return
        tally = self.counts[key]
        if member.succeeded:
            tally["succeeded"] += 1
        elif member.failed:
            tally["failed"] += 1
        elif pod.node_name is not None:
            tally["scheduled"] += 1
            self.bound_on[key].add(pod.node_name)
            self.bound_pods[key].append(pod)
            self._rank(key, pod)
            if member.running:
                tally["running"] += 1
        else:
            tally["pending"] += 1
            self._pend(key, pod)

    def done(self, key: GangKey, min_member: int, finished_before: bool) -> bool:
        """Nothing of the group waits or runs, and enough of it finished (or it had)."""
        counts = self.counts.get(key, {})
        if key in self.pending or counts.get("pending") or counts.get("scheduled"):
            return False
        return finished_before or counts.get("succeeded", 0) + counts.get("failed", 0) >= min_member

    def _bound_in(self, key: GangKey, spec: GroupSpec) -> tuple[tuple[str, NodeName], ...]:
        """The sub-group and node of each bound member in one, for a group with sub-groups."""
        if spec.topology is None or not spec.topology.sub_groups:
            return ()
        return tuple((name, pod.node_name) for pod in self.bound_pods.get(key, ())
                     if pod.node_name is not None and (name := pod.sub_group) is not None)

    def _pend(self, key: GangKey, pod: Pod) -> None:
        self.pending[key].append(pod if pod.gang == key else replace(pod, gang=key))
        self._rank(key, pod)
        if not pod.preempts:
            self.never.add(key)

    def _rank(self, key: GangKey, pod: Pod) -> None:
        """The lowest priority among the gang's live members: one member never lifts it."""
        self.priority[key] = min(self.priority.get(key, pod.priority), pod.priority)

    def gang(
        self,
        key: GangKey,
        spec: GroupSpec | None,
        *,
        solo: bool,
        priority_classes: Mapping[str, int],
        never_preempting_classes: frozenset[str],
    ) -> Gang:
        """The gang of ``key`` under ``spec``; a ``solo`` one is a pod of a basic group
        (``spec``), placed alone."""
        counts = self.counts.get(key, {})
        pods = tuple(sorted(self.pending.get(key, ()), key=lambda p: (p.created, p.key)))
        live = pods or self.bound_pods.get(key, ())
        return Gang(
            key=key,
            min_member=1 if solo or spec is None else spec.min_member,
            pending=pods,
            bound=counts.get("scheduled", 0) + counts.get("succeeded", 0),
            queue=spec.queue if spec else next(
                (pod.queue for pod in live if pod.queue), DEFAULT_QUEUE),
            min_resources=spec.min_resources if spec else Resources.zero(),
            priority=_gang_priority(spec, self.priority.get(key), priority_classes),
            created=(spec.created if spec and not solo
                     else min((pod.created for pod in live), default=0.0)),
            topology_keys=spec.topology_keys if spec and not solo else (),
            levels=spec.topology if spec and not solo else None,
            bound_on=frozenset(self.bound_on.get(key, ())),
            bound_in=self._bound_in(key, spec) if spec and not solo else (),
            preempts=key not in self.never and (spec is None or (
                spec.preempts and spec.priority_class not in never_preempting_classes)),
            preemptible=spec is None or spec.preemptible,
            group_claims=spec.resource_claims if spec and not solo else (),
            group_uid=spec.uid if spec else "",
            expected_runtime=spec.expected_runtime if spec else None,
            kueue_workload=spec.kueue_workload if spec else None,
        )


def _gang_priority(
    spec: GroupSpec | None, lowest_member: int | None, classes: Mapping[str, int]
) -> int:
    """The PodGroup's class value when it names a known class (checked against every
    member: ``_priority_mismatches``), else its lowest member's, else the group's own."""
    named = spec.priority_class if spec is not None else None
    if named is not None and named in classes:
        return classes[named]
    if lowest_member is not None:
        return lowest_member
    return _group_priority(spec, classes)


def _group_priority(spec: GroupSpec | None, classes: Mapping[str, int] | None) -> int:
    """The priority a group gives its gang: its own value, or its class's."""
    if spec is None:
        return 0
    if spec.priority is not None:
        return spec.priority
    return (classes or {}).get(spec.priority_class or "", 0)
