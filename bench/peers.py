"""``make bench-peers``: the throughput backlog of ``make bench-scheduler`` (1,000 KWOK
nodes of 8 GPUs, 5,000 one-GPU pods in gangs of 8) drained by gangsched, Volcano,
YuniKorn and Kueue (admitting for kube-scheduler, by quota alone and with
``waitForPodsReady``) in one run; writes
bench/results/peers-throughput.json and the table docs/benchmarks.md and
docs/comparison.md quote from it.

Each contender gets a fresh control plane of the same build and shape (no
kube-scheduler), so none inherits another's objects or has to wait for them to go,
and each declares its gangs its own way, as in ``make demo-peers``: gangsched
PodGroups, Volcano PodGroups, YuniKorn task groups, Kueue's pod groups (its labels and
admission gate, a ClusterQueue as large as the cluster, kube-scheduler placing what it
admits, with its default client limits). The backlog is created while no scheduler
runs (Kueue is started once before, to make its queues, and stopped), and timed from
the scheduler's start, start-up included (gangsched's process; a peer's processes,
with Volcano's CRDs and queue applied once more, which changes nothing) until its last
pod is bound. YuniKorn's placeholder pods do not count.

A contender that does not bind every pod within ``--timeout`` is stopped and reported
with what it bound: gangsched's rate over its is then at least gangsched's rate times
the time limit over the backlog's pods, since it would have needed longer than the
limit for all of them. The results are written as each contender finishes, before its
control plane is torn down, so a later failure loses none of them.

``python -m bench.peers --quote`` writes the quoted tables again from the results alone.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.harness import (
    GROUP_LABEL,
    Clients,
    PodWatch,
    bench_parser,
    create_all,
    create_namespace,
    load_average,
    machine,
    node_shape,
    pod_manifest,
    say,
    shape_figures,
    work_directory,
    write_report,
)
from bench.scheduler import Batch, bind_figures, gang_batch, gang_spread, run_backlog
from demo.comparison import splice
from demo.contenders import (
    GANGSCHED,
    KUEUE,
    KUEUE_READY,
    VOLCANO,
    YUNIKORN,
    Contender,
    Gang,
    kueue_quota,
)
from devcluster.controlplane import ClusterOptions, LocalCluster, running_cluster
from devcluster.peers import ensure_peer_binaries, install, peer
from tests.e2e.kueue import flavor_and_queues, kueue

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results" / "peers-throughput.json"
QUOTED_IN = (REPO / "docs" / "benchmarks.md", REPO / "docs" / "comparison.md")
TABLE_START = "<!-- peers-throughput: make bench-peers -->"
TABLE_END = "<!-- end of peers-throughput -->"
CONTENDERS = (GANGSCHED, VOLCANO, YUNIKORN, KUEUE, KUEUE_READY)


def peer_batch(contender: Contender, namespace: str, gangs: int, size: int) -> Batch:
    """The backlog's gangs declared the peer's own way (the pods keep gangsched's group
    label too, which only the figures read)."""
    members = [Gang(f"job-{g}", size) for g in range(gangs)]
    groups = [group for gang in members if (group := contender.podgroup(namespace, gang))]
    pods = [contender.member(pod_manifest(namespace, f"{gang.name}-{i}",
                                          contender.scheduler_name, gang.name), gang)
            for gang in members for i in range(size)]
    return Batch(namespace, groups, pods)


def run_peer(cluster: LocalCluster, clients: Clients, contender: Contender, batch: Batch,
             args: argparse.Namespace) -> dict[str, Any]:
    """The backlog made while the peer is stopped, then timed from its start until every
    pod is bound or ``args.timeout`` has passed."""
    install(contender.peer, cluster)
    create_namespace(clients.get(), batch.namespace)
    if contender.peer == "kueue":
        with kueue(cluster, cluster.logs):
            flavor_and_queues(cluster, batch.namespace,
                              kueue_quota(args.nodes, node_shape(args.node_gpus)))
    create_all(clients, batch.podgroups, args.workers)
    creation_s = create_all(clients, batch.pods, args.workers)
    names = {pod["metadata"]["name"] for pod in batch.pods}
    watch = PodWatch(clients, batch.namespace)
    watch.start()
    started = time.monotonic()
    running = kueue(cluster, cluster.logs, ready_timeout_s=contender.ready_timeout_s) \
        if contender.peer == "kueue" else peer(contender.peer, cluster, cluster.logs)
    with running:
        while not (finished := names <= watch.bound_at.keys()):
            if time.monotonic() - started > args.timeout:
                break
            time.sleep(0.1)
    watch.stop()
    watch.bound_at = {name: at for name, at in watch.bound_at.items() if name in names}
    watch.nodes = {name: node for name, node in watch.nodes.items() if name in names}
    return {"pods": len(batch.pods), "all_bound": finished,
            "creation_s": round(creation_s, 2), **bind_figures(watch, batch, started, None),
            **gang_spread(batch, watch), **gangs_bound(batch, watch.bound_at)}


def gangs_bound(batch: Batch, bound_at: Mapping[str, float]) -> dict[str, int]:
    """Gangs with every member bound, and gangs with some members bound and some not."""
    gangs: dict[str, list[bool]] = {}
    for pod in batch.pods:
        meta = pod["metadata"]
        gangs.setdefault(meta["labels"][GROUP_LABEL], []).append(meta["name"] in bound_at)
    return {"gangs_whole": sum(all(bound) for bound in gangs.values()),
            "gangs_partly_bound": sum(any(bound) and not all(bound) for bound in gangs.values())}


def measure(contender: Contender, args: argparse.Namespace, workdir: Path,
            report: dict[str, Any]) -> None:
    """One contender on a control plane of its own; its figures go into ``report``, and
    to ``args.output``, before the control plane is torn down."""
    shape = node_shape(args.node_gpus)
    options = ClusterOptions(nodes=0, with_kube_scheduler=contender.peer == "kueue")
    with running_cluster(workdir / contender.key, options) as cluster:
        cluster.apply_crds()
        cluster.ensure_nodes(args.nodes, shape, prefix="bench")
        clients = Clients(cluster.kubeconfig)
        namespace = f"bench-{contender.key}"
        load = load_average()
        if contender is GANGSCHED:
            batch = gang_batch(namespace, args.gangs, args.gang_size)
            run = run_backlog(cluster, clients, batch, args, workdir / "gangsched.log", None)
        else:
            batch = peer_batch(contender, namespace, args.gangs, args.gang_size)
            run = run_peer(cluster, clients, contender, batch, args)
        report["runs"][contender.key] = {"title": contender.title, "time_limit_s": args.timeout,
                                         "load_average_1_5_15_before": load, **run}
        report["gangsched_over_peer_pods_per_s"] = ratios(report["runs"])
        write_report(args.output, report)
    say(f"{contender.title}: {run.get('bound')}/{run['pods']} bound, "
        f"{run.get('pods_per_s')} pods/s")


def ratio(ours: Mapping[str, Any], theirs: Mapping[str, Any]) -> dict[str, Any] | None:
    """gangsched's pods/s over a peer's; for a peer stopped at its time limit, the least
    that ratio can be (``at_least``)."""
    rate = ours.get("pods_per_s") if ours["all_bound"] else None
    if not rate:
        return None
    if theirs["all_bound"]:
        return {"ratio": round(rate / theirs["pods_per_s"], 2)}
    return {"at_least": round(rate * theirs["time_limit_s"] / theirs["pods"], 1)}


def ratios(runs: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any] | None]:
    ours = runs.get(GANGSCHED.key)
    if ours is None:
        return {}
    return {key: ratio(ours, run) for key, run in runs.items() if key != GANGSCHED.key}


def _row(key: str, run: Mapping[str, Any], found: Mapping[str, Any]) -> str:
    if not run["all_bound"]:
        return (f"| {run['title']} | **not done**: {run.get('bound', 0):,} of {run['pods']:,} "
                f"bound when stopped at {run['time_limit_s']:g} s | "
                f"{run['bound'] / run['time_limit_s']:.1f} until then | "
                + (f"{run['first_bind_after_s']:g} s | " if run["bound"] else "— | ")
                + (f"at least {found['at_least']:g}x |" if found else "— |"))
    cell = f"{found['ratio']:.2f}x" if found else "—"
    return (f"| {run['title']} | {run['wall_s']:g} s | {run['pods_per_s']:g} | "
            f"{run['first_bind_after_s']:g} s | {cell} |")


def table(results: Mapping[str, Any]) -> str:
    """One row per contender: when its last pod was bound, its rate, and gangsched's rate
    over it (same run)."""
    sizes = results["sizes"]
    lines = [f"| {sizes['pods']:,} pods in gangs of {sizes['gang_size']}, as a backlog | "
             "last pod bound after its start | bound per second | first bind after | "
             "gangsched's rate over it |",
             "| --- | --- | --- | --- | --- |"]
    found = results["gangsched_over_peer_pods_per_s"]
    lines += [_row(key, run, found.get(key)) for key, run in results["runs"].items()]
    return "\n".join(lines)


def quote(results: Mapping[str, Any]) -> None:
    for path in QUOTED_IN:
        splice(path, TABLE_START, TABLE_END, table(results))


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = bench_parser("bench.peers", __doc__, RESULTS, nodes=1000, node_gpus=8)
    parser.add_argument("--gangs", type=int, default=625)
    parser.add_argument("--workers", type=int, default=8, help="threads creating pods")
    parser.add_argument("--timeout", type=float, default=300,
                        help="seconds a contender has to bind its backlog")
    parser.add_argument("--contenders", default=",".join(c.key for c in CONTENDERS),
                        help="comma-separated subset of: "
                        + ", ".join(c.key for c in CONTENDERS))
    parser.add_argument("--quote", action="store_true",
                        help="only write the quoted tables again from --output")
    args = parser.parse_args(argv)
    known = {c.key: c for c in CONTENDERS}
    unknown = set(args.contenders.split(",")) - set(known)
    if unknown:
        parser.error(f"unknown contenders: {', '.join(sorted(unknown))}")
    args.contenders = [known[key] for key in args.contenders.split(",")]
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    if args.quote:
        quote(json.loads(args.output.read_text()))
        return
    if any(c.peer for c in args.contenders):
        ensure_peer_binaries()
    report: dict[str, Any] = {
        "benchmark": "a backlog drained by gangsched and each peer, each on a fresh local "
                     "control plane of the same shape",
        "machine": machine(),
        "sizes": {"nodes": args.nodes, "node": shape_figures(node_shape(args.node_gpus)),
                  "gangs": args.gangs, "gang_size": args.gang_size,
                  "pods": args.gangs * args.gang_size},
        "runs": {},
    }
    started = time.monotonic()
    with work_directory(args.workdir, "gangsched-bench-peers-") as workdir:
        for contender in args.contenders:
            measure(contender, args, workdir, report)
    report["total_run_s"] = round(time.monotonic() - started, 1)
    write_report(args.output, report)
    if args.output == RESULTS:
        quote(report)
    say(table(report))


if __name__ == "__main__":
    main()
