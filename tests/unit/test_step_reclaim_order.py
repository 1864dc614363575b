"""Reclaim and priority preemption over many steps through :func:`gangsched.core.step.step`,
on a cluster where nothing changes but what the step decides: each evicted pod is created
again at once by its controller, pending, and each bind lands.

Room one of them moves is never moved back by the other: a gang reclaimed from a
queue above its share comes back and does not preempt the reclaiming queue by
priority, and a queue preempted by priority keeps its share and does not reclaim.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from gangsched.core.actions import Bind, Evict
from gangsched.core.kubeobjects.groups import Flavor, GroupSpec
from gangsched.core.model.objects import GangKey, Pod, PodKey, Policy, QueueName, QueueSpec
from gangsched.core.model.resources import Resources
from gangsched.core.placement.capacity import Snapshot
from gangsched.core.reasons import Preempting, ProtectedByShare
from gangsched.core.stages.gangs import Member
from gangsched.core.state import State
from gangsched.core.step import StepConfig, Stepped, step
from gangsched.core.view import StepView
from tests.unit.test_cycle import node, pod
from tests.unit.test_step import Cluster, Group, Record

A, B = QueueName("a"), QueueName("b")
NODES = [node("n1", 4), node("n2", 4)]
"""8 CPUs: queues a and b, of equal weight, deserve 4 each."""
CONFIG = StepConfig(policy=Policy.BINPACK, preemption=True, reclaim=True,
                    reclaim_interval_s=10.0)
HIGH = 1000


@dataclass
class World:
    """The pods as the API server holds them, and the gangs' queues."""

    queues: dict[GangKey, QueueName]
    pods: dict[PodKey, Pod] = field(default_factory=dict)
    uids: dict[PodKey, str] = field(default_factory=dict)
    evictions: list[Evict] = field(default_factory=list)

    def add(self, name: str, queue: QueueName, *, on: str | None = None,
            priority: int = 0) -> None:
        """A gang of two 1-CPU members, bound on ``on`` or pending."""
        key = GangKey(f"ns/{name}")
        self.queues[key] = queue
        for i in range(2):
            member = replace(pod(f"ns/{name}-{i}", 1, gang=key, on=on), priority=priority)
            self.pods[member.key] = member
            self.uids[member.key] = f"{member.key}-0"

    def view(self) -> StepView:
        pods = list(self.pods.values())
        groups = [Group(key, Flavor.GANGSCHED, f"uid-{key}",
                        GroupSpec(key, Flavor.GANGSCHED, min_member=2,
                                  min_resources=Resources.zero(), queue=queue, created=0.0,
                                  generation=1))
                  for key, queue in self.queues.items()]
        return StepView(Cluster(
            snapshot=Snapshot.build(NODES, pods),
            members=tuple(Member(p, p.gang, running=p.node_name is not None) for p in pods),
            groups={g.key: g for g in groups},
            queues={A: QueueSpec(A), B: QueueSpec(B)},
            pods={p.key: Record(p, self.uids[p.key]) for p in pods},
        ))

    def play(self, seconds: float) -> Stepped:
        """Step once a second; evicted pods come back pending under a new UID at once,
        as a Job's or ReplicaSet's controller creates them again. The last step's answer."""
        state, now = State(), 100.0
        stepped = step(state, self.view(), now, CONFIG)
        while now < 100.0 + seconds:
            stepped = step(state, self.view(), now, CONFIG)
            stepped = step(state, self.view(), now, CONFIG)
            for action in stepped.actions:
                if isinstance(action, Evict):
                    self.evictions.append(action)
                    for key in (k for keys in action.victim_pods.values() for k in keys):
                        self.pods[key] = replace(self.pods[key], node_name=None)
                        self.uids[key] = f"{key}-{len(self.evictions)}"
                elif isinstance(action, Bind):
                    for key, on in action.placement.assignments:
                        self.pods[key] = replace(self.pods[key], node_name=on)
            state, now = stepped.state, now + 1.0
        return stepped

    def held(self, queue: QueueName) -> int:
        return sum(p.requests.get("cpu") for p in self.pods.values()
                   if p.node_name is not None and self.queues[p.gang or GangKey("")] == queue
                   ) // 1000


def test_a_gang_reclaimed_from_a_borrowing_queue_does_not_preempt_the_reclaimer_back() -> None:
    # a borrowed: three high-priority gangs on 6 CPUs, b one low gang on 2 and one waiting.
    world = World({})
    for i, on in enumerate(["n1", "n1", "n2"]):
        world.add(f"a-{i}", A, on=on, priority=HIGH)
    world.add("b-run", B, on="n2")
    world.add("b-0", B)
    last = world.play(60.0)
    (reclaimed,) = world.evictions  # eight or so, one each way, without the order
    assert reclaimed.preemption.reclaim_for == B
    assert world.held(A) == 4 and world.held(B) == 4, "each holds its deserved share"
    (victim,) = reclaimed.preemption.victims
    reason = next(u.reason for u in last.result.unplaceable if u.gang == victim)
    assert isinstance(reason, ProtectedByShare) and reason.queues == (B,)


def test_a_queue_at_its_share_is_not_preempted_by_priority_so_has_nothing_to_reclaim() -> None:
    # b borrowed 6 CPUs; a holds 2 and two more high-priority gangs wait. The first takes
    # the room b borrows; the second would take b below its share: it waits, saying so.
    world = World({})
    for i, on in enumerate(["n1", "n1", "n2"]):
        world.add(f"b-{i}", B, on=on)
    world.add("a-run", A, on="n2", priority=HIGH)
    world.add("a-hi-0", A, priority=HIGH)
    world.add("a-hi-1", A, priority=HIGH)
    last = world.play(60.0)
    (preempted,) = world.evictions
    assert preempted.preemption.reclaim_for is None
    assert preempted.preemption.preemptor == GangKey("ns/a-hi-0")
    assert world.held(A) == 4 and world.held(B) == 4
    reason = next(u.reason for u in last.result.unplaceable
                  if u.gang == GangKey("ns/a-hi-1"))
    assert isinstance(reason, ProtectedByShare) and reason.queues == (B,)
    assert not any(isinstance(u.reason, Preempting) for u in last.result.unplaceable)
