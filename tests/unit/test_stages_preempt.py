"""The preempt stage on its own: which gangs a preemptor evicts and what room it holds.

Each test builds a session, has the gang's placement fail as the place stage
would, and calls ``preempt`` with that reason; what it checks is the
preemption recorded, the reason the preemptor is given (with its figures)
and the room left for the gangs after it.
"""

from __future__ import annotations

from dataclasses import replace
from itertools import combinations

from hypothesis import given
from hypothesis import strategies as st

from gangsched.core.dra.devices import DeviceRef
from gangsched.core.model.objects import Gang, GangKey, NodeName, Pod, QueueName, QueueSpec
from gangsched.core.model.resources import Capability
from gangsched.core.placement.capacity import Capacity, Unplaceable
from gangsched.core.placement.holds import Hold
from gangsched.core.placement.preemption import shifted
from gangsched.core.reasons import AwaitingVictims, DoesNotFit, Preempting, Reason
from gangsched.core.stages.cycle import take_turn
from gangsched.core.stages.preempt import preempt
from gangsched.core.stages.session import Session, Waits
from gangsched.core.stages.starve import wait
from tests.unit.clusters import PROPERTY
from tests.unit.test_cycle import gang, node, pod
from tests.unit.test_dra import (
    DRIVER,
    claim_obj,
    claiming,
    devices_of,
    gpu_cluster,
    held_by,
    request,
)
from tests.unit.test_stages_allocate import placed, session, waiting

NODES = [node("n1", 4), node("n2", 4)]
RACKS = [replace(node("n1", 4), labels=(("rack", "a"),)),
         replace(node("n2", 4), labels=(("rack", "b"),))]


def running(key: str, on: str, pods: int = 2, cores: int = 1, *, priority: int = 0,
            created: float = 0.0, preemptible: bool = True) -> tuple[Gang, list[Pod]]:
    """A whole gang bound on node ``on``, nothing pending."""
    members = [pod(f"{key}-{i}", cores, gang=key, on=on) for i in range(pods)]
    return (Gang(GangKey(key), min_member=pods, pending=(), bound=pods, priority=priority,
                 created=created, preemptible=preemptible), members)


def refused(s: Session, preemptor: Gang) -> Reason:
    """Why the preemptor does not fit as things stand: the cause preempt is given."""
    decision = s.capacity.place(preemptor, s.inp.policy)
    assert isinstance(decision, Unplaceable), "the preemptor must not fit without evicting"
    return decision.reason


def preempted(everyone: list[tuple[Gang, list[Pod]]], preemptor: Gang, *, racks: bool = False,
              preempting: dict[str, list[str]] | None = None,
              later: tuple[Gang, ...] = (), admitted: tuple[str, ...] = (),
              queues: tuple[QueueSpec, ...] = ()) -> tuple[Session, bool]:
    """The session after ``preemptor``, refused, was handed to preempt; ``later`` wait after it."""
    s = session(RACKS if racks else NODES, [*(g for g, _ in everyone), preemptor, *later],
                running=[p for _, pods in everyone for p in pods], preemption=True,
                preempting=preempting, admitted=admitted, queues=queues)
    answer = preempt(s, preemptor, refused(s, preemptor))
    if isinstance(answer, Waits):  # as the cycle does: the gang waits with that reason
        wait(s, preemptor, answer.reason)
    return s, bool(answer)


def full(priority: int = 0) -> list[tuple[Gang, list[Pod]]]:
    """Both nodes full: four gangs of two one-core pods."""
    return [running(f"ns/low-{i}", f"n{1 + i // 2}", priority=priority) for i in range(4)]


def test_the_fewest_lowest_priority_gangs_are_evicted_and_the_preemptor_says_so() -> None:
    everyone = [running("ns/mid-0", "n1", priority=5), running("ns/mid-1", "n1", priority=5),
                running("ns/low-0", "n2", priority=0, created=1.0),
                running("ns/low-1", "n2", priority=0, created=2.0)]
    s, accounted = preempted(everyone, gang("ns/urgent", 4, priority=10))
    assert accounted
    (chosen,) = s.preemptions
    assert set(chosen.victims) == {"ns/low-0", "ns/low-1"}
    assert sorted(chosen.pods) == ["ns/low-0-0", "ns/low-0-1", "ns/low-1-0", "ns/low-1-1"]
    assert {node for _, node in chosen.placement.assignments} == {"n2"}
    reason = waiting(s)["ns/urgent"]
    assert isinstance(reason, Preempting)
    assert reason.victims == chosen.victims
    assert reason.hold.get("cpu") == 4000
    assert isinstance(reason.cause, DoesNotFit) and reason.cause.need == 4


def test_one_big_gang_is_evicted_rather_than_two_small_ones() -> None:
    everyone = [running("ns/big", "n1", 4, priority=0),
                running("ns/small-0", "n2", priority=0), running("ns/small-1", "n2", priority=0)]
    s, _ = preempted(everyone, gang("ns/urgent", 4, priority=10))
    assert [p.victims for p in s.preemptions] == [("ns/big",)]


def test_among_equals_the_youngest_gang_goes_first() -> None:
    everyone = [running("ns/old", "n1", 4, created=1.0), running("ns/young", "n2", 4, created=9.0)]
    s, _ = preempted(everyone, gang("ns/urgent", 4, priority=10))
    assert [p.victims for p in s.preemptions] == [("ns/young",)]


def test_gangs_of_equal_or_higher_priority_or_opted_out_are_never_victims() -> None:
    everyone = [running("ns/equal", "n1", 4, priority=10),
                running("ns/kept", "n2", 4, priority=0, preemptible=False)]
    s, accounted = preempted(everyone, gang("ns/urgent", 4, priority=10))
    assert not accounted and s.preemptions == []
    assert waiting(s) == {}, "a gang that preempts nobody is left to wait like any other"


def test_a_gang_of_equal_priority_is_no_victim_even_where_evicting_it_alone_would_do() -> None:
    """The fewest victims are sought among the gangs of lower priority only: here two of
    them go, not the one gang of the preemptor's own priority that would free a node."""
    everyone = [running("ns/equal", "n1", 4, priority=10),
                running("ns/low-0", "n2", priority=0), running("ns/low-1", "n2", priority=0)]
    s, _ = preempted(everyone, gang("ns/urgent", 4, priority=10))
    assert [set(p.victims) for p in s.preemptions] == [{"ns/low-0", "ns/low-1"}]


def test_no_victim_is_chosen_while_another_preemption_is_under_way() -> None:
    s, accounted = preempted(full(), gang("ns/urgent", 4, priority=10),
                             preempting={"ns/first": ["ns/low-0"]})
    assert not accounted and s.preemptions == []


def test_only_one_preemption_is_chosen_in_one_cycle() -> None:
    s, first = preempted(full(), gang("ns/urgent", 2, priority=10))
    second = gang("ns/later", 2, priority=10)
    assert first and not preempt(s, second, refused(s, second))
    assert [p.preemptor for p in s.preemptions] == ["ns/urgent"]


def test_a_preemptor_awaiting_its_victims_holds_only_what_they_will_not_free() -> None:
    # ns/low-0 (two cores) is going from n1; ns/urgent's one three-core pod lands on n1
    # once it has gone, and takes the one core still free there now. n2's free core
    # is no part of that room: it stays for the gangs after it.
    everyone = [running("ns/low-0", "n1", 2), running("ns/other", "n1", 1),
                running("ns/keep", "n2", 3, priority=50)]
    preemptor = gang("ns/urgent", 1, 3, priority=10)
    small = gang("ns/small", 1)
    s, accounted = preempted(everyone, preemptor, preempting={"ns/urgent": ["ns/low-0"]},
                             later=(small,))
    assert accounted and s.preemptions == [], "no new victim while its own are going"
    reason = waiting(s)["ns/urgent"]
    assert isinstance(reason, AwaitingVictims) and reason.victims == ("ns/low-0",)
    assert reason.hold.get("cpu") == 3000
    assert s.capacity.free(NodeName("n1")).get("cpu") == 0
    assert s.capacity.free(NodeName("n2")).get("cpu") == 1000
    assert s.reserved.is_zero, "held on its nodes, not as a cluster-wide sum"
    # A later one-core gang fits beside it on n2; under a sum hold it would find nothing.
    take_turn(s, small)
    assert placed(s) == [("ns/small", 1)]


def test_a_new_preemptor_holds_its_landing_nodes_against_the_gangs_after_it() -> None:
    # Evicting ns/low-0 lets ns/urgent's two four-core pods land one on n1 and one on n2
    # (six cores, empty): n2's four are taken now, its other two stay free for others.
    nodes = [node("n1", 4), node("n2", 6)]
    low, pods = running("ns/low-0", "n1", 4)
    preemptor = gang("ns/urgent", 2, 4, priority=10)
    pair, more = gang("ns/pair", 2), gang("ns/more", 1)
    s = session(nodes, [low, preemptor, pair, more], running=pods, preemption=True)
    assert preempt(s, preemptor, refused(s, preemptor))
    (chosen,) = s.preemptions
    assert chosen.victims == ("ns/low-0",)
    assert sorted(n for _, n in chosen.placement.assignments) == ["n1", "n2"]
    reason = waiting(s)["ns/urgent"]
    assert isinstance(reason, Preempting) and reason.hold.get("cpu") == 8000
    assert s.capacity.free(NodeName("n2")).get("cpu") == 2000
    take_turn(s, pair)
    take_turn(s, more)
    assert placed(s) == [("ns/pair", 2)]
    assert isinstance(waiting(s)["ns/more"], DoesNotFit)


def test_a_topology_gang_evicts_only_inside_the_one_domain_it_lands_in() -> None:
    # Rack a holds the youngest victims, but a four-pod gang needs one whole rack:
    # it evicts both gangs of one rack, never one from each.
    everyone = [running("ns/a-0", "n1", created=5.0), running("ns/a-1", "n1", created=6.0),
                running("ns/b-0", "n2", created=7.0), running("ns/b-1", "n2", created=1.0)]
    preemptor = replace(gang("ns/urgent", 4, priority=10), topology_keys=("rack",))
    s, accounted = preempted(everyone, preemptor, racks=True)
    assert accounted
    (chosen,) = s.preemptions
    racks = {victim.split("-")[0] for victim in chosen.victims}
    assert len(chosen.victims) == 2 and len(racks) == 1
    assert {n for _, n in chosen.placement.assignments} in ({"n1"}, {"n2"})


def test_no_preemption_when_the_flag_is_off() -> None:
    everyone = full()
    preemptor = gang("ns/urgent", 4, priority=10)
    s = session(NODES, [*(g for g, _ in everyone), preemptor],
                running=[p for _, pods in everyone for p in pods], preemption=False)
    assert not preempt(s, preemptor, refused(s, preemptor))
    assert s.preemptions == [] and s.reserved.is_zero


def test_a_partly_bound_gang_evicts_only_for_the_members_it_lacks() -> None:
    # ns/urgent runs two of the four members it needs on n1 and has three pending:
    # two cores more make it whole, so one small gang goes, not two.
    urgent = gang("ns/urgent", 3, min_member=4, bound=2, priority=10, first=2)
    everyone = [running("ns/low-0", "n1"), running("ns/low-1", "n2"), running("ns/low-2", "n2")]
    s = session(NODES, [*(g for g, _ in everyone), urgent], preemption=True, running=[
        *(pod(f"ns/urgent-{i}", 1, gang="ns/urgent", on="n1") for i in range(2)),
        *(p for _, pods in everyone for p in pods)])
    accounted = preempt(s, urgent, refused(s, urgent))
    assert accounted
    (chosen,) = s.preemptions
    assert len(chosen.victims) == 1 and len(chosen.placement.assignments) == 2


def test_a_preemption_that_would_eat_an_admitted_reservation_evicts_enough_for_both() -> None:
    # ns/spark is admitted and reserves four cores it has not used yet. Evicting two
    # gangs would fit ns/urgent but leave nothing of that reservation: all four go.
    spark = gang("ns/spark", 0, min_member=1, min_cpu=4)
    s, accounted = preempted(full(), gang("ns/urgent", 4, priority=10), later=(spark,),
                             admitted=("ns/spark",))
    assert accounted
    (chosen,) = s.preemptions
    assert len(chosen.victims) == 4


def test_a_gang_over_its_queue_s_capability_evicts_nobody() -> None:
    capped = QueueSpec(QueueName("q"), capability=Capability.parse({"cpu": 2}))
    preemptor = replace(gang("ns/urgent", 4, priority=10), queue=QueueName("q"))
    s, accounted = preempted(full(), preemptor, queues=(capped,))
    assert not accounted and s.preemptions == []


@st.composite
def crowded(draw: st.DrawFn) -> tuple[list[tuple[Gang, list[Pod]]], Gang]:
    """Running gangs of drawn priority and size on two full-ish nodes, and a waiting gang."""
    everyone = []
    used = {"n1": 0, "n2": 0}
    for i in range(draw(st.integers(1, 5))):
        where = draw(st.sampled_from(sorted(used)))
        size = draw(st.integers(1, 4 - used[where])) if used[where] < 4 else 0
        if size == 0:
            continue
        used[where] += size
        everyone.append(running(f"ns/r{i}", where, size, priority=draw(st.integers(0, 4)),
                                created=float(draw(st.integers(0, 9))),
                                preemptible=draw(st.booleans())))
    preemptor = gang("ns/urgent", draw(st.integers(2, 8)), priority=draw(st.integers(1, 5)))
    return everyone, preemptor


@PROPERTY
@given(crowded())
def test_victims_are_always_whole_evictable_gangs_of_lower_priority(
    drawn: tuple[list[tuple[Gang, list[Pod]]], Gang],
) -> None:
    everyone, preemptor = drawn
    s = session(NODES, [*(g for g, _ in everyone), preemptor],
                running=[p for _, pods in everyone for p in pods], preemption=True)
    decision = s.capacity.place(preemptor, s.inp.policy)
    if not isinstance(decision, Unplaceable):
        return
    preempt(s, preemptor, decision.reason)
    gangs = {g.key: (g, pods) for g, pods in everyone}
    for chosen in s.preemptions:
        assert chosen.preemptor == preemptor.key
        for victim in chosen.victims:
            victim_gang, _ = gangs[victim]
            assert victim_gang.priority < preemptor.priority and victim_gang.preemptible
        assert sorted(chosen.pods) == sorted(
            p.key for victim in chosen.victims for p in gangs[victim][1])
        # The fewest: no smaller set of possible victims would have made room.
        possible = [key for key, (g, _) in gangs.items()
                    if g.priority < preemptor.priority and g.preemptible]
        for size in range(len(chosen.victims)):
            for fewer in combinations(possible, size):
                going = [p for victim in fewer for p in gangs[victim][1]]
                after = Capacity.from_snapshot(shifted(s.inp.snapshot, remove=going))
                assert isinstance(after.place(preemptor, s.inp.policy), Unplaceable), fewer


def gpu_job(key: str, claim: str, *, priority: int,
            on: str | None = None) -> tuple[Gang, list[Pod]]:
    """A one-pod gang whose pod claims ``claim``: bound on ``on``, else pending."""
    member = claiming(f"{key}-0", claim)
    if on is None:
        return Gang(GangKey(key), min_member=1, pending=(member,), priority=priority), []
    return (Gang(GangKey(key), min_member=1, pending=(), bound=1, priority=priority),
            [replace(member, node_name=NodeName(on), gang=GangKey(key))])


def test_a_gang_claiming_gpus_evicts_the_gang_whose_claim_holds_them_and_gets_its_devices(
) -> None:
    """The victim's claim is deallocated once its pod is gone, as the resource-claim
    controller does: its eight GPUs are the preemptor's."""
    low = gpu_job("ns/low", "train", priority=0, on="n-0")
    urgent, _ = gpu_job("ns/urgent", "next", priority=1000)
    s = Session(gpu_cluster(["n-0"], [claim_obj("train", request(count=8),
                                                 status=held_by("n-0", range(8), "low-0")),
                                       claim_obj("next", request(count=8))],
                            [low], [urgent], preemption=True))
    assert preempt(s, urgent, refused(s, urgent))
    (chosen,) = s.preemptions
    assert chosen.victims == ("ns/low",)
    assert sorted(devices_of(chosen.placement)["ns/next"]) == sorted(
        DeviceRef(DRIVER, "n-0", f"gpu-{i}") for i in range(8))
    assert isinstance(waiting(s)["ns/urgent"], Preempting)


def test_a_claim_another_consumer_still_holds_keeps_its_devices_and_nobody_is_evicted(
) -> None:
    """A claim shared with a gang of higher priority stays allocated when the low one
    goes: evicting it would free nothing the preemptor can use."""
    low = gpu_job("ns/low", "shared", priority=0, on="n-0")
    high = gpu_job("ns/high", "shared", priority=5000, on="n-0")
    urgent, _ = gpu_job("ns/urgent", "next", priority=1000)
    s = Session(gpu_cluster(["n-0"], [
        claim_obj("shared", request(count=8),
                  status=held_by("n-0", range(8), "low-0", "high-0")),
        claim_obj("next", request(count=8))], [low, high], [urgent], preemption=True))
    assert not preempt(s, urgent, refused(s, urgent))
    assert s.preemptions == []


def test_devices_held_for_a_replacement_are_no_room_for_a_preemptor() -> None:
    """n-1's GPUs are held for a running gang's lost member, n-0's are a priority-0 gang's
    claim. Evicting the younger priority-0 cpu gang on n-1 would free no GPU the preemptor
    may have: the GPU gang goes, though older."""
    gpus, on_gpus = gpu_job("ns/gpus", "held", priority=0, on="n-0")
    cpus = (Gang(GangKey("ns/cpus"), 1, (), bound=1, created=5.0),
            [replace(claiming("ns/cpus-0"), node_name=NodeName("n-1"), gang=GangKey("ns/cpus"))])
    job = (Gang(GangKey("ns/job"), 2, (), bound=1, priority=5000),
           [replace(claiming("ns/job-0"), node_name=NodeName("n-1"), gang=GangKey("ns/job"))])
    lost = replace(claiming("ns/job-1", "gone"), node_name=NodeName("n-1"),
                   gang=GangKey("ns/job"))
    hold = Hold(GangKey("ns/job"), "u1", lost, until=1e9,
                devices=tuple(DeviceRef(DRIVER, "n-1", f"gpu-{i}") for i in range(8)))
    urgent, _ = gpu_job("ns/urgent", "next", priority=1000)
    s = Session(gpu_cluster(["n-0", "n-1"], [
        claim_obj("held", request(count=8), status=held_by("n-0", range(8), "gpus-0")),
        claim_obj("next", request(count=8))],
        [(replace(gpus, created=1.0), on_gpus), cpus, job], [urgent],
        preemption=True, holds=(hold,)))
    assert preempt(s, urgent, refused(s, urgent))
    (chosen,) = s.preemptions
    assert chosen.victims == ("ns/gpus",)
