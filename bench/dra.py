"""Devices against kube-scheduler on the same claims: ``make bench-dra``.

``python -m bench.dra`` writes bench/results/dra.json. One local control plane
(etcd, kube-apiserver, KWOK, kube-scheduler, and kube-controller-manager, whose
resource-claim controller makes the pods' claims from their templates) with
``--nodes`` (500) KWOK nodes of 32 cpu and 128Gi, each given 8 fake GPUs by the
fake driver's ResourceSlices (:mod:`devcluster.fakedriver`: two NVLink cliques
of four per node). Then, on the same nodes and devices, one backlog after
another (each deleted, its claims gone, before the next):

1. ``gangsched_backlog``: ``--gangs`` (250) PodGroups of ``minMember: 8`` and
   their pods (2 cpu, 8Gi), each pod with one or two claims made from the
   templates of :data:`bench.dra_core.TEMPLATES` (one GPU; one GPU chosen by a
   CEL selector; two GPUs of one clique) as :func:`bench.dra_core.plan` deals
   them (seeded: the same every run). Created while no gangsched runs, the
   claims made; then gangsched starts and is timed from its start.
2. ``kube_scheduler_unthrottled``: the same pods with the same claims and
   ``schedulerName: default-scheduler``, no gang, created while kube-scheduler
   is stopped, their claims made; it then starts with its client limit raised
   to ``--kube-qps`` and is timed from its start.
3. ``native_gang`` (only when named in ``--contenders``): the same, grouped by
   native PodGroups of ``minCount: 8`` for kube-scheduler 1.37's own gangs.

Figures per run are ``bench.scheduler``'s (pods bound per second from the
scheduler's start to its last bind, CPU seconds, API writes); for gangsched
also its cycles from its log: the first placing cycle and, once every pod is
bound, the cycles with nothing new to place (its own status writes and the
claim controller's updates still wake it). Then the core alone in this
process on the same cluster and claims (:mod:`bench.dra_core`): the first
cycle, the same cycle warm, and a cycle with nothing new; ``--profile`` adds
where the first cycle's time went.

Everything shares this machine's cores: the figures are those of a whole small
cluster on one host, not of a scheduler alone; read the ratio.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import pykube

from bench import dra_core
from bench.harness import (
    Clients,
    Gangsched,
    add_nodes,
    bench_parser,
    delete_all,
    distribution,
    list_items,
    machine,
    say,
    work_directory,
)
from bench.scheduler import (
    BacklogHooks,
    Batch,
    gang_batch,
    native_batch,
    plain_batch,
    run_backlog,
    run_kube,
)
from devcluster import fakedriver
from devcluster.controlplane import ClusterOptions, NodeShape, running_cluster

RESULTS = Path(__file__).parent / "results" / "dra.json"
RESOURCE_API = "resource.k8s.io/v1"
CONTENDERS = ("gangsched_backlog", "kube_scheduler_unthrottled", "native_gang")
DEFAULT_CONTENDERS = ("gangsched_backlog", "kube_scheduler_unthrottled")
SHAPE = NodeShape(cpu=dra_core.NODE_ALLOCATABLE["cpu"],
                  memory=dra_core.NODE_ALLOCATABLE["memory"], gpus=0,
                  pods=int(dra_core.NODE_ALLOCATABLE["pods"]))


def with_claims(batch: Batch, dealt: dra_core.Plan) -> Batch:
    """The batch's pods asking cpu and memory only, with the plan's claims: pod ``n``
    is member ``n % size`` of gang ``n // size``, whichever scheduler it goes to."""
    members = [templates for gang in dealt for templates in gang]
    for pod, templates in zip(batch.pods, members, strict=True):
        container = pod["spec"]["containers"][0]
        container["resources"] = {
            "requests": dict(dra_core.POD_REQUESTS),
            "claims": [{"name": f"c{c}"} for c in range(len(templates))]}
        pod["spec"]["resourceClaims"] = [
            {"name": f"c{c}", "resourceClaimTemplateName": template}
            for c, template in enumerate(templates)]
    return batch


class ClaimsMade(BacklogHooks):
    """The templates before the pods; every claim made before the scheduler starts."""

    def __init__(self, clients: Clients, claims: int, timeout: float, idle_s: float) -> None:
        self.clients, self.claims, self.timeout = clients, claims, timeout
        self.idle_s = idle_s
        self.made_s: list[float] = []
        self.idle: dict[str, Any] = {}

    def before_pods(self, namespace: str) -> None:
        api = self.clients.get()
        cls = pykube.object_factory(api, RESOURCE_API, "ResourceClaimTemplate")
        for name, devices in dra_core.TEMPLATES.items():
            cls(api, {"apiVersion": RESOURCE_API, "kind": "ResourceClaimTemplate",
                      "metadata": {"name": name, "namespace": namespace},
                      "spec": {"spec": {"devices": devices}}}).create()

    def before_start(self, namespace: str) -> None:
        started = time.monotonic()
        while (made := len(claims_in(self.clients, namespace))) < self.claims:
            if time.monotonic() - started > self.timeout:
                raise RuntimeError(f"{made}/{self.claims} claims made in {namespace}")
            time.sleep(1.0)
        self.made_s.append(round(time.monotonic() - started, 1))
        say(f"{self.claims} claims made in {namespace} in {self.made_s[-1]}s")

    def before_stop(self, scheduler: Gangsched) -> None:
        """gangsched left alone ``idle_s`` seconds once everything is bound and Running:
        its cycles then have nothing new to place (see :func:`idle_cycles`)."""
        since = time.time()
        time.sleep(self.idle_s)
        self.idle = idle_cycles(scheduler, since)


def claims_in(clients: Clients, namespace: str) -> list[dict[str, Any]]:
    return list_items(clients.get(), "resourceclaims", namespace, RESOURCE_API)[0]


def devices_allocated(clients: Clients, namespace: str) -> dict[str, int]:
    """Claims allocated and the devices they hold, as the API server has them."""
    claims = claims_in(clients, namespace)
    allocated = [c for c in claims if (c.get("status") or {}).get("allocation")]
    devices = sum(len(c["status"]["allocation"]["devices"].get("results") or [])
                  for c in allocated)
    return {"claims": len(claims), "claims_allocated": len(allocated),
            "devices_allocated": devices}


def delete_backlog(clients: Clients, namespace: str, timeout: float = 600) -> float:
    """Pods and PodGroups deleted, and their claims gone with them (the claim controller
    deletes what it made once no pod holds it): the devices are free for the next."""
    started = time.monotonic()
    delete_all(clients.get(), namespace)
    while claims_in(clients, namespace):
        if time.monotonic() - started > timeout:
            raise RuntimeError(f"claims of {namespace} not gone after {timeout}s")
        time.sleep(1.0)
    return round(time.monotonic() - started, 1)


def idle_cycles(scheduler: Gangsched, since: float) -> dict[str, Any]:
    """gangsched's cycles from ``since`` (wall clock, the log's): from its ``cycle_done``
    lines, those whose inputs had not moved (the answer reused) and those it decided
    again (node heartbeats, a periodic refresh)."""
    lines = scheduler.log_lines("cycle_done")
    after = [line for line in lines
             if datetime.fromisoformat(line["timestamp"]).timestamp() > since]
    decided = [float(line["cycle_ms"]) for line in after if not line.get("reused")]
    reused = [float(line["cycle_ms"]) for line in after if line.get("reused")]
    return {"decided_ms": distribution(decided, 2), "reused_ms": distribution(reused, 2)}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = bench_parser("bench.dra", __doc__, RESULTS, nodes=500, node_gpus=8)
    parser.add_argument("--gangs", type=int, default=250)
    parser.add_argument("--seed", type=int, default=42, help="deals the claims out")
    parser.add_argument("--workers", type=int, default=8, help="threads creating pods")
    parser.add_argument("--kube-qps", type=int, default=5000,
                        help="kube-scheduler's and kube-controller-manager's raised client "
                        "QPS and burst")
    parser.add_argument("--timeout", type=float, default=600,
                        help="seconds to wait for one run's pods to bind")
    parser.add_argument("--contenders", default=",".join(DEFAULT_CONTENDERS),
                        help="comma-separated subset of: " + ", ".join(CONTENDERS))
    parser.add_argument("--idle-s", type=float, default=30,
                        help="seconds gangsched is left alone once its backlog is bound")
    parser.add_argument("--core-only", action="store_true",
                        help="the in-process figures alone, no control plane")
    parser.add_argument("--profile", action="store_true",
                        help="profile the in-process first cycle (cProfile)")
    args = parser.parse_args(argv)
    args.contenders = [c for c in args.contenders.split(",") if c]
    if set(args.contenders) - set(CONTENDERS):
        parser.error(f"contenders are a subset of {', '.join(CONTENDERS)}")
    if args.node_gpus != dra_core.GPUS_PER_NODE:
        parser.error(f"the fake driver's nodes have {dra_core.GPUS_PER_NODE} GPUs here")
    return args


def run_cluster(args: argparse.Namespace, dealt: dra_core.Plan,
                report: dict[str, Any]) -> None:
    """Every contender on one control plane, one backlog after another."""
    pods = args.gangs * args.gang_size
    claims = sum(len(t) for gang in dealt for t in gang)
    with work_directory(args.workdir, "gangsched-dra-") as workdir:
        options = ClusterOptions(nodes=0, with_kube_scheduler=True, with_controller_manager=True,
                                 controller_manager_qps=args.kube_qps)
        with running_cluster(workdir / "cluster", options) as cluster:
            cluster.apply_crds()
            setup: dict[str, Any] = {"nodes_ready_s": round(add_nodes(
                cluster, args.nodes, SHAPE, "bench"), 1)}
            step = time.monotonic()
            fakedriver.publish(cluster.client, [f"bench-{i}" for i in range(args.nodes)],
                               per_node=dra_core.GPUS_PER_NODE)
            setup["slices_published_s"] = round(time.monotonic() - step, 1)
            report["setup"] = setup
            say(f"{args.nodes} nodes and their slices ready: {setup}")
            clients = Clients(cluster.kubeconfig)
            hooks = ClaimsMade(clients, claims, args.timeout, args.idle_s)
            runs = {
                "gangsched_backlog": lambda: run_backlog(
                    cluster, clients, with_claims(gang_batch("dra-gang", args.gangs,
                                                             args.gang_size), dealt),
                    args, workdir / "gangsched.log", None, hooks, log_level="debug"),
                "kube_scheduler_unthrottled": lambda: run_kube(
                    cluster, clients, with_claims(plain_batch("dra-kube", pods,
                                                              args.gang_size), dealt),
                    args, native_gang=False, qps=args.kube_qps, hooks=hooks),
                "native_gang": lambda: run_kube(
                    cluster, clients, with_claims(native_batch("dra-native", args.gangs,
                                                               args.gang_size), dealt),
                    args, native_gang=True, qps=args.kube_qps, hooks=hooks),
            }
            namespaces = {"gangsched_backlog": "dra-gang", "kube_scheduler_unthrottled":
                          "dra-kube", "native_gang": "dra-native"}
            for name in args.contenders:
                result = runs[name]()
                result["devices"] = devices_allocated(clients, namespaces[name])
                if name == "gangsched_backlog":
                    result["cycles_left_alone"] = {"seconds": args.idle_s, **hooks.idle}
                report[name] = result
                say(f"{name}: {result['bound']}/{pods} bound, {result.get('pods_per_s')} pods/s")
                setup[f"delete_{name}_s"] = delete_backlog(clients, namespaces[name])
            setup["claims_made_s"] = hooks.made_s


def summary(report: dict[str, Any]) -> dict[str, Any]:
    ours = report.get("gangsched_backlog") or {}
    theirs = report.get("kube_scheduler_unthrottled") or {}
    mine, base = ours.get("pods_per_s"), theirs.get("pods_per_s")
    cycles = ours.get("cycles") or {}
    alone = ours.get("cycles_left_alone") or {}
    core = report.get("core") or {}
    return {
        "gangsched_pods_per_s": mine, "kube_scheduler_pods_per_s": base,
        "ratio": round(mine / base, 2) if mine and base else None,
        "native_gang_pods_per_s": (report.get("native_gang") or {}).get("pods_per_s"),
        "gangsched_first_placing_cycle_ms": cycles.get("first_placing_cycle_ms"),
        "gangsched_idle_reused_cycle_ms_p50": (alone.get("reused_ms") or {}).get("p50"),
        "gangsched_idle_decided_cycle_ms_p50": (alone.get("decided_ms") or {}).get("p50"),
        "core_first_cycle_s": core.get("first_cycle_s"),
        "core_idle_cycle_ms": core.get("idle_cycle_ms"),
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    dealt = dra_core.plan(random.Random(args.seed), args.gangs, args.gang_size)
    report: dict[str, Any] = {
        "benchmark": "pods with device claims from templates, as a backlog",
        "machine": machine(),
        "sizes": {"nodes": args.nodes, "devices": args.nodes * dra_core.GPUS_PER_NODE,
                  "gangs": args.gangs, "gang_size": args.gang_size,
                  "pods": args.gangs * args.gang_size,
                  "claims": sum(len(t) for gang in dealt for t in gang),
                  "gpus_asked": dra_core.gpus_asked(dealt), "seed": args.seed,
                  "node": dra_core.NODE_ALLOCATABLE, "pod_requests": dra_core.POD_REQUESTS,
                  "templates": dra_core.TEMPLATES},
        "command": "make bench-dra",
    }
    started = time.monotonic()
    if not args.core_only:
        run_cluster(args, dealt, report)
    say("the core alone, in this process")
    report["core"] = dra_core.figures(args.nodes, dealt, profile=args.profile)
    report["summary"] = summary(report)
    report["total_run_s"] = round(time.monotonic() - started, 1)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report["summary"], indent=2))
    if args.profile:
        print(report["core"]["first_cycle_profile"])
    say(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
