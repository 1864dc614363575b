"""The full cycle of ``bench.scale``, without a control plane: ``python -m bench.full_cycle``
writes bench/results/full_cycle.json.

The same cluster as ``make bench-scale`` (5,000 nodes of 32 cpu, 128Gi and 2
GPUs; 2,500 PodGroups of 8 one-GPU pods), built from the same manifests and
fed to the mirror as the watches feed it. The first step places half the
gangs; their pods are then reported bound and running, and ``--cycles`` full
steps follow with the state each leaves: 1,250 gangs waiting for room that
does not come, every status and condition planned again. The conditions a step
asks to write on waiting pods are fed back as their watch would return them, so
a settled cluster is measured, not one whose writes never arrive. The figure is the
CPU time of :func:`gangsched.core.step.step` alone (what bench-scale's
``cycle_ms`` measures as wall time in the scheduler), here free of the API
server's and the watches' noise and of other processes on the machine, so
that a change to the core can be measured before and after in a minute.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.harness import gang_manifests, machine, write_report
from gangsched.core.actions import Action, MarkUnschedulable
from gangsched.core.model.objects import Flavor
from gangsched.core.model.runtimes import RUNTIME_ANNOTATION
from gangsched.core.state import State
from gangsched.core.step import StepConfig, step
from gangsched.core.view import StepView
from gangsched.feed import Feed
from gangsched.mirror import Mirror

RESULTS = Path(__file__).parent / "results" / "full_cycle.json"
CREATED = "2026-01-01T00:00:00Z"


def node(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {},
        "status": {
            "allocatable": {"cpu": "32", "memory": "128Gi", "nvidia.com/gpu": "2", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def fill(mirror: Mirror, nodes: int, gangs: int,
         runtimes: bool = False) -> dict[str, dict[str, Any]]:
    """The cluster in the mirror; the pods by key, to be reported bound later. With
    ``runtimes`` each PodGroup states an expected runtime (5 to 35 minutes), so every
    cycle forecasts the waiting gangs' starts (core.forecast)."""
    feed = Feed(mirror)
    feed.replace("nodes", [node(f"node-{i}") for i in range(nodes)])
    pods: dict[str, dict[str, Any]] = {}
    for index in range(gangs):
        group, *members = gang_manifests("scale", f"gang-{index}", 8)
        group["metadata"].update(uid=f"group-{index}", creationTimestamp=CREATED)
        if runtimes:
            group["metadata"]["annotations"] = {RUNTIME_ANNOTATION: f"{300 + index % 61 * 30}s"}
        feed.upsert_group(Flavor.GANGSCHED, group)
        for member in members:
            meta = member["metadata"]
            meta.update(uid=f"pod-{meta['name']}", creationTimestamp=CREATED)
            member["status"] = {"phase": "Pending"}
            pods[f"scale/{meta['name']}"] = member
    feed.replace("pods", list(pods.values()))
    return pods


def step_view(mirror: Mirror) -> StepView:
    return StepView(mirror.view(), priority_classes=mirror.groups_and_queues.priority_classes,
                    never_preempting_classes=frozenset(), bad_pods={}, budgets=())


def written(feed: Feed, pods: dict[str, dict[str, Any]], actions: Sequence[Action]) -> None:
    """The PodScheduled conditions the step asked for, back through the pods' watch."""
    for action in actions:
        if isinstance(action, MarkUnschedulable):
            pod = pods[str(action.pod)]
            pod["status"]["conditions"] = [{
                "type": "PodScheduled", "status": "False",
                "reason": action.condition_reason,
                "message": action.message}]
            feed.upsert("pods", pod)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--gangs", type=int, default=2500)
    parser.add_argument("--cycles", type=int, default=15)
    parser.add_argument("--runtimes", action="store_true",
                        help="PodGroups state expected runtimes: the estimated starts of the "
                             "waiting gangs are forecast, not all unknown.")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    gc.set_threshold(20_000, 20, 50)  # as `gangsched run` sets it
    mirror = Mirror(scheduler_names=frozenset({"gang"}))
    pods = fill(mirror, args.nodes, args.gangs, args.runtimes)
    gc.freeze()
    config, now = StepConfig(), 1000.0
    started = time.process_time()
    stepped = step(State(), step_view(mirror), now, config)
    placing_ms = (time.process_time() - started) * 1000
    feed, placed = Feed(mirror), len(stepped.result.placements)
    for placement in stepped.result.placements:
        for pod_key, node_name in placement.assignments:
            pod = pods[pod_key]
            pod["spec"]["nodeName"], pod["status"]["phase"] = node_name, "Running"
            feed.upsert("pods", pod)
    written(feed, pods, stepped.actions)
    state, full_ms = stepped.state, []
    for _ in range(args.cycles):
        now += 5
        view = step_view(mirror)
        started = time.process_time()
        stepped = step(state, view, now, config)
        full_ms.append((time.process_time() - started) * 1000)
        state = stepped.state
        written(feed, pods, stepped.actions)
    write_report(args.output, {
        "machine": machine(),
        "nodes": args.nodes, "gangs": args.gangs,
        "placing_cycle_ms": round(placing_ms, 1),
        "gangs_placed": placed,
        "full_cycle_ms": {"p50": round(statistics.median(full_ms), 1),
                          "min": round(min(full_ms), 1), "max": round(max(full_ms), 1),
                          "cycles": len(full_ms)},
    })


if __name__ == "__main__":
    main()
