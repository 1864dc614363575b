"""Devices at scale in the placement core alone: the in-process half of ``make bench-dra``.

The same cluster and claims as the control-plane half (:mod:`bench.dra`): KWOK-like
nodes of 8 fake GPUs each, published as the fake driver publishes them (two NVLink
cliques per node), gangs of 8 pods, each pod with one or two claims made from the
templates of :data:`TEMPLATES` as :func:`plan` deals them out. Figures:

* ``first_cycle_s``: one cycle (``run_cycle``) placing every gang that fits, from a
  fresh snapshot: its index, the CEL selectors evaluated on every device, every
  allocation;
* ``pods_per_s``: the pods that cycle placed, over its time;
* ``warm_cycle_s``, ``warm_pods_per_s``: the same cycle again on an inventory read
  anew, as after a restart of the cycle but not of the process: what each device
  said of each selector is kept (devices and expressions are immutable values),
  so this is the placement and allocation alone;
* ``idle_cycle_ms``: the cycle after, every pod bound and its claims allocated, and
  nothing new: the cost of a wake-up that changes nothing; ``idle_cycle_running_gangs_ms``
  the same with the gangs in it, running, as the scheduler's cycle has them;
* with ``profile``, where the first cycle's time went (cProfile, by cumulative time).
"""

from __future__ import annotations

import cProfile
import io
import pstats
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from devcluster import fakedriver
from gangsched.core.dra.devices import Claim, ClaimKey, Device, Inventory
from gangsched.core.dra.parse import (
    device_class_from_api,
    resource_claim_from_api,
    slice_from_api,
)
from gangsched.core.model.objects import (
    Gang,
    GangKey,
    Node,
    NodeName,
    Pod,
    PodClaim,
    PodKey,
    Policy,
)
from gangsched.core.model.resources import Resources
from gangsched.core.placement.capacity import Snapshot
from gangsched.core.stages.cycle import CycleInput, CycleResult, run_cycle

GPUS_PER_NODE = 8
POD_REQUESTS = {"cpu": "2", "memory": "8Gi"}
NODE_ALLOCATABLE = {"cpu": "32", "memory": "128Gi", "pods": "110"}
CLIQUE = f"{fakedriver.DRIVER}/clique"
TEMPLATES: Mapping[str, dict[str, Any]] = {
    "one": {"requests": [{"name": "gpus", "exactly": {
        "deviceClassName": fakedriver.DEVICE_CLASS, "count": 1}}]},
    "h100": {"requests": [{"name": "gpus", "exactly": {
        "deviceClassName": fakedriver.DEVICE_CLASS, "count": 1,
        "selectors": [{"cel": {"expression":
                               f'device.attributes["{fakedriver.DRIVER}"].model == "H100"'}}]}}]},
    "pair": {"requests": [{"name": "gpus", "exactly": {
        "deviceClassName": fakedriver.DEVICE_CLASS, "count": 2}}],
        "constraints": [{"matchAttribute": CLIQUE}]},
}
"""The claims pods make, as ``ResourceClaimTemplate`` specs: one GPU; one GPU chosen by
a CEL selector on its model; two GPUs of one NVLink clique."""
GPUS = {"one": 1, "h100": 1, "pair": 2}

Plan = list[list[tuple[str, ...]]]
"""For each gang, for each of its pods, the templates of its claims in order."""


def plan(rng: random.Random, gangs: int, size: int) -> Plan:
    """Each pod's claims: a first from ``one`` (half), ``h100`` or ``pair`` (a quarter
    each), and half the pods a second ``one``: 1.75 GPUs a pod on average, so that
    what is asked fits the 8 a node has with room to spare for either scheduler."""
    dealt: Plan = []
    for _ in range(gangs):
        pods: list[tuple[str, ...]] = []
        for _ in range(size):
            first = rng.choice(("one", "one", "h100", "pair"))
            pods.append((first, "one") if rng.random() < 0.5 else (first,))
        dealt.append(pods)
    return dealt


def gpus_asked(dealt: Plan) -> int:
    return sum(GPUS[name] for gang in dealt for pod in gang for name in pod)


def claim_name(gang: int, pod: int, claim: int) -> str:
    return f"g{gang}-p{pod}-c{claim}"


def cluster(nodes: int, dealt: Plan) -> tuple[list[Node], Inventory, list[Gang]]:
    """The nodes, their devices with every claim of the plan (none allocated), the gangs."""
    found = [Node(NodeName(f"node-{i}"), Resources.parse(NODE_ALLOCATABLE))
             for i in range(nodes)]
    devices: dict[NodeName, tuple[Device, ...]] = {}
    for index, node in enumerate(found):
        name, published = slice_from_api(fakedriver.slice_manifest(
            node.name, index, per_node=GPUS_PER_NODE))
        assert name is not None
        devices[name] = published
    device_class = device_class_from_api(fakedriver.device_class_manifest())
    claims: dict[ClaimKey, Claim] = {}
    gangs = []
    for g, members in enumerate(dealt):
        pods = []
        for p, templates in enumerate(members):
            own = []
            for c, template in enumerate(templates):
                claim_id = claim_name(g, p, c)
                claim = resource_claim_from_api({
                    "metadata": {"name": claim_id, "namespace": "bench",
                                 "uid": f"uid-{claim_id}"},
                    "spec": {"devices": TEMPLATES[template]}})
                claims[claim.key] = claim
                own.append(PodClaim(f"c{c}", claim.key))
            pods.append(Pod(PodKey(f"bench/g{g}-p{p}"),
                            Resources.parse({**POD_REQUESTS, "pods": 1}),
                            uid=f"uid-g{g}-p{p}", resource_claims=tuple(own)))
        gangs.append(Gang(GangKey(f"bench/g{g}"), len(members), tuple(pods)))
    inventory = Inventory.build(devices, {device_class.name: device_class}, claims)
    return found, inventory, gangs


def decide(nodes: Sequence[Node], pods: Sequence[Pod], inventory: Inventory,
           gangs: Sequence[Gang]) -> tuple[float, CycleResult]:
    """One cycle over this cluster; its seconds and what it decided."""
    snapshot = replace(Snapshot.build(list(nodes), list(pods)), devices=inventory)
    started = time.perf_counter()
    result = run_cycle(CycleInput(
        snapshot=snapshot, gangs=tuple(gangs), bound_requests={}, queues={},
        admitted=frozenset(), waiting_since={}, now=0.0, policy=Policy.BINPACK))
    return time.perf_counter() - started, result


def placed(result: CycleResult) -> int:
    return sum(len(p.assignments) for p in result.placements)


def settled(inventory: Inventory, gangs: Sequence[Gang],
            result: CycleResult) -> tuple[list[Pod], Inventory, list[Gang]]:
    """The pods bound and their claims allocated as ``result`` decided, and the gangs
    running so (none pending), as the scheduler's next cycle sees them."""
    by_key = {pod.key: pod for gang in gangs for pod in gang.pending}
    bound = [replace(by_key[key], node_name=node)
             for placement in result.placements for key, node in placement.assignments]
    claims = dict(inventory.claims)
    for placement in result.placements:
        for write in placement.claims:
            if write.allocation is not None:
                claims[write.claim] = replace(claims[write.claim], allocation=write.allocation)
    where = {pod.key: pod.node_name for pod in bound}
    running = [replace(gang, pending=(), bound=len(gang.pending),
                       bound_on=frozenset(n for p in gang.pending if (n := where.get(p.key))))
               for gang in gangs if all(p.key in where for p in gang.pending)]
    return bound, Inventory.build(inventory.devices, inventory.classes, claims), running


def profiled_first_cycle(nodes: Sequence[Node], inventory: Inventory,
                         gangs: Sequence[Gang], lines: int = 25) -> str:
    """The first cycle under cProfile: the functions that took most, cumulative."""
    profiler = cProfile.Profile()
    profiler.enable()
    decide(nodes, [], inventory, gangs)
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(lines)
    return out.getvalue()


def figures(nodes: int, dealt: Plan, profile: bool = False) -> dict[str, Any]:
    """The in-process figures of the module docstring for ``nodes`` and the plan."""
    found, inventory, gangs = cluster(nodes, dealt)
    first_s, first = decide(found, [], inventory, gangs)
    warm_s, _ = decide(found, [], replace(inventory), gangs)
    bound, after, running = settled(inventory, gangs, first)
    idle = sorted(decide(found, bound, after, [])[0] for _ in range(5))
    with_gangs = sorted(decide(found, bound, after, running)[0] for _ in range(5))
    count = placed(first)
    report: dict[str, Any] = {
        "claims": len(inventory.claims),
        "placed_pods": count,
        "placed_gangs": len(first.placements),
        "first_cycle_s": round(first_s, 3),
        "pods_per_s": round(count / first_s, 1),
        "warm_cycle_s": round(warm_s, 3),
        "warm_pods_per_s": round(count / warm_s, 1),
        "idle_cycle_ms": round(idle[len(idle) // 2] * 1000, 2),
        "idle_cycle_running_gangs_ms": round(with_gangs[len(with_gangs) // 2] * 1000, 2),
    }
    if profile:
        fresh = cluster(nodes, dealt)
        report["first_cycle_profile"] = profiled_first_cycle(fresh[0], fresh[1], fresh[2])
    return report
