# mypy: ignore-errors
"""The step that places a backlog, in-process: ``python bench/placing_step.py [--rules]``.

The backlog of ``make bench-scheduler`` (1,000 nodes of 32 cpu, 128Gi and 8
GPUs; 625 PodGroups of 8 one-GPU pods) or, with ``--rules``, that of ``make
bench-rules`` (the same nodes in 10 zones; 500 gangs of 8 with one-per-node
anti-affinity and a zone spread of maxSkew 1), fed to the mirror as the
watches feed it; the figure is the CPU time of :func:`gangsched.core.step.step`
placing it all from an empty state, five times (min and median). It runs from
a checkout of any commit since 10184c9 too (``git worktree add /tmp/before
10184c9; cd /tmp/before && python /path/to/bench/placing_step.py``), so a
change to the core is measured before and after, interleaved, on one machine.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time

sys.path.insert(0, ".")

from bench.harness import gang_manifests
from gangsched.core.model.objects import Flavor
from gangsched.core.state import State
from gangsched.core.step import StepConfig, step
from gangsched.core.view import StepView
from gangsched.mirror import Mirror

try:
    from gangsched.feed import Feed
except ImportError:  # before the feed was split from the mirror
    Feed = None

CREATED = "2026-01-01T00:00:00Z"
REQUESTS = {"cpu": "2", "memory": "8Gi", "nvidia.com/gpu": "1"}
HOST, ZONE = "kubernetes.io/hostname", "topology.kubernetes.io/zone"


def node(index: int, zones: int) -> dict:
    name = f"node-{index}"
    labels = {HOST: name}
    if zones:
        labels[ZONE] = f"zone-{index % zones}"
    return {"metadata": {"name": name, "labels": labels}, "spec": {},
            "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "nvidia.com/gpu": "8",
                                       "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def with_rules(pod: dict, job: str) -> None:
    pod["metadata"]["labels"]["job"] = job
    selector = {"matchLabels": {"job": job}}
    pod["spec"]["affinity"] = {"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": selector, "topologyKey": HOST}]}}
    pod["spec"]["topologySpreadConstraints"] = [{
        "maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": selector}]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rules", action="store_true", help="bench-rules's backlog")
    args = parser.parse_args()
    gangs, zones = (500, 10) if args.rules else (625, 0)
    mirror = Mirror(scheduler_names=frozenset({"gang"}))
    feed = Feed(mirror) if Feed is not None else mirror
    feed.replace("nodes", [node(i, zones) for i in range(1000)])
    pods = []
    for index in range(gangs):
        group, *members = gang_manifests("backlog", f"gang-{index}", 8, REQUESTS)
        group["metadata"].update(uid=f"group-{index}", creationTimestamp=CREATED)
        feed.upsert_group(Flavor.GANGSCHED, group)
        for member in members:
            member["metadata"].update(uid=f"pod-{member['metadata']['name']}",
                                      creationTimestamp=CREATED)
            member["status"] = {"phase": "Pending"}
            if args.rules:
                with_rules(member, f"job-{index}")
            pods.append(member)
    feed.replace("pods", pods)
    gc.set_threshold(20_000, 20, 50)  # as `gangsched run` sets it, and freezes once synced
    gc.freeze()
    view = StepView(mirror.view(), priority_classes=mirror.priority_classes)
    times, placed = [], 0
    for _ in range(5):
        started = time.process_time()
        placed = len(step(State(), view, 1000.0, StepConfig()).result.placements)
        times.append((time.process_time() - started) * 1000)
    print(json.dumps({"backlog": "rules" if args.rules else "plain", "gangs_placed": placed,
                      "cpu_ms_min": round(min(times), 1),
                      "cpu_ms_median": round(statistics.median(times), 1)}))


if __name__ == "__main__":
    main()
