"""Properties of gang placement on random small clusters."""

from __future__ import annotations

import random
from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gangsched.core.model import Gang, GangKey, PodKey
from gangsched.core.nodefit import node_excluded_reason
from gangsched.core.placement import Capacity, Placement, Snapshot, Unplaceable, apply, remove
from gangsched.core.resources import Resources
from tests.unit.clusters import (
    gang,
    max_placeable,
    node,
    overcommitted,
    pod,
    small_gangs,
    small_snapshots,
    tight_instances,
)

PROPERTY = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def need_of(gang: Gang) -> int:
    return max(0, gang.min_member - gang.bound)


@PROPERTY
@given(small_snapshots(), small_gangs())
def test_no_node_is_overcommitted(snapshot: Snapshot, gang: Gang) -> None:
    decision = Capacity.from_snapshot(snapshot).place(gang)
    if isinstance(decision, Placement):
        assert overcommitted(snapshot, decision, gang.pending) == []


@PROPERTY
@given(small_snapshots(), small_gangs())
def test_gang_is_placed_whole_or_not_at_all(snapshot: Snapshot, gang: Gang) -> None:
    decision = Capacity.from_snapshot(snapshot).place(gang)
    if isinstance(decision, Placement):
        keys = [key for key, _ in decision.assignments]
        assert len(keys) == len(set(keys))
        assert set(keys) <= {pod.key for pod in gang.pending}
        assert len(keys) >= max(need_of(gang), 1)
    else:
        assert getattr(decision.reason, "gang", None) == gang.key


@PROPERTY
@given(small_snapshots(), small_gangs())
def test_no_pod_lands_where_its_rules_exclude_it(snapshot: Snapshot, gang: Gang) -> None:
    decision = Capacity.from_snapshot(snapshot).place(gang)
    if isinstance(decision, Placement):
        by_key = {pod.key: pod for pod in gang.pending}
        for key, name in decision.assignments:
            assert node_excluded_reason(by_key[key].rules, snapshot.nodes[name].node) is None


@PROPERTY
@given(small_snapshots(), small_gangs())
def test_completeness_against_brute_force(snapshot: Snapshot, gang: Gang) -> None:
    """A placement is found exactly when one exists."""
    decision = Capacity.from_snapshot(snapshot).place(gang)
    possible = max_placeable(snapshot, list(gang.pending))
    exists = possible >= max(need_of(gang), 1)
    assert isinstance(decision, Placement) == exists, decision
    one_kind = len({(pod.requests, pod.rules) for pod in gang.pending}) == 1
    if isinstance(decision, Placement) and one_kind:
        # pods beyond the minimum are placed as far as they fit (exactly, for one kind)
        assert len(decision.assignments) == possible


@PROPERTY
@given(small_snapshots(), small_gangs())
def test_place_then_remove_restores_the_snapshot(snapshot: Snapshot, gang: Gang) -> None:
    decision = Capacity.from_snapshot(snapshot).place(gang)
    if isinstance(decision, Placement):
        applied = apply(snapshot, decision, gang.pending)
        assert remove(applied, decision, gang.pending) == snapshot


@PROPERTY
@given(small_snapshots(), small_gangs(), small_gangs())
def test_capacity_matches_apply_and_release_restores_it(
    snapshot: Snapshot, first: Gang, second: Gang
) -> None:
    second = replace(second, pending=tuple(
        replace(pod, key=PodKey(f"second/{pod.key}")) for pod in second.pending
    ))
    capacity = Capacity.from_snapshot(snapshot)
    original = {name: capacity.free(name) for name in snapshot.nodes}
    decision = capacity.place(first)
    if isinstance(decision, Placement):
        applied = apply(snapshot, decision, first.pending)
        assert {name: capacity.free(name) for name in snapshot.nodes} == {
            name: applied.free(name) for name in snapshot.nodes
        }
        # a second gang sees the first one's pods as used
        later = capacity.place(second)
        fresh = Capacity.from_snapshot(applied).place(second)
        assert isinstance(later, Placement) == isinstance(fresh, Placement)
        if isinstance(later, Placement):
            capacity.release(later)
        capacity.release(decision)
    assert {name: capacity.free(name) for name in snapshot.nodes} == original
    total = Resources.zero()
    for name, usage in snapshot.nodes.items():
        if usage.node.ready and not usage.node.unschedulable:
            # An overcommitted resource counts as nothing left, never as negative.
            positive = {r: v for r, v in original[name].amounts.items() if v > 0}
            total = total + Resources.of(positive)
    assert capacity.free_total() == total


@PROPERTY
@given(small_snapshots(), small_gangs(), st.sampled_from([False, True]))
def test_deterministic(snapshot: Snapshot, gang: Gang, rebuild: bool) -> None:
    first = Capacity.from_snapshot(snapshot).place(gang)
    again = Snapshot(dict(snapshot.nodes)) if rebuild else snapshot
    second = Capacity.from_snapshot(again).place(gang)
    assert first == second
    assert isinstance(first, Placement | Unplaceable)


@PROPERTY
@given(tight_instances())
def test_completeness_on_tight_instances(instance: tuple[Snapshot, Gang]) -> None:
    snapshot, gang = instance
    decision = Capacity.from_snapshot(snapshot).place(gang)
    exists = max_placeable(snapshot, list(gang.pending)) >= max(need_of(gang), 1)
    assert isinstance(decision, Placement) == exists, decision


def test_completeness_where_greedy_alone_fails() -> None:
    """Seeded instances, many of which first-fit gets wrong; the search must not."""
    rng = random.Random(20240501)
    searched = 0
    for _ in range(1500):
        nodes = [node(f"n{i}", cpu=rng.choice(["1", "2", "3", "4"]),
                      memory=rng.choice(["1Gi", "2Gi", "3Gi", "4Gi"]))
                 for i in range(rng.randint(1, 6))]
        shapes = [{"cpu": rng.choice(["500m", "1", "1500m", "2", "3"]),
                   "memory": rng.choice(["512Mi", "1Gi", "2Gi", "3Gi"])}
                  for _ in range(rng.randint(2, 3))]
        picks = [rng.choice(shapes) for _ in range(rng.randint(2, 6))]
        members = [pod(f"ns/p{i}", cpu=s["cpu"], memory=s["memory"]) for i, s in enumerate(picks)]
        min_member = rng.choice([len(members), len(members) - 1, rng.randint(1, len(members))])
        snapshot = Snapshot.build(nodes, [])
        subject = gang("ns/g", members, min_member=min_member)
        decision = Capacity.from_snapshot(snapshot).place(subject)
        exists = max_placeable(snapshot, members) >= min_member
        assert isinstance(decision, Placement) == exists, (nodes, members, min_member)
        greedy_only = Capacity(snapshot, budget=0).place(subject)
        searched += isinstance(decision, Placement) and isinstance(greedy_only, Unplaceable)
    assert searched >= 10  # the instances really do need the search


def renamed(gang: Gang, prefix: str) -> Gang:
    return replace(gang, key=GangKey(f"{prefix}/{gang.key}"), pending=tuple(
        replace(pod, key=PodKey(f"{prefix}/{pod.key}")) for pod in gang.pending
    ))


@PROPERTY
@given(small_snapshots(), st.lists(st.tuples(small_gangs(), st.booleans()), max_size=4),
       small_gangs())
def test_a_pass_of_places_and_releases_agrees_with_a_fresh_snapshot(
    snapshot: Snapshot, steps: list[tuple[Gang, bool]], probe: Gang
) -> None:
    """Incremental bookkeeping (groups, shape indexes) never drifts from recomputing."""
    capacity = Capacity.from_snapshot(snapshot)
    current = snapshot
    for number, (step, release) in enumerate(steps):
        member = renamed(step, f"g{number}")
        decision = capacity.place(member)
        if not isinstance(decision, Placement):
            continue
        if release:
            capacity.release(decision)
        else:
            current = apply(current, decision, member.pending)
    assert {name: capacity.free(name) for name in snapshot.nodes} == {
        name: current.free(name) for name in snapshot.nodes
    }
    ours = capacity.place(probe)
    fresh = Capacity.from_snapshot(current).place(probe)
    assert isinstance(ours, Placement) == isinstance(fresh, Placement)
    if isinstance(ours, Unplaceable) and isinstance(fresh, Unplaceable):
        assert ours.reason == fresh.reason
