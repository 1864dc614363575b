"""Gang latency under a steady arrival rate: from a gang's last pod created to all of it bound.

``python -m bench.latency`` writes bench/results/latency.json. One local
control plane (etcd, kube-apiserver, KWOK; no kube-scheduler: every pod here
is gangsched's) with ``--nodes`` fake nodes of 32 cpu, 128Gi and 8
nvidia.com/gpu, and ``gangsched run`` with its defaults. For each rate in
``--rates`` (gangs per second), gangs arrive for ``--seconds``: at its
scheduled moment a gang's PodGroup (``minMember: 8``) is created, then its 8
pods (1 GPU, 2 cpu, 8Gi each) all at once from a thread pool. A watch in this
process notes when each pod is first seen bound; a gang's latency is the time
from the return of its last pod's create request to its last pod seen bound,
both on this process's clock. Between rates the gangs of the finished rate are
deleted, so every rate starts on an empty cluster (20 gangs/s for 30 s take
4,800 of the 8,000 GPUs of 1,000 nodes: none waits for room).

The arrival rate actually met is reported beside the one asked for: the
creates share the machine's cores with the control plane and the scheduler.
"""

from __future__ import annotations

import argparse
import math
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.harness import (
    POD_REQUESTS,
    Clients,
    Gangsched,
    PodWatch,
    add_nodes,
    bench_parser,
    cpu_seconds,
    create,
    create_namespace,
    delete_all,
    distribution,
    gang_manifests,
    load_average,
    machine,
    memory_kib,
    node_shape,
    say,
    shape_figures,
    work_directory,
    write_report,
)
from devcluster.controlplane import ClusterOptions, LocalCluster, running_cluster

RESULTS = Path(__file__).parent / "results" / "latency.json"
GOALS_P99_MS = {10.0: 300.0, 20.0: 1000.0}
"""The p99 latency each arrival rate (gangs/s) must stay under."""


@dataclass
class Arrivals:
    """When each gang was due, started and finished being created, on one clock."""

    due: dict[str, float] = field(default_factory=dict)
    started: dict[str, float] = field(default_factory=dict)
    created: dict[str, float] = field(default_factory=dict)
    created_wall: dict[str, float] = field(default_factory=dict)
    """``created`` on the wall clock, to set beside the times in gangsched's log."""
    failures: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def create_gang(clients: Clients, pods_pool: ThreadPoolExecutor, manifests: list[dict[str, Any]],
                arrivals: Arrivals) -> None:
    """The PodGroup, then every pod at once; notes when the last create returned."""
    name = manifests[0]["metadata"]["name"]
    started = time.monotonic()
    try:
        create(clients, manifests[0])
        futures: list[Future[None]] = [pods_pool.submit(create, clients, m)
                                       for m in manifests[1:]]
        for future in futures:
            future.result()
    except Exception as error:
        with arrivals.lock:
            arrivals.failures.append(f"{name}: {error!r}"[:300])
        return
    with arrivals.lock:
        arrivals.started[name] = started
        arrivals.created[name] = time.monotonic()
        arrivals.created_wall[name] = time.time()


def run_rate(cluster: LocalCluster, clients: Clients, scheduler: Gangsched, rate: float,
             args: argparse.Namespace, namespace: str | None = None) -> dict[str, Any]:
    namespace = namespace or f"latency-{str(rate).replace('.', '-')}"
    api = clients.get()
    create_namespace(api, namespace)
    count = max(1, round(rate * args.seconds))
    gangs = {f"gang-{g}": gang_manifests(namespace, f"gang-{g}", args.gang_size)
             for g in range(count)}
    watch = PodWatch(clients, namespace)
    watch.start()
    assert scheduler.proc is not None
    pid = scheduler.proc.pid
    cpu_before, samples_before = cpu_seconds(pid), scheduler.samples()
    cycles_before = len(scheduler.log_lines("cycle_done"))
    arrivals = Arrivals()
    load_start = load_average()
    with ThreadPoolExecutor(max_workers=args.pod_workers, thread_name_prefix="pod") as pods, \
            ThreadPoolExecutor(max_workers=args.gang_workers, thread_name_prefix="gang") as pool:
        began = time.monotonic() + 0.2
        for index, (name, manifests) in enumerate(gangs.items()):
            due = began + index / rate
            pause = due - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            arrivals.due[name] = due
            pool.submit(create_gang, clients, pods, manifests, arrivals)
    finished = watch.wait_bound(len(arrivals.created) * args.gang_size, args.timeout)
    cpu_used = cpu_seconds(pid) - cpu_before
    samples_after = scheduler.samples()
    time.sleep(0.5)
    watch.stop()
    load_end = load_average()
    cycles = scheduler.log_lines("cycle_done")[cycles_before:]

    latencies, unbound = [], 0
    by_gang: dict[str, dict[str, float]] = {}
    for name in arrivals.created:
        times = [watch.bound_at.get(f"{name}-{i}") for i in range(args.gang_size)]
        bound = [t for t in times if t is not None]
        if len(bound) < args.gang_size:
            unbound += 1
            continue
        latencies.append((max(bound) - arrivals.created[name]) * 1000)
        seen = [watch.seen_at.get(f"{name}-{i}", math.inf) for i in range(args.gang_size)]
        by_gang[name] = {"latency_ms": latencies[-1],
                         "last_pod_seen_by_a_watch_ms": (max(seen) - arrivals.created[name]) * 1000}
    created = sorted(arrivals.created.values())
    first_due = min(arrivals.due.values())
    span = created[-1] - first_due if created else 0.0
    achieved = len(created) / span if span > 0 else 0.0
    lags = [(arrivals.started[n] - arrivals.due[n]) * 1000 for n in arrivals.started]
    spans = [(arrivals.created[n] - arrivals.started[n]) * 1000 for n in arrivals.created]
    figures = distribution(latencies)
    placed_wall = {str(line["gang"]).split("/", 1)[1]: _wall(str(line["timestamp"]))
                   for line in scheduler.log_lines("gang_placed")
                   if str(line["gang"]).startswith(namespace + "/")}
    to_placed = [(placed_wall[n] - arrivals.created_wall[n]) * 1000
                 for n in arrivals.created if n in placed_wall]
    for name, gang_times in by_gang.items():
        if name in placed_wall:
            gang_times["placed_ms"] = (placed_wall[name] - arrivals.created_wall[name]) * 1000
    slowest = sorted(by_gang.items(), key=lambda item: -item[1]["latency_ms"])[:5]
    goal = GOALS_P99_MS.get(rate)
    delete_s = delete_all(api, namespace, timeout=300)
    return {
        "rate_asked_gangs_per_s": rate,
        "rate_achieved_gangs_per_s": round(achieved, 2),
        "pods_created_per_s": round(achieved * args.gang_size, 1),
        "gangs": count,
        "gangs_created": len(created),
        "create_failures": arrivals.failures[:10],
        "create_failures_count": len(arrivals.failures),
        "gangs_not_wholly_bound": unbound,
        "all_bound": finished and unbound == 0,
        "latency_ms": figures,
        "goal": None if goal is None else {
            "p99_ms_at_most": goal,
            "met": bool(latencies) and unbound == 0 and float(figures["p99"]) <= goal,
        },
        "placed_after_last_create_ms": distribution(to_placed),
        # A pod's ADDED event reaching the benchmark's own watch: when it comes late,
        # the API server's watches run late for every client, the scheduler's too.
        "last_pod_seen_by_a_watch_ms": distribution(
            [g["last_pod_seen_by_a_watch_ms"] for g in by_gang.values()]),
        "slowest_gangs": {name: {k: round(v, 1) for k, v in gang_times.items()}
                          for name, gang_times in slowest},
        "gang_start_behind_schedule_ms": distribution(lags),
        "gang_creation_ms": distribution(spans),
        "gangsched_cpu_s": round(cpu_used, 1),
        "gangsched_cpu_share_of_window": round(cpu_used / max(span, 1e-3), 2),
        "gangsched_cycles": round(samples_after.get("gangsched_cycles_total", 0)
                                  - samples_before.get("gangsched_cycles_total", 0)),
        "cycle_ms": distribution([float(c["cycle_ms"]) for c in cycles]),
        "cycle_with_reports_ms": distribution([float(c["with_reports_ms"]) for c in cycles]),
        "gangsched_memory_kib": memory_kib(pid),
        "load_average_1_5_15": {"start": load_start, "end": load_end},
        "delete_s": round(delete_s, 1),
    }


def _wall(stamp: str) -> float:
    """A log line's ISO timestamp as seconds since the epoch."""
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


WARM_UP_RATE = 5.0
WARM_UP_S = 2.0


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = bench_parser("bench.latency", __doc__, RESULTS, nodes=1000, node_gpus=8)
    parser.add_argument("--rates", type=float, nargs="+", default=[5.0, 10.0, 20.0],
                        help="gangs per second, one run each")
    parser.add_argument("--seconds", type=float, default=30, help="arrivals last this long")
    parser.add_argument("--pod-workers", type=int, default=64, help="threads creating pods")
    parser.add_argument("--gang-workers", type=int, default=32,
                        help="threads each creating one gang at a time")
    parser.add_argument("--timeout", type=float, default=120,
                        help="seconds to wait, after the last arrival, for every bind")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    report: dict[str, Any] = {
        "benchmark": "gang latency at steady arrival rates, last create to last bind",
        "machine": machine(),
        "sizes": {
            "nodes": args.nodes,
            "node": shape_figures(node_shape(args.node_gpus)),
            "gang_size": args.gang_size,
            "pod_requests": POD_REQUESTS,
            "seconds_per_rate": args.seconds,
            "rates_gangs_per_s": args.rates,
            "pod_create_threads": args.pod_workers,
        },
        "gangsched": "gangsched run, default settings (debounce 50 ms, resync 5 s)",
        "runs": {},
    }
    started = time.monotonic()
    with work_directory(args.workdir, "gangsched-latency-") as workdir, \
            running_cluster(workdir / "cluster", ClusterOptions(nodes=0)) as cluster:
        cluster.apply_crds()
        report["sizes"]["nodes_ready_s"] = round(
            add_nodes(cluster, args.nodes, node_shape(args.node_gpus), "latency"), 1)
        say(f"{args.nodes} nodes ready")
        clients = Clients(cluster.kubeconfig)
        scheduler = Gangsched(cluster, cluster.workdir / "gangsched.log", log_level="debug")
        scheduler.start()
        try:
            # Not measured: the first PodGroups after a start wait for the watches of
            # freshly created CRDs, which the API server serves only once their
            # storage is ready; a scheduler in a cluster meets that once, if ever.
            run_rate(cluster, clients, scheduler, WARM_UP_RATE,
                     argparse.Namespace(**{**vars(args), "seconds": WARM_UP_S}), "warm-up")
            for rate in args.rates:
                run = run_rate(cluster, clients, scheduler, rate, args)
                report["runs"][f"{rate:g}_gangs_per_s"] = run
                say(f"{rate:g} gangs/s (met {run['rate_achieved_gangs_per_s']}): latency ms "
                    f"{run['latency_ms']}, unbound gangs {run['gangs_not_wholly_bound']}")
        finally:
            scheduler.stop()
        report["gangsched_process"] = scheduler.figures
        report["warnings"] = scheduler.cycles()["warnings"]
    report["goals_met"] = {name: run["goal"]["met"] for name, run in report["runs"].items()
                           if run["goal"] is not None}
    report["total_run_s"] = round(time.monotonic() - started, 1)
    write_report(args.output, report)


if __name__ == "__main__":
    main()
