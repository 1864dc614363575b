"""The scheduling cycle: admission, reservations, fair order, replacements, starvation."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tests.unit.test_dra as dra
from gangsched.core.dra.devices import ClaimKey
from gangsched.core.model.objects import (
    Gang,
    GangKey,
    Node,
    NodeName,
    Pod,
    PodAffinityTerm,
    PodClaim,
    PodKey,
    Policy,
    QueueName,
    QueueSpec,
)
from gangsched.core.model.resources import Capability, Resources
from gangsched.core.placement.capacity import Snapshot
from gangsched.core.reasons import (
    AdmissionNoRoom,
    AdmissionOverCapability,
    CapabilityExceeded,
    DevicesShort,
    DoesNotFit,
    HeldForStarving,
    PartlyBound,
    PodRulesUnmet,
    QueueClosed,
    QueueMissing,
    Reason,
    ReservedByAdmitted,
    ShortOfMembers,
    Starved,
    Starving,
    TooBigToHold,
)
from gangsched.core.stages.backoff import BindRefusal
from gangsched.core.stages.cycle import CycleInput, CycleResult, run_cycle

DEFAULT = QueueName("default")


def cpu(cores: int) -> Resources:
    return Resources.of({"cpu": cores * 1000})


def pod_request(cores: int) -> Resources:
    return Resources.of({"cpu": cores * 1000, "pods": 1})


def node(name: str, cores: int, *, unschedulable: bool = False) -> Node:
    return Node(
        NodeName(name),
        Resources.of({"cpu": cores * 1000, "pods": 110}),
        unschedulable=unschedulable,
    )


def pod(key: str, cores: int = 1, *, gang: str | None = None, on: str | None = None) -> Pod:
    return Pod(
        PodKey(key),
        pod_request(cores),
        gang=None if gang is None else GangKey(gang),
        node_name=None if on is None else NodeName(on),
    )


def gang(
    key: str,
    pods: int = 1,
    cores: int = 1,
    *,
    min_member: int | None = None,
    bound: int = 0,
    queue: str = "default",
    min_cpu: int = 0,
    priority: int = 0,
    created: float = 0.0,
    first: int = 0,
) -> Gang:
    """A gang of ``pods`` pending pods named ``<key>-<i>``, numbered from ``first``."""
    return Gang(
        GangKey(key),
        min_member=pods if min_member is None else min_member,
        pending=tuple(pod(f"{key}-{i}", cores, gang=key) for i in range(first, first + pods)),
        bound=bound,
        queue=QueueName(queue),
        min_resources=cpu(min_cpu) if min_cpu else Resources.zero(),
        priority=priority,
        created=created,
    )


def cycle(
    nodes: Sequence[Node],
    gangs: Iterable[Gang],
    *,
    bound_pods: Sequence[Pod] = (),
    bound_requests: Mapping[str, Resources] | None = None,
    queues: Iterable[QueueSpec] = (),
    admitted: Iterable[str] = (),
    waiting_since: Mapping[str, float] | None = None,
    now: float = 1000.0,
    bind_refusals: Mapping[str, BindRefusal] | None = None,
) -> CycleResult:
    specs = {DEFAULT: QueueSpec(DEFAULT)}
    specs.update({spec.name: spec for spec in queues})
    return run_cycle(
        CycleInput(
            snapshot=Snapshot.build(nodes, bound_pods),
            gangs=tuple(gangs),
            bound_requests={GangKey(k): v for k, v in (bound_requests or {}).items()},
            queues=specs,
            admitted=frozenset(GangKey(k) for k in admitted),
            waiting_since={GangKey(k): v for k, v in (waiting_since or {}).items()},
            now=now,
            policy=Policy.BINPACK,
            bind_refusals={PodKey(k): v for k, v in (bind_refusals or {}).items()},
        )
    )


def placed(result: CycleResult) -> list[str]:
    return [p.gang for p in result.placements]


def placed_pods(result: CycleResult) -> set[str]:
    return {pod for p in result.placements for pod, _ in p.assignments}


def cores(amount: Resources) -> int:
    return amount.get("cpu") // 1000


def reasons(result: CycleResult) -> dict[str, Reason]:
    return {u.gang: u.reason for u in result.unplaceable}


SIX_CPU = [node("n1", 2), node("n2", 2), node("n3", 2)]


def spark(i: int, *, executors: bool = False, bound: int = 0) -> Gang:
    """Spark job i: a driver first, two executors once the driver runs; minResources 3 CPU."""
    key = f"ns/spark-{i}"
    if executors:
        return gang(key, 2, min_member=1, bound=bound, min_cpu=3, created=i, first=1)
    return gang(key, 1, min_member=1, bound=bound, min_cpu=3, created=i)


# -- admission and reservations: the Spark deadlock --------------------------


def test_spark_on_six_cpus_admits_two_jobs_at_a_time() -> None:
    first = cycle(SIX_CPU, [spark(i) for i in range(6)])
    assert first.newly_admitted == ("ns/spark-0", "ns/spark-1")
    assert first.admitted == {"ns/spark-0", "ns/spark-1"}
    assert placed_pods(first) == {"ns/spark-0-0", "ns/spark-1-0"}
    waiting = reasons(first)
    assert set(waiting) == {f"ns/spark-{i}" for i in range(2, 6)}
    assert all(isinstance(r, AdmissionNoRoom) for r in waiting.values())
    refused = waiting["ns/spark-2"]
    assert isinstance(refused, AdmissionNoRoom)
    # Two drivers took 2 of 6 CPUs; the other 4 are promised to their executors.
    assert (refused.min_resources, cores(refused.free), refused.reserved) == (cpu(3), 4, cpu(4))
    assert refused.short == cpu(3)

    drivers = [pod(pk, gang=p.gang, on=nd) for p in first.placements for pk, nd in p.assignments]
    one_cpu = {"ns/spark-0": pod_request(1), "ns/spark-1": pod_request(1)}

    # The drivers run and have not created their executors yet: the room for
    # them stays reserved, nobody else is admitted.
    running = [
        Gang(GangKey(f"ns/spark-{i}"), 1, (), bound=1, min_resources=cpu(3), created=i)
        for i in range(2)
    ]
    idle = cycle(
        SIX_CPU,
        running + [spark(i) for i in range(2, 6)],
        bound_pods=drivers,
        bound_requests=one_cpu,
        admitted=first.admitted,
    )
    assert idle.placements == ()
    assert idle.newly_admitted == ()
    assert all(isinstance(r, AdmissionNoRoom) for r in reasons(idle).values())

    second = cycle(
        SIX_CPU,
        [spark(0, executors=True, bound=1), spark(1, executors=True, bound=1)]
        + [spark(i) for i in range(2, 6)],
        bound_pods=drivers,
        bound_requests=one_cpu,
        admitted=first.admitted,
    )
    assert placed_pods(second) == {"ns/spark-0-1", "ns/spark-0-2", "ns/spark-1-1", "ns/spark-1-2"}
    assert second.newly_admitted == ()
    assert set(reasons(second)) == {f"ns/spark-{i}" for i in range(2, 6)}

    # The first two jobs finished: they leave the input and the cluster is empty.
    third = cycle(SIX_CPU, [spark(i) for i in range(2, 6)], admitted=second.admitted)
    assert third.newly_admitted == ("ns/spark-2", "ns/spark-3")
    assert third.admitted == {"ns/spark-2", "ns/spark-3"}
    assert placed(third) == ["ns/spark-2", "ns/spark-3"]


def test_reservation_keeps_a_gang_without_min_resources_out_of_reserved_room() -> None:
    driver = pod("ns/spark-0-0", gang="ns/spark-0", on="n1")
    running = Gang(GangKey("ns/spark-0"), 1, (), bound=1, min_resources=cpu(3))

    def with_spark(*train: Gang) -> CycleResult:
        return cycle(
            SIX_CPU,
            [running, *train],
            bound_pods=[driver],
            bound_requests={"ns/spark-0": pod_request(1)},
            admitted=["ns/spark-0"],
        )

    # 5 CPU free, 2 of them reserved for spark-0's executors.
    four = with_spark(gang("ns/train", 4))
    assert four.placements == ()
    reason = reasons(four)["ns/train"]
    assert isinstance(reason, ReservedByAdmitted)
    assert (reason.reserved, cores(reason.placed), cores(reason.free_after)) == (cpu(2), 4, 1)

    three = with_spark(gang("ns/train", 3))
    assert placed(three) == ["ns/train"]

    # The refused gang gives back what it tried, so a later one still fits.
    both = with_spark(gang("ns/train", 4, created=0), gang("ns/tune", 3, created=1))
    assert placed(both) == ["ns/tune"]
    assert set(reasons(both)) == {"ns/train"}

    # Without the reservation the same four pods fit.
    alone = cycle(SIX_CPU, [gang("ns/train", 4)], bound_pods=[driver])
    assert placed(alone) == ["ns/train"]


def test_podgroup_without_pods_is_admitted_in_turn_and_holds_its_room() -> None:
    # training-operator creates no pod of a Volcano job before its PodGroup is
    # Inqueue: an empty group must be admitted on its own, in fair order.
    empty = [Gang(GangKey(f"ns/job-{i}"), 4, (), min_resources=cpu(4), created=i)
             for i in range(2)]
    first = cycle(SIX_CPU, empty)
    assert first.newly_admitted == ("ns/job-0",)
    assert first.placements == ()
    assert first.unplaceable == ()
    (refused,) = first.unadmitted
    assert refused.gang == "ns/job-1"
    assert isinstance(refused.reason, AdmissionNoRoom)

    # Its reservation keeps a later gang without minResources out.
    later = cycle(SIX_CPU, [*empty, gang("ns/small", 3, created=5)], admitted=first.admitted)
    assert placed(later) == []
    assert isinstance(reasons(later)["ns/small"], ReservedByAdmitted)


def test_admission_counts_room_taken_earlier_in_the_cycle() -> None:
    # An older gang without minResources takes 4 CPUs first; 2 are left, the
    # Spark job needs 3.
    result = cycle(SIX_CPU, [gang("ns/train", 4, created=0), spark(1)])
    assert placed(result) == ["ns/train"]
    assert result.newly_admitted == ("ns/train",)
    refused = reasons(result)["ns/spark-1"]
    assert isinstance(refused, AdmissionNoRoom)
    assert (cores(refused.free), refused.short) == (2, cpu(1))


# -- queues -------------------------------------------------------------------


def test_queue_capability_caps_admission() -> None:
    cap = Capability.parse({"cpu": 4})
    capped = QueueSpec(QueueName("q"), capability=cap)
    big = [node("n1", 8)]
    result = cycle(
        big,
        [
            gang("ns/a", 1, min_member=1, min_cpu=3, queue="q", created=0),
            gang("ns/b", 1, min_member=1, min_cpu=3, queue="q", created=1),
            gang("ns/c", 1, min_member=1, min_cpu=3, created=2),
        ],
        queues=[capped],
    )
    assert set(result.newly_admitted) == {"ns/a", "ns/c"}  # default goes first by name
    # ns/a's driver uses 1 CPU of its 3 and keeps 2 reserved: 3 more would pass 4.
    assert reasons(result)["ns/b"] == AdmissionOverCapability(
        cpu(3), QueueName("q"), cap, pod_request(1), cpu(2))


def test_queue_capability_caps_placement_on_the_resources_it_names() -> None:
    capped = QueueSpec(QueueName("q"), capability=Capability.parse({"cpu": 2}))
    big = [node("n1", 8)]
    result = cycle(
        big,
        [gang("ns/a", 2, queue="q", created=0), gang("ns/b", 1, queue="q", created=1)],
        queues=[capped],
    )
    assert placed(result) == ["ns/a"]  # the pod count is not capped, cpu is
    exceeded = reasons(result)["ns/b"]
    assert isinstance(exceeded, CapabilityExceeded)
    assert (exceeded.queue, cores(exceeded.allocated), cores(exceeded.placed)) == ("q", 2, 1)

    # Room the queue already uses counts too.
    used = cycle(
        big,
        [gang("ns/b", 1, queue="q"), Gang(GangKey("ns/a"), 2, (), bound=2, queue=QueueName("q"))],
        bound_pods=[pod("ns/a-0", on="n1"), pod("ns/a-1", on="n1")],
        bound_requests={"ns/a": pod_request(2)},
        queues=[capped],
    )
    assert used.placements == ()
    assert isinstance(reasons(used)["ns/b"], CapabilityExceeded)


def test_closed_queue_admits_nothing_new_but_admitted_gangs_go_on() -> None:
    closed = QueueSpec(QueueName("q"), open=False)
    result = cycle(
        SIX_CPU,
        [gang("ns/new", 1, queue="q"), gang("ns/old", 1, queue="q")],
        queues=[closed],
        admitted=["ns/old"],
    )
    assert placed(result) == ["ns/old"]
    assert result.newly_admitted == ()
    assert reasons(result)["ns/new"] == QueueClosed(QueueName("q"))


def test_unknown_queue_waits_with_a_reason() -> None:
    result = cycle(SIX_CPU, [gang("ns/a", 1, queue="nope"), gang("ns/b", 1)])
    assert placed(result) == ["ns/b"]
    assert reasons(result) == {"ns/a": QueueMissing(QueueName("nope"))}


def test_default_queue_exists_without_being_passed() -> None:
    result = run_cycle(
        CycleInput(
            snapshot=Snapshot.build(SIX_CPU, ()),
            gangs=(gang("ns/a"),),
            bound_requests={},
            queues={},
            admitted=frozenset(),
            waiting_since={},
            now=0.0,
            policy=Policy.BINPACK,
        )
    )
    assert placed(result) == ["ns/a"]


def _queue_of(key: str) -> str:
    return key.split("/")[1].split("-")[0]


def test_weighted_fair_share_places_two_to_one() -> None:
    gangs = [gang(f"ns/{q}-{i}", 1, queue=q, created=i) for q in ("a", "b") for i in range(6)]
    one_node = [node("n1", 6)]
    weighted = cycle(
        one_node,
        gangs,
        queues=[QueueSpec(QueueName("a"), weight=2), QueueSpec(QueueName("b"), weight=1)],
    )
    order = [_queue_of(k) for k in placed(weighted)]
    assert order == ["a", "b", "a", "a", "b", "a"]

    # Equal weights share equally; the other way round favours b.
    equal = cycle(one_node, gangs, queues=[QueueSpec(QueueName("a")), QueueSpec(QueueName("b"))])
    assert [_queue_of(k) for k in placed(equal)].count("a") == 3
    flipped = cycle(
        one_node,
        gangs,
        queues=[QueueSpec(QueueName("a"), weight=1), QueueSpec(QueueName("b"), weight=2)],
    )
    assert [_queue_of(k) for k in placed(flipped)].count("b") == 4


def test_queue_already_using_more_goes_after() -> None:
    queues = [QueueSpec(QueueName("a")), QueueSpec(QueueName("b"))]
    running = Gang(GangKey("ns/a-run"), 1, (), bound=1, queue=QueueName("a"))
    result = cycle(
        [node("n1", 3)],
        [running, gang("ns/a-0", 1, queue="a"), gang("ns/b-0", 1, queue="b", created=5)],
        bound_pods=[pod("ns/a-run-0", on="n1")],
        bound_requests={"ns/a-run": pod_request(1)},
        queues=queues,
    )
    assert placed(result) == ["ns/b-0", "ns/a-0"]


# -- order --------------------------------------------------------------------


def test_priority_then_age() -> None:
    result = cycle(
        [node("n1", 2)],
        [
            gang("ns/low-old", 1, priority=0, created=1),
            gang("ns/high-new", 1, priority=10, created=5),
            gang("ns/high-old", 1, priority=10, created=2),
        ],
    )
    assert placed(result) == ["ns/high-old", "ns/high-new"]
    assert set(reasons(result)) == {"ns/low-old"}


def test_a_pod_beyond_min_member_of_a_running_gang_waits_its_turn() -> None:
    # Three workers, minMember 2: one died, two still run; the gang is whole, so the
    # third is an extra, ordinary work in its queue's order, behind higher priority.
    workers = [pod(f"ns/ddp-{i}", gang="ns/ddp", on="n1") for i in range(2)]
    ddp = gang("ns/ddp", 1, min_member=2, bound=2, first=2, created=50)
    urgent = gang("ns/urgent", 1, priority=100, created=0)
    result = cycle(
        [node("n1", 3)],
        [urgent, ddp],
        bound_pods=workers,
        bound_requests={"ns/ddp": pod_request(2)},
        admitted=["ns/ddp"],
    )
    assert placed(result) == ["ns/urgent"]
    extra = reasons(result)["ns/ddp"]
    assert isinstance(extra, DoesNotFit) and extra.need == 0  # no gang check for an extra


@pytest.mark.parametrize("kind", ["pod rules", "devices"])
def test_an_extra_pod_of_a_running_gang_that_fits_nowhere_binds_nothing_and_is_told_why(
    kind: str,
) -> None:
    """The extra needs no gang check, but a placement of none of its pods would bind
    nothing: the gang waits with the extra's reason, as an extra without rules does."""
    ddp = gang("ns/ddp", 1, min_member=1, bound=1, first=1)
    extra = ddp.pending[0]
    snapshot = Snapshot.build([node("n1", 4)], [pod("ns/ddp-0", gang="ns/ddp", on="n1")])
    if kind == "pod rules":
        extra = replace(extra, affinity=(PodAffinityTerm(
            "kubernetes.io/hostname", (("app", "nobody"),), namespaces=("ns",)),))
        expected: type = PodRulesUnmet
    else:
        snapshot = replace(snapshot, devices=dra.inventory(["n1"], [
            dra.claim_obj("nine", dra.request(count=9))]))
        extra = replace(extra, uid="uid-extra",
                        resource_claims=(PodClaim("gpus", ClaimKey("ns/nine")),))
        expected = DevicesShort
    result = run_cycle(CycleInput(
        snapshot=snapshot, gangs=(replace(ddp, pending=(extra,)),),
        bound_requests={GangKey("ns/ddp"): pod_request(1)},
        queues={DEFAULT: QueueSpec(DEFAULT)}, admitted=frozenset({GangKey("ns/ddp")}),
        waiting_since={}, now=1000.0, policy=Policy.BINPACK))
    assert result.placements == ()
    assert isinstance(reasons(result)["ns/ddp"], expected)


def test_only_the_members_a_gang_lacks_go_first_its_extras_wait_their_queue_turn() -> None:
    # minMember 2, one bound; three pending: one replaces, two are elastic extras.
    # Queue "light" (weight 1) runs it; queue "heavy" (weight 10) has a gang of 2.
    light, heavy = QueueSpec(QueueName("light")), QueueSpec(QueueName("heavy"), weight=10)
    elastic = gang("ns/elastic", 3, min_member=2, bound=1, first=1, queue="light")
    promised = gang("ns/promised", 2, queue="heavy", created=100)
    result = cycle(
        [node("n1", 4)],
        [elastic, promised],
        bound_pods=[pod("ns/elastic-0", gang="ns/elastic", on="n1")],
        bound_requests={"ns/elastic": pod_request(1)},
        queues=[light, heavy],
    )
    assert placed_pods(result) == {"ns/elastic-1", "ns/promised-0", "ns/promised-1"}
    assert placed(result) == ["ns/elastic", "ns/promised"]  # one bind per gang


def test_replacement_is_placed_even_without_a_gang_check() -> None:
    # min_member 3 with 3 bound: one pending replacement needs no companions.
    ddp = gang("ns/ddp", 1, min_member=3, bound=3, first=3)
    result = cycle(
        [node("n1", 4)],
        [ddp],
        bound_pods=[pod(f"ns/ddp-{i}", gang="ns/ddp", on="n1") for i in range(3)],
        bound_requests={"ns/ddp": pod_request(3)},
    )
    assert placed_pods(result) == {"ns/ddp-3"}
    assert result.newly_admitted == ("ns/ddp",)  # running, so admitted though the set was lost


def test_replacement_that_does_not_fit_is_told_why() -> None:
    ddp = gang("ns/ddp", 1, cores=2, min_member=1, bound=1, first=1)
    result = cycle(
        [node("n1", 2)],
        [ddp],
        bound_pods=[pod("ns/ddp-0", gang="ns/ddp", on="n1")],
        bound_requests={"ns/ddp": pod_request(1)},
    )
    assert result.placements == ()
    reason = reasons(result)["ns/ddp"]
    assert isinstance(reason, DoesNotFit)
    assert [dict(shape.short) for shape in reason.shapes] == [{"cpu": 1}]


def test_replacement_for_a_gang_that_fell_below_min_member_goes_first() -> None:
    # PyTorch DDP: minMember = all 3 workers; one died, so only 2 are bound.
    workers = [pod(f"ns/ddp-{i}", gang="ns/ddp", on="n1") for i in range(2)]
    ddp = gang("ns/ddp", 1, min_member=3, bound=2, first=2, created=50)
    urgent = gang("ns/urgent", 1, priority=100, created=0)
    result = cycle(
        [node("n1", 3)], [urgent, ddp], bound_pods=workers,
        bound_requests={"ns/ddp": pod_request(2)}, admitted=["ns/ddp"],
    )
    assert placed(result) == ["ns/ddp"]


def test_partly_bound_gang_holds_room_for_its_missing_members_at_once() -> None:
    # A bind cut short left 1 of 3 bound; the rest must not lose their room to
    # a newcomer, without waiting for the starvation threshold.
    bound_one = [pod("ns/job-0", gang="ns/job", on="n1"), pod("other/blocker", 2, on="n1")]
    job = gang("ns/job", 2, min_member=3, bound=1, first=1)
    newcomer = gang("ns/new", 1, created=100)
    result = cycle([node("n1", 4)], [job, newcomer], bound_pods=bound_one,
                   bound_requests={"ns/job": pod_request(1)}, admitted=["ns/job"])
    assert result.placements == ()
    held = reasons(result)["ns/job"]
    assert isinstance(held, Starving) and held.urgency == PartlyBound(1, 3)
    assert held.nodes == ("n1",)
    told = reasons(result)["ns/new"]
    assert isinstance(told, HeldForStarving) and (told.starving, told.nodes) == ("ns/job", ("n1",))


# -- starvation ---------------------------------------------------------------

BLOCKED = [node("n1", 4)]
BLOCKER = [pod("other/blocker", 1, on="n1")]


def _starvation(now: float, *giants: Gang) -> CycleResult:
    since = {str(g.key): 0.0 for g in giants}
    small = gang("ns/small", 1, created=100)
    return cycle(BLOCKED, [*giants, small], bound_pods=BLOCKER, waiting_since=since, now=now)


def test_starving_gang_holds_its_room_against_later_small_gangs() -> None:
    big = gang("ns/big", 4, created=0)
    result = _starvation(75.0, big)
    assert result.placements == ()
    reason = reasons(result)["ns/big"]
    assert isinstance(reason, Starving)
    assert (reason.urgency, reason.hold) == (Starved(60.0), pod_request(1).scale(4))
    assert _starvation(80.0, big).unplaceable == result.unplaceable  # same as time passes
    small = reasons(result)["ns/small"]
    assert isinstance(small, HeldForStarving) and small.starving == "ns/big"
    assert small.nodes == ("n1",) and reason.nodes == ("n1",)


def test_a_starving_gang_keeps_room_on_the_nodes_it_needs_so_small_gangs_cannot_fragment_it(
) -> None:
    # Two 8-core pods need two nodes with 8 cores free, not 16 cores free across four
    # nodes: small gangs spread over every node would leave each 2 short for ever.
    nodes = [node(f"n{i}", 8) for i in range(1, 5)]
    blockers = [pod(f"other/blocker-{i}", 2, on=f"n{i}") for i in range(1, 5)]
    big = gang("ns/big", 2, 8, created=0)
    smalls = [replace(gang(f"ns/small-{i}", 1, 2, created=100 + i), policy=Policy.SPREAD)
              for i in range(4)]
    result = cycle(nodes, [big, *smalls], bound_pods=blockers,
                   waiting_since={"ns/big": 0.0}, now=75.0)
    held = reasons(result)["ns/big"]
    assert isinstance(held, Starving) and held.nodes == ("n1", "n2")
    used = {node for p in result.placements for _, node in p.assignments}
    assert used and used <= {"n3", "n4"}, "nothing lands on the nodes the big gang waits for"


def test_before_the_threshold_small_gangs_pass() -> None:
    result = _starvation(59.0, gang("ns/big", 4, created=0))
    assert placed(result) == ["ns/small"]
    assert isinstance(reasons(result)["ns/big"], DoesNotFit)


def test_only_the_first_starving_gang_holds_room() -> None:
    first = gang("ns/big-a", 4, created=0)
    second = gang("ns/big-b", 4, created=1)
    result = _starvation(75.0, first, second)
    assert isinstance(reasons(result)["ns/big-a"], Starving)
    assert isinstance(reasons(result)["ns/big-b"], DoesNotFit)
    small = reasons(result)["ns/small"]
    assert isinstance(small, HeldForStarving) and small.starving == "ns/big-a"


def test_a_gang_short_of_members_never_starves_and_holds_nothing() -> None:
    # A Job with parallelism 2 under a PodGroup of minMember 3: it can never be whole.
    short = gang("ns/short", 2, min_member=3, created=0)
    result = _starvation(75.0, short)
    assert placed(result) == ["ns/small"]
    assert reasons(result)["ns/short"] == ShortOfMembers(GangKey("ns/short"), has=2, needs=3)

    # Partly bound and short (a member gone, its replacement not yet created):
    # the replacement holds cover it, not the starving gang's.
    bound = gang("ns/job", 1, min_member=3, bound=1, first=1, created=0)
    result = cycle(BLOCKED, [bound, gang("ns/small", 2, created=100)],
                   bound_pods=[*BLOCKER, pod("ns/job-0", gang="ns/job", on="n1")],
                   bound_requests={"ns/job": pod_request(1)}, admitted=["ns/job"])
    assert placed(result) == ["ns/small"]
    assert reasons(result)["ns/job"] == ShortOfMembers(GangKey("ns/job"), has=2, needs=3)


def test_a_gang_bigger_than_the_cluster_holds_nothing() -> None:
    result = _starvation(75.0, gang("ns/huge", 5, created=0))
    assert placed(result) == ["ns/small"]
    huge = reasons(result)["ns/huge"]
    assert isinstance(huge, TooBigToHold)
    assert (cores(huge.need), cores(huge.cluster_total)) == (5, 4)


# -- properties ---------------------------------------------------------------


@st.composite
def cycle_inputs(draw: st.DrawFn) -> CycleInput:
    nodes = [
        node(f"n{i}", draw(st.integers(1, 4)), unschedulable=draw(st.booleans()))
        for i in range(draw(st.integers(1, 4)))
    ]
    queues = {
        DEFAULT: QueueSpec(DEFAULT),
        QueueName("a"): QueueSpec(
            QueueName("a"),
            weight=draw(st.integers(1, 3)),
            capability=draw(st.sampled_from(
                [None, Capability.parse({"cpu": 3}), Capability.parse({"cpu": 6})])),
            open=draw(st.booleans()),
        ),
    }
    gangs: list[Gang] = []
    bound_requests: dict[GangKey, Resources] = {}
    for i in range(draw(st.integers(0, 8))):
        pods = draw(st.integers(0, 3))
        bound = draw(st.integers(0, 2))
        key = f"ns/g{i}"
        gangs.append(
            gang(
                key,
                pods,
                draw(st.integers(1, 2)),
                min_member=draw(st.integers(1, max(1, pods + bound))),
                bound=bound,
                queue=draw(st.sampled_from(["default", "a", "missing"])),
                min_cpu=draw(st.sampled_from([0, 0, 2, 4])),
                priority=draw(st.integers(0, 2)),
                created=draw(st.integers(0, 3)),
            )
        )
        if bound:
            bound_requests[GangKey(key)] = pod_request(bound)
    keys = [g.key for g in gangs]
    admitted = draw(st.lists(st.sampled_from(keys), unique=True)) if keys else []
    waiting = draw(st.lists(st.sampled_from(keys), unique=True)) if keys else []
    return CycleInput(
        snapshot=Snapshot.build(nodes, ()),
        gangs=tuple(draw(st.permutations(gangs))),
        bound_requests=bound_requests,
        queues=queues,
        admitted=frozenset(admitted),
        waiting_since=dict.fromkeys(waiting, 0.0),
        now=draw(st.sampled_from([10.0, 100.0])),
        policy=draw(st.sampled_from(list(Policy))),
    )


@settings(max_examples=60, deadline=None)
@given(inp=cycle_inputs(), data=st.data())
def test_same_input_same_output_whatever_the_order_of_gangs(
    inp: CycleInput, data: st.DataObject
) -> None:
    shuffled = CycleInput(
        snapshot=inp.snapshot,
        gangs=tuple(data.draw(st.permutations(inp.gangs))),
        bound_requests=dict(reversed(list(inp.bound_requests.items()))),
        queues=inp.queues,
        admitted=inp.admitted,
        waiting_since=inp.waiting_since,
        now=inp.now,
        policy=inp.policy,
    )
    assert run_cycle(inp) == run_cycle(inp) == run_cycle(shuffled)


@settings(max_examples=60, deadline=None)
@given(inp=cycle_inputs())
def test_every_waiting_gang_is_placed_or_told_why_once(inp: CycleInput) -> None:
    result = run_cycle(inp)
    decided = [p.gang for p in result.placements] + [u.gang for u in result.unplaceable]
    assert sorted(decided) == sorted(g.key for g in inp.gangs if g.pending)
    assert all(u.reason for u in result.unplaceable)
    present = {g.key for g in inp.gangs}
    assert result.admitted == (inp.admitted & present) | set(result.newly_admitted)
    assert not set(result.newly_admitted) & inp.admitted


@settings(max_examples=60, deadline=None)
@given(inp=cycle_inputs())
def test_no_node_oversubscribed_and_no_cordoned_node_used(inp: CycleInput) -> None:
    result = run_cycle(inp)
    pods = {p.key: p for g in inp.gangs for p in g.pending}
    used: dict[NodeName, Resources] = {}
    for placement in result.placements:
        for pod_key, on in placement.assignments:
            used[on] = used.get(on, Resources.zero()) + pods[pod_key].requests
    for on, amount in used.items():
        target = inp.snapshot.nodes[on].node
        assert not target.unschedulable
        assert amount.fits(target.allocatable)


@settings(max_examples=60, deadline=None)
@given(inp=cycle_inputs())
def test_placements_never_break_a_reservation_that_held_at_the_start(inp: CycleInput) -> None:
    """Without starvation, the room left covers every admitted gang's unused minResources."""
    inp = CycleInput(
        snapshot=inp.snapshot,
        gangs=inp.gangs,
        bound_requests=inp.bound_requests,
        queues=inp.queues,
        admitted=inp.admitted,
        waiting_since={},
        now=inp.now,
        policy=inp.policy,
    )
    zero = Resources.zero()
    free = zero
    for usage in inp.snapshot.nodes.values():
        if not usage.node.unschedulable:
            free = free + usage.node.allocatable

    def reserved(admitted: frozenset[GangKey], bound: Mapping[GangKey, Resources]) -> int:
        return sum(
            max(0, g.min_resources.get("cpu") - bound.get(g.key, zero).get("cpu"))
            for g in inp.gangs
            if g.key in admitted
        )

    start_admitted = inp.admitted | {g.key for g in inp.gangs if g.bound > 0}
    if reserved(start_admitted, inp.bound_requests) > free.get("cpu"):
        return  # promised more than there is before the cycle began: nothing to keep
    result = run_cycle(inp)
    pods = {p.key: p for g in inp.gangs for p in g.pending}
    bound = dict(inp.bound_requests)
    for placement in result.placements:
        for pod_key, _ in placement.assignments:
            request = pods[pod_key].requests
            free = free - request
            bound[placement.gang] = bound.get(placement.gang, zero) + request
    assert reserved(result.admitted, bound) <= free.get("cpu")


def test_podgroup_without_pods_naming_a_missing_queue_is_told_so() -> None:
    result = cycle(SIX_CPU, [gang("ns/a", 0, queue="nope", min_member=1, min_cpu=1)])
    assert {u.gang: u.reason for u in result.unadmitted} == {
        "ns/a": QueueMissing(QueueName("nope"))}
    assert result.admitted == frozenset()


def test_closed_queue_still_places_a_replacement_for_a_running_gang() -> None:
    closed = QueueSpec(QueueName("q"), open=False)
    replacement = gang("ns/running", 1, min_member=2, bound=1, queue="q", first=1)
    result = cycle(SIX_CPU, [replacement], bound_pods=[pod("ns/running-0", on="n1")],
                   queues=[closed])
    assert placed(result) == ["ns/running"]


def test_capability_caps_every_resource_it_names_under_a_flood() -> None:
    capped = QueueSpec(QueueName("q"),
                       capability=Capability.parse({"cpu": 3, "pods": 2}))
    flood = [gang(f"ns/g{i}", 1, queue="q", created=float(i)) for i in range(20)]
    result = cycle([node("big", 64)], flood, queues=[capped])
    # cpu would allow three; the pod cap of two binds first.
    assert len(result.placements) == 2


def test_a_capability_of_zero_lets_none_of_that_resource_in() -> None:
    no_cpu = QueueSpec(QueueName("q"), capability=Capability.parse({"cpu": "0"}))
    result = cycle([node("big", 64)], [gang("ns/a", 1, queue="q")], queues=[no_cpu])
    assert result.placements == ()
    exceeded = reasons(result)["ns/a"]
    assert isinstance(exceeded, CapabilityExceeded) and exceeded.capability == no_cpu.capability

    # A zero on a resource the gang does not ask for stops nothing.
    no_gpu = QueueSpec(QueueName("q"), capability=Capability.parse({"nvidia.com/gpu": 0}))
    result = cycle([node("big", 64)], [gang("ns/a", 1, queue="q")], queues=[no_gpu])
    assert placed(result) == ["ns/a"]
