"""Benchmark of the placement core: ``python -m bench.core`` writes bench/results/core.json.

Synthetic clusters of 500 to 5,000 nodes (CPU nodes and 8-GPU nodes, half
the GPU nodes tainted, a few cordoned or not ready, a daemon pod everywhere
and pods of other schedulers on about a third of the nodes) receive 1,000
pending gangs of 8 pods: CPU workers, GPU workers, parameter server plus
workers, and zone-pinned gangs. Two figures per size:

* ``full_pass_s``: one pass placing all 1,000 gangs via one Capacity, from a
  fresh snapshot (snapshot index, capacity and every placement included);
* ``one_gang_ms``: placing one more gang into the snapshot that results
  (all placed pods bound), median over several gang shapes. The snapshot's
  index is built once per cycle and shared; its cost is ``index_build_ms``.

``distinct_nodes`` repeats both on the same cluster after one odd-sized
foreign pod lands on every node, so that almost no two nodes are alike: the
worst case for the grouping that makes the common case fast.
"""

from __future__ import annotations

import json
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from gangsched.core.model.objects import (
    Gang,
    GangKey,
    Node,
    NodeName,
    Pod,
    PodKey,
    PodPlacementRules,
    Taint,
    Toleration,
)
from gangsched.core.model.resources import Resources
from gangsched.core.placement.capacity import Capacity, Placement, Snapshot, place_gang

SIZES = (500, 1000, 2000, 5000)
GANGS = 1000
GANG_SIZE = 8
SEED = 42
RESULTS = Path(__file__).parent / "results" / "core.json"

GPU_TAINT = Taint("nvidia.com/gpu", "present", "NoSchedule")
GPU_TOLERATION = Toleration("nvidia.com/gpu", "Exists", "", "NoSchedule")
ZONES = ("zone-a", "zone-b", "zone-c")


def res(**amounts: str | int) -> Resources:
    """Keyword shorthand: ``gpu`` is nvidia.com/gpu, underscores are dashes."""
    return Resources.parse({
        "nvidia.com/gpu" if name == "gpu" else name.replace("_", "-"): value
        for name, value in amounts.items()
    })


def build_cluster(size: int, rng: random.Random) -> tuple[list[Node], list[Pod]]:
    nodes: list[Node] = []
    pods: list[Pod] = []
    cpu_node = res(cpu="32", memory="128Gi", pods=110, ephemeral_storage="200Gi")
    gpu_node = res(cpu="96", memory="768Gi", pods=110, gpu=8)
    daemon = res(cpu="100m", memory="128Mi", pods=1)
    others = [res(cpu="500m", memory="1Gi", pods=1), res(cpu="2", memory="4Gi", pods=1),
              res(cpu="4", memory="16Gi", pods=1), res(cpu="1", memory="2Gi", pods=1)]
    for i in range(size):
        is_gpu = i % 5 == 0
        name = NodeName(f"node-{i:05d}")
        zone = ZONES[i % len(ZONES)]
        labels = (("node.kubernetes.io/instance-type", "p4d" if is_gpu else "m6i"),
                  ("topology.kubernetes.io/zone", zone))
        nodes.append(
            Node(
                name=name,
                allocatable=gpu_node if is_gpu else cpu_node,
                labels=labels,
                taints=(GPU_TAINT,) if is_gpu and i % 10 == 0 else (),
                unschedulable=rng.random() < 0.02,
                ready=rng.random() >= 0.01,
            )
        )
        pods.append(Pod(PodKey(f"kube-system/ds-{i}"), daemon, node_name=name))
        if rng.random() < 0.33:
            for j in range(rng.randint(1, 2)):
                pods.append(Pod(PodKey(f"other/p-{i}-{j}"), rng.choice(others), node_name=name))
    return nodes, pods


def build_gangs(rng: random.Random, prefix: str = "team", count: int = GANGS) -> list[Gang]:
    worker = res(cpu="2", memory="8Gi", pods=1)
    gpu_worker = res(cpu="8", memory="64Gi", pods=1, gpu=1)
    gpu_pair = res(cpu="16", memory="128Gi", pods=1, gpu=2)
    ps = res(cpu="4", memory="16Gi", pods=1)
    tolerate = PodPlacementRules(tolerations=(GPU_TOLERATION,))
    gangs = []
    for g in range(count):
        key = f"{prefix}-{g % 20}/job-{g}"
        roll = rng.random()
        shapes: list[tuple[Resources, PodPlacementRules]]
        if roll < 0.55:
            shapes = [(worker, PodPlacementRules())] * GANG_SIZE
        elif roll < 0.70:
            zone = PodPlacementRules(node_selector=(("topology.kubernetes.io/zone",
                                                     rng.choice(ZONES)),))
            shapes = [(worker, zone)] * GANG_SIZE
        elif roll < 0.80:
            shapes = [(ps, PodPlacementRules())] + [(worker, PodPlacementRules())] * 7
        elif roll < 0.95:
            shapes = [(gpu_worker, tolerate)] * GANG_SIZE
        else:
            shapes = [(gpu_pair, tolerate)] * GANG_SIZE
        pending = tuple(
            Pod(PodKey(f"{key}-{i}"), requests, rules) for i, (requests, rules) in
            enumerate(shapes)
        )
        gangs.append(Gang(GangKey(key), GANG_SIZE, pending))
    return gangs


def timed(action: Callable[[], object]) -> tuple[float, object]:
    start = time.perf_counter()
    result = action()
    return time.perf_counter() - start, result


def run_size(size: int) -> dict[str, object]:
    rng = random.Random(SEED + size)
    nodes, existing = build_cluster(size, rng)
    gangs = build_gangs(rng)

    build_s, snapshot_obj = timed(lambda: Snapshot.build(nodes, existing))
    snapshot = snapshot_obj
    assert isinstance(snapshot, Snapshot)

    def full_pass() -> list[object]:
        capacity = Capacity.from_snapshot(snapshot)
        return [capacity.place(gang) for gang in gangs]

    # The index is part of a fresh snapshot's cost: time it inside the pass.
    full_pass_s, decisions_obj = timed(full_pass)
    decisions = decisions_obj
    assert isinstance(decisions, list)
    placements = [d for d in decisions if isinstance(d, Placement)]
    classes = sum(len(kind) for kind in snapshot.index.classes)

    # A second pass on the same snapshot, index warm, for the steady state.
    warm_pass_s, _ = timed(full_pass)

    placed_pods = {pod.key: pod for gang in gangs for pod in gang.pending}
    bound = list(existing)
    for placement in placements:
        for key, node_name in placement.assignments:
            pod = placed_pods[key]
            bound.append(Pod(pod.key, pod.requests, pod.rules, node_name=node_name))
    full = Snapshot.build(nodes, bound)
    index_s, _ = timed(lambda: full.index)

    samples = one_gang_samples(full)
    distinct = distinct_nodes(size, nodes, existing, gangs)

    return {
        "nodes": size,
        "gangs": len(gangs),
        "pods": sum(len(g.pending) for g in gangs),
        "full_pass_s": round(full_pass_s, 4),
        "one_gang_ms": round(statistics.median(samples) * 1000, 3),
        "one_gang_max_ms": round(max(samples) * 1000, 3),
        "warm_pass_s": round(warm_pass_s, 4),
        "snapshot_build_s": round(build_s, 4),
        "index_build_ms": round(index_s * 1000, 2),
        "gangs_placed": len(placements),
        "pods_placed": sum(len(p.assignments) for p in placements),
        "node_groups": classes,
        "existing_pods": len(existing),
        "distinct_nodes": distinct,
    }


def one_gang_samples(full: Snapshot) -> list[float]:
    """Seconds to place each of a dozen probe gangs (of every shape) into ``full``."""
    probes = build_gangs(random.Random(SEED), prefix="probe", count=12)
    samples = []
    for probe in probes:
        start = time.perf_counter()
        place_gang(full, probe)
        samples.append(time.perf_counter() - start)
    return samples


def distinct_nodes(
    size: int, nodes: list[Node], existing: list[Pod], gangs: list[Gang]
) -> dict[str, object]:
    """The worst case for grouping: one odd-sized foreign pod per node makes
    nearly every node's free resources unique, as in a long-lived busy cluster."""
    rng = random.Random(SEED * 7 + size)
    odd = [
        Pod(
            PodKey(f"noise/p-{i}"),
            Resources.of({"cpu": rng.randint(1, 80) * 100,
                          "memory": rng.randint(1, 256) * 2**27, "pods": 1}),
            node_name=node.name,
        )
        for i, node in enumerate(nodes)
    ]
    snapshot = Snapshot.build(nodes, existing + odd)

    def full_pass() -> list[object]:
        capacity = Capacity.from_snapshot(snapshot)
        return [capacity.place(gang) for gang in gangs]

    elapsed, decisions = timed(full_pass)
    assert isinstance(decisions, list)
    samples = one_gang_samples(snapshot)
    return {
        "node_groups": sum(len(kind) for kind in snapshot.index.classes),
        "full_pass_s": round(elapsed, 4),
        "one_gang_ms": round(statistics.median(samples) * 1000, 3),
        "one_gang_max_ms": round(max(samples) * 1000, 3),
        "gangs_placed": sum(isinstance(d, Placement) for d in decisions),
    }


def main() -> None:
    results = [run_size(size) for size in SIZES]
    report = {
        "benchmark": "gangsched.core placement",
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "machine": platform.machine(),
        "cores": os.cpu_count(),
        "targets_at_5000_nodes": {"full_pass_s": 1.0, "one_gang_ms": 20},
        "results": results,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    for row in results:
        print(
            f"{row['nodes']:>5} nodes: full pass {row['full_pass_s']:.3f}s "
            f"({row['gangs_placed']}/{row['gangs']} gangs placed), "
            f"one gang {row['one_gang_ms']:.2f}ms (max {row['one_gang_max_ms']:.2f}), "
            f"index {row['index_build_ms']:.1f}ms, groups {row['node_groups']}"
        )
        worst = row["distinct_nodes"]
        assert isinstance(worst, dict)
        print(
            f"       distinct nodes ({worst['node_groups']} groups): full pass "
            f"{worst['full_pass_s']:.3f}s, one gang {worst['one_gang_ms']:.2f}ms "
            f"(max {worst['one_gang_max_ms']:.2f})"
        )
    print(f"wrote {RESULTS}", file=sys.stderr)


if __name__ == "__main__":
    main()
