"""End-to-end scheduling throughput on the local control plane: gangsched vs kube-scheduler.

``python -m bench.scheduler`` writes bench/results/scheduler.json. One local
control plane (etcd, kube-apiserver, KWOK, kube-scheduler) with 500 fake
nodes of 32 cpu, 128Gi and 8 nvidia.com/gpu; then, on the same nodes, one
batch after another (each deleted, and gone, before the next):

1. ``gangsched``: ``gangsched run`` in its own process, as users run it and as
   the end-to-end tests start it. ``--gangs`` PodGroups of ``minMember: 8``
   are created, then their pods (1 GPU, 2 cpu, 8Gi each), all up front from a
   thread pool, gang after gang, while the scheduler runs.
2. ``gangsched_backlog``: the same batch created while no gangsched runs;
   then gangsched starts and drains the backlog. This is the scheduler's own
   throughput, with pod creation out of the way.
3. ``kube_scheduler``: the same number of pods of the same shape with
   ``schedulerName: default-scheduler`` and no gang, created as a backlog
   while kube-scheduler is stopped, as in 2; kube-scheduler then starts with
   its default client rate limit (50 requests/s, burst 100) and is timed
   from its start.
4. ``kube_scheduler_unthrottled``: the same, kube-scheduler started with
   its client limit raised to ``--kube-qps`` (QPS and burst), so what is
   measured is scheduling work and not a client limit.
5. ``native_gang``: kube-scheduler 1.37 with native gang scheduling on
   (``GenericWorkload``) and the raised limit; the same backlog grouped by
   native ``scheduling.k8s.io/v1beta1`` PodGroups of ``minCount: 8``.

The backlogs (2 to 5) measure each scheduler's own throughput, from its
start to its last bind, with pod creation out of the way; the ratios in the
report compare gangsched's backlog with each of them. gangsched's backlog,
the unthrottled kube-scheduler and the bare binder then run again, one after
another, for ``--rounds`` rounds in all (3): ``ratios_of_medians`` compares
the medians of their rounds, steadier than any one run on a shared machine.

A watch on the batch's namespace notes, in this process's clock, when each pod
was first seen bound (``spec.nodeName``). Figures per run: the time to create
all pods; the wall time from the first create request to the last pod bound;
bind throughput from creation start, over the window from first to last bind,
and for the pods still unbound when creation ended; the CPU seconds each
process used meanwhile. For gangsched: every gang landed whole, how far apart
in time a gang's pods were bound, and the scheduling cycle times from its
``gang_placed`` log lines (one figure per cycle: each gang placed in a cycle
logs that cycle's time) and, from its metrics endpoint, how many cycles it
ran in all and for how long (most place nothing, so they log nothing).
Once gangsched has stopped, the pods as the API server holds them are
checked: gangs whole, and bound pods whose ``PodScheduled`` condition does
not say True (an ``Unschedulable`` write that landed after the bind).

kube-scheduler's log says when binds waited for its client rate limit.

Everything (control plane, schedulers, the threads creating pods, the watch)
shares this machine's cores: the figures are those of a whole small cluster on
one host, not of a scheduler alone.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pykube

from bench.harness import (
    GROUP_LABEL,
    NATIVE_VERSION,
    POD_REQUESTS,
    PODGROUP_VERSION,
    Clients,
    Gangsched,
    PodWatch,
    bench_parser,
    cpu_seconds,
    create_all,
    create_namespace,
    delete_all,
    list_items,
    machine,
    node_shape,
    percentile,
    pod_manifest,
    say,
    shape_figures,
    work_directory,
)
from devcluster.controlplane import (
    ClusterOptions,
    LocalCluster,
    running_cluster,
)

RESULTS = Path(__file__).parent / "results" / "scheduler.json"
THROTTLE_DELAY = re.compile(r'delay="([0-9.]+)s"')
API_REQUESTS = re.compile(r'^apiserver_request_total\{([^}]*)\} ([0-9.e+]+)$', re.MULTILINE)
API_LABEL = re.compile(r'(\w+)="([^"]*)"')
WRITE_VERBS = frozenset({"POST", "PUT", "PATCH", "DELETE", "APPLY"})


def event_reasons(api: pykube.HTTPClient, namespace: str) -> dict[str, int]:
    """Events written in ``namespace`` (core and events.k8s.io), by reason."""
    reasons: Counter[str] = Counter()
    seen: set[str] = set()
    for version in ("v1", "events.k8s.io/v1"):
        items, _ = list_items(api, "events", namespace, version)
        for item in items:
            uid = str(item["metadata"].get("uid"))
            if uid not in seen:
                seen.add(uid)
                reasons[str(item.get("reason"))] += 1
    return dict(sorted(reasons.items()))


def final_state(api: pykube.HTTPClient, namespace: str, gang_size: int) -> dict[str, Any]:
    """What the API server holds once the scheduler is done: pods bound, gangs whole,
    and bound pods whose ``PodScheduled`` condition does not say True."""
    pods, _ = list_items(api, "pods", namespace)
    gangs: dict[str, list[bool]] = {}
    stale = 0
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        group = (pod["metadata"].get("labels") or {}).get(GROUP_LABEL)
        if group:
            gangs.setdefault(group, []).append(bool(node))
        conditions = (pod.get("status") or {}).get("conditions") or []
        scheduled = next((c for c in conditions if c.get("type") == "PodScheduled"), None)
        if node and (scheduled is None or scheduled.get("status") != "True"):
            stale += 1
    figures: dict[str, Any] = {
        "pods_bound": sum(1 for p in pods if (p.get("spec") or {}).get("nodeName")),
        "bound_pods_without_podscheduled_true": stale,
    }
    if gangs:
        figures["gangs_whole"] = sum(
            1 for members in gangs.values() if len(members) == gang_size and all(members))
        figures["gangs_partly_bound"] = sum(
            1 for members in gangs.values() if any(members) and not all(members))
    return figures


def api_writes(api: pykube.HTTPClient) -> Counter[str]:
    """The API server's count of write requests so far, by verb and resource
    (``POST pods/binding``), from its own metrics."""
    response = api.session.get(f"{api.url}/metrics", timeout=30)
    response.raise_for_status()
    counts: Counter[str] = Counter()
    for labels, value in API_REQUESTS.findall(response.text):
        label = dict(API_LABEL.findall(labels))
        if label.get("verb") not in WRITE_VERBS:
            continue
        resource = label.get("resource", "")
        if label.get("subresource"):
            resource += "/" + label["subresource"]
        counts[f"{label['verb']} {resource}"] += int(float(value))
    return counts


def writes_between(before: Counter[str], after: Counter[str], pods: int) -> dict[str, Any]:
    """Writes the API server took meanwhile, by kind, and per pod of the batch
    (every component's: the scheduler's, KWOK's, the controllers')."""
    delta = {k: after[k] - before.get(k, 0) for k in after if after[k] > before.get(k, 0)}
    return {"by_kind": dict(sorted(delta.items(), key=lambda kv: -kv[1])),
            "per_pod": round(sum(delta.values()) / pods, 2)}


def cpu_sample(pids: Mapping[str, int]) -> dict[str, float]:
    sample = {name: cpu_seconds(pid) for name, pid in pids.items()}
    sample["bench (this process)"] = time.process_time()
    return sample


# ---- manifests ------------------------------------------------------------------------------
@dataclass
class Batch:
    namespace: str
    podgroups: list[dict[str, Any]]
    pods: list[dict[str, Any]]


class BacklogHooks:
    """What a backlog needs beyond its pods and PodGroups, in its namespace: objects the
    pods refer to (made before them), and what must be true before the scheduler starts
    (claims made from templates, say) so that its clock times its own work alone."""

    def before_pods(self, namespace: str) -> None:
        """Called once the namespace exists, before any PodGroup or pod is created."""

    def before_start(self, namespace: str) -> None:
        """Called once every pod is created, before the watch and the scheduler start."""

    def before_stop(self, scheduler: Gangsched) -> None:
        """Called once every pod is bound and every PodGroup Running, gangsched still up."""


def gang_batch(namespace: str, gangs: int, size: int) -> Batch:
    groups = [
        {"apiVersion": PODGROUP_VERSION, "kind": "PodGroup",
         "metadata": {"name": f"job-{g}", "namespace": namespace},
         "spec": {"minMember": size}}
        for g in range(gangs)
    ]
    pods = [pod_manifest(namespace, f"job-{g}-{i}", "gang", f"job-{g}")
            for g in range(gangs) for i in range(size)]
    return Batch(namespace, groups, pods)


def native_batch(namespace: str, gangs: int, size: int) -> Batch:
    """The gang batch as Kubernetes 1.37 expresses it, for kube-scheduler's own gangs."""
    groups = [
        {"apiVersion": NATIVE_VERSION, "kind": "PodGroup",
         "metadata": {"name": f"job-{g}", "namespace": namespace},
         "spec": {"schedulingPolicy": {"gang": {"minCount": size}}}}
        for g in range(gangs)
    ]
    pods = [pod_manifest(namespace, f"job-{g}-{i}", "default-scheduler", f"job-{g}",
                         native=True)
            for g in range(gangs) for i in range(size)]
    return Batch(namespace, groups, pods)


def plain_batch(namespace: str, count: int, size: int,
                scheduler: str = "default-scheduler") -> Batch:
    pods = [pod_manifest(namespace, f"job-{n // size}-{n % size}", scheduler, None)
            for n in range(count)]
    return Batch(namespace, [], pods)


def bind_figures(watch: PodWatch, batch: Batch, started: float,
                 created: float | None) -> dict[str, Any]:
    """Throughput figures from the bind times; ``started`` is when the clock started,
    ``created`` when the last create returned (None: created before ``started``)."""
    times = sorted(watch.bound_at.values())
    if not times:
        return {"bound": 0}
    bound, last = len(times), times[-1]
    wall = last - started
    figures: dict[str, Any] = {
        "bound": bound,
        "wall_s": round(wall, 2),
        "pods_per_s": round(bound / wall, 1),
        "first_bind_after_s": round(times[0] - started, 2),
        "bind_window_s": round(last - times[0], 2),
        "pods_per_s_bind_window": round(bound / max(last - times[0], 1e-3), 1),
        "time_to_50pct_bound_s": round(times[(bound - 1) // 2] - started, 2),
        "time_to_95pct_bound_s": round(times[max(0, math.ceil(0.95 * bound) - 1)] - started,
                                       2),
        "nodes_used": len(set(watch.nodes.values())),
        # The ADDED event counts one: more means status writes before the bind.
        "watch_events_before_bind_per_pod": round(statistics.fmean(
            watch.events_before_bind.get(p["metadata"]["name"], 0) for p in batch.pods), 2),
    }
    if created is not None:
        early = sum(1 for t in times if t <= created)
        tail = last - created
        figures.update({
            "bound_by_creation_end": early,
            "after_creation_end_s": round(tail, 2),
            "pods_per_s_after_creation_end": (
                round((bound - early) / tail, 1) if tail > 0 else None),
        })
    return figures


def gang_spread(batch: Batch, watch: PodWatch) -> dict[str, Any]:
    """How far apart in time the pods of each whole gang were seen bound."""
    members: dict[str, list[str]] = {}
    for pod in batch.pods:
        members.setdefault(pod["metadata"]["labels"][GROUP_LABEL], []).append(
            pod["metadata"]["name"])
    spreads = [
        max(times) - min(times)
        for names in members.values()
        if len(times := [watch.bound_at[n] for n in names if n in watch.bound_at]) == len(names)
    ]
    if not spreads:
        return {}
    return {"gang_bind_spread_ms_p50": round(percentile(spreads, 50) * 1000, 1),
            "gang_bind_spread_ms_p95": round(percentile(spreads, 95) * 1000, 1),
            "gang_bind_spread_ms_max": round(max(spreads) * 1000, 1)}


# ---- the three runs --------------------------------------------------------------------------
def run_live(cluster: LocalCluster, clients: Clients, batch: Batch, args: argparse.Namespace,
             log_path: Path, profile: Path | None) -> dict[str, Any]:
    """gangsched runs; PodGroups are created, then the pods, timed until all are bound."""
    api = clients.get()
    create_namespace(api, batch.namespace)
    scheduler = Gangsched(cluster, log_path, profile)
    scheduler.start()
    try:
        assert scheduler.proc is not None
        pids = {**cluster.pids, "gangsched": scheduler.proc.pid}
        create_all(clients, batch.podgroups, args.workers)
        # gangsched's first answer to a PodGroup is its status: wait for it, so
        # that work is not counted in the pods' time.
        settle_started = time.monotonic()
        while time.monotonic() - settle_started < 60:
            groups, _ = list_items(api, "podgroups", batch.namespace, PODGROUP_VERSION)
            if all((g.get("status") or {}).get("phase") for g in groups):
                break
            time.sleep(0.5)
        settled = time.monotonic() - settle_started
        watch = PodWatch(clients, batch.namespace)
        watch.start()
        cpu_before, counters_before = cpu_sample(pids), scheduler.metrics()
        started = time.monotonic()
        creation_s = create_all(clients, batch.pods, args.workers)
        finished = watch.wait_bound(len(batch.pods), args.timeout)
        cpu_after, counters_after = cpu_sample(pids), scheduler.metrics()
        time.sleep(0.5)  # late events: a pod bound twice would show here
        watch.stop()
    finally:
        scheduler.stop()
    return {
        "pods": len(batch.pods),
        "all_bound": finished,
        "podgroups_status_written_s": round(settled, 2),
        "creation_s": round(creation_s, 2),
        "creation_pods_per_s": round(len(batch.pods) / creation_s, 1),
        **bind_figures(watch, batch, started, started + creation_s),
        **gang_spread(batch, watch),
        "cpu_s": {k: round(cpu_after[k] - cpu_before[k], 1) for k in cpu_before},
        "gangsched_process": scheduler.figures,
        "counters_until_last_bind": {k: round(counters_after[k] - counters_before.get(k, 0), 2)
                                     for k in counters_after},
        "cycles": scheduler.cycles(),
        "after_stop": final_state(api, batch.namespace, args.gang_size),
        "events_by_reason": event_reasons(api, batch.namespace),
    }


def run_backlog(cluster: LocalCluster, clients: Clients, batch: Batch,
                args: argparse.Namespace, log_path: Path,
                profile: Path | None, hooks: BacklogHooks | None = None,
                log_level: str = "info") -> dict[str, Any]:
    """PodGroups and pods exist before gangsched starts; timed from its start."""
    api = clients.get()
    create_namespace(api, batch.namespace)
    hooks = hooks or BacklogHooks()
    hooks.before_pods(batch.namespace)
    create_all(clients, batch.podgroups, args.workers)
    creation_s = create_all(clients, batch.pods, args.workers)
    hooks.before_start(batch.namespace)
    watch = PodWatch(clients, batch.namespace)
    watch.start()
    scheduler = Gangsched(cluster, log_path, profile, log_level=log_level)
    cpu_before, writes_before = cpu_sample(cluster.pids), api_writes(api)
    started = time.monotonic()
    scheduler.start()
    try:
        ready = time.monotonic()
        finished = watch.wait_bound(len(batch.pods), args.timeout)
        assert scheduler.proc is not None
        cpu_after = cpu_sample({**cluster.pids, "gangsched": scheduler.proc.pid})
        writes = writes_between(writes_before, api_writes(api), len(batch.pods))
        counters = scheduler.metrics()
        # Binds go before status and Events: how long the PodGroups take to say
        # Running once the last pod is bound.
        groups_running = groups_running_after(api, batch.namespace, len(batch.podgroups))
        watch.stop()
        hooks.before_stop(scheduler)
    finally:
        scheduler.stop()
    figures = bind_figures(watch, batch, started, None)
    last = max(watch.bound_at.values(), default=ready)
    figures["podgroups_running_after_last_bind_s"] = (
        None if groups_running is None else round(groups_running - last, 2))
    return {
        "pods": len(batch.pods),
        "all_bound": finished,
        "creation_s": round(creation_s, 2),
        "creation_pods_per_s": round(len(batch.pods) / creation_s, 1),
        **figures,
        "after_scheduler_started_s": round(last - ready, 2),
        "pods_per_s_after_scheduler_started": round(figures["bound"] / max(last - ready, 1e-3),
                                                     1),
        **gang_spread(batch, watch),
        "cpu_s": {k: round(cpu_after.get(k, 0.0) - cpu_before.get(k, 0.0), 1)
                  for k in cpu_after},
        "api_writes_until_last_bind": writes,
        "gangsched_process": scheduler.figures,
        "counters_until_last_bind": {k: round(v, 2) for k, v in counters.items()},
        "cycles": scheduler.cycles(),
        "after_stop": final_state(api, batch.namespace, args.gang_size),
        "events_by_reason": event_reasons(api, batch.namespace),
    }


def groups_running_after(api: pykube.HTTPClient, namespace: str, count: int,
                         timeout: float = 60) -> float | None:
    """Wait until ``count`` PodGroups of ``namespace`` say Running; when that was
    seen (``time.monotonic``), or None after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        groups, _ = list_items(api, "podgroups", namespace, PODGROUP_VERSION)
        if sum((g.get("status") or {}).get("phase") == "Running" for g in groups) >= count:
            return time.monotonic()
        time.sleep(0.2)
    return None


def run_kube(cluster: LocalCluster, clients: Clients, batch: Batch,
             args: argparse.Namespace, *, native_gang: bool, qps: int | None,
             hooks: BacklogHooks | None = None) -> dict[str, Any]:
    """A backlog for kube-scheduler with these settings: the batch is created while it
    is stopped, then it starts and is timed from its start, as gangsched's backlog is."""
    cluster.stop_kube_scheduler()
    log = cluster.logs / "kube-scheduler.log"
    log_offset = log.stat().st_size if log.exists() else 0
    api = clients.get()
    create_namespace(api, batch.namespace)
    hooks = hooks or BacklogHooks()
    hooks.before_pods(batch.namespace)
    create_all(clients, batch.podgroups, args.workers)
    creation_s = create_all(clients, batch.pods, args.workers)
    hooks.before_start(batch.namespace)
    watch = PodWatch(clients, batch.namespace)
    watch.start()
    cpu_before, writes_before = cpu_sample(cluster.pids), api_writes(api)
    started = time.monotonic()
    cluster.restart_kube_scheduler(native_gang=native_gang, qps=qps)
    finished = watch.wait_bound(len(batch.pods), args.timeout)
    cpu_after = cpu_sample(cluster.pids)
    writes = writes_between(writes_before, api_writes(api), len(batch.pods))
    time.sleep(0.5)
    watch.stop()
    # kube-scheduler's client logs, now and then, how long a request waited for
    # its rate limit.
    with log.open("rb") as text:
        text.seek(log_offset)
        lines = text.read().decode(errors="replace").splitlines()
    throttled = [
        float(match.group(1)) for line in lines
        if "client-side throttling" in line and (match := THROTTLE_DELAY.search(line))
    ]
    limits = f"client qps and burst {qps}" if qps else "defaults, client qps 50 and burst 100"
    return {
        "pods": len(batch.pods),
        "all_bound": finished,
        "creation_s": round(creation_s, 2),
        "creation_pods_per_s": round(len(batch.pods) / creation_s, 1),
        **bind_figures(watch, batch, started, None),
        **(gang_spread(batch, watch) if batch.podgroups else {}),
        "cpu_s": {k: round(cpu_after.get(k, 0.0) - cpu_before.get(k, 0.0), 1)
                  for k in cpu_after},
        "api_writes_until_last_bind": writes,
        "config": ("native gang scheduling (GenericWorkload), " if native_gang else "") + limits,
        "client_side_throttling_max_wait_s": round(max(throttled, default=0.0), 1),
        "after": final_state(api, batch.namespace, args.gang_size),
        "events_by_reason": event_reasons(api, batch.namespace),
    }


def run_bare(cluster: LocalCluster, clients: Clients, batch: Batch,
             args: argparse.Namespace) -> dict[str, Any]:
    """The bare binder (bench/barebinder.py) on a backlog, timed from its start."""
    api = clients.get()
    create_namespace(api, batch.namespace)
    creation_s = create_all(clients, batch.pods, args.workers)
    watch = PodWatch(clients, batch.namespace)
    watch.start()
    cpu_before, writes_before = cpu_sample(cluster.pids), api_writes(api)
    started = time.monotonic()
    command = [sys.executable, "-m", "bench.barebinder", f"--kubeconfig={cluster.kubeconfig}",
               f"--namespace={batch.namespace}", "--node-prefix=bench",
               f"--in-flight={args.bare_in_flight}"]
    binder = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    finished = watch.wait_bound(len(batch.pods), args.timeout)
    cpu_after = cpu_sample({**cluster.pids, "barebinder": binder.pid})
    writes = writes_between(writes_before, api_writes(api), len(batch.pods))
    out, err = binder.communicate(timeout=60)
    time.sleep(0.5)
    watch.stop()
    if binder.returncode != 0:
        raise RuntimeError(f"the bare binder failed: {out.decode()[-2000:]}{err.decode()[-2000:]}")
    return {
        "pods": len(batch.pods),
        "all_bound": finished,
        "creation_s": round(creation_s, 2),
        **bind_figures(watch, batch, started, None),
        "cpu_s": {k: round(cpu_after.get(k, 0.0) - cpu_before.get(k, 0.0), 1)
                  for k in cpu_after},
        "api_writes_until_last_bind": writes,
        "config": f"aiohttp, {args.bare_in_flight} bindings in flight, round-robin nodes",
        "binder": json.loads(out.decode().strip().splitlines()[-1]),
    }


# ---- main ---------------------------------------------------------------------------------
CONTENDERS = ("gangsched", "gangsched_backlog", "kube_scheduler", "kube_scheduler_unthrottled",
              "native_gang", "bare_binder")
ROUNDED = ("gangsched_backlog", "kube_scheduler_unthrottled", "bare_binder")
"""The contenders run again in later rounds: the quick ones the goals compare, on a
machine whose noise moves any single run by a fifth."""


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = bench_parser("bench.scheduler", __doc__, RESULTS, nodes=1000, node_gpus=8)
    parser.add_argument("--gangs", type=int, default=625)
    parser.add_argument("--workers", type=int, default=8, help="threads creating pods")
    parser.add_argument("--kube-qps", type=int, default=5000,
                        help="kube-scheduler's raised client QPS and burst")
    parser.add_argument("--timeout", type=float, default=180,
                        help="seconds to wait for one run's pods to bind")
    parser.add_argument("--profile", type=Path, default=None, metavar="DIR",
                        help="run gangsched under pyinstrument; reports go to DIR")
    parser.add_argument("--bare-in-flight", type=int, default=64,
                        help="bindings the bare binder keeps in flight")
    parser.add_argument("--rounds", type=int, default=3,
                        help="runs of each of " + ", ".join(ROUNDED) + " (one after another, "
                        "round after round); ratios also come from their medians")
    parser.add_argument("--contenders", default=",".join(CONTENDERS),
                        help="comma-separated subset of: " + ", ".join(CONTENDERS))
    args = parser.parse_args(argv)
    args.contenders = [c for c in args.contenders.split(",") if c]
    unknown = set(args.contenders) - set(CONTENDERS)
    if unknown:
        parser.error(f"unknown contenders: {', '.join(sorted(unknown))}")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    if args.workdir is not None and args.workdir.exists() and any(args.workdir.iterdir()):
        raise SystemExit(f"--workdir {args.workdir} is not empty: a cluster needs a fresh one")
    if args.profile is not None:
        args.profile.mkdir(parents=True, exist_ok=True)
    pods = args.gangs * args.gang_size
    shape = node_shape(args.node_gpus)
    report: dict[str, Any] = {
        "benchmark": "end-to-end scheduling on the local control plane",
        "machine": machine(),
        "sizes": {
            "nodes": args.nodes,
            "node": shape_figures(shape),
            "gangs": args.gangs,
            "gang_size": args.gang_size,
            "pods": pods,
            "pod_requests": POD_REQUESTS,
            "create_threads": args.workers,
        },
        "profiled": args.profile is not None,
    }

    def profile(name: str) -> Path | None:
        return None if args.profile is None else args.profile / f"{name}.txt"

    run_started = time.monotonic()
    with work_directory(args.workdir, "gangsched-bench-") as workdir:
        options = ClusterOptions(nodes=0, with_kube_scheduler=True)
        with running_cluster(workdir / "cluster", options) as cluster:
            cluster.apply_crds()
            step = time.monotonic()
            cluster.ensure_nodes(args.nodes, shape, prefix="bench")
            setup: dict[str, float] = {"nodes_ready_s": round(time.monotonic() - step, 1)}
            report["setup"] = setup
            say(f"{args.nodes} nodes ready in {setup['nodes_ready_s']}s")
            clients = Clients(cluster.kubeconfig)
            api = clients.get()

            if "gangsched" in args.contenders:
                live = gang_batch("bench-gang", args.gangs, args.gang_size)
                report["gangsched"] = run_live(cluster, clients, live, args,
                                               workdir / "gangsched-live.log", profile("live"))
                say(f"gangsched: {report['gangsched']['bound']}/{pods} bound in "
                    f"{report['gangsched'].get('wall_s')}s")
                setup["delete_batch_1_s"] = round(delete_all(api, live.namespace), 1)

            if "gangsched_backlog" in args.contenders:
                backlog = gang_batch("bench-backlog", args.gangs, args.gang_size)
                report["gangsched_backlog"] = run_backlog(
                    cluster, clients, backlog, args, workdir / "gangsched-backlog.log",
                    profile("backlog"))
                say(f"gangsched, backlog: {report['gangsched_backlog']['bound']}/{pods} bound "
                    f"in {report['gangsched_backlog'].get('wall_s')}s from its start")
                setup["delete_batch_2_s"] = round(delete_all(api, backlog.namespace), 1)

            contenders = (
                ("kube_scheduler", plain_batch("bench-kube", pods, args.gang_size),
                 False, None),
                ("kube_scheduler_unthrottled",
                 plain_batch("bench-kube-fast", pods, args.gang_size), False, args.kube_qps),
                ("native_gang", native_batch("bench-native", args.gangs, args.gang_size),
                 True, args.kube_qps),
            )
            for name, batch, native, qps in contenders:
                if name not in args.contenders:
                    continue
                report[name] = run_kube(cluster, clients, batch, args, native_gang=native,
                                        qps=qps)
                say(f"{name}: {report[name]['bound']}/{pods} bound in "
                    f"{report[name].get('wall_s')}s")
                setup[f"delete_{name}_s"] = round(delete_all(api, batch.namespace), 1)

            if "bare_binder" in args.contenders:
                bare = plain_batch("bench-bare", pods, args.gang_size, scheduler="bare-binder")
                report["bare_binder"] = run_bare(cluster, clients, bare, args)
                say(f"bare_binder: {report['bare_binder']['bound']}/{pods} bound in "
                    f"{report['bare_binder'].get('wall_s')}s")
                setup["delete_bare_binder_s"] = round(delete_all(api, bare.namespace), 1)

            rounds = {name: [report[name].get("pods_per_s")] for name in ROUNDED
                      if name in report}
            for again in range(2, args.rounds + 1):
                for name in rounds:
                    rounds[name].append(run_again(name, again, cluster, clients, args, workdir))
                    say(f"round {again}, {name}: {rounds[name][-1]} pods/s")
            report["rounds_pods_per_s"] = rounds
    report["ratios"] = ratios(report)
    report["ratios_of_medians"] = ratios({
        name: {"pods_per_s": statistics.median(rates)}
        for name, rates in report.get("rounds_pods_per_s", {}).items()
        if all(rate is not None for rate in rates)})
    report["total_run_s"] = round(time.monotonic() - run_started, 1)

    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + "\n")
    print_summary(report)
    print(f"wrote {args.output}", file=sys.stderr)


def run_again(name: str, round_no: int, cluster: LocalCluster, clients: Clients,
              args: argparse.Namespace, workdir: Path) -> float | None:
    """One more run of a rounded contender on a fresh batch; its pods bound per second."""
    pods = args.gangs * args.gang_size
    if name == "gangsched_backlog":
        batch = gang_batch(f"bench-backlog-{round_no}", args.gangs, args.gang_size)
        result = run_backlog(cluster, clients, batch, args,
                             workdir / f"gangsched-backlog-{round_no}.log", None)
    elif name == "bare_binder":
        batch = plain_batch(f"bench-bare-{round_no}", pods, args.gang_size,
                            scheduler="bare-binder")
        result = run_bare(cluster, clients, batch, args)
    else:
        batch = plain_batch(f"bench-kube-fast-{round_no}", pods, args.gang_size)
        result = run_kube(cluster, clients, batch, args, native_gang=False, qps=args.kube_qps)
    delete_all(clients.get(), batch.namespace)
    rate = result.get("pods_per_s") if result.get("all_bound") else None
    return float(rate) if rate is not None else None


RATIO_BASES = ("kube_scheduler", "kube_scheduler_unthrottled", "native_gang", "bare_binder")


def ratios(report: Mapping[str, Any]) -> dict[str, float | None]:
    """gangsched's backlog, bound per second, over each kube-scheduler backlog, same run."""
    found: dict[str, float | None] = {}
    for ours in ("gangsched_backlog",):
        for base in RATIO_BASES:
            if ours not in report or base not in report:
                continue
            mine, theirs = report[ours].get("pods_per_s"), report[base].get("pods_per_s")
            found[f"{ours}_over_{base}"] = (
                round(mine / theirs, 2) if mine and theirs else None)
    return found


def print_summary(report: Mapping[str, Any]) -> None:
    sizes = report["sizes"]
    host = report["machine"]
    print(f"{sizes['nodes']} nodes, {sizes['pods']} pods ({sizes['gangs']} gangs of "
          f"{sizes['gang_size']}), {host['cores']} cores, Python {host['python']}"
          + (" (gangsched profiled)" if report["profiled"] else ""))
    gang = report.get("gangsched")
    if gang is not None:
        print(f"  gangsched live: {gang['bound']}/{gang['pods']} bound. Created in "
              f"{gang['creation_s']}s ({gang['creation_pods_per_s']}/s); last bind "
              f"{gang.get('wall_s')}s after the first create: {gang.get('pods_per_s')} pods/s; "
              f"{gang.get('bound_by_creation_end')} bound by creation end, the other "
              f"{gang['bound'] - gang.get('bound_by_creation_end', 0)} in "
              f"{gang.get('after_creation_end_s')}s")
    print(f"  backlogs of {sizes['pods']} pods, timed from the scheduler's start:")
    for name in ("gangsched_backlog", *RATIO_BASES):
        r = report.get(name)
        if r is None:
            continue
        print(f"    {name}: {r['bound']}/{r['pods']} bound, last {r.get('wall_s')}s after its "
              f"start: {r.get('pods_per_s')} pods/s; first bind after "
              f"{r.get('first_bind_after_s')}s, then {r.get('pods_per_s_bind_window')}/s; "
              f"CPU s {r.get('cpu_s')}; API writes per pod "
              f"{(r.get('api_writes_until_last_bind') or {}).get('per_pod')}")
    for name in ("gangsched", "gangsched_backlog"):
        r = report.get(name)
        if r is None:
            continue
        after, cycles = r["after_stop"], r["cycles"]
        counters = r["counters_until_last_bind"]
        print(f"  {name}: gangs whole {after.get('gangs_whole')}/{sizes['gangs']}, "
              f"partly bound {after.get('gangs_partly_bound')}; a gang's binds span p50 "
              f"{r.get('gang_bind_spread_ms_p50')} ms, max {r.get('gang_bind_spread_ms_max')} "
              f"ms; {cycles.get('cycles_placing')} cycles placed gangs, cycle ms p50 "
              f"{cycles.get('cycle_ms_p50')} p95 {cycles.get('cycle_ms_p95')} max "
              f"{cycles.get('cycle_ms_max')}; {counters.get('cycles', 0):.0f} cycles in all until "
              f"the last bind, {counters.get('cycle_seconds', 0):.2f}s of them; PodGroups all "
              f"Running {r.get('podgroups_running_after_last_bind_s')}s after the last bind; "
              f"events {r.get('events_by_reason')}")
    print("  ratios (pods/s): " + ", ".join(f"{k} {v}" for k, v in report["ratios"].items()))
    if report.get("rounds_pods_per_s"):
        print(f"  rounds (pods/s): {report['rounds_pods_per_s']}; ratios of their medians: "
              + ", ".join(f"{k} {v}" for k, v in report["ratios_of_medians"].items()))
    print(f"  total run {report['total_run_s']}s")


if __name__ == "__main__":
    main()
