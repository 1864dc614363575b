"""Devices at scale: ``python -m bench.dra`` writes bench/results/dra.json.

The placement core on 500 KWOK-like nodes of 8 fake GPUs each (published as
the fake driver publishes them, two NVLink cliques per node), with 250 gangs
of 8 pods, each pod with one or two claims of 1 or 2 GPUs (a third of the
claims asking one clique). Figures:

* ``first_cycle_s``: one cycle (``run_cycle``) placing every gang, from a fresh
  snapshot: its index, the CEL selectors evaluated on every device, every
  allocation;
* ``pods_per_s``: the pods that cycle placed, over its time;
* ``warm_cycle_s``, ``warm_pods_per_s``: the same cycle again on an inventory read
  anew, as after a restart of the cycle but not of the process: what each device
  said of each selector is kept (devices and expressions are immutable values),
  so this is the placement and allocation alone;
* ``idle_cycle_ms``: the cycle after, with every gang bound and its claims
  allocated, and nothing new: the cost of a wake-up that changes nothing.

kube-scheduler is not run here: its figures for the same claims need the
control plane (``bench-scheduler``'s harness); this is the core alone.
"""

from __future__ import annotations

import json
import platform
import random
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from devcluster import fakedriver
from gangsched.core.cycle import CycleInput, run_cycle
from gangsched.core.dra.devices import (
    Claim,
    ClaimKey,
    Device,
    Inventory,
)
from gangsched.core.dra.parse import (
    device_class_from_api,
    resource_claim_from_api,
    slice_from_api,
)
from gangsched.core.model import Gang, GangKey, Node, NodeName, Pod, PodClaim, PodKey, Policy
from gangsched.core.placement import Snapshot
from gangsched.core.resources import Resources

NODES = 500
GANGS = 250
GANG_SIZE = 8
SEED = 42
RESULTS = Path(__file__).parent / "results" / "dra.json"


def _claim(name: str, count: int, one_clique: bool) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": [{"name": "gpus", "exactly": {
        "deviceClassName": fakedriver.DEVICE_CLASS, "count": count}}]}
    if one_clique:
        devices["constraints"] = [{"matchAttribute": f"{fakedriver.DRIVER}/clique"}]
    return {"metadata": {"name": name, "namespace": "bench", "uid": f"uid-{name}"},
            "spec": {"devices": devices}}


def cluster(rng: random.Random) -> tuple[list[Node], Inventory, list[Gang]]:
    nodes = [Node(NodeName(f"node-{i}"), Resources.parse(
        {"cpu": "64", "memory": "512Gi", "pods": 110})) for i in range(NODES)]
    devices: dict[NodeName, tuple[Device, ...]] = {}
    for index, node in enumerate(nodes):
        name, found = slice_from_api(fakedriver.slice_manifest(node.name, index))
        assert name is not None
        devices[name] = found
    device_class = device_class_from_api(fakedriver.device_class_manifest())
    claims: dict[ClaimKey, Claim] = {}
    gangs = []
    for g in range(GANGS):
        pods = []
        for p in range(GANG_SIZE):
            own = []
            for c in range(rng.choice((1, 2))):
                claim = resource_claim_from_api(_claim(f"g{g}-p{p}-c{c}", rng.choice((1, 2)),
                                                       rng.random() < 1 / 3))
                claims[claim.key] = claim
                own.append(PodClaim(f"c{c}", claim.key))
            pods.append(Pod(PodKey(f"bench/g{g}-p{p}"), Resources.parse(
                {"cpu": "2", "memory": "8Gi", "pods": 1}), uid=f"uid-g{g}-p{p}",
                resource_claims=tuple(own)))
        gangs.append(Gang(GangKey(f"bench/g{g}"), GANG_SIZE, tuple(pods)))
    inventory = Inventory.build(devices, {device_class.name: device_class}, claims)
    return nodes, inventory, gangs


def cycle(nodes: list[Node], pods: list[Pod], inventory: Inventory,
          gangs: list[Gang]) -> tuple[float, int]:
    snapshot = replace(Snapshot.build(nodes, pods), devices=inventory)
    started = time.perf_counter()
    result = run_cycle(CycleInput(
        snapshot=snapshot, gangs=tuple(gangs), bound_requests={}, queues={},
        admitted=frozenset(), waiting_since={}, now=0.0, policy=Policy.BINPACK))
    elapsed = time.perf_counter() - started
    return elapsed, sum(len(p.assignments) for p in result.placements)


def main() -> int:
    nodes, inventory, gangs = cluster(random.Random(SEED))
    first_s, placed = cycle(nodes, [], inventory, gangs)
    warm_s, _ = cycle(nodes, [], replace(inventory), gangs)
    # Everything bound, every claim allocated as the first cycle decided: the idle cycle.
    snapshot = replace(Snapshot.build(nodes, []), devices=inventory)
    result = run_cycle(CycleInput(
        snapshot=snapshot, gangs=tuple(gangs), bound_requests={}, queues={},
        admitted=frozenset(), waiting_since={}, now=0.0, policy=Policy.BINPACK))
    by_key = {pod.key: pod for gang in gangs for pod in gang.pending}
    bound = [replace(by_key[key], node_name=node)
             for placement in result.placements for key, node in placement.assignments]
    claims = dict(inventory.claims)
    for placement in result.placements:
        for write in placement.claims:
            if write.allocation is not None:
                claims[write.claim] = replace(claims[write.claim], allocation=write.allocation)
    after = Inventory.build(inventory.devices, inventory.classes, claims)
    idle = [cycle(nodes, bound, after, [])[0] for _ in range(5)]
    report = {
        "nodes": NODES, "devices": NODES * 8, "gangs": GANGS, "pods": GANGS * GANG_SIZE,
        "claims": len(inventory.claims),
        "placed_pods": placed,
        "first_cycle_s": round(first_s, 3),
        "pods_per_s": round(placed / first_s, 1),
        "warm_cycle_s": round(warm_s, 3),
        "warm_pods_per_s": round(placed / warm_s, 1),
        "idle_cycle_ms": round(sorted(idle)[len(idle) // 2] * 1000, 2),
        "python": platform.python_version(),
        "command": "make bench-dra",
    }
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
