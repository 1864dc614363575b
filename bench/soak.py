"""A soak: gangs created and deleted at a steady rate for a long time, thousands waiting.

``python -m bench.soak`` writes bench/results/soak.json. One local control
plane (etcd, kube-apiserver, KWOK; no kube-scheduler) with ``--nodes`` fake
nodes of 32 cpu, 128Gi and ``--node-gpus`` nvidia.com/gpu, and ``gangsched
run`` with its defaults. First the cluster is filled with gangs of 8 one-GPU
pods, plus ``--waiting`` gangs more than it holds, which wait. Then, for
``--minutes``, ``--rate`` times a second the oldest gang (running, since gangs
are served oldest first) is deleted, its PodGroup first so its departure is
no lost member to hold room for, and a new gang is created at the back: the
cluster stays full, the same number of gangs waits, and every departure lets
the oldest waiting gang in.

Every ``--sample-seconds`` the gangsched process's resident memory and, from
its metrics page, the depth of its write queue
(``gangsched_write_queue_depth``: status writes and Events waiting to go out)
are sampled. Pass conditions:

- memory: the resident set at the end is within 10 % of the resident set at
  the mark, the first 5 minutes of a 30-minute run (a sixth of the run, if
  shorter), by when the scheduler's caches are warm;
- write queue: bounded once past the mark (the fill before the soak queues a
  write for every object at once), i.e. never deeper than the number of
  objects it may write to (pods, PodGroups and the Queue), and not growing:
  its mean over the last fifth of the run is at most 1.5 times its mean over
  the fifth after the mark (or at most 10).
"""

from __future__ import annotations

import argparse
import collections
import statistics
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pykube

from bench.harness import (
    GROUP_LABEL,
    POD_REQUESTS,
    PODGROUP_VERSION,
    Clients,
    Gangsched,
    PodWatch,
    add_nodes,
    bench_parser,
    cpu_seconds,
    create,
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

RESULTS = Path(__file__).parent / "results" / "soak.json"
NAMESPACE = "soak"
MEMORY_DRIFT = 0.10


def delete_gang(clients: Clients, name: str) -> None:
    """The PodGroup first, then its pods, at once (no grace)."""
    api = clients.get()
    options = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}
    api.raise_for_status(api.delete(version=PODGROUP_VERSION, url=f"podgroups/{name}",
                                    namespace=NAMESPACE, json=options))
    api.raise_for_status(api.delete(url="pods", namespace=NAMESPACE, json=options,
                                    params={"labelSelector": f"{GROUP_LABEL}={name}"}))


def replace_gang(clients: Clients, old: str, new: str, size: int) -> None:
    delete_gang(clients, old)
    for manifest in gang_manifests(NAMESPACE, new, size):
        create(clients, manifest)


def sample(scheduler: Gangsched, pid: int, started: float) -> dict[str, float]:
    """Memory and CPU from /proc; the rest from the metrics page, which a scheduler whose
    loop is busy answers late: then ``metrics_s`` says how late, and the rest is absent."""
    asked = time.monotonic()
    figures = {
        "t_s": round(asked - started, 1),
        "rss_mb": round(memory_kib(pid).get("VmRSS", 0) / 1024, 1),
        "cpu_s": round(cpu_seconds(pid), 1),
    }
    try:
        values = scheduler.samples()
    except OSError:  # timed out
        figures["metrics_s"] = round(time.monotonic() - asked, 1)
        return figures
    figures.update({
        "metrics_s": round(time.monotonic() - asked, 2),
        "write_queue_depth": values.get("gangsched_write_queue_depth", -1.0),
        "gangs_placed": values.get("gangsched_gangs_placed_total", 0.0),
        "gangs_waiting": values.get("gangsched_gangs_waiting", 0.0),
        "cycles": values.get("gangsched_cycles_total", 0.0),
    })
    return figures


def verdict(samples: list[dict[str, float]], mark_s: float,
            objects: int) -> dict[str, Any]:
    """Memory at the end against memory at the mark; the write queue bounded and flat."""
    at_mark = next((s for s in samples if s["t_s"] >= mark_s), samples[-1])
    end = samples[-1]
    drift = (end["rss_mb"] - at_mark["rss_mb"]) / at_mark["rss_mb"]
    answered = [s for s in samples if "write_queue_depth" in s]
    after = [s for s in answered if s["t_s"] >= mark_s] or answered[-1:]
    fifth = max(1, len(after) // 5)
    early = statistics.fmean(s["write_queue_depth"] for s in after[:fifth])
    late = statistics.fmean(s["write_queue_depth"] for s in after[-fifth:])
    deepest = max(s["write_queue_depth"] for s in after)
    return {
        "mark_s": mark_s,
        "rss_mb_at_mark": at_mark["rss_mb"],
        "rss_mb_at_end": end["rss_mb"],
        "rss_mb_max": max(s["rss_mb"] for s in samples),
        "rss_drift_after_mark": round(drift, 3),
        "memory_met": abs(drift) <= MEMORY_DRIFT,
        "write_queue_depth_max_after_mark": deepest,
        "write_queue_depth_max_before_mark": max(
            (s["write_queue_depth"] for s in answered if s["t_s"] < mark_s), default=None),
        "write_queue_objects_bound": objects,
        "write_queue_mean_after_mark": round(early, 1),
        "write_queue_mean_last_fifth": round(late, 1),
        "write_queue_met": deepest <= objects and late <= max(10.0, 1.5 * early),
        "metrics_page_unanswered": len(samples) - len(answered),
        "metrics_page_slowest_s": max(s["metrics_s"] for s in samples),
    }


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = bench_parser("bench.soak", __doc__, RESULTS, nodes=500, node_gpus=4)
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--waiting", type=int, default=375,
                        help="gangs beyond what the cluster holds, waiting all along")
    parser.add_argument("--rate", type=float, default=1.0,
                        help="gangs deleted and created per second")
    parser.add_argument("--sample-seconds", type=float, default=5)
    parser.add_argument("--workers", type=int, default=16, help="threads creating objects")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    shape = node_shape(args.node_gpus)
    running = args.nodes * args.node_gpus // args.gang_size
    gangs = running + args.waiting
    mark_s = args.minutes * 60 / 6
    report: dict[str, Any] = {
        "benchmark": "soak: gangs deleted and created at a steady rate, thousands waiting",
        "machine": machine(),
        "sizes": {
            "nodes": args.nodes,
            "node": shape_figures(shape),
            "gang_size": args.gang_size, "pod_requests": POD_REQUESTS,
            "gangs_running": running, "gangs_waiting": args.waiting,
            "pods": gangs * args.gang_size, "pods_waiting": args.waiting * args.gang_size,
            "gangs_replaced_per_s": args.rate, "minutes": args.minutes,
            "sample_seconds": args.sample_seconds,
        },
        "gangsched": "gangsched run, default settings (debounce 50 ms, resync 5 s)",
    }
    samples: list[dict[str, float]] = []
    replaced, failures = 0, 0
    with work_directory(args.workdir, "gangsched-soak-") as workdir, \
            running_cluster(workdir / "cluster", ClusterOptions(nodes=0)) as cluster:
        cluster.apply_crds()
        add_nodes(cluster, args.nodes, shape, "soak")
        clients = Clients(cluster.kubeconfig)
        api: pykube.HTTPClient = clients.get()
        create_namespace(api, NAMESPACE)
        scheduler = Gangsched(cluster, workdir / "gangsched.log", log_level="debug")
        scheduler.start()
        assert scheduler.proc is not None
        pid = scheduler.proc.pid
        watch = PodWatch(clients, NAMESPACE)
        watch.start()
        try:
            order = collections.deque(f"gang-{g}" for g in range(gangs))
            manifests = [gang_manifests(NAMESPACE, name, args.gang_size) for name in order]
            create_all(clients, [m[0] for m in manifests], args.workers)
            create_all(clients, [p for m in manifests for p in m[1:]], args.workers)
            filled = watch.wait_bound(running * args.gang_size, 600)
            say(f"{gangs} gangs created, {len(watch.bound_at)} pods bound; soaking "
                f"{args.minutes:g} minutes")
            watch.stop()
            started = time.monotonic()
            ends = started + args.minutes * 60
            next_sample, tick, serial = started, 0, gangs
            lock = threading.Lock()
            errors: list[str] = []

            def churn(old: str, new: str) -> None:
                try:
                    replace_gang(clients, old, new, args.gang_size)
                except Exception as error:
                    with lock:
                        errors.append(repr(error)[:300])

            with ThreadPoolExecutor(max_workers=args.workers) as pool:
                while (now := time.monotonic()) < ends:
                    if now >= next_sample:
                        samples.append(sample(scheduler, pid, started))
                        next_sample += args.sample_seconds
                    due = started + tick / args.rate
                    if now >= due:
                        old, new = order.popleft(), f"gang-{serial}"
                        order.append(new)
                        serial, tick = serial + 1, tick + 1
                        pool.submit(churn, old, new)
                    time.sleep(max(0.0, min(next_sample, started + tick / args.rate)
                                   - time.monotonic()))
            samples.append(sample(scheduler, pid, started))
            replaced, failures = tick, len(errors)
            report["churn_errors"] = errors[:10]
            report["filled_before_soak"] = filled
            report["load_average_1_5_15_end"] = load_average()
        finally:
            scheduler.stop()
        report["gangsched_process"] = scheduler.figures
        cycles = scheduler.log_lines("cycle_done")
        report["cycles"] = {
            "count": len(cycles),
            "reused": sum(1 for c in cycles if c.get("reused")),
            "full_with_reports_ms": distribution(
                [float(c["with_reports_ms"]) for c in cycles if not c.get("reused")]),
        }
        report["warnings"] = scheduler.cycles()["warnings"]
    objects = gangs * (args.gang_size + 1) + 1
    report.update({
        "gangs_replaced": replaced,
        "churn_failures": failures,
        "gangs_placed_during_soak": max(s.get("gangs_placed", 0.0) for s in samples)
        - min(s.get("gangs_placed", 0.0) for s in samples),
        "verdict": verdict(samples, mark_s, objects),
        "samples": samples,
    })
    write_report(args.output, report)
    say(f"soak verdict: {report['verdict']}")


if __name__ == "__main__":
    main()
