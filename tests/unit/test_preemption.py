"""Victim choice: whole gangs, the fewest and lowest that really make room."""

from __future__ import annotations

from dataclasses import replace
from itertools import combinations

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from gangsched.core.dra.devices import DeviceClassSpec, Inventory
from gangsched.core.model.objects import DisruptionBudget, Gang, GangKey, Node, NodeName, PodKey
from gangsched.core.placement.capacity import Capacity, Placement, Snapshot
from gangsched.core.placement.preemption import (
    Candidate,
    Preemption,
    budget_selects,
    choose_victims,
    protected_by_budgets,
    shifted,
)
from tests.unit.clusters import gang, max_placeable, node, overcommitted, pod, workers


def running(key: str, nodes: list[str], *, gpu: int = 1, priority: int = 0,
            created: float = 0.0) -> Candidate:
    pods = tuple(pod(f"{key}-{i}", cpu="100m", memory="128Mi", gpu=gpu, node_name=name)
                 for i, name in enumerate(nodes))
    return Candidate(GangKey(key), priority, created, pods)


def cluster(candidates: list[Candidate], nodes: list[Node]) -> Snapshot:
    return Snapshot.build(nodes, [p for c in candidates for p in c.pods])


def urgent(count: int, *, gpu: int = 1, priority: int = 100) -> Gang:
    return replace(gang("ns/urgent", workers("ns/u", count, cpu="100m", memory="128Mi", gpu=gpu)),
                   priority=priority)


def gpu_nodes(count: int, gpus: int = 8) -> list[Node]:
    return [node(f"n{i}", cpu="32", memory="128Gi", gpu=gpus) for i in range(count)]


def test_evicts_exactly_enough_whole_gangs_for_an_eight_gpu_gang() -> None:
    nodes = gpu_nodes(4)
    # 16 gangs of 2 one-GPU pods fill 4 x 8 GPUs.
    small = [running(f"ns/g{i:02d}", [f"n{i // 4}"] * 2, created=float(i)) for i in range(16)]
    chosen = choose_victims(cluster(small, nodes), urgent(2, gpu=4), small)
    assert chosen is not None
    assert len(chosen.victims) == 4
    assert len(chosen.pods) == 8  # every pod of every victim
    freed = shifted(cluster(small, nodes), remove=[
        p for c in small if c.gang in chosen.victims for p in c.pods])
    assert overcommitted(freed, chosen.placement, urgent(2, gpu=4).pending) == []


def test_lowest_priority_and_then_youngest_go_first() -> None:
    nodes = gpu_nodes(1, gpus=4)
    low_old = running("ns/low-old", ["n0", "n0"], priority=1, created=1.0)
    low_new = running("ns/low-new", ["n0"], priority=1, created=2.0)
    mid = running("ns/mid", ["n0"], priority=5, created=3.0)
    everyone = [low_old, low_new, mid]
    chosen = choose_victims(cluster(everyone, nodes), urgent(1), everyone)
    assert chosen is not None and chosen.victims == ("ns/low-new",)


def test_fewer_victims_beat_lower_priority_ones() -> None:
    nodes = gpu_nodes(1, gpus=4)
    one_big = running("ns/big", ["n0"], gpu=2, priority=5)
    two_small = [running(f"ns/s{i}", ["n0"], priority=1) for i in range(2)]
    everyone = [one_big, *two_small]
    chosen = choose_victims(cluster(everyone, nodes), urgent(1, gpu=2), everyone)
    assert chosen is not None and chosen.victims == ("ns/big",)


def test_nothing_evicted_when_even_all_victims_would_not_do() -> None:
    nodes = gpu_nodes(2, gpus=2)
    small = [running(f"ns/g{i}", [f"n{i}"], gpu=2) for i in range(2)]
    # One pod of 4 GPUs fits no 2-GPU node, however empty.
    assert choose_victims(cluster(small, nodes), urgent(1, gpu=4), small) is None


def test_a_gang_that_may_not_preempt_evicts_nothing() -> None:
    nodes = gpu_nodes(1, gpus=2)
    low = running("ns/low", ["n0", "n0"])
    assert choose_victims(cluster([low], nodes), replace(urgent(1), preempts=False), [low]) is None


def test_room_check_rejects_sets_that_break_other_promises() -> None:
    nodes = gpu_nodes(1, gpus=2)
    low = running("ns/low", ["n0", "n0"])
    assert choose_victims(cluster([low], nodes), urgent(1), [low],
                          room=lambda freed, placement: False) is None


def test_shifted_adds_and_removes_requests_on_their_nodes() -> None:
    nodes = gpu_nodes(1, gpus=2)
    low = running("ns/low", ["n0"])
    snapshot = cluster([low], nodes)
    n0 = NodeName("n0")
    assert shifted(snapshot, remove=low.pods).free(n0) == Snapshot.build(nodes, []).free(n0)
    assert shifted(shifted(snapshot, remove=low.pods), add=low.pods) == snapshot


def test_shifted_keeps_the_devices_and_the_pods_on_nodes() -> None:
    nodes = gpu_nodes(1, gpus=2)
    low = running("ns/low", ["n0"])
    devices = Inventory(classes={"gpu": DeviceClassSpec("gpu")})
    snapshot = replace(cluster([low], nodes), devices=devices)
    freed = shifted(snapshot, remove=low.pods)
    assert freed.devices is devices
    assert freed.pods == () and shifted(freed, add=low.pods).pods == low.pods


# ---------------------------------------------------------------- properties


@st.composite
def preemption_instances(draw: st.DrawFn) -> tuple[Snapshot, Gang, list[Candidate]]:
    """A few GPU nodes full of small running gangs of mixed priority, and a preemptor."""
    count = draw(st.integers(1, 3))
    nodes = [node(f"n{i}", cpu="4", memory="8Gi", gpu=draw(st.sampled_from([2, 3, 4])))
             for i in range(count)]
    free = {n.name: n.allocatable.get("nvidia.com/gpu") for n in nodes}
    candidates: list[Candidate] = []
    for g in range(draw(st.integers(1, 6))):
        size = draw(st.integers(1, 3))
        placed: list[str] = []
        for _ in range(size):
            options = sorted(name for name, left in free.items() if left > 0)
            if not options:
                break
            name = draw(st.sampled_from(options))
            free[name] -= 1
            placed.append(name)
        if placed:
            candidates.append(running(f"ns/g{g}", placed, priority=draw(st.integers(0, 3)),
                                      created=float(draw(st.integers(0, 5)))))
    pods = draw(st.integers(1, 4))
    gpus = draw(st.sampled_from([1, 1, 2]))
    preemptor = replace(
        gang("ns/urgent", workers("ns/u", pods, cpu="100m", memory="128Mi", gpu=gpus),
             min_member=draw(st.integers(1, pods))),
        priority=draw(st.integers(1, 4)),
    )
    return cluster(candidates, nodes), preemptor, candidates


def fits_without(snapshot: Snapshot, preemptor: Gang, victims: tuple[Candidate, ...]) -> bool:
    """Independent of the code under test: brute force over every assignment."""
    freed = shifted(snapshot, remove=[p for v in victims for p in v.pods])
    return max_placeable(freed, preemptor.pending) >= preemptor.min_member - preemptor.bound


def chosen_for(
    instance: tuple[Snapshot, Gang, list[Candidate]],
) -> tuple[Snapshot, Gang, list[Candidate], Preemption | None]:
    """The instance and the victims chosen for it among the gangs of lower priority, as the
    preemption stage offers them; only gangs that do not fit as they are, since
    preemption is for them."""
    snapshot, preemptor, candidates = instance
    assume(not fits_without(snapshot, preemptor, ()))
    lower = [c for c in candidates if c.priority < preemptor.priority]
    return snapshot, preemptor, candidates, choose_victims(snapshot, preemptor, lower)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(preemption_instances())
def test_evicting_the_chosen_set_always_makes_the_preemptor_fit(
    instance: tuple[Snapshot, Gang, list[Candidate]],
) -> None:
    snapshot, preemptor, candidates, chosen = chosen_for(instance)
    if chosen is None:
        return
    by_key = {c.gang: c for c in candidates}
    victims = tuple(by_key[key] for key in chosen.victims)
    assert all(v.priority < preemptor.priority for v in victims)
    # Whole gangs: every pod of every victim, and nothing else.
    assert sorted(chosen.pods) == sorted(p.key for v in victims for p in v.pods)
    freed = shifted(snapshot, remove=[p for v in victims for p in v.pods])
    assert fits_without(snapshot, preemptor, victims)
    assert overcommitted(freed, chosen.placement, preemptor.pending) == []
    again = Capacity.from_snapshot(freed).place(preemptor)
    assert isinstance(again, Placement)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(preemption_instances())
def test_no_smaller_set_of_lower_priority_would_do(
    instance: tuple[Snapshot, Gang, list[Candidate]],
) -> None:
    snapshot, preemptor, candidates, chosen = chosen_for(instance)
    lower = [c for c in candidates if c.priority < preemptor.priority]
    size = len(chosen.victims) if chosen is not None else len(lower) + 1
    for smaller in range(size):
        for victims in combinations(lower, smaller):
            assert not fits_without(snapshot, preemptor, victims), (
                f"{[v.gang for v in victims]} would do with fewer victims than "
                f"{chosen.victims if chosen else 'none found'}"
            )


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(preemption_instances())
def test_of_the_smallest_sets_the_highest_victim_priority_is_lowest(
    instance: tuple[Snapshot, Gang, list[Candidate]],
) -> None:
    snapshot, preemptor, candidates, chosen = chosen_for(instance)
    if chosen is None:
        return
    lower = [c for c in candidates if c.priority < preemptor.priority]
    worst = max(c.priority for c in candidates if c.gang in chosen.victims)
    for victims in combinations(lower, len(chosen.victims)):
        if fits_without(snapshot, preemptor, victims):
            assert max(v.priority for v in victims) >= worst


def guarded(candidate: Candidate, label: str) -> Candidate:
    """The candidate with every pod labelled ``guard=<label>``."""
    return replace(candidate, pods=tuple(replace(p, labels=(("guard", label),))
                                         for p in candidate.pods))


def budget(name: str, label: str, allowed: int) -> DisruptionBudget:
    return DisruptionBudget(f"ns/{name}", "ns", match_labels=(("guard", label),),
                            disruptions_allowed=allowed)


def test_a_budget_allowing_one_disruption_protects_a_four_pod_gang() -> None:
    nodes = gpu_nodes(1, gpus=4)
    victim = guarded(running("ns/train", ["n0"] * 4), "train")
    one = budget("train", "train", 1)
    assert choose_victims(cluster([victim], nodes), urgent(1), [victim], budgets=[one]) is None
    assert protected_by_budgets([victim], [one]) == {"ns/train": ("ns/train",)}
    # Without the budget the same gang goes, whole.
    chosen = choose_victims(cluster([victim], nodes), urgent(1), [victim])
    assert chosen is not None and len(chosen.pods) == 4


def test_a_budget_is_spent_by_every_victim_of_one_preemption_together() -> None:
    nodes = gpu_nodes(1, gpus=4)
    # Two gangs of 2 under one budget allowing 3: either may go, not both.
    shared = [guarded(running(f"ns/s{i}", ["n0", "n0"], created=float(i)), "shared")
              for i in range(2)]
    three = budget("shared", "shared", 3)
    assert protected_by_budgets(shared, [three]) == {}
    assert choose_victims(cluster(shared, nodes), urgent(4), shared, budgets=[three]) is None
    # With an older gang no budget guards, the preemptor takes it and one of the two,
    # though without the budget the two younger would go.
    nodes = gpu_nodes(1, gpus=6)
    free = running("ns/free", ["n0", "n0"], created=-5.0)  # oldest: last choice
    everyone = [*shared, free]
    chosen = choose_victims(cluster(everyone, nodes), urgent(4), everyone, budgets=[three])
    assert chosen is not None and "ns/free" in chosen.victims and len(chosen.victims) == 2
    unbudgeted = choose_victims(cluster(everyone, nodes), urgent(4), everyone)
    assert unbudgeted is not None and set(unbudgeted.victims) == {"ns/s0", "ns/s1"}


def test_the_greedy_fallback_spends_no_budget_beyond_what_it_allows() -> None:
    nodes = gpu_nodes(1, gpus=4)
    shared = [guarded(running(f"ns/s{i}", ["n0", "n0"], created=float(i)), "shared")
              for i in range(2)]
    three = budget("shared", "shared", 3)
    # A search budget of one placement check sends the choice to the greedy fallback.
    assert choose_victims(cluster(shared, nodes), urgent(4), shared, budgets=[three],
                          budget=1) is None


def test_a_budget_selects_its_namespace_and_labels_only() -> None:
    labelled = replace(pod("ns/a", node_name="n0"), labels=(("guard", "x"),))
    one = budget("x", "x", 0)
    assert budget_selects(one, labelled)
    assert not budget_selects(one, replace(labelled, key=PodKey("other/a")))
    assert not budget_selects(one, replace(labelled, labels=()))
    assert budget_selects(replace(one, match_labels=()), replace(labelled, labels=()))
    assert not budget_selects(replace(one, selects_pods=False), labelled)
