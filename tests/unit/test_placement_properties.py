"""Properties of gang placement on random small clusters."""

from __future__ import annotations

import random
from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from gangsched.core.fit.nodefit import node_excluded_reason
from gangsched.core.model.objects import (
    Gang,
    GangKey,
    Pod,
    PodKey,
    PodPlacementRules,
    Policy,
    SelectorRequirement,
    SelectorTerm,
    Toleration,
)
from gangsched.core.model.resources import Resources
from gangsched.core.placement.capacity import (
    Capacity,
    Decision,
    Placement,
    Snapshot,
    Unplaceable,
    apply,
    remove,
)
from gangsched.core.reasons import DoesNotFit
from tests.unit.clusters import (
    BUSY,
    PROPERTY,
    ZONES,
    gang,
    max_placeable,
    node,
    overcommitted,
    pod,
    small_gangs,
    small_snapshots,
    tight_instances,
)


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
        if not usage.node.unschedulable:
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
    """Incremental bookkeeping (groups, shape indexes) never drifts from recomputing: the
    next gang lands exactly where it would on a fresh snapshot of the same free room, on
    the same nodes among equally free ones, whatever was placed and given back before."""
    capacity = Capacity.from_snapshot(snapshot)
    current = snapshot
    for number, (step, release) in enumerate(steps):
        member = renamed(step, f"g{number}")
        current = kept_or_given_back(capacity, current, member, capacity.place(member), release)
    assert {name: capacity.free(name) for name in snapshot.nodes} == {
        name: current.free(name) for name in snapshot.nodes
    }
    assert capacity.place(probe) == Capacity.from_snapshot(current).place(probe)


def kept_or_given_back(capacity: Capacity, current: Snapshot, member: Gang,
                       decision: Placement | Unplaceable, release: bool) -> Snapshot:
    """A placement given back to ``capacity`` (``release``) or kept: the snapshot of the room
    left, as ``current`` becomes when it is kept."""
    if not isinstance(decision, Placement):
        return current
    if release:
        capacity.release(decision)
        return current
    return apply(current, decision, member.pending)


@st.composite
def alike_snapshots(draw: st.DrawFn) -> Snapshot:
    """A few nodes of two sizes in two zones, so that many are equally free."""
    nodes = [node(f"n{i}", cpu=draw(st.sampled_from(["2", "4"])),
                  labels={"zone": draw(st.sampled_from(ZONES))})
             for i in range(draw(st.integers(2, 6)))]
    return Snapshot.build(nodes, [])


@st.composite
def alike_gangs(draw: st.DrawFn, prefix: str) -> Gang:
    """One to four pods of one or two sizes, some kept to a zone."""
    sizes = draw(st.lists(st.sampled_from(["1", "2"]), min_size=1, max_size=2))
    zone = draw(st.sampled_from([None, *ZONES]))
    members = [pod(f"{prefix}/p{i}", cpu=draw(st.sampled_from(sizes)),
                   selector=None if zone is None else {"zone": zone})
               for i in range(draw(st.integers(1, 4)))]
    return gang(f"{prefix}/g", members, policy=draw(st.sampled_from([None, Policy.SPREAD])))


@PROPERTY
@given(alike_snapshots(), st.lists(st.tuples(st.integers(0, 3), st.booleans()), max_size=4),
       st.data())
def test_a_gang_given_back_leaves_the_next_one_where_it_would_have_gone(
    snapshot: Snapshot, steps: list[tuple[int, bool]], data: st.DataObject
) -> None:
    """Among equally free nodes the choice never depends on what was tried and given
    back: after any places and releases, each gang lands exactly where it lands on a
    fresh snapshot of the room left, so a discarded trial changes no later decision."""
    capacity = Capacity.from_snapshot(snapshot)
    current = snapshot
    for number, (_, release) in enumerate(steps):
        member = data.draw(alike_gangs(f"g{number}"))
        decision = capacity.place(member)
        assert decision == Capacity.from_snapshot(current).place(member)
        current = kept_or_given_back(capacity, current, member, decision, release)
    probe = data.draw(alike_gangs("probe"))
    assert capacity.place(probe) == Capacity.from_snapshot(current).place(probe)


NO_SUCH_NODE = SelectorRequirement("metadata.name", "NotIn", ("no-such-node",))


def named_but_unrestricted(gang: Gang) -> Gang:
    """The gang with a rule on node names added to every pod that admits every node.

    Such rules are checked node by node, not per kind of node, so the gang
    takes the path of rules that pin pods to named nodes.
    """

    def widened(member: Pod) -> Pod:
        terms = member.rules.required_affinity or (SelectorTerm(),)
        rules = replace(member.rules, required_affinity=tuple(
            replace(term, match_fields=(*term.match_fields, NO_SUCH_NODE)) for term in terms
        ))
        return replace(member, rules=rules)

    return replace(gang, pending=tuple(widened(member) for member in gang.pending))


def busy_cluster(rng: random.Random) -> tuple[Snapshot, list[Gang]]:
    """Up to a dozen nodes of mixed sizes, labels, taints and flags, partly used,
    and a pass of gangs mixing kinds of pods, with policies of both kinds."""
    nodes = [
        node(f"n{i}", cpu=rng.choice(["1", "2", "3", "4", "8"]),
             memory=rng.choice(["1Gi", "2Gi", "4Gi", "8Gi"]), gpu=rng.choice([0, 0, 1, 2, 4]),
             pods=rng.choice([110, 110, 3]), labels={"zone": rng.choice(ZONES)},
             taints=rng.choice([(), (), (), (BUSY,)]), unschedulable=rng.random() < 0.1,
             ready=rng.random() > 0.1)
        for i in range(rng.randint(1, 12))
    ]
    existing = [
        pod(f"other/x{i}", cpu=rng.choice(["250m", "500m", "1"]),
            memory=rng.choice(["128Mi", "512Mi"]), gpu=rng.choice([0, 0, 1]),
            node_name=rng.choice(nodes).name)
        for i in range(rng.randint(0, 8))
    ]
    gangs = []
    for number in range(rng.randint(1, 6)):
        templates = [
            {"cpu": rng.choice(["500m", "1", "1500m", "2"]),
             "memory": rng.choice(["256Mi", "512Mi", "1Gi", "2Gi"]),
             "gpu": rng.choice([0, 0, 1, 2]),
             "selector": {"zone": rng.choice(ZONES)} if rng.random() < 0.15 else None,
             "tolerations": (Toleration("gpu", "Exists", "", ""),) if rng.random() < 0.5 else ()}
            for _ in range(rng.randint(1, 3))
        ]
        members = [pod(f"g{number}/p{i}", **rng.choice(templates))  # type: ignore[arg-type]
                   for i in range(rng.randint(1, 10))]
        gangs.append(gang(f"g{number}/g", members, min_member=rng.randint(1, len(members)),
                          policy=rng.choice([None, Policy.BINPACK, Policy.SPREAD])))
    return Snapshot.build(nodes, existing), gangs


def test_a_rule_on_names_that_excludes_no_node_changes_no_placement() -> None:
    """Binpack and spread are one policy whatever the rules: in a pass where every
    pod carries a rule on node names that admits every node, each pod goes where
    it goes without the rule, and the same gangs are refused for the same reasons."""
    rng = random.Random(20261123)
    for _ in range(400):
        snapshot, gangs = busy_cluster(rng)
        plain = Capacity.from_snapshot(snapshot)
        named = Capacity.from_snapshot(snapshot)
        for subject in gangs:
            decision = named.place(named_but_unrestricted(subject))
            assert without_rules(plain.place(subject)) == without_rules(decision), subject


def without_rules(decision: Decision) -> Decision:
    """The decision with the rules it quotes for each kind of pod left out."""
    if isinstance(decision, Placement) or not isinstance(decision.reason, DoesNotFit):
        return decision
    shapes = tuple(replace(shape, rules=PodPlacementRules()) for shape in decision.reason.shapes)
    return replace(decision, reason=replace(decision.reason, shapes=shapes))
