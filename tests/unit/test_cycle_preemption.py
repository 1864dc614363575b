"""Preemption inside the cycle: whole gangs of lower priority, one preemption at a time."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from gangsched.core.model.objects import (
    DisruptionBudget,
    Gang,
    GangKey,
    Pod,
    PodKey,
    Policy,
    QueueName,
    QueueSpec,
)
from gangsched.core.model.resources import Resources
from gangsched.core.placement.capacity import Snapshot
from gangsched.core.reasons import (
    AwaitingVictims,
    BeingPreempted,
    DoesNotFit,
    Preempting,
    ProtectedByBudget,
)
from gangsched.core.stages.cycle import CycleInput, CycleResult, run_cycle
from tests.unit.test_cycle import gang, node, pod, reasons

DEFAULT = QueueName("default")
NODES = [node("n1", 4), node("n2", 4)]
RACKS = [replace(node("n1", 4), labels=(("rack", "a"),)),
         replace(node("n2", 4), labels=(("rack", "b"),))]


def running(key: str, on: str, pods: int = 2, *, priority: int = 0,
            preemptible: bool = True) -> tuple[Gang, tuple[Pod, ...]]:
    """A gang with every member bound on node ``on`` and nothing pending."""
    members = tuple(pod(f"{key}-{i}", 1, gang=key, on=on) for i in range(pods))
    return (
        Gang(GangKey(key), min_member=pods, pending=(), bound=pods, priority=priority,
             preemptible=preemptible),
        members,
    )


def full(priority: int = 0) -> list[tuple[Gang, tuple[Pod, ...]]]:
    """Two nodes of 4 CPU filled by four running gangs of 2 CPU."""
    return [running(f"ns/low-{i}", f"n{1 + i // 2}", priority=priority) for i in range(4)]


def run(
    everyone: Iterable[tuple[Gang, tuple[Pod, ...]]],
    waiting: Iterable[Gang],
    *,
    in_racks: bool = False,
    preemption: bool = True,
    preempting: Mapping[str, Iterable[str]] | None = None,
    unevictable: Iterable[str] = (),
    budgets: tuple[DisruptionBudget, ...] = (),
) -> CycleResult:
    running_gangs = list(everyone)
    pods = [p for _, members in running_gangs for p in members]
    bound: dict[GangKey, Resources] = {}
    for g, members in running_gangs:
        total = Resources.zero()
        for p in members:
            total = total + p.requests
        bound[g.key] = total
    return run_cycle(CycleInput(
        snapshot=Snapshot.build(RACKS if in_racks else NODES, pods),
        gangs=(*(g for g, _ in running_gangs), *waiting),
        bound_requests=bound,
        queues={DEFAULT: QueueSpec(DEFAULT)},
        admitted=frozenset(),
        waiting_since={},
        now=1000.0,
        policy=Policy.BINPACK,
        bound_pods={g.key: members for g, members in running_gangs},
        preemption=preemption,
        preempting={GangKey(k): frozenset(GangKey(v) for v in vs)
                    for k, vs in (preempting or {}).items()},
        unevictable=frozenset(GangKey(k) for k in unevictable),
        budgets=budgets,
    ))


def urgent(pods: int = 4, priority: int = 100) -> Gang:
    return gang("ns/urgent", pods, 1, priority=priority)


def test_a_gang_that_cannot_fit_evicts_exactly_enough_whole_gangs() -> None:
    result = run(full(), [urgent(4)])
    assert len(result.preemptions) == 1
    chosen = result.preemptions[0]
    assert chosen.preemptor == "ns/urgent"
    assert len(chosen.victims) == 2
    assert len(chosen.pods) == 4
    assert result.placements == ()
    reason = reasons(result)["ns/urgent"]
    assert isinstance(reason, Preempting) and reason.victims == chosen.victims
    assert isinstance(reason.cause, DoesNotFit)


def test_no_preemption_when_the_flag_is_off() -> None:
    result = run(full(), [urgent()], preemption=False)
    assert result.preemptions == ()


def test_equal_priority_waits() -> None:
    result = run(full(priority=100), [urgent()])
    assert result.preemptions == ()


def test_a_gang_that_never_preempts_waits() -> None:
    result = run(full(), [replace(urgent(), preempts=False)])
    assert result.preemptions == ()


def test_an_opted_out_gang_is_never_a_victim() -> None:
    everyone = [running("ns/keep", "n1", 4, preemptible=False), *full()[2:]]
    result = run(everyone, [urgent(4)])
    assert [set(p.victims) for p in result.preemptions] == [{"ns/low-2", "ns/low-3"}]


def test_refused_by_the_eviction_api_is_not_chosen_again() -> None:
    result = run(full(), [urgent(4)], unevictable=["ns/low-0", "ns/low-1"])
    assert [set(p.victims) for p in result.preemptions] == [{"ns/low-2", "ns/low-3"}]
    nothing_left = run(full(), [urgent(4)], unevictable=["ns/low-0", "ns/low-1", "ns/low-2"])
    assert nothing_left.preemptions == ()


def test_while_victims_go_the_preemptor_holds_its_room_and_goes_first() -> None:
    # low-0 is gone already, low-1 is still terminating: 2 CPU are free on n1.
    everyone = full()[1:]
    newcomer = gang("ns/small", 1, 1, created=-5.0)
    result = run(everyone, [urgent(4), newcomer],
                 preempting={"ns/urgent": ["ns/low-0", "ns/low-1"]})
    assert result.placements == ()
    assert result.preemptions == ()  # one at a time: nothing more is evicted
    holding = reasons(result)["ns/urgent"]
    assert isinstance(holding, AwaitingVictims) and holding.victims == ("ns/low-0", "ns/low-1")
    assert holding.hold.get("cpu") == 4000
    small = reasons(result)["ns/small"]  # the 2 CPU free on n1 are the preemptor's
    assert isinstance(small, DoesNotFit) and small.shapes[0].room == {}


def test_the_preemptor_holds_room_on_its_nodes_and_later_gangs_use_the_others() -> None:
    # low-0 is gone from n1, low-1 still terminating there; n2 has 1 CPU free that the
    # preemptor, landing on n1, does not need: a later gang takes it.
    everyone = [*full()[1:2], running("ns/low-2", "n2", pods=3)]
    newcomer = gang("ns/small", 1, 1, created=-5.0)
    result = run(everyone, [urgent(4), newcomer],
                 preempting={"ns/urgent": ["ns/low-0", "ns/low-1"]})
    assert [p.gang for p in result.placements] == ["ns/small"]
    assert {node for p in result.placements for _, node in p.assignments} == {"n2"}
    assert isinstance(reasons(result)["ns/urgent"], AwaitingVictims)


def test_once_the_room_is_free_the_preemptor_is_placed_before_older_gangs() -> None:
    everyone = full()[2:]
    older = gang("ns/older", 4, 1, created=-100.0, priority=200)
    result = run(everyone, [urgent(4), older],
                 preempting={"ns/urgent": ["ns/low-0", "ns/low-1"]})
    assert [p.gang for p in result.placements] == ["ns/urgent"]


def test_replacements_of_a_victim_wait_for_the_preemption() -> None:
    victim, members = running("ns/low-0", "n1")
    replacing = replace(victim, pending=(pod("ns/low-0-9", 1, gang="ns/low-0"),), bound=1)
    result = run([(replacing, members[:1]), *full()[1:]], [urgent(4)],
                 preempting={"ns/urgent": ["ns/low-0", "ns/low-1"]})
    assert reasons(result)["ns/low-0"] == BeingPreempted(GangKey("ns/urgent"))
    assert PodKey("ns/low-0-9") not in {p for pl in result.placements for p, _ in pl.assignments}


def test_victims_are_chosen_against_every_gang_placed_earlier_in_the_cycle() -> None:
    """Gangs placed before a preemptor, also after another gang weighed preempting and
    chose nobody, take room the preemptor cannot count on."""
    lows = [running("ns/low-0", "n1", priority=0), running("ns/low-1", "n2", priority=0)]
    result = run(lows, [
        gang("ns/first", 1, 1, priority=300),      # placed: 3 CPU left free
        gang("ns/too-big", 10, 1, priority=200),   # cannot fit even with every eviction
        gang("ns/second", 2, 1, priority=150),     # placed: 1 CPU left free
        gang("ns/urgent", 4, 1, priority=100),     # needs 3 more: both low gangs must go
    ])
    assert {p.gang for p in result.placements} == {"ns/first", "ns/second"}
    assert [(p.preemptor, sorted(p.victims)) for p in result.preemptions] == [
        ("ns/urgent", ["ns/low-0", "ns/low-1"])]


def test_a_topology_gang_evicts_whole_gangs_inside_the_one_domain_it_will_land_in() -> None:
    # The two lowest gangs run in different racks: evicting them frees 4 CPU the gang
    # cannot use together. Both gangs of one rack go instead.
    everyone = [running("ns/low-0", "n1", priority=0), running("ns/mid-1", "n1", priority=5),
                running("ns/low-2", "n2", priority=0), running("ns/mid-3", "n2", priority=5)]
    rack_gang = replace(urgent(4), topology_keys=("rack",))
    result = run(everyone, [rack_gang], in_racks=True)
    assert [(p.preemptor, sorted(p.victims)) for p in result.preemptions] == [
        ("ns/urgent", ["ns/low-0", "ns/mid-1"])]
    assert {node for _, node in result.preemptions[0].placement.assignments} == {"n1"}
    assert isinstance(reasons(result)["ns/urgent"], Preempting)


def test_a_topology_gang_with_members_bound_evicts_only_in_their_domain() -> None:
    # Two of its four members run in rack b; low-0, first in eviction order, runs in
    # rack a, where the rest could not join them.
    bound = (pod("ns/urgent-8", 1, gang="ns/urgent", on="n2"),
             pod("ns/urgent-9", 1, gang="ns/urgent", on="n2"))
    rack_gang = replace(urgent(2), topology_keys=("rack",), min_member=4, bound=2,
                        bound_on=frozenset(p.node_name for p in bound if p.node_name))
    everyone = [(rack_gang, bound), running("ns/low-0", "n1"), running("ns/low-1", "n1"),
                running("ns/low-2", "n2")]
    result = run(everyone, [], in_racks=True)
    assert [sorted(p.victims) for p in result.preemptions] == [["ns/low-2"]]


def test_a_partly_bound_gang_evicts_for_the_members_it_lacks() -> None:
    # A bind cut short left 2 of 4 bound on n1; the other 2 find no room: one low gang
    # goes, and the gang completes instead of holding n1 idle.
    job = replace(gang("ns/job", 2, 1, min_member=4, priority=100, first=2), bound=2)
    members = tuple(pod(f"ns/job-{i}", 1, gang="ns/job", on="n1") for i in range(2))
    everyone = [(job, members), running("ns/low-0", "n1"), running("ns/low-2", "n2"),
                running("ns/low-3", "n2")]
    result = run(everyone, [])
    assert [(p.preemptor, len(p.victims)) for p in result.preemptions] == [("ns/job", 1)]
    assert len(result.preemptions[0].placement.assignments) == 2


def test_gangs_a_budget_protects_are_no_victims_and_the_preemptor_says_so() -> None:
    # One disruption allowed over every pod of the namespace: no 2-pod gang may go.
    everyone = DisruptionBudget("ns/all", "ns", disruptions_allowed=1)
    result = run(full(), [urgent(4)], budgets=(everyone,))
    assert result.preemptions == ()
    reason = reasons(result)["ns/urgent"]
    assert isinstance(reason, ProtectedByBudget)
    assert reason.gangs == ("ns/low-0", "ns/low-1", "ns/low-2", "ns/low-3")
    assert reason.budgets == ("ns/all",) and isinstance(reason.cause, DoesNotFit)
    # A budget of another namespace changes nothing.
    elsewhere = DisruptionBudget("other/all", "other", disruptions_allowed=0)
    assert len(run(full(), [urgent(4)], budgets=(elsewhere,)).preemptions) == 1
