"""gangsched at scale: thousands of nodes, tens of thousands of pods, thousands waiting.

``python -m bench.scale`` writes bench/results/scale.json. One local control
plane (etcd, kube-apiserver, KWOK; no kube-scheduler) with ``--nodes`` fake
nodes of 32 cpu, 128Gi and ``--node-gpus`` nvidia.com/gpu (2 by default, so
5,000 nodes hold 10,000 one-GPU pods), and ``--gangs`` PodGroups of
``minMember: 8`` with their pods (1 GPU, 2 cpu, 8Gi each; 20,000 pods by
default), created while no scheduler runs. Then ``gangsched run`` starts with
its defaults and places what fits: half the gangs run, the other half (10,000
pods by default) wait for room that does not come.

Figures: the time from gangsched's start to the last bind; every cycle's time
(its ``cycle_done`` debug lines: the decision alone, and with the status and
condition writes it hands out), while placing and once settled; the idle
cycle, once nothing changes any more (every write gone out, nothing placed
for a while): the resync cycles of ``--idle-seconds`` with nothing new; the
resident memory of the gangsched process, sampled every second, and its peak
(``VmHWM``).
"""

from __future__ import annotations

import argparse
import threading
import time
from collections.abc import Sequence
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
    create_all,
    create_namespace,
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
from devcluster.controlplane import ClusterOptions, running_cluster

RESULTS = Path(__file__).parent / "results" / "scale.json"
IDLE_CYCLE_GOAL_MS = 10.0
RSS_GOAL_MB = 300.0
NAMESPACE = "scale"


class MemorySampler:
    """Samples a process's resident set every ``interval`` seconds on a thread."""

    def __init__(self, pid: int, interval: float = 1.0) -> None:
        self.pid, self.interval = pid, interval
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        started = time.monotonic()
        while not self._stop.wait(self.interval):
            rss = memory_kib(self.pid).get("VmRSS")
            if rss is not None:
                self.samples.append((time.monotonic() - started, rss))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def wait_quiet(scheduler: Gangsched, quiet_s: float, timeout: float) -> float:
    """Wait until the write queue is empty and no gang was placed for ``quiet_s``."""
    started = time.monotonic()
    placed, since = -1.0, time.monotonic()
    while time.monotonic() - started < timeout:
        samples = scheduler.samples()
        now_placed = samples.get("gangsched_gangs_placed_total", 0.0)
        if now_placed != placed or samples.get("gangsched_write_queue_depth", 0.0) > 0:
            placed, since = now_placed, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            break
        time.sleep(1.0)
    return time.monotonic() - started


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = bench_parser("bench.scale", __doc__, RESULTS, nodes=5000, node_gpus=2)
    parser.add_argument("--gangs", type=int, default=2500)
    parser.add_argument("--workers", type=int, default=16, help="threads creating objects")
    parser.add_argument("--idle-seconds", type=float, default=60,
                        help="how long to watch the settled scheduler's idle cycles")
    parser.add_argument("--quiet-seconds", type=float, default=15,
                        help="no gang placed and no write queued this long counts as settled")
    parser.add_argument("--timeout", type=float, default=900,
                        help="seconds to wait for the binds, and then to settle")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    shape = node_shape(args.node_gpus)
    pods = args.gangs * args.gang_size
    fitting_gangs = min(args.gangs, args.nodes * args.node_gpus // args.gang_size)
    report: dict[str, Any] = {
        "benchmark": "gangsched with thousands of nodes and pods, thousands waiting",
        "machine": machine(),
        "sizes": {
            "nodes": args.nodes,
            "node": shape_figures(shape),
            "gangs": args.gangs, "gang_size": args.gang_size, "pods": pods,
            "pod_requests": POD_REQUESTS,
            "gangs_that_fit": fitting_gangs,
            "pods_left_waiting": pods - fitting_gangs * args.gang_size,
        },
        "gangsched": "gangsched run, default settings (debounce 50 ms, resync 5 s)",
    }
    started = time.monotonic()
    with work_directory(args.workdir, "gangsched-scale-") as workdir, \
            running_cluster(workdir / "cluster", ClusterOptions(nodes=0)) as cluster:
        cluster.apply_crds()
        setup: dict[str, float] = {
            "nodes_ready_s": round(add_nodes(cluster, args.nodes, shape, "scale"), 1)}
        say(f"{args.nodes} nodes ready in {setup['nodes_ready_s']}s")
        clients = Clients(cluster.kubeconfig)
        create_namespace(clients.get(), NAMESPACE)
        manifests = [gang_manifests(NAMESPACE, f"gang-{g}", args.gang_size)
                     for g in range(args.gangs)]
        setup["podgroups_created_s"] = round(
            create_all(clients, [m[0] for m in manifests], args.workers), 1)
        setup["pods_created_s"] = round(
            create_all(clients, [p for m in manifests for p in m[1:]], args.workers), 1)
        report["setup"] = setup
        say(f"{pods} pods created in {setup['pods_created_s']}s")
        watch = PodWatch(clients, NAMESPACE)
        watch.start()

        scheduler = Gangsched(cluster, workdir / "gangsched.log", log_level="debug")
        launched = time.monotonic()
        scheduler.start()
        assert scheduler.proc is not None
        pid = scheduler.proc.pid
        memory = MemorySampler(pid)
        try:
            ready = time.monotonic() - launched
            bound_all = watch.wait_bound(fitting_gangs * args.gang_size, args.timeout)
            binds_done = time.monotonic() - launched
            say(f"{len(watch.bound_at)} pods bound {binds_done:.1f}s after start; settling")
            settle_s = wait_quiet(scheduler, args.quiet_seconds, args.timeout)
            cycles_before = len(scheduler.log_lines("cycle_done"))
            cpu_before, load_before = cpu_seconds(pid), load_average()
            time.sleep(args.idle_seconds)
            idle_cpu = cpu_seconds(pid) - cpu_before
            samples = scheduler.samples()
            lines = scheduler.log_lines("cycle_done")
            memory_now = memory_kib(pid)
            load_idle = load_average()
            warnings = scheduler.cycles()["warnings"]  # the log goes with the workdir
        finally:
            memory.stop()
            scheduler.stop()
            watch.stop()
    busy, idle = lines[:cycles_before], lines[cycles_before:]
    peak_mb = memory_now.get("VmHWM", 0) / 1024
    idle_ms = [float(c["with_reports_ms"]) for c in idle]
    report.update({
        "scheduler_started_s": round(ready, 1),
        "all_fitting_bound": bound_all,
        "pods_bound": len(watch.bound_at),
        "last_bind_after_start_s": round(binds_done, 1),
        "settled_after_last_bind_s": round(settle_s, 1),
        "cycles_until_settled": {
            "count": len(busy),
            "cycle_ms": distribution([float(c["cycle_ms"]) for c in busy]),
            "with_reports_ms": distribution([float(c["with_reports_ms"]) for c in busy]),
            "placing_cycle_ms": distribution(
                [float(c["cycle_ms"]) for c in busy if int(c["placed"]) > 0]),
        },
        "idle": {
            "seconds": args.idle_seconds,
            "cycles": len(idle),
            "gangs_in_cycle": max((int(c["gangs"]) for c in lines if c.get("gangs")),
                                  default=None),
            "reused": sum(1 for c in idle if c.get("reused")),
            "full_with_reports_ms": distribution(
                [float(c["with_reports_ms"]) for c in idle if not c.get("reused")]),
            "cycle_ms": distribution([float(c["cycle_ms"]) for c in idle]),
            "with_reports_ms": distribution(idle_ms),
            "gangsched_cpu_s": round(idle_cpu, 2),
            "write_queue_depth": samples.get("gangsched_write_queue_depth"),
            "load_average_1_5_15": {"start": load_before, "end": load_idle},
        },
        "memory": {
            "rss_mb_now": round(memory_now.get("VmRSS", 0) / 1024, 1),
            "rss_mb_peak": round(peak_mb, 1),
            "rss_mb_samples_every_10s": [round(kib / 1024, 1)
                                         for _, kib in memory.samples[::10]],
        },
        "gangsched_process": scheduler.figures,
        "warnings": warnings,
    })
    idle_p50 = report["idle"]["with_reports_ms"].get("p50")
    report["goals"] = {
        "idle_cycle_ms_at_most": IDLE_CYCLE_GOAL_MS,
        "idle_cycle_met": idle_p50 is not None and float(idle_p50) <= IDLE_CYCLE_GOAL_MS,
        "rss_mb_at_most": RSS_GOAL_MB,
        "rss_met": 0 < peak_mb <= RSS_GOAL_MB,
    }
    report["total_run_s"] = round(time.monotonic() - started, 1)
    write_report(args.output, report)
    say(f"idle cycle ms {report['idle']['with_reports_ms']}, peak RSS {peak_mb:.0f} MB")


if __name__ == "__main__":
    main()
