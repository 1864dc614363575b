"""Every pod under its queue's rules, through ``core.step``: a pod in no PodGroup is counted,
capped and evictable while it runs; a gang's priority is its PodGroup's or its lowest
member's; a tenant's opt-out annotation keeps priority preemption off its gangs, never
its queue's reclaim."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from gangsched.core.actions import (
    Bind,
    Evict,
    MarkUnschedulable,
    TellRuntimeProblem,
    WriteGroupStatus,
    WriteQueueStatus,
)
from gangsched.core.kubeobjects.groups import Flavor, GroupSpec
from gangsched.core.model.objects import GangKey, Node, Pod, QueueName, QueueSpec, solo_gang_key
from gangsched.core.model.resources import Capability, Resources
from gangsched.core.placement.capacity import Snapshot
from gangsched.core.reasons import CapabilityExceeded
from gangsched.core.stages.gangs import Member
from gangsched.core.state import State
from gangsched.core.step import StepConfig, Stepped, step
from gangsched.core.view import StepView
from tests.unit.test_cycle import DEFAULT, node, pod
from tests.unit.test_step import Cluster, Group, Record

PREEMPTING = StepConfig(preemption=True)
RECLAIMING = StepConfig(preemption=True, reclaim=True)


def lone(name: str, cores: int = 1, *, on: str | None = None, priority: int = 0) -> Pod:
    """A pod in no PodGroup."""
    return replace(pod(f"ns/{name}", cores, on=on), priority=priority, created=float(len(name)))


def member(group: str, name: str, cores: int = 1, *, on: str | None = None,
           priority: int = 0, millicores: int | None = None) -> Pod:
    made = replace(pod(f"ns/{name}", cores, gang=f"ns/{group}", on=on), priority=priority)
    if millicores is not None:
        made = replace(made, requests=Resources.of({"cpu": millicores, "pods": 1}))
    return made


def podgroup(name: str, min_member: int, *, queue: QueueName = DEFAULT,
             priority_class: str | None = None, preemptible: bool = True) -> Group:
    key = GangKey(f"ns/{name}")
    return Group(key, Flavor.GANGSCHED, f"uid-{name}", GroupSpec(
        key, Flavor.GANGSCHED, min_member=min_member, min_resources=Resources.zero(),
        queue=queue, created=0.0, generation=1, priority_class=priority_class,
        preemptible=preemptible))


def run(nodes: list[Node], pods: list[Pod], *, groups: Iterable[Group] = (),
        queues: Iterable[QueueSpec] = (), config: StepConfig = PREEMPTING,
        classes: Mapping[str, int] | None = None) -> Stepped:
    specs = {DEFAULT: QueueSpec(DEFAULT)}
    specs.update({spec.name: spec for spec in queues})
    cluster = Cluster(
        snapshot=Snapshot.build(nodes, pods),
        members=tuple(Member(p, p.gang, running=p.node_name is not None) for p in pods),
        groups={g.key: g for g in groups},
        queues=specs,
        pods={p.key: Record(p, f"uid-{p.key}") for p in pods},
    )
    return step(State(), StepView(cluster, priority_classes=classes or {}), 1000.0, config)


def evictions(stepped: Stepped) -> list[tuple[tuple[GangKey, ...], QueueName | None]]:
    return [(a.preemption.victims, a.preemption.reclaim_for)
            for a in stepped.actions if isinstance(a, Evict)]


def binds(stepped: Stepped) -> list[GangKey]:
    return [a.placement.gang for a in stepped.actions if isinstance(a, Bind)]


def capped_default(cores: int) -> QueueSpec:
    return QueueSpec(DEFAULT, capability=Capability.parse({"cpu": cores}))


def test_running_pods_in_no_podgroup_count_against_their_queues_cap() -> None:
    # default may hold 2 cpu; two lone pods run, two wait: they stay waiting.
    pods = [lone("a", on="n1"), lone("b", on="n1"), lone("c"), lone("d")]
    stepped = run([node("n1", 8)], pods, queues=[capped_default(2)])
    assert binds(stepped) == []
    running = pods[0].requests + pods[1].requests
    waiting = {u.gang: u.reason for u in stepped.result.unplaceable}
    for one in pods[2:]:
        reason = waiting[solo_gang_key(one.key)]
        assert isinstance(reason, CapabilityExceeded)
        assert (reason.queue, reason.allocated, reason.placed) == (DEFAULT, running, one.requests)
    (status,) = [a.status for a in stepped.actions
                 if isinstance(a, WriteQueueStatus) and a.queue == DEFAULT]
    assert status.allocated == running


def test_a_running_pod_in_no_podgroup_gets_no_group_status_nor_reason() -> None:
    running = lone("a", on="n1")
    stepped = run([node("n1", 8)], [running])
    told = [a for a in stepped.actions
            if isinstance(a, (WriteGroupStatus, MarkUnschedulable, TellRuntimeProblem))]
    assert told == []
    assert stepped.result.unplaceable == () and stepped.result.placements == ()


def test_a_pod_in_no_podgroup_preempts_and_is_preempted_by_priority() -> None:
    low, high = lone("low", on="n1", priority=0), lone("high", priority=1000)
    stepped = run([node("n1", 1)], [low, high])
    assert evictions(stepped) == [((solo_gang_key(low.key),), None)]
    # Without preemption it only waits.
    assert evictions(run([node("n1", 1)], [low, high], config=StepConfig())) == []


def test_running_pods_in_no_podgroup_are_reclaimed_from_a_queue_above_its_share() -> None:
    # default's lone pods took both cpus while b was empty; b's gang reclaims one of them.
    queue_b = QueueName("b")
    pods = [lone("a", on="n1"), lone("bb", on="n1"), member("job", "job-0")]
    stepped = run([node("n1", 2)], pods, groups=[podgroup("job", 1, queue=queue_b)],
                  queues=[QueueSpec(queue_b)], config=RECLAIMING)
    ((victims, reclaim_for),) = evictions(stepped)
    assert reclaim_for == queue_b and len(victims) == 1
    assert victims[0] in {solo_gang_key(pods[0].key), solo_gang_key(pods[1].key)}


def test_one_member_of_a_high_class_never_lifts_a_gang_over_a_running_one() -> None:
    # A priority-500 gang runs on the only node; a gang of three priority-0 pods and one
    # 10m pod of priority 1000 waits: it is a priority-0 gang, and evicts nobody.
    running = [member("mid", f"mid-{i}", 2, on="n1", priority=500) for i in range(2)]
    mixed = [*(member("mixed", f"mixed-{i}", 1) for i in range(3)),
             member("mixed", "mixed-tiny", priority=1000, millicores=10)]
    groups = [podgroup("mid", 2), podgroup("mixed", 4)]
    stepped = run([node("n1", 4)], [*running, *mixed], groups=groups)
    assert evictions(stepped) == [] and binds(stepped) == []
    # Its PodGroup naming a class every member carries is what ranks it.
    classed = [replace(p, priority=1000) for p in mixed]
    stepped = run([node("n1", 4)], [*running, *classed],
                  groups=[podgroup("mid", 2), podgroup("mixed", 4, priority_class="high")],
                  classes={"high": 1000})
    assert evictions(stepped) == [((GangKey("ns/mid"),), None)]


def test_a_tenants_opt_out_keeps_priority_preemption_off_but_not_reclaim() -> None:
    # Queue a fills the node: an opted-out gang of priority 0 and one of priority 2000.
    queue_a, queue_b = QueueName("a"), QueueName("b")
    groups = [podgroup("held", 2, queue=queue_a, preemptible=False),
              podgroup("keep", 2, queue=queue_a)]
    running = [*(member("held", f"held-{i}", on="n1") for i in range(2)),
               *(member("keep", f"keep-{i}", on="n1", priority=2000) for i in range(2))]
    waiting = [member("job", "job-0", 2, priority=1000)]
    queues = [QueueSpec(queue_a), QueueSpec(queue_b)]

    def in_queue(queue: QueueName) -> list[Group]:
        return [*groups, podgroup("job", 1, queue=queue)]

    # Priority alone does not take it: the annotation is the tenant's word for that.
    by_priority = run([node("n1", 4)], [*running, *waiting], groups=in_queue(queue_a),
                      queues=queues, config=RECLAIMING)
    assert evictions(by_priority) == []
    # Queue a borrows b's half: b reclaims the lowest of a's gangs, annotated or not.
    reclaimed = run([node("n1", 4)], [*running, *waiting], groups=in_queue(queue_b),
                    queues=queues, config=RECLAIMING)
    assert evictions(reclaimed) == [((GangKey("ns/held"),), queue_b)]
    # Only the admin's reclaimable: false keeps it.
    kept = run([node("n1", 4)], [*running, *waiting], groups=in_queue(queue_b),
               queues=[QueueSpec(queue_a, reclaimable=False), QueueSpec(queue_b)],
               config=RECLAIMING)
    assert evictions(kept) == []
