"""Pods claiming devices under inter-pod rules: the device search keeps every required
rule the plain search keeps (host ports, affinity and anti-affinity both ways, spread),
counts the gang's own members as it places them, and ranks nodes by the preferred
rules. Pods are read from API objects, with the fake driver's GPUs on every node."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Any

from gangsched.core.kubeobjects.pods import pod_from_api
from gangsched.core.model.objects import Gang, GangKey, Pod, Policy
from gangsched.core.placement.capacity import Capacity, Placement, Snapshot, Unplaceable
from gangsched.core.reasons import DevicesShort, PodRulesUnmet
from tests.unit.test_dra import claim_obj, inventory, request
from tests.unit.test_interpod import HOST, ZONE, affine, anti, node, spread, term

NODES = [node("n-0", "a", cores=16), node("n-1", "a", cores=16), node("n-2", "b", cores=16),
         node("n-3", "b", cores=16)]
"""Four nodes of 8 GPUs each, two per zone."""


def gpu_pod(name: str, *, gpus: int = 1, labels: dict[str, str] | None = None,
            on: str | None = None, ports: tuple[int, ...] = (), **spec: Any) -> Pod:
    """A pod asking ``gpus`` GPUs through its own claim ``<name>-gpus`` (0: no claim)."""
    container: dict[str, Any] = {"name": "main", "resources": {"requests": {"cpu": "1"}}}
    if ports:
        container["ports"] = [{"containerPort": port, "hostPort": port} for port in ports]
    claims = [{"name": "gpus", "resourceClaimName": f"{name}-gpus"}] if gpus else []
    obj = {
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}",
                     "labels": labels or {}, "creationTimestamp": "2024-05-01T12:00:00Z"},
        "spec": {"containers": [container], "resourceClaims": claims,
                 **({"nodeName": on} if on else {}), **spec},
        "status": {"phase": "Running" if on else "Pending"},
    }
    return pod_from_api(obj)


def job(name: str, count: int, *, gpus: int = 1, **spec: Any) -> Gang:
    key = GangKey(f"ns/{name}")
    pods = tuple(replace(gpu_pod(f"{name}-{i}", gpus=gpus, labels={"job": name}, **spec),
                         gang=key) for i in range(count))
    return Gang(key, min_member=count, pending=pods)


def capacity(*gangs: Gang, residents: tuple[Pod, ...] = (), gpus: int = 1) -> Capacity:
    """The four nodes with the residents, and an unallocated claim of ``gpus`` GPUs for
    every pod of the gangs."""
    claims = [claim_obj(f"{pod.key.split('/')[1]}-gpus", request(count=gpus))
              for gang in gangs for pod in gang.pending]
    base = Snapshot.build(NODES, residents)
    return Capacity(replace(base, devices=inventory([n.name for n in NODES], claims)))


def nodes_of(decision: Placement | Unplaceable) -> list[str]:
    assert isinstance(decision, Placement), decision
    return [node for _, node in decision.assignments]


def zone_of(name: str) -> str:
    return dict(next(n for n in NODES if n.name == name).labels)[ZONE]


ONE_PER_NODE: dict[str, Any] = {"affinity": anti(term(HOST, job="train"))}


def test_a_gpu_gang_with_one_per_node_anti_affinity_lands_on_four_nodes() -> None:
    train = job("train", 4, **ONE_PER_NODE)
    decision = capacity(train).place(train)
    assert sorted(nodes_of(decision)) == ["n-0", "n-1", "n-2", "n-3"]
    assert len(decision.claims) == 4  # type: ignore[union-attr]


def test_a_fifth_member_of_a_one_per_node_gang_finds_no_node_and_the_reason_names_the_rule(
) -> None:
    train = job("train", 5, **ONE_PER_NODE)
    decision = capacity(train).place(train)
    assert isinstance(decision, Unplaceable)
    reason = decision.reason
    assert isinstance(reason, PodRulesUnmet)
    assert (reason.need, reason.placed, reason.refused) == (5, 4, (("pod anti-affinity", 4),))


def test_a_gang_refused_by_its_rules_leaves_no_member_counted_for_the_next() -> None:
    train = job("train", 5, **ONE_PER_NODE)
    alone = Gang(GangKey("ns/alone"), 1, (gpu_pod("alone", labels={"x": "y"},
                                                  affinity=anti(term(HOST, job="train"))),))
    cap = capacity(train, alone)
    assert isinstance(cap.place(train), Unplaceable)
    assert nodes_of(cap.place(alone)) == ["n-0"]


def test_a_gpu_pod_with_its_own_anti_affinity_selecting_nothing_is_placed() -> None:
    lone = Gang(GangKey("ns/p"), 1, (gpu_pod("p", affinity=anti(term(HOST, app="none"))),))
    assert nodes_of(capacity(lone).place(lone)) == ["n-0"]


def test_a_gpu_pod_keeps_off_the_node_where_a_running_pods_anti_affinity_selects_it() -> None:
    guard = gpu_pod("guard", gpus=0, on="n-0", labels={"app": "guard"},
                    affinity=anti(term(HOST, app="web")))
    web = Gang(GangKey("ns/web"), 1, (gpu_pod("web", labels={"app": "web"}),))
    assert nodes_of(capacity(web, residents=(guard,)).place(web)) == ["n-1"]


def test_a_gpu_pod_with_a_host_port_keeps_off_the_node_where_the_port_is_taken() -> None:
    holder = gpu_pod("holder", gpus=0, on="n-0", ports=(8080,))
    web = Gang(GangKey("ns/web"), 1, (gpu_pod("web", ports=(8080,)),))
    assert nodes_of(capacity(web, residents=(holder,)).place(web)) == ["n-1"]


def test_two_members_asking_one_host_port_go_to_two_nodes() -> None:
    """Binpack would put both on the gang's first node: the first member counts."""
    pair = job("pair", 2, ports=(9100,))
    assert len(set(nodes_of(capacity(pair).place(pair)))) == 2


def test_a_gpu_gang_with_required_affinity_to_a_running_pod_goes_to_its_zone() -> None:
    db = gpu_pod("db", gpus=0, on="n-3", labels={"app": "db"})
    near = job("near", 2, affinity=affine(term(ZONE, app="db")))
    assert {zone_of(n) for n in nodes_of(capacity(near, residents=(db,)).place(near))} == {"b"}


def test_a_gpu_gang_spread_over_zones_puts_two_members_in_each() -> None:
    even = job("even", 4, topologySpreadConstraints=[spread(1, ZONE, job="even")])
    placed = nodes_of(capacity(even).place(even))
    assert Counter(zone_of(n) for n in placed) == {"a": 2, "b": 2}


def test_preferred_anti_affinity_spreads_a_gpu_gang_that_binpack_would_stack() -> None:
    soft = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "podAffinityTerm": term(HOST, job="apart")}]}}
    apart = job("apart", 3, affinity=soft)
    assert len(set(nodes_of(capacity(apart).place(apart)))) == 3
    together = job("together", 3)
    assert len(set(nodes_of(capacity(together).place(together)))) == 1


def test_preferred_affinity_draws_a_gpu_pod_to_the_running_pods_node() -> None:
    cache = gpu_pod("cache", gpus=0, on="n-2", labels={"app": "cache"})
    soft = {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 50, "podAffinityTerm": term(HOST, app="cache")}]}}
    near = Gang(GangKey("ns/near"), 1, (gpu_pod("near", affinity=soft),))
    assert nodes_of(capacity(near, residents=(cache,)).place(near)) == ["n-2"]


def test_a_schedule_anyway_spread_over_hosts_spreads_a_gpu_gang() -> None:
    anyway = {**spread(1, HOST, job="wide"), "whenUnsatisfiable": "ScheduleAnyway"}
    wide = job("wide", 4, topologySpreadConstraints=[anyway])
    assert len(set(nodes_of(capacity(wide).place(wide)))) == 4


def test_devices_short_on_the_nodes_the_rules_allow_is_a_devices_reason() -> None:
    """Eight GPUs per node: a member asking 8 fits on a node alone; the rules allow the
    nodes, the devices of the ones taken do not."""
    guard = gpu_pod("guard", gpus=0, on="n-0", labels={"app": "guard"},
                    affinity=anti(term(HOST, job="big")))
    big = job("big", 4, gpus=8)
    decision = capacity(big, residents=(guard,), gpus=8).place(big)
    assert isinstance(decision, Unplaceable)
    assert isinstance(decision.reason, DevicesShort)
    assert decision.reason.placed == 3


def test_spread_policy_and_rules_together_still_place_the_whole_gang() -> None:
    train = job("train", 4, **ONE_PER_NODE)
    assert sorted(nodes_of(capacity(train).place(train, Policy.SPREAD))) == [
        "n-0", "n-1", "n-2", "n-3"]
