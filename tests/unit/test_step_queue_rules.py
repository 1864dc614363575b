"""Every pod under its queue's rules, through ``core.step``: a gang's priority is its
PodGroup's or its lowest member's."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from gangsched.core.actions import Bind, Evict
from gangsched.core.gangs import Member
from gangsched.core.groups import Flavor, GroupSpec
from gangsched.core.model import GangKey, Node, Pod, QueueName, QueueSpec
from gangsched.core.placement import Snapshot
from gangsched.core.resources import Resources
from gangsched.core.state import State
from gangsched.core.step import StepConfig, Stepped, step
from gangsched.core.view import StepView
from tests.unit.test_cycle import DEFAULT, node, pod
from tests.unit.test_step import Cluster, Group, Record

PREEMPTING = StepConfig(preemption=True)


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


