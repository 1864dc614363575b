# mypy: ignore-errors
"""The decision of ``bench.full_cycle`` as the code before the shell was reshaped made it
(3f3503c): gather the gangs, run the cycle; the status and condition reports were then
built by the shell, outside the figure. Run it from a checkout of that commit::

    git worktree add /tmp/before 3f3503c
    cd /tmp/before && python /path/to/gangsched/bench/full_cycle_before.py

It prints one JSON line: the CPU time of each full cycle, as ``bench.full_cycle`` writes
them, on the same cluster (5,000 nodes of 2 GPUs, 2,500 gangs of 8, half placed).
"""

from __future__ import annotations

import gc
import json
import statistics
import sys
import time
from typing import Any

sys.path.insert(0, ".")

from bench.harness import gang_manifests
from gangsched.core.kubeobjects.groups import Flavor
from gangsched.core.model.objects import Policy
from gangsched.core.placement.holds import seats_of
from gangsched.core.stages.cycle import run_cycle
from gangsched.decisions import cycle_input, gather_view
from gangsched.mirror import Mirror

CREATED = "2026-01-01T00:00:00Z"


def node(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}, "spec": {},
            "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "nvidia.com/gpu": "2",
                                       "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def main(cycles: int = 15) -> None:
    gc.set_threshold(20_000, 20, 50)
    mirror: Any = Mirror(scheduler_names=frozenset({"gang"}))
    mirror.replace("nodes", [node(f"node-{i}") for i in range(5000)])
    pods: dict[str, dict[str, Any]] = {}
    for index in range(2500):
        group, *members = gang_manifests("scale", f"gang-{index}", 8)
        group["metadata"].update(uid=f"group-{index}", creationTimestamp=CREATED)
        mirror.upsert_group(Flavor.GANGSCHED, group)
        for member in members:
            meta = member["metadata"]
            meta.update(uid=f"pod-{meta['name']}", creationTimestamp=CREATED)
            member["status"] = {"phase": "Pending"}
            pods[f"scale/{meta['name']}"] = member
    mirror.replace("pods", list(pods.values()))
    gc.freeze()

    def decide(admitted: frozenset[Any], now: float) -> Any:
        view = mirror.view()
        gathering = gather_view(view, frozenset(), mirror.priority_classes, frozenset())
        seats_of((m.pod, m.group) for m in view.members if m.group in gathering.groups)
        return run_cycle(cycle_input(view, gathering.gathered, admitted=admitted,
                                     waiting_since={}, now=now, policy=Policy.BINPACK,
                                     starvation_s=60.0))

    now = 1000.0
    started = time.process_time()
    result = decide(frozenset(), now)
    placing_ms = (time.process_time() - started) * 1000
    for placement in result.placements:
        for key, name in placement.assignments:
            pods[key]["spec"]["nodeName"], pods[key]["status"]["phase"] = name, "Running"
            mirror.upsert("pods", pods[key])
    admitted, full_ms = result.admitted, []
    for _ in range(cycles):
        now += 5
        started = time.process_time()
        result = decide(admitted, now)
        full_ms.append((time.process_time() - started) * 1000)
        admitted = result.admitted
    print(json.dumps({"placing_cycle_ms": round(placing_ms, 1),
                      "full_cycle_ms": {"p50": round(statistics.median(full_ms), 1),
                                        "min": round(min(full_ms), 1), "cycles": cycles}}))


if __name__ == "__main__":
    main()
