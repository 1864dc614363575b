"""The step over sequences of cycles, with the state carried from one to the next.

Each test plays a few cycles of the pure step on views built from plain
values, folding outcomes in between as the shell does, and checks what the
state and the actions say a user would see: holds that start and end, waits
that keep their start, admissions kept, refused binds backing off, a PodGroup
created again under the same name starting afresh.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from hypothesis import example, given, settings
from hypothesis import strategies as st

from gangsched.core.actions import Action, Bind, LogDecision, WriteGroupStatus
from gangsched.core.fit.volumes import Storage
from gangsched.core.kubeobjects.groups import Flavor, GroupSpec, Phase
from gangsched.core.model.objects import (
    GangKey,
    Node,
    NodeName,
    Pod,
    PodKey,
    Policy,
    QueueName,
    QueueSpec,
)
from gangsched.core.model.resources import Resources
from gangsched.core.placement.capacity import Snapshot
from gangsched.core.placement.holds import Seat
from gangsched.core.reasons import BindBackoff, render
from gangsched.core.stages.gangs import Member
from gangsched.core.state import (
    InFlight,
    State,
    bind_refused,
    binds_done,
    eviction_refused,
    eviction_stopped,
)
from gangsched.core.step import StepConfig, Stepped, step
from gangsched.core.view import StepView
from tests.unit.clusters import node as gpu_node
from tests.unit.test_cycle import DEFAULT, cpu, node, pod
from tests.unit.test_dra import claim_obj, claiming, held_by, inventory, request

CONFIG = StepConfig(policy=Policy.BINPACK, starvation_s=30.0, replacement_grace_s=20.0)


@dataclass(frozen=True)
class Group:
    key: GangKey
    flavor: Flavor
    uid: str
    spec: GroupSpec | None
    error: str | None = None
    status: Mapping[str, object] = field(default_factory=dict)
    policy: Policy | None = None


@dataclass(frozen=True)
class Record:
    pod: Pod
    uid: str
    scheduled_message: str | None = None
    scheduled_reason: str | None = None


@dataclass(frozen=True)
class Cluster:
    snapshot: Snapshot
    members: tuple[Member, ...]
    groups: Mapping[GangKey, Group]
    queues: Mapping[QueueName, QueueSpec]
    pods: Mapping[PodKey, Record]
    storage: Storage = field(default_factory=Storage)
    named_by_others: frozenset[GangKey] = frozenset()
    topologies: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


def group(name: str, min_member: int, *, uid: str = "u1", min_cpu: int = 0) -> Group:
    key = GangKey(f"ns/{name}")
    spec = GroupSpec(key, Flavor.GANGSCHED, min_member=min_member,
                     min_resources=cpu(min_cpu) if min_cpu else Resources.zero(),
                     queue=DEFAULT, created=0.0, generation=1)
    return Group(key, Flavor.GANGSCHED, uid, spec)


def members(name: str, count: int, *, on: Iterable[str | None] = (), first: int = 0,
            cores: int = 1) -> list[Pod]:
    nodes = list(on) + [None] * count
    return [pod(f"ns/{name}-{i}", cores, gang=f"ns/{name}", on=nodes[i - first])
            for i in range(first, first + count)]


def view(nodes: list[Node], pods: list[Pod], groups: list[Group],
         uids: Mapping[str, str] | None = None) -> StepView:
    uids = uids or {}
    return StepView(Cluster(
        snapshot=Snapshot.build(nodes, pods),
        members=tuple(Member(p, p.gang, running=p.node_name is not None) for p in pods),
        groups={g.key: g for g in groups},
        queues={DEFAULT: QueueSpec(DEFAULT)},
        pods={p.key: Record(p, uids.get(p.key, f"uid-{p.key}")) for p in pods},
    ))


def binds(stepped: Stepped) -> list[GangKey]:
    return [a.placement.gang for a in stepped.actions if isinstance(a, Bind)]


def logged(stepped: Stepped, event: str) -> list[dict[str, object]]:
    return [dict(a.fields) for a in stepped.actions
            if isinstance(a, LogDecision) and a.event == event]


def status_of(actions: Iterable[Action], key: GangKey) -> WriteGroupStatus:
    (status,) = [a for a in actions if isinstance(a, WriteGroupStatus) and a.group == key]
    return status


JOB, WAITER, URGENT = GangKey("ns/job"), GangKey("ns/waiter"), GangKey("ns/urgent")


def test_a_gang_waits_since_it_first_waited_and_starves_after_the_threshold() -> None:
    nodes = [node("n1", 2)]
    cluster = view(nodes, members("job", 3), [group("job", 3)])
    first = step(State(), cluster, 100.0, CONFIG)
    assert binds(first) == [] and first.state.waiting_since == {JOB: 100.0}
    assert 130.0 in first.thresholds, "it starves 30 s after it began to wait"
    assert logged(first, "gang_waiting")[0]["gang"] == JOB

    second = step(first.state, cluster, 110.0, CONFIG)
    assert second.state.waiting_since == {JOB: 100.0}, "still waiting since the first cycle"
    assert logged(second, "gang_waiting") == [], "the same reason is logged once"
    starving = step(second.state, cluster, 131.0, CONFIG)
    assert starving.result.unplaceable[0].reason != second.result.unplaceable[0].reason

    room = view([node("n1", 2), node("n2", 2)], members("job", 3), [group("job", 3)])
    placed = step(starving.state, room, 140.0, CONFIG)
    assert binds(placed) == [JOB] and placed.state.waiting_since == {}


def test_an_admission_is_kept_until_the_podgroup_is_created_again_under_its_name() -> None:
    nodes = [node("n1", 4)]
    spark = group("spark", 1, min_cpu=3)
    driver_bound = members("spark", 1, on=["n1"])
    admitted = step(State(), view(nodes, [], [spark]), 100.0, CONFIG)
    key = GangKey("ns/spark")
    assert key in admitted.state.admitted
    assert status_of(admitted.actions, key).status.phase is Phase.INQUEUE

    kept = step(admitted.state, view(nodes, driver_bound, [spark]), 101.0, CONFIG)
    assert key in kept.state.admitted, "admitted once, admitted while it runs"

    # Deleted and created again under the same name while another job holds the room:
    # the new group is not admitted on the old one's say-so.
    again = step(kept.state, view(nodes, members("other", 1, on=["n1"], cores=4),
                                  [group("other", 1, min_cpu=4),
                                   group("spark", 1, uid="u2", min_cpu=3)]), 103.0, CONFIG)
    assert key not in again.state.admitted, "the new group starts afresh"
    assert again.state.waiting_since[key] == 103.0, "and waits from its own creation"


def test_a_departed_members_room_is_held_until_the_grace_ends() -> None:
    nodes = [node("n1", 1), node("n2", 1)]
    job = group("job", 2)
    both = members("job", 2, on=["n1", "n2"])
    waiter = [*members("waiter", 1)]
    running = step(State(), view(nodes, both, [job, group("waiter", 1)]), 100.0, CONFIG)
    assert binds(running) == [], "the cluster is full"

    gone = step(running.state, view(nodes, [both[0], *waiter], [job, group("waiter", 1)]),
                101.0, CONFIG)
    assert binds(gone) == [], "the waiter must not take the departed member's room"
    (held,) = logged(gone, "replacement_held")
    assert (held["gang"], held["pod"], held["node"]) == (JOB, "ns/job-1", "n2")
    assert [h.until for h in gone.state.holds] == [121.0]
    assert 121.0 in gone.thresholds

    still = step(gone.state, view(nodes, [both[0], *waiter], [job, group("waiter", 1)]),
                 120.0, CONFIG)
    assert binds(still) == [] and len(still.state.holds) == 1

    over = step(still.state, view(nodes, [both[0], *waiter], [job, group("waiter", 1)]),
                121.0, CONFIG)
    assert over.state.holds == ()
    assert [f["pod"] for f in logged(over, "replacement_hold_released")] == ["ns/job-1"]
    assert binds(over) == [WAITER], "the grace is over: the room is anyone's"


def test_a_refused_bind_backs_the_gang_off_until_its_backoff_ends() -> None:
    nodes = [node("n1", 2)]
    cluster = view(nodes, members("job", 2), [group("job", 2)])
    first = step(State(), cluster, 100.0, CONFIG)
    assert binds(first) == [JOB]

    # The API server refuses one pod's bind; the shell folds the outcome in.
    state = bind_refused(first.state, PodKey("ns/job-0"), now=100.5, status=403,
                         message="bindings are frozen")
    state = binds_done(state, [PodKey("ns/job-1")])
    refusal = state.bind_refusals[PodKey("ns/job-0")]
    assert refusal.refusals == 1 and refusal.until > 100.5

    waiting = step(state, cluster, 100.6, CONFIG)
    assert binds(waiting) == [], "the gang waits whole while a member backs off"
    assert refusal.until in waiting.thresholds, "the loop decides again when it ends"
    reason = waiting.state.reported[JOB].reason
    assert isinstance(reason, BindBackoff)
    assert (reason.pod, reason.status, reason.refusals) == ("ns/job-0", 403, 1)
    assert status_of(waiting.actions, JOB).status.message == render(reason)

    again = bind_refused(waiting.state, PodKey("ns/job-0"), now=refusal.until + 0.1,
                         status=403, message="bindings are frozen")
    assert again.bind_refusals[PodKey("ns/job-0")].refusals == 2, "the backoff doubles"
    retried = step(waiting.state, cluster, refusal.until + 0.01, CONFIG)
    assert binds(retried) == [JOB], "tried again once the backoff ends"


def test_a_bound_pod_backs_off_no_more() -> None:
    state = bind_refused(State(), PodKey("ns/job-0"), now=100.0, status=0, message="")
    bound = view([node("n1", 2)], members("job", 1, on=["n1"]), [group("job", 1)])
    assert step(state, bound, 100.1, CONFIG).state.bind_refusals == {}


def test_what_was_reported_for_a_group_is_forgotten_when_it_is_created_again() -> None:
    nodes = [node("n1", 1)]
    old = step(State(), view(nodes, members("job", 2), [group("job", 2)]), 100.0, CONFIG)
    assert JOB in old.state.reported and old.state.group_uids[JOB] == "u1"
    renewed = view(nodes, members("job", 2), [group("job", 2, uid="u2")],
                   uids={"ns/job-0": "new-0", "ns/job-1": "new-1"})
    new = step(old.state, renewed, 101.0, CONFIG)
    assert new.state.group_uids[JOB] == "u2"
    assert new.state.waiting_since[JOB] == 101.0
    assert new.state.reported[JOB].since == 101.0
    assert logged(new, "gang_waiting"), "the new group's wait is logged as new"


@given(st.lists(st.tuples(st.sets(st.integers(0, 4)), st.floats(0.5, 15.0)),
                min_size=2, max_size=12))
@example([({0, 1, 2}, 1.0), ({0, 1, 2, 4}, 1.0), ({0, 1, 2}, 1.0)])
@settings(max_examples=80, deadline=None)
def test_members_that_leave_and_come_back_under_their_names_never_fail_a_cycle(
    seated_over_time: list[tuple[set[int], float]],
) -> None:
    """A running gang of five on five nodes whose members go and come back under the same
    names, cycle after cycle, beside a gang waiting for room: every step runs, each
    departed pod is held at most once, and never more rooms than members are missing."""
    nodes = [node(f"n{i}", 1) for i in range(5)]
    groups = [group("job", 5), group("waiter", 1)]
    state, now = State(), 100.0
    everyone = members("job", 5, on=[f"n{i}" for i in range(5)])
    state = step(state, view(nodes, everyone, groups), now, CONFIG).state
    for seated, seconds in seated_over_time:
        now += seconds
        present = [p for i, p in enumerate(everyone) if i in seated]
        stepped = step(state, view(nodes, [*present, *members("waiter", 1)], groups), now,
                       CONFIG)
        keys = [hold.pod.key for hold in stepped.state.holds]
        assert len(keys) == len(set(keys))
        assert len(keys) <= 5 - len(present)
        state = stepped.state


def test_a_victim_whose_eviction_stopped_half_way_gets_its_departed_room_held() -> None:
    nodes = [node("n1", 1), node("n2", 1)]
    job, waiter_group = group("job", 2), group("waiter", 1)
    both = members("job", 2, on=["n1", "n2"])
    running = step(State(), view(nodes, both, [job]), 100.0, CONFIG)
    # Evicted for ns/urgent: job-1 went, then the Eviction API refused job-0.
    preempting = replace(running.state, preempting={URGENT: InFlight(frozenset({JOB}), 100.0)})
    evicting = step(preempting, view(nodes, [both[0]], [job]), 101.0, CONFIG)
    assert evicting.state.holds == (), "while it is a victim its room is the preemptor's"
    stopped = eviction_stopped(evicting.state, URGENT, [JOB], {both[1].key: Seat(both[1], JOB)},
                               until=116.0)
    after = view(nodes, [both[0], *members("waiter", 1)], [job, waiter_group])
    held = step(stopped, after, 102.0, CONFIG)
    assert binds(held) == [], "the waiter must not take the room of the victim's member"
    assert [h.pod.key for h in held.state.holds] == [both[1].key]
    # Ended as a plain refusal, the room would be anyone's and the victim stay short.
    refused = eviction_refused(evicting.state, URGENT, [JOB], until=116.0)
    assert binds(step(refused, after, 102.0, CONFIG)) == [WAITER]


def test_a_departed_members_gpus_are_held_for_its_replacement_and_no_other_gang() -> None:
    """A worker claiming one node's eight GPUs goes, and its claim with it; a gang
    claiming eight GPUs arrives meanwhile and waits. The replacement, with a claim of its
    own, gets the departed worker's node and devices."""
    names = ["n-0", "n-1"]
    nodes = [gpu_node(name, cpu="16", memory="64Gi") for name in names]

    def worker(name: str, on: str | None = None) -> Pod:
        return replace(claiming(f"ns/{name}", name), gang=JOB,
                       node_name=None if on is None else NodeName(on))

    def seen(pods: list[Pod], claims: list[dict[str, object]], *groups: Group) -> StepView:
        cluster = view(nodes, pods, [group("job", 2), *groups]).cluster
        assert isinstance(cluster, Cluster)
        return StepView(replace(cluster, snapshot=replace(
            cluster.snapshot, devices=inventory(names, claims))))

    both = [worker("job-0", "n-0"), worker("job-1", "n-1")]
    held = [claim_obj(f"job-{i}", request(count=8),
                      status=held_by(f"n-{i}", range(8), f"job-{i}")) for i in range(2)]
    running = step(State(), seen(both, held), 100.0, CONFIG)
    waiter = replace(claiming("ns/waiter-0", "waiter"), gang=WAITER)
    gone = step(running.state, seen([both[0], waiter], [held[0], claim_obj("waiter",
                                                                           request(count=8))],
                                    group("waiter", 1)), 101.0, CONFIG)
    assert binds(gone) == [], "the departed worker's GPUs are not the waiter's"
    (hold,) = gone.state.holds
    assert len(hold.devices) == 8 and {ref.pool for ref in hold.devices} == {"n-1"}

    back = worker("job-2")
    replaced = step(gone.state, seen(
        [both[0], waiter, back],
        [held[0], claim_obj("waiter", request(count=8)), claim_obj("job-2", request(count=8))],
        group("waiter", 1)), 102.0, CONFIG)
    (bind,) = [a for a in replaced.actions if isinstance(a, Bind)]
    assert bind.placement.gang == JOB and bind.placement.assignments == (("ns/job-2", "n-1"),)
    (write,) = bind.placement.claims
    assert write.allocation is not None and {d.device for d in write.allocation.devices} == set(
        hold.devices)
