"""Gangs with inter-pod rules as a backlog: gangsched vs kube-scheduler, ``make bench-rules``.

``python -m bench.rules`` writes bench/results/rules.json. One local control
plane with 1,000 KWOK nodes in 10 zones (``topology.kubernetes.io/zone``), of
32 cpu, 128Gi and 8 nvidia.com/gpu each; then, on the same nodes, one
backlog after another (each deleted, and gone, before the next):

1. ``gangsched_backlog``: 500 PodGroups of ``minMember: 8`` and their pods
   (1 GPU, 2 cpu, 8Gi each), every pod with one-per-node anti-affinity
   towards its job (``kubernetes.io/hostname``) and a ``DoNotSchedule`` zone
   spread of its job with ``maxSkew: 1``, created while no gangsched runs;
   then gangsched starts and is timed from its start.
2. ``kube_scheduler_unthrottled``: the same pods with the same rules and
   ``schedulerName: default-scheduler``, no gang, created while
   kube-scheduler is stopped; it then starts with its client limit raised to
   ``--kube-qps`` and is timed from its start.

Figures are those of ``bench.scheduler`` (bind throughput from the
scheduler's start, CPU seconds, API writes, gangsched's cycle times from its
log: the first placing cycle among them), and after each run the placement
is checked against the rules: how many jobs have two pods on one node, and
the largest zone skew of any job.

Everything shares this machine's cores: the figures are those of a whole
small cluster on one host, not of a scheduler alone.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pykube

from bench.harness import (
    Clients,
    bench_parser,
    delete_all,
    list_items,
    machine,
    node_shape,
    say,
    shape_figures,
    work_directory,
)
from bench.scheduler import Batch, gang_batch, plain_batch, run_backlog, run_kube
from devcluster.controlplane import ClusterOptions, LocalCluster, running_cluster

RESULTS = Path(__file__).parent / "results" / "rules.json"
ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def with_rules(batch: Batch, size: int) -> Batch:
    """The batch, every pod labelled with its job and carrying the job's rules."""
    for index, pod in enumerate(batch.pods):
        job = f"job-{index // size}"
        pod["metadata"]["labels"]["job"] = job
        selector = {"matchLabels": {"job": job}}
        pod["spec"]["affinity"] = {"podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": selector, "topologyKey": HOST}]}}
        pod["spec"]["topologySpreadConstraints"] = [{
            "maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": selector}]
    return batch


def zoned_nodes(cluster: LocalCluster, count: int, zones: int, gpus: int) -> dict[str, str]:
    """``count`` nodes, as evenly as may be over ``zones`` zones: node name to zone."""
    found: dict[str, str] = {}
    for zone in range(zones):
        share = count // zones + (1 if zone < count % zones else 0)
        names = cluster.ensure_nodes(share, node_shape(gpus), prefix=f"bench-z{zone}",
                                     labels={ZONE: f"zone-{zone}"}, wait=False)
        found.update(dict.fromkeys(names, f"zone-{zone}"))
    deadline = time.monotonic() + 600
    while True:
        ready = sum(1 for n in pykube.Node.objects(cluster.client) if n.name in found and any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in (n.obj.get("status") or {}).get("conditions") or []))
        if ready >= len(found):
            return found
        if time.monotonic() > deadline:
            raise RuntimeError(f"{ready}/{len(found)} nodes Ready")
        time.sleep(1.0)


def rules_kept(clients: Clients, namespace: str, zones: Mapping[str, str]) -> dict[str, Any]:
    """How the bound pods keep the rules: jobs with two pods on a node, the largest skew."""
    pods, _ = list_items(clients.get(), "pods", namespace, "v1")
    by_job: dict[str, list[str]] = {}
    for pod in pods:
        node = pod["spec"].get("nodeName")
        if node:
            by_job.setdefault(pod["metadata"]["labels"]["job"], []).append(node)
    every_zone = sorted(set(zones.values()))
    doubled = sum(1 for nodes in by_job.values() if len(set(nodes)) < len(nodes))
    skews = []
    for nodes in by_job.values():
        counts = Counter(zones[node] for node in nodes)
        skews.append(max(counts.values()) - min(counts.get(z, 0) for z in every_zone))
    return {"jobs_with_pods_bound": len(by_job), "jobs_with_two_pods_on_a_node": doubled,
            "largest_zone_skew": max(skews, default=0)}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = bench_parser("bench.rules", __doc__, RESULTS, nodes=1000, node_gpus=8)
    parser.add_argument("--zones", type=int, default=10)
    parser.add_argument("--gangs", type=int, default=500)
    parser.add_argument("--workers", type=int, default=8, help="threads creating pods")
    parser.add_argument("--kube-qps", type=int, default=5000,
                        help="kube-scheduler's raised client QPS and burst")
    parser.add_argument("--timeout", type=float, default=600,
                        help="seconds to wait for one run's pods to bind")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    pods = args.gangs * args.gang_size
    report: dict[str, Any] = {
        "benchmark": "gangs with one-per-node anti-affinity and zone spread, as a backlog",
        "machine": machine(),
        "sizes": {"nodes": args.nodes, "zones": args.zones,
                  "node": shape_figures(node_shape(args.node_gpus)), "gangs": args.gangs,
                  "gang_size": args.gang_size, "pods": pods,
                  "rules": "anti-affinity one per node per job; zone spread maxSkew 1 per job"},
    }
    started = time.monotonic()
    with work_directory(args.workdir, "gangsched-rules-") as workdir:
        options = ClusterOptions(nodes=0, with_kube_scheduler=True)
        with running_cluster(workdir / "cluster", options) as cluster:
            cluster.apply_crds()
            step = time.monotonic()
            zones = zoned_nodes(cluster, args.nodes, args.zones, args.node_gpus)
            say(f"{len(zones)} nodes in {args.zones} zones ready in "
                f"{time.monotonic() - step:.1f}s")
            clients = Clients(cluster.kubeconfig)
            backlog = with_rules(gang_batch("rules-gang", args.gangs, args.gang_size),
                                 args.gang_size)
            ours = run_backlog(cluster, clients, backlog, args, workdir / "gangsched.log", None)
            ours["rules_kept"] = rules_kept(clients, backlog.namespace, zones)
            report["gangsched_backlog"] = ours
            say(f"gangsched: {ours['bound']}/{pods} bound, {ours.get('pods_per_s')} pods/s")
            delete_all(clients.get(), backlog.namespace)
            plain = with_rules(plain_batch("rules-kube", pods, args.gang_size), args.gang_size)
            theirs = run_kube(cluster, clients, plain, args, native_gang=False,
                              qps=args.kube_qps)
            theirs["rules_kept"] = rules_kept(clients, plain.namespace, zones)
            report["kube_scheduler_unthrottled"] = theirs
            say(f"kube-scheduler: {theirs['bound']}/{pods} bound, "
                f"{theirs.get('pods_per_s')} pods/s")
    mine, base = ours.get("pods_per_s"), theirs.get("pods_per_s")
    report["ratio_pods_per_s"] = round(mine / base, 2) if mine and base else None
    cycles = ours.get("cycles") or {}
    report["summary"] = {
        "gangsched_pods_per_s": mine, "kube_scheduler_pods_per_s": base,
        "ratio": report["ratio_pods_per_s"],
        "gangsched_first_bind_after_s": ours.get("first_bind_after_s"),
        "gangsched_first_placing_cycle_ms": cycles.get("first_placing_cycle_ms"),
        "gangsched_cycle_ms_max": cycles.get("cycle_ms_max"),
    }
    report["total_run_s"] = round(time.monotonic() - started, 1)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report["summary"]))
    print(f"wrote {args.output}", file=sys.stderr)


if __name__ == "__main__":
    main()
