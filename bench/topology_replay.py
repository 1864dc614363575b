# mypy: ignore-errors
"""bench-topology's trace replayed in-process on the core: ``python -m bench.topology_replay``.

The seeded trace of bench/topology.py (its gangs, arrivals and run times) on its
fabric of racks and blocks, without a cluster: every ``--tick`` seconds of
simulated time the gangs that arrived are fed in, pods whose run time is over
go, and :func:`gangsched.core.step.step` decides one cycle, whose binds take
effect at once. The figures are bench-topology's own (:func:`bench.topology.in_target`):
the share of gangs in their tightest asked domain, by kind, the waits, and
the largest gang one rack could take, sampled each simulated second. A change
to how gangs choose their domains is measured here in seconds, on exactly the
trace the cluster bench runs; the cluster bench then says what it costs in
pods per second against the other schedulers.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta

sys.path.insert(0, ".")

from bench.topology import (
    KINDS,
    NODE_GPUS,
    RACK,
    Fabric,
    gangsched_manifests,
    in_target,
    largest_free,
    trace,
)
from bench.topology_core import fabric_feed
from gangsched.core.actions import Bind
from gangsched.core.model.objects import Flavor
from gangsched.core.state import State
from gangsched.core.step import StepConfig, step
from gangsched.core.view import StepView

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def stamp(seconds: float) -> str:
    return (EPOCH + timedelta(seconds=int(seconds))).strftime("%Y-%m-%dT%H:%M:%SZ")


def gpus_of(pod: dict) -> int:
    return int(pod["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"])


def diagnose(action, gangs, free, fabric, now) -> None:
    gang = next(g for g in gangs if action.placement.gang.endswith("/" + g.name))
    names = [n for _, n in action.placement.assignments]
    if in_target(gang, names, fabric) or gang.kind in ("rack_required", "sub_groups"):
        return
    racks: dict[str, int] = {}
    for n in fabric.nodes():
        r = fabric.domains(n)[RACK]
        racks[r] = racks.get(r, 0) + (free[n] == NODE_GPUS)
    blocks: dict[str, int] = {}
    for r, k in racks.items():
        blocks[fabric.block_of(r)] = blocks.get(fabric.block_of(r), 0) + k
    print(f"t={now:.1f} {gang.name} pods={gang.pods} arrived={gang.arrival_s:.1f} "
          f"best rack={max(racks.values())} best block={max(blocks.values())} "
          f"racks used={len({fabric.domains(n)[RACK] for n in names})}", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--racks", type=int, default=64)
    parser.add_argument("--rack-nodes", type=int, default=16)
    parser.add_argument("--block-racks", type=int, default=4)
    parser.add_argument("--gangs", type=int, default=256)
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--seed", type=int, default=30)
    parser.add_argument("--tick", type=float, default=0.25, help="simulated seconds a cycle")
    parser.add_argument("--preferred-wait", type=int, default=0,
                        help="the gangs' topology.preferredWaitSeconds")
    parser.add_argument("--diagnose", action="store_true", help="say where misses went")
    args = parser.parse_args()
    fabric = Fabric(args.racks, args.rack_nodes, args.block_racks)
    gangs = trace(args.seed, args.gangs, args.seconds, (20, 60))
    mirror, feed = fabric_feed(fabric)
    base = EPOCH.timestamp()
    waiting = list(gangs)
    pods: dict[str, dict] = {}
    runtime: dict[str, int] = {}
    ends: dict[str, float] = {}
    bound_at: dict[str, float] = {}
    nodes: dict[str, str] = {}
    free = {n: NODE_GPUS for n in fabric.nodes()}
    samples: list[int] = []
    state, now, cpu, cycles = State(), 0.0, 0.0, 0
    total = sum(g.pods for g in gangs)
    while len(bound_at) < total and now < 3600:
        while waiting and waiting[0].arrival_s <= now:
            gang = waiting.pop(0)
            group, *members = gangsched_manifests("bench", gang, args.preferred_wait)
            group["metadata"].update(uid=f"group-{gang.name}", creationTimestamp=stamp(now))
            feed.upsert_group(Flavor.GANGSCHED, group)
            for member in members:
                name = member["metadata"]["name"]
                member["metadata"].update(uid=f"pod-{name}", creationTimestamp=stamp(now))
                member["status"] = {"phase": "Pending"}
                pods[name] = member
                runtime[name] = gang.runtime_s
                feed.upsert("pods", member)
        for name in [n for n, end in ends.items() if end <= now]:
            del ends[name]
            free[nodes[name]] += gpus_of(pods[name])
            feed.delete("pods", pods[name])
        view = StepView(mirror.view(), priority_classes=mirror.groups_and_queues.priority_classes)
        started = time.process_time()
        stepped = step(state, view, base + now, StepConfig())
        cpu += time.process_time() - started
        cycles += 1
        state = stepped.state
        for action in stepped.actions:
            if not isinstance(action, Bind):
                continue
            if args.diagnose:
                diagnose(action, gangs, free, fabric, now)
            for key, node_name in action.placement.assignments:
                name = key.split("/", 1)[1]
                pod = pods[name]
                pod["spec"]["nodeName"] = node_name
                pod["status"] = {"phase": "Running", "startTime": stamp(now)}
                feed.upsert("pods", pod)
                bound_at[name], nodes[name] = now, node_name
                ends[name] = now + runtime[name]
                free[node_name] -= gpus_of(pod)
        if abs(now - round(now)) < args.tick / 2 and now <= args.seconds:
            samples.append(largest_free(free, fabric, RACK))
        now += args.tick
    per_kind = {kind: [0, 0] for kind in KINDS}
    waits = []
    for gang in gangs:
        names = [f"{gang.name}-{i}" for i in range(gang.pods)]
        per_kind[gang.kind][0] += 1
        if all(n in bound_at for n in names):
            waits.append(max(bound_at[n] for n in names) - gang.arrival_s)
            per_kind[gang.kind][1] += in_target(gang, [nodes[n] for n in names], fabric)
    print(json.dumps({
        "tick_s": args.tick, "seed": args.seed, "cycles": cycles,
        "cpu_s": round(cpu, 1), "end_s": round(now, 1),
        "share_in_target_domain": round(sum(k[1] for k in per_kind.values()) / len(gangs), 3),
        "by_kind": {kind: f"{c[1]}/{c[0]}" for kind, c in per_kind.items()},
        "wait_p50_s": round(statistics.median(waits), 1),
        "wait_p95_s": round(sorted(waits)[int(0.95 * (len(waits) - 1))], 1),
        "rack_whole_free_nodes_mean": round(statistics.fmean(samples), 2)}))


if __name__ == "__main__":
    main()
