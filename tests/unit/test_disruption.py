"""A gang bound whole gets a PodDisruptionBudget of its own, which never stops gangsched's
own preemption from taking the gang whole (it is deleted first)."""

from __future__ import annotations

from dataclasses import replace

from gangsched.core.actions import Evict, WriteBudget
from gangsched.core.kubeobjects.podgroups import COSCHEDULING_LABEL, GROUP_LABEL
from gangsched.core.model.objects import (
    DisruptionBudget,
    Flavor,
    GangKey,
    Node,
    Pod,
    PodKey,
    QueueSpec,
)
from gangsched.core.placement.capacity import Snapshot
from gangsched.core.stages.gangs import Member
from gangsched.core.state import State
from gangsched.core.step import StepConfig, Stepped, step
from gangsched.core.view import StepView
from tests.unit.test_cycle import DEFAULT, node, pod
from tests.unit.test_step import Cluster, Group, Record, group
from tests.unit.test_step_queue_rules import lone, podgroup

BUDGETS = StepConfig(disruption_budgets=True, preemption=True)
JOB = GangKey("ns/job")


def labelled(name: str, count: int, *, on: str | None, label: str = GROUP_LABEL,
             first: int = 0) -> list[Pod]:
    return [replace(pod(f"ns/{name}-{i}", 1, gang=f"ns/{name}", on=on),
                    labels=((label, name),)) for i in range(first, first + count)]


def cluster_view(nodes: list[Node], pods: list[Pod], groups: list[Group],
                 budgets: tuple[DisruptionBudget, ...] = ()) -> StepView:
    cluster = Cluster(
        snapshot=Snapshot.build(nodes, pods),
        members=tuple(Member(p, p.gang, running=p.node_name is not None) for p in pods),
        groups={g.key: g for g in groups},
        queues={DEFAULT: QueueSpec(DEFAULT)},
        pods={p.key: Record(p, f"uid-{p.key}") for p in pods},
    )
    return StepView(cluster, budgets=budgets, priority_classes={})


def stepped(nodes: list[Node], pods: list[Pod], groups: list[Group], *,
            budgets: tuple[DisruptionBudget, ...] = (),
            config: StepConfig = BUDGETS) -> Stepped:
    return step(State(), cluster_view(nodes, pods, groups, budgets), 1000.0, config)


def written(result: Stepped) -> list[WriteBudget]:
    return [a for a in result.actions if isinstance(a, WriteBudget)]


def test_a_gang_bound_whole_gets_a_budget_of_minmember_owned_by_its_podgroup() -> None:
    result = stepped([node("n1", 4)], labelled("job", 3, on="n1"), [group("job", 2)])
    assert written(result) == [WriteBudget(JOB, Flavor.GANGSCHED.value, "u1", 2,
                                           (GROUP_LABEL, "job"))]


def test_a_gang_labelled_the_scheduler_plugins_way_is_selected_by_that_label() -> None:
    pods = labelled("job", 2, on="n1", label=COSCHEDULING_LABEL)
    (budget,) = written(stepped([node("n1", 4)], pods, [group("job", 2)]))
    assert budget.label == (COSCHEDULING_LABEL, "job")


def test_no_budget_for_a_gang_not_bound_whole_one_that_has_its_own_or_when_turned_off() -> None:
    partly = [*labelled("job", 1, on="n1"), *labelled("job", 2, on=None, first=1)]
    nodes, groups = [node("n1", 1)], [group("job", 3)]
    assert written(stepped(nodes, partly, groups)) == []
    whole = labelled("job", 2, on="n1")
    exists = DisruptionBudget("ns/job", "ns", group_uid="u1")
    assert written(stepped([node("n1", 2)], whole, [group("job", 2)], budgets=(exists,))) == []
    off = replace(BUDGETS, disruption_budgets=False)
    assert written(stepped([node("n1", 2)], whole, [group("job", 2)], config=off)) == []


def test_a_gang_whose_pods_carry_no_group_label_gets_no_budget() -> None:
    """Volcano's annotation and the native field leave a budget nothing to select by."""
    pods = [pod(f"ns/job-{i}", 1, gang="ns/job", on="n1") for i in range(2)]
    assert written(stepped([node("n1", 2)], pods, [group("job", 2)])) == []


def test_a_gangs_own_budget_does_not_stop_its_preemption_whole_and_goes_first() -> None:
    low = labelled("low", 2, on="n1")
    high = lone("high", 2, priority=1000)
    groups = [podgroup("low", 2)]
    own = DisruptionBudget("ns/low", "ns", match_labels=((GROUP_LABEL, "low"),),
                           disruptions_allowed=0, group_uid="uid-low")
    (evict,) = [a for a in stepped([node("n1", 2)], [*low, high], groups,
                                   budgets=(own,)).actions if isinstance(a, Evict)]
    assert evict.preemption.victims == (GangKey("ns/low"),)
    assert evict.own_budgets == ("ns/low",)
    assert set(evict.victim_pods[GangKey("ns/low")]) == {PodKey("ns/low-0"),
                                                         PodKey("ns/low-1")}
    # A person's budget of the same figures, owned by no PodGroup, still protects it.
    persons = replace(own, group_uid="")
    assert not [a for a in stepped([node("n1", 2)], [*low, high], groups,
                                   budgets=(persons,)).actions if isinstance(a, Evict)]


def test_a_gang_being_preempted_gets_no_budget_again_while_its_eviction_is_under_way() -> None:
    """Its own budget was deleted so that it may go whole: one created again before the
    Eviction API takes its pods would refuse some of them and leave it half evicted."""
    low = labelled("low", 2, on="n1")
    high = lone("high", 2, priority=1000)
    groups = [podgroup("low", 2)]
    cluster = cluster_view([node("n1", 2)], [*low, high], groups)
    first = step(State(), cluster, 1000.0, BUDGETS)
    assert [a for a in first.actions if isinstance(a, Evict)] and written(first) == []
    # A second later its pods still run: the evictions are not through yet.
    assert written(step(first.state, cluster, 1001.0, BUDGETS)) == []
