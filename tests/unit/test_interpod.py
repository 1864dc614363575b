"""Inter-pod affinity, anti-affinity and topology spread, honoured for whole gangs.

Pods are read from API objects, as the scheduler reads them, so the tests
cover the parsing of the terms as well as the placement under them.
"""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gangsched.core.fit.interpod import PodRule, pod_rules_refusal, term_selects
from gangsched.core.kubeobjects.pods import pod_from_api
from gangsched.core.model.objects import Gang, GangKey, Node, NodeName, Pod, PodKey, Policy
from gangsched.core.model.resources import Resources
from gangsched.core.placement.capacity import Capacity, Placement, Snapshot, Unplaceable
from gangsched.core.reasons import PodRulesUnmet, RuleBlock

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def node(name: str, zone: str = "a", cores: int = 4, **labels: str) -> Node:
    return Node(NodeName(name), Resources.of({"cpu": cores * 1000, "pods": 110}),
                labels=tuple(sorted({HOST: name, ZONE: zone, **labels}.items())))


def api_pod(name: str, *, labels: dict[str, str] | None = None, on: str | None = None,
            namespace: str = "ns", cpu: str = "1", **spec: Any) -> Pod:
    obj = {
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {},
                     "creationTimestamp": "2024-05-01T12:00:00Z"},
        "spec": {"containers": [{"name": "main", "resources": {"requests": {"cpu": cpu}}}],
                 **({"nodeName": on} if on else {}), **spec},
        "status": {"phase": "Running" if on else "Pending"},
    }
    return pod_from_api(obj)


def term(topology_key: str = HOST, **match: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": match}, "topologyKey": topology_key}


def anti(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}


def affine(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}


def spread(max_skew: int = 1, key: str = ZONE, **match: str) -> dict[str, Any]:
    return {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": match}}


def workers(job: str, count: int, **spec: Any) -> Gang:
    pods = tuple(api_pod(f"{job}-{i}", labels={"job": job}, **spec) for i in range(count))
    key = GangKey(f"ns/{job}")
    return Gang(key, min_member=count, pending=tuple(replace(p, gang=key) for p in pods))


def place(nodes: list[Node], gang: Gang, residents: tuple[Pod, ...] = (),
          policy: Policy = Policy.BINPACK) -> Placement | Unplaceable:
    snapshot = Snapshot.build(nodes, residents)
    return Capacity(snapshot).place(gang, policy)


def nodes_of(decision: Placement | Unplaceable) -> list[str]:
    assert isinstance(decision, Placement), decision
    return [node for _, node in decision.assignments]


ONE_PER_NODE = {"affinity": anti(term(job="train"))}


def test_one_per_node_workers_take_four_nodes_and_wait_whole_on_three() -> None:
    gang = workers("train", 4, **ONE_PER_NODE)
    four = [node(f"n{i}") for i in range(4)]
    assert sorted(nodes_of(place(four, gang))) == ["n0", "n1", "n2", "n3"]

    decision = place(four[:3], gang)
    assert isinstance(decision, Unplaceable)
    reason = decision.reason
    assert isinstance(reason, PodRulesUnmet)
    assert reason.placed == 3 and reason.need == 4
    assert dict(reason.refused) == {PodRule.ANTI_AFFINITY.value: 3}
    assert reason.shown == tuple(
        RuleBlock(NodeName(f"n{i}"), PodRule.ANTI_AFFINITY.value, "kubernetes.io/hostname",
                  f"n{i}", other=PodKey(f"ns/train-{i}"), same_gang=True) for i in range(3))


def test_without_rules_the_same_gang_packs_onto_one_node() -> None:
    # The contrast that makes the test above mean something: binpack alone packs them.
    gang = workers("train", 4)
    assert set(nodes_of(place([node(f"n{i}") for i in range(3)], gang))) == {"n0"}


def test_a_running_pods_anti_affinity_keeps_the_gang_off_its_node() -> None:
    guard = api_pod("db", labels={"app": "db"}, on="n0", affinity=anti(term(job="train")))
    gang = workers("train", 2)
    decision = place([node("n0", cores=8), node("n1", cores=2)], gang, (guard,))
    assert set(nodes_of(decision)) == {"n1"}


def test_anti_affinity_against_running_pods_by_zone() -> None:
    db = api_pod("db-0", labels={"app": "db"}, on="a0")
    gang = workers("train", 2, affinity=anti(term(ZONE, app="db")))
    decision = place([node("a0", "a", 8), node("b0", "b", 1), node("b1", "b", 1)], gang, (db,))
    assert sorted(nodes_of(decision)) == ["b0", "b1"]


def test_affinity_follows_the_pods_it_selects_into_their_zone() -> None:
    cache = api_pod("cache", labels={"app": "cache"}, on="b0")
    gang = workers("train", 3, affinity=affine(term(ZONE, app="cache")))
    nodes = [node("a0", "a", 8), node("b0", "b", 2), node("b1", "b", 2)]
    decision = place(nodes, gang, (cache,))
    assert set(nodes_of(decision)) <= {"b0", "b1"}


def test_the_first_of_pods_affine_to_each_other_may_go_anywhere_and_the_rest_follow() -> None:
    gang = workers("train", 3, affinity=affine(term(ZONE, job="train")))
    nodes = [node("a0", "a", 1), node("b0", "b", 2), node("b1", "b", 2)]
    zones = {name[0] for name in nodes_of(place(nodes, gang))}
    assert len(zones) == 1


def test_affinity_to_pods_that_run_nowhere_waits_naming_it() -> None:
    gang = workers("train", 2, affinity=affine(term(ZONE, app="cache")))
    decision = place([node("a0")], gang)
    assert isinstance(decision, Unplaceable)
    assert isinstance(decision.reason, PodRulesUnmet)
    assert dict(decision.reason.refused) == {PodRule.AFFINITY.value: 1}


def test_workers_spread_evenly_over_three_zones() -> None:
    gang = workers("train", 6, topologySpreadConstraints=[spread(job="train")])
    nodes = [node(f"{zone}{i}", zone, 8) for zone in "abc" for i in range(2)]
    zones = Counter(name[0] for name in nodes_of(place(nodes, gang)))
    assert zones == {"a": 2, "b": 2, "c": 2}


def test_a_spread_that_cannot_be_met_waits_whole_naming_the_zone_and_skew() -> None:
    gang = workers("train", 4, topologySpreadConstraints=[spread(job="train")])
    # Zone c exists but has no room: the skew against it caps a and b at one each.
    nodes = [node("a0", "a", 8), node("b0", "b", 8), node("c0", "c", 0)]
    decision = place(nodes, gang)
    assert isinstance(decision, Unplaceable)
    reason = decision.reason
    assert isinstance(reason, PodRulesUnmet) and reason.placed == 2
    assert dict(reason.refused) == {PodRule.SPREAD.value: 2}
    assert reason.shown == tuple(
        RuleBlock(NodeName(f"{zone}0"), PodRule.SPREAD.value, "topology.kubernetes.io/zone",
                  zone, max_skew=1, skew=2) for zone in "ab")


def test_spread_counts_running_pods_of_the_same_namespace_only() -> None:
    running = (api_pod("old-0", labels={"job": "train"}, on="a0"),
               api_pod("x-0", labels={"job": "train"}, on="b0", namespace="other"))
    gang = workers("train", 1, topologySpreadConstraints=[spread(job="train")])
    nodes = [node("a0", "a", 8), node("b0", "b", 8)]
    assert nodes_of(place(nodes, gang, running)) == ["b0"]
    gang3 = workers("train", 3, topologySpreadConstraints=[spread(job="train")])
    zones = Counter(name[0] for name in nodes_of(place(nodes, gang3, running)))
    assert zones == {"a": 1, "b": 2}


def test_min_domains_above_the_domains_there_are_caps_every_domain_at_max_skew() -> None:
    constraint = {**spread(job="train"), "minDomains": 3}
    gang = workers("train", 3, topologySpreadConstraints=[constraint])
    decision = place([node("a0", "a", 8), node("b0", "b", 8)], gang)
    assert isinstance(decision, Unplaceable)
    two = workers("train", 2, topologySpreadConstraints=[constraint])
    assert sorted(nodes_of(place([node("a0", "a", 8), node("b0", "b", 8)], two))) == ["a0", "b0"]


def test_a_node_without_the_spread_key_is_refused() -> None:
    bare = Node(NodeName("bare"), Resources.of({"cpu": 8000, "pods": 110}))
    gang = workers("train", 1, topologySpreadConstraints=[spread(job="train")])
    decision = place([bare], gang)
    assert isinstance(decision, Unplaceable)
    assert isinstance(decision.reason, PodRulesUnmet)
    assert dict(decision.reason.refused) == {PodRule.SPREAD_LABEL.value: 1}


def test_one_pod_verdict_matches_kube_scheduler_rules() -> None:
    nodes = {n.name: n for n in (node("a0", "a"), node("b0", "b"))}
    db = api_pod("db", labels={"app": "db"}, on="a0", affinity=anti(term(ZONE, role="web")))
    web = api_pod("web", labels={"role": "web"})
    refusal = pod_rules_refusal(web, NodeName("a0"), nodes, [db])
    assert refusal is not None and refusal.rule is PodRule.EXISTING_ANTI_AFFINITY
    assert pod_rules_refusal(web, NodeName("b0"), nodes, [db]) is None


def test_pods_placed_earlier_in_the_pass_count_for_later_gangs() -> None:
    capacity = Capacity(Snapshot.build([node(f"n{i}") for i in range(3)], ()))
    guard = Gang(GangKey("ns/guard"), 1, (
        api_pod("guard", labels={"app": "db"}, affinity=anti(term(tier="x"))),))
    guarded = nodes_of(capacity.place(guard))[0]
    # Binpack would put these beside the guard; its anti-affinity keeps them away.
    plain = Gang(GangKey("ns/plain"), 3, tuple(
        api_pod(f"p-{i}", labels={"tier": "x"}) for i in range(3)))
    placement = capacity.place(plain)
    assert guarded not in nodes_of(placement)
    assert isinstance(placement, Placement)
    capacity.release(placement)
    capacity.release(Placement(guard.key, ((guard.pending[0].key, NodeName(guarded)),)))
    assert len(set(nodes_of(capacity.place(plain)))) == 1  # the guard gone, binpack again


# ---- the search against brute force: anti-affinity, whose verdict does not depend on order


def _anti_ok(placed: list[tuple[Pod, str]]) -> bool:
    """No pod's anti-affinity selects another pod in its domain, either way, but between
    two running pods (bound by ``nodeName``, they may break each other's)."""
    zones = ZONES_OF
    for holder, where in placed:
        for term in holder.anti_affinity:
            mine = zones[where].get(term.topology_key)
            if mine is None:
                continue
            for other, there in placed:
                both_running = holder.node_name is not None and other.node_name is not None
                if (other.key != holder.key and not both_running
                        and zones[there].get(term.topology_key) == mine
                        and term_selects(term, other)):
                    return False
    return True


ZONES_OF: dict[str, dict[str, str]] = {}


@given(st.data())
@settings(max_examples=120, deadline=None)
def test_anti_affinity_gangs_are_placed_exactly_when_some_assignment_exists(
    data: st.DataObject,
) -> None:
    zone_names = data.draw(st.lists(st.sampled_from("ab"), min_size=2, max_size=4))
    cores = data.draw(st.lists(st.integers(1, 3), min_size=len(zone_names),
                               max_size=len(zone_names)))
    shapes = zip(zone_names, cores, strict=True)
    nodes = [node(f"n{i}", zone, c) for i, (zone, c) in enumerate(shapes)]
    ZONES_OF.clear()
    ZONES_OF.update({n.name: dict(n.labels) for n in nodes})
    keys = st.sampled_from((HOST, ZONE))
    existing = []
    for i in range(data.draw(st.integers(0, 2))):
        spec: dict[str, Any] = {}
        if data.draw(st.booleans()):
            spec["affinity"] = anti(term(data.draw(keys), app="w"))
        existing.append(api_pod(f"e{i}", labels={"app": data.draw(st.sampled_from(("w", "x")))},
                                on=data.draw(st.sampled_from([n.name for n in nodes])), **spec))
    size = data.draw(st.integers(1, 4))
    pods = []
    for i in range(size):
        spec = {}
        if data.draw(st.booleans()):
            spec["affinity"] = anti(term(data.draw(keys), app="w"))
        pods.append(api_pod(f"g{i}", labels={"app": data.draw(st.sampled_from(("w", "x")))},
                            **spec))
    gang = Gang(GangKey("ns/g"), size, tuple(pods))
    decision = place(nodes, gang, tuple(existing))

    used = Counter(str(pod.node_name) for pod in existing)
    room = {str(n.name): n.allocatable.get("cpu") // 1000 - used[n.name] for n in nodes}
    seated = [(pod, str(pod.node_name)) for pod in existing]

    def feasible() -> bool:
        for choice in itertools.product(list(room), repeat=size):
            taken = Counter(choice)
            if any(taken[name] > room[name] for name in taken):
                continue
            if _anti_ok(seated + list(zip(pods, choice, strict=True))):
                return True
        return False

    if isinstance(decision, Placement):
        where = dict(decision.assignments)
        chosen = [str(where[pod.key]) for pod in pods]
        assert all(Counter(chosen)[n] <= room[n] for n in chosen)
        assert _anti_ok(seated + list(zip(pods, chosen, strict=True)))
    else:
        assert not feasible(), decision.reason


def test_a_gang_too_large_to_search_is_placed_member_by_member() -> None:
    # 300 pods: past the exhaustive search's limit, placed in one descent.
    gang = workers("big", 300, **{"affinity": anti(term(job="big"))})
    nodes = [node(f"n{i:03}", "abc"[i % 3]) for i in range(300)]
    assert len(set(nodes_of(place(nodes, gang)))) == 300
    decision = place(nodes[:299], gang)
    assert isinstance(decision, Unplaceable)
    assert isinstance(decision.reason, PodRulesUnmet) and decision.reason.placed == 299


# ---- preferences: they rank nodes, never refuse one


def preferred(kind: str, weight: int, term_: dict[str, Any]) -> dict[str, Any]:
    return {kind: {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": weight, "podAffinityTerm": term_}]}}


def test_preferred_anti_affinity_spreads_a_gang_binpack_would_pack() -> None:
    gang = workers("soft", 3, affinity=preferred("podAntiAffinity", 100, term(job="soft")))
    assert len(set(nodes_of(place([node(f"n{i}") for i in range(3)], gang)))) == 3
    # With fewer nodes than pods it still places them all: a preference never refuses.
    assert len(nodes_of(place([node("n0")], gang))) == 3


def test_preferred_affinity_goes_to_the_zone_of_the_pods_it_selects() -> None:
    cache = api_pod("cache", labels={"app": "cache"}, on="b0")
    gang = workers("near", 2, affinity=preferred("podAffinity", 50, term(ZONE, app="cache")))
    nodes = [node("a0", "a", 8), node("b0", "b", 8)]
    assert set(nodes_of(place(nodes, gang, (cache,)))) == {"b0"}


def test_two_members_alike_but_for_their_preferences_each_follow_their_own() -> None:
    cache = api_pod("cache", labels={"app": "cache"}, on="b0")
    key = GangKey("ns/pair")
    near = api_pod("near", labels={"job": "pair"},
                   affinity=preferred("podAffinity", 100, term(HOST, app="cache")))
    away = api_pod("away", labels={"job": "pair"},
                   affinity=preferred("podAntiAffinity", 100, term(HOST, app="cache")))
    gang = Gang(key, 2, (replace(near, gang=key), replace(away, gang=key)))
    decision = place([node("a0", "a", 8), node("b0", "b", 8)], gang, (cache,))
    assert isinstance(decision, Placement)
    assert dict(decision.assignments) == {"ns/near": "b0", "ns/away": "a0"}


def test_a_schedule_anyway_spread_ranks_emptier_zones_first() -> None:
    soft = {**spread(job="even"), "whenUnsatisfiable": "ScheduleAnyway"}
    gang = workers("even", 4, topologySpreadConstraints=[soft])
    nodes = [node("a0", "a", 8), node("b0", "b", 8)]
    assert Counter(name[0] for name in nodes_of(place(nodes, gang))) == {"a": 2, "b": 2}


# ---- the search's counts against the one-pod verdict computed from scratch


@given(st.data())
@settings(max_examples=120, deadline=None)
def test_each_member_placed_passes_the_one_pod_verdict_given_those_before_it(
    data: st.DataObject,
) -> None:
    """Replayed in order (one kind of pod: the search's order), every member of a placed
    gang is accepted by :func:`pod_rules_refusal` over the pods on nodes and the members
    before it: the counts the search keeps agree with counting from scratch."""
    zone_names = data.draw(st.lists(st.sampled_from("abc"), min_size=2, max_size=5))
    nodes = [node(f"n{i}", zone, data.draw(st.integers(1, 3)))
             for i, zone in enumerate(zone_names)]
    keys = st.sampled_from((HOST, ZONE))
    labels = st.sampled_from(("w", "x"))
    existing = []
    for i in range(data.draw(st.integers(0, 3))):
        spec: dict[str, Any] = {}
        if data.draw(st.booleans()):
            spec["affinity"] = anti(term(data.draw(keys), app="w"))
        existing.append(api_pod(f"e{i}", labels={"app": data.draw(labels)},
                                on=data.draw(st.sampled_from([n.name for n in nodes])), **spec))
    rules: dict[str, Any] = {}
    affinity: dict[str, Any] = {}
    if data.draw(st.booleans()):
        affinity.update(anti(term(data.draw(keys), app=data.draw(labels))))
    if data.draw(st.booleans()):
        affinity.update(affine(term(data.draw(keys), app=data.draw(labels))))
    if affinity:
        rules["affinity"] = affinity
    if data.draw(st.booleans()) or not rules:
        constraint = spread(data.draw(st.integers(1, 2)), data.draw(keys), app="w")
        if data.draw(st.booleans()):
            constraint["minDomains"] = data.draw(st.integers(2, 4))
        rules["topologySpreadConstraints"] = [constraint]
    size = data.draw(st.integers(1, 4))
    gang = Gang(GangKey("ns/g"), size, tuple(
        replace(api_pod(f"g{i}", labels={"app": "w"}, **rules), gang=GangKey("ns/g"))
        for i in range(size)))
    decision = place(nodes, gang, tuple(existing))
    if not isinstance(decision, Placement):
        return
    by_name = {n.name: n for n in nodes}
    seated = list(existing)
    pods = {pod.key: pod for pod in gang.pending}
    for key, where in decision.assignments:
        pod = pods[key]
        assert pod_rules_refusal(pod, where, by_name, seated) is None, (key, where)
        seated.append(replace(pod, node_name=where))
