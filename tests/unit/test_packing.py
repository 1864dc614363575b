"""The exhaustive search for a gang's minimum, and the kinds of pod it works on."""

from __future__ import annotations

import pytest
from hypothesis import given

from gangsched.core.fit.nodefit import node_excluded_reason
from gangsched.core.model.objects import Gang, NodeName, Pod, Policy
from gangsched.core.model.resources import Resources
from gangsched.core.placement.capacity import Placement
from gangsched.core.placement.packing import SEARCH_MAX_PODS, PodType, Search, search_view
from gangsched.core.placement.room import fit_count
from gangsched.core.placement.shapes import FreeNodes
from gangsched.core.placement.snapshot import Snapshot
from tests.unit import clusters
from tests.unit.clusters import PROPERTY, max_placeable, node, overcommitted, pod
from tests.unit.clusters import gang as make_gang

UNLIMITED = 10**9


def searched(
    snapshot: Snapshot, gang: Gang, budget: int = UNLIMITED
) -> tuple[Search, list[PodType]]:
    nodes = FreeNodes(snapshot.index)
    types = PodType.group(gang.pending, snapshot.index.max_allocatable)
    view = search_view(nodes.index, nodes.classes, types)
    need = max(0, gang.min_member - gang.bound)
    return Search(view, types, need, gang.policy or Policy.BINPACK, budget), types


@PROPERTY
@given(clusters.small_gangs(max_pods=8))
def test_kinds_of_pod_are_the_identical_pods_biggest_first(gang: Gang) -> None:
    largest = Resources.parse({"cpu": "4", "memory": "4Gi", "nvidia.com/gpu": 4, "pods": 110})
    types = PodType.group(gang.pending, largest)
    assert sorted(p.key for kind in types for p in kind.pods) == sorted(
        p.key for p in gang.pending
    )
    for kind in types:
        assert all((p.requests, p.rules) == (kind.requests, kind.rules) for p in kind.pods)
    assert len({(kind.requests, kind.rules) for kind in types}) == len(types)
    assert sorted(kind.bit for kind in types) == [1 << i for i in range(len(types))]
    shares = [max(amount * 1_000_000 // largest.get(name)
                  for name, amount in kind.requests.amounts.items()) for kind in types]
    assert shares == sorted(shares, reverse=True)


def test_a_scarce_gpu_makes_a_pod_bigger_than_many_cpus() -> None:
    """Pods with the fewest places to go are placed first."""
    largest = Resources.parse({"cpu": "64", "memory": "256Gi", "nvidia.com/gpu": 1, "pods": 110})
    cpu_heavy = pod("ns/cpu", cpu="16", memory="16Gi")
    gpu_light = pod("ns/gpu", cpu="1", memory="1Gi", gpu=1)
    types = PodType.group([cpu_heavy, gpu_light], largest)
    assert [kind.pods for kind in types] == [[gpu_light], [cpu_heavy]]


@PROPERTY
@given(clusters.small_snapshots(), clusters.small_gangs())
def test_the_view_holds_each_node_in_the_state_it_is_in(snapshot: Snapshot, gang: Gang) -> None:
    """A node is in the view once, under its free resources and the kinds of pod its
    rules and room let on; a node none of them may use is left out."""
    search, types = searched(snapshot, gang)
    seen: list[NodeName] = []
    for (free, mask), groups in search.view.items():
        for name in (name for group in groups for name in group):
            seen.append(name)
            assert snapshot.free(name) == free
            here = snapshot.nodes[name].node
            expected = sum(kind.bit for kind in types
                           if node_excluded_reason(kind.rules, here) is None
                           and fit_count(free, kind.items))
            assert mask == expected
    assert len(seen) == len(set(seen))
    for name, usage in snapshot.nodes.items():
        if name not in seen:
            assert not any(node_excluded_reason(kind.rules, usage.node) is None
                           and fit_count(snapshot.free(name), kind.items) for kind in types)


def check_search(snapshot: Snapshot, gang: Gang) -> None:
    search, types = searched(snapshot, gang)
    need = search.need
    if len(types) < 2 or need == 0:
        return  # the capacity's greedy pass answers those exactly
    found = search.solve()
    assert not search.exhausted
    pods = list(gang.pending)
    assert (found is not None) == (max_placeable(snapshot, pods) >= need)
    if found is not None:
        assert len(found) == need
        assert len({p.key for p, _ in found}) == need
        placement = Placement(gang.key, tuple((p.key, name) for p, name in found))
        assert overcommitted(snapshot, placement, pods) == []
        for member, name in found:
            assert node_excluded_reason(member.rules, snapshot.nodes[name].node) is None


@PROPERTY
@given(clusters.small_snapshots(), clusters.small_gangs())
def test_the_search_finds_the_minimum_exactly_when_brute_force_does(
    snapshot: Snapshot, gang: Gang
) -> None:
    check_search(snapshot, gang)


@PROPERTY
@given(clusters.tight_instances())
def test_the_search_is_complete_where_packing_order_matters(
    instance: tuple[Snapshot, Gang]
) -> None:
    check_search(*instance)


def mixed_gang(count: int) -> tuple[Snapshot, Gang]:
    """Three nodes of 3 CPU and a gang of 2-CPU and 1-CPU pods that fits only
    when each node takes one of each."""
    snapshot = Snapshot.build([node(f"n{i}", cpu="3") for i in range(3)], [])
    big = [pod(f"ns/big{i}", cpu="2") for i in range(count)]
    small = [pod(f"ns/small{i}", cpu="1") for i in range(count)]
    return snapshot, make_gang("ns/g", big + small)


def test_a_search_cut_short_says_so() -> None:
    snapshot, subject = mixed_gang(3)
    search, _ = searched(snapshot, subject, budget=1)
    assert search.solve() is None
    assert search.exhausted
    complete, _ = searched(snapshot, subject)
    assert complete.solve() is not None and not complete.exhausted


def test_a_gang_too_large_to_search_is_not_searched() -> None:
    snapshot, subject = mixed_gang(SEARCH_MAX_PODS // 2 + 1)
    search, _ = searched(snapshot, subject)
    assert search.solve() is None
    assert search.exhausted and search.work == 0


@pytest.mark.parametrize("policy", [Policy.BINPACK, Policy.SPREAD])
def test_the_policy_shapes_which_nodes_the_minimum_takes(policy: Policy) -> None:
    """Binpack puts the minimum on as few nodes as it can, spread on as many."""
    snapshot = Snapshot.build([node(f"n{i}", cpu="4") for i in range(4)], [])
    members: list[Pod] = [pod("ns/ps", cpu="2"), pod("ns/w0", cpu="1"), pod("ns/w1", cpu="1")]
    search, _ = searched(snapshot, make_gang("ns/g", members, min_member=3, policy=policy))
    found = search.solve()
    assert found is not None
    used = {name for _, name in found}
    assert len(used) == (1 if policy is Policy.BINPACK else 3)
