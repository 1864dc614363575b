# mypy: ignore-errors
"""One cycle of bench-topology's busiest moment, in-process: ``python bench/topology_core.py``.

1,024 nodes of 8 GPUs in racks of 16 and blocks of 4 racks, labelled and named by
a ``Topology`` as ``make bench-topology`` labels them; ``--busy`` of the nodes
hold a bound 8-GPU pod each, racks spread; ``--gangs`` gangs of the seeded trace
of bench/topology.py (rack and block levels, sub-groups) wait. The figure is the
CPU time of :func:`gangsched.core.step.step` deciding one cycle from an empty
state, ``--runs`` times (min and median), so a change to the core is measured
before and after on the same input without a cluster.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time

sys.path.insert(0, ".")

from bench.topology import (
    BLOCK,
    HOST,
    NODE_GPUS,
    PODGROUP_VERSION,
    RACK,
    TOPOLOGY,
    Fabric,
    gangsched_manifests,
    trace,
)
from gangsched.core.model.objects import Flavor
from gangsched.core.state import State
from gangsched.core.step import StepConfig, step
from gangsched.core.view import StepView
from gangsched.feed import Feed
from gangsched.mirror import Mirror

CREATED = "2026-01-01T00:00:00Z"


def node(name: str, fabric: Fabric) -> dict:
    return {"metadata": {"name": name, "labels": fabric.domains(name)}, "spec": {},
            "status": {"allocatable": {"cpu": "64", "memory": "512Gi",
                                       "nvidia.com/gpu": str(NODE_GPUS), "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def busy_pod(name: str) -> dict:
    return {"metadata": {"name": f"busy-{name}", "namespace": "busy", "uid": f"busy-{name}",
                         "creationTimestamp": CREATED, "labels": {}},
            "spec": {"nodeName": name, "schedulerName": "default-scheduler",
                     "containers": [{"name": "main", "resources": {
                         "requests": {"cpu": "1", "memory": "1Gi",
                                      "nvidia.com/gpu": str(NODE_GPUS)}}}]},
            "status": {"phase": "Running"}}


def fabric_feed(fabric: Fabric) -> tuple[Mirror, Feed]:
    """A mirror holding the fabric's nodes and its Topology, and the feed into it."""
    mirror = Mirror(scheduler_names=frozenset({"gang"}))
    feed = Feed(mirror)
    feed.replace("nodes", [node(n, fabric) for n in fabric.nodes()])
    feed.replace("topologies", [{
        "apiVersion": PODGROUP_VERSION, "kind": "Topology", "metadata": {"name": TOPOLOGY},
        "spec": {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}, {"nodeLabel": HOST}]}}])
    return mirror, feed


def moment(args: argparse.Namespace) -> StepView:
    fabric = Fabric(args.nodes // 16, 16, 4)
    mirror, feed = fabric_feed(fabric)
    names = fabric.nodes()
    busy = int(len(names) * args.busy)
    step_of = max(1, len(names) // busy) if busy else 0
    pods = [busy_pod(n) for n in names[::step_of][:busy]] if busy else []
    for gang in trace(args.seed, args.gangs, 120.0, (20, 60)):
        group, *members = gangsched_manifests("bench", gang)
        group["metadata"].update(uid=f"group-{gang.name}", creationTimestamp=CREATED)
        feed.upsert_group(Flavor.GANGSCHED, group)
        for member in members:
            member["metadata"].update(uid=f"pod-{member['metadata']['name']}",
                                      creationTimestamp=CREATED)
            member["status"] = {"phase": "Pending"}
            pods.append(member)
    feed.replace("pods", pods)
    return StepView(mirror.view(), priority_classes=mirror.groups_and_queues.priority_classes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--nodes", type=int, default=1024)
    parser.add_argument("--gangs", type=int, default=200)
    parser.add_argument("--busy", type=float, default=0.5, help="share of nodes held")
    parser.add_argument("--seed", type=int, default=30)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help="cProfile one step")
    args = parser.parse_args()
    view = moment(args)
    gc.set_threshold(20_000, 20, 50)  # as `gangsched run` sets it, and freezes once synced
    gc.freeze()
    if args.profile:
        import cProfile
        import pstats
        profiler = cProfile.Profile()
        profiler.runcall(step, State(), view, 1000.0, StepConfig())
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(45)
        return
    times, placed = [], 0
    for _ in range(args.runs):
        started = time.process_time()
        placed = len(step(State(), view, 1000.0, StepConfig()).result.placements)
        times.append((time.process_time() - started) * 1000)
    print(json.dumps({"nodes": args.nodes, "gangs": args.gangs, "busy": args.busy,
                      "gangs_placed": placed, "cpu_ms_min": round(min(times), 1),
                      "cpu_ms_median": round(statistics.median(times), 1)}))


if __name__ == "__main__":
    main()
