"""``python -m demo`` (``make demo``): each seed workload under each scheduler, side by side.

For every contender: a fresh local control plane (kube-scheduler always
runs; gangsched beside it when the contender is gangsched, a peer's
processes when it is a peer, with ``--peers``), then each
scenario on exactly the nodes it names, polled until every job finished or
nothing changed for ``STALL_S``. Everything is torn down afterwards; what
stays is ``demo-out/``: the timeline PNG, an HTML page, the figures as JSON
and the processes' logs.
"""

from __future__ import annotations

import contextlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import click
from rich.console import Console
from rich.live import Live
from rich.table import Table

from demo.comparison import write_comparison
from demo.contenders import CONTENDERS, PEERS, Contender, kueue_quota
from demo.report import draw_timeline, outcome, write_html, write_json
from demo.scenarios import SCENARIOS, Autoscaling, Scenario, bound_pods
from demo.timeline import Recorder, Run, RunSummary, summarize
from devcluster.controlplane import ClusterOptions, LocalCluster, ensure_binaries
from devcluster.karpenter import Karpenter, running_karpenter
from devcluster.peers import ensure_peer_binaries, peer
from tests.e2e.kueue import flavor_and_queues, kueue
from tests.e2e.scenario import only_nodes
from tests.e2e.workspace import Workspace

POLL_S = 0.1
STALL_S = 6.0
"""A run with no pod changing state for this long is stuck (a deadlock: nothing will)."""
MAX_S = 90.0


@contextlib.contextmanager
def gangsched(cluster: LocalCluster, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gangsched", "run", f"--kubeconfig={cluster.kubeconfig}",
             "--metrics-port=0", "--log-format=json"],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )
    try:
        deadline = time.monotonic() + 60
        while "scheduler_started" not in log.read_text(errors="replace"):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise click.ClickException(f"gangsched did not start; see {log}")
            time.sleep(0.1)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def progress(contender: Contender, scenario: Scenario, recorder: Recorder, now: float,
             pods: int, bound: int) -> Table:
    table = Table(show_header=True, box=None, pad_edge=False)
    for column in ("scheduler", "scenario", "time", "pods bound", "jobs finished",
                   "jobs partly bound"):
        table.add_column(column)
    partly = recorder.partly_bound_jobs()
    table.add_row(contender.title, scenario.short, f"{now:5.1f} s", f"{bound}/{pods}",
                  f"{scenario.finished()}/{scenario.jobs}",
                  f"[red]{partly}[/red]" if partly else "0")
    return table


def run_scenario(cluster: LocalCluster, contender: Contender, make: type[Scenario],
                 live: Live, karpenter: Karpenter | None) -> Run:
    ws = Workspace(cluster)
    scenario = make(ws, contender)
    only_nodes(cluster, scenario.nodes, scenario.shape)
    if contender.peer == "kueue":
        flavor_and_queues(cluster, ws.name, kueue_quota(scenario.nodes, scenario.shape))
    autoscaled = karpenter if make.nodepools else None
    if autoscaled is not None:
        autoscaled.apply(*make.nodepools)
    # A run on bought nodes lasts its horizon: what its nodes cost is the point.
    horizon = scenario.horizon_s if isinstance(scenario, Autoscaling) else 0.0
    recorder = Recorder()
    started = time.monotonic()
    finished_at: float | None = None
    try:
        scenario.submit()
        while True:
            now = time.monotonic() - started
            pods = ws.pods()
            recorder.observe(pods, now)
            scenario.step(pods, now)
            if autoscaled is not None and isinstance(scenario, Autoscaling):
                recorder.observe_nodes({node["metadata"]["name"] for node in autoscaled.nodes()},
                                       scenario.working_nodes(pods), now)
            live.update(progress(contender, scenario, recorder, now, len(pods),
                                 bound_pods(pods)))
            if scenario.finished() == scenario.jobs:
                # The last job's pods turn Succeeded on the next poll; record it.
                recorder.observe(ws.pods(), time.monotonic() - started)
                finished_at = now
                break
            if (now - recorder.last_change > STALL_S and now >= horizon) or now > MAX_S:
                break
            time.sleep(POLL_S)
        ended = time.monotonic() - started
    finally:
        ws.close()
        if autoscaled is not None:
            autoscaled.clear()
    run = summarize(scenario.title, contender.title, scenario.jobs, scenario.finished(),
                    recorder, ended, finished_at, scenario.racks)
    live.console.print(f"[bold]{contender.title}[/bold] · {scenario.short}: "
                       f"{outcome(run.summary)}")
    return run


def run_contender(contender: Contender, scenarios: Sequence[type[Scenario]], bin_dir: Path,
                  logs: Path, live: Live) -> list[Run]:
    with tempfile.TemporaryDirectory(prefix="gangsched-demo-") as workdir:
        # kube-controller-manager makes pods' device claims from their templates and
        # frees the devices once the pods are done, for every scheduler alike.
        cluster = LocalCluster(
            workdir=Path(workdir), bin_dir=bin_dir,
            options=ClusterOptions(nodes=0, with_kube_scheduler=True,
                                   with_controller_manager=True,
                                   native_gang=contender.native_gang),
        )
        live.update(f"starting a control plane for {contender.title}…")
        cluster.start()
        try:
            cluster.apply_crds()
            with contextlib.ExitStack() as stack:
                if contender.runs_gangsched:
                    stack.enter_context(gangsched(cluster, logs / f"{contender.key}.log"))
                if contender.peer:
                    live.update(f"starting {contender.title}…")
                if contender.peer == "kueue":
                    stack.enter_context(kueue(cluster, Path(workdir),
                                              ready_timeout_s=contender.ready_timeout_s))
                    stack.callback(shutil.copy, Path(workdir) / "kueue.log",
                                   logs / f"{contender.key}-kueue.log")
                elif contender.peer:
                    stack.enter_context(peer(contender.peer, cluster, cluster.logs))
                karpenter = None
                if any(make.nodepools for make in scenarios):
                    live.update("starting Karpenter…")
                    karpenter = stack.enter_context(running_karpenter(
                        cluster, Path(workdir) / "karpenter", batch_idle="1s", batch_max="3s"))
                    stack.callback(shutil.copy, karpenter.log_path,
                                   logs / f"{contender.key}-karpenter.log")
                return [run_scenario(cluster, contender, make, live, karpenter)
                        for make in scenarios]
        finally:
            cluster.stop()
            for log in cluster.logs.glob("*.log"):
                shutil.copy(log, logs / f"{contender.key}-{log.name}")


def summary_table(summaries: list[list[RunSummary]], contenders: Sequence[Contender],
                  scenarios: Sequence[type[Scenario]]) -> Table:
    table = Table(title="Side by side (measured on this machine)", title_justify="left")
    table.add_column("scenario")
    table.add_column("")
    for contender in contenders:
        table.add_column(contender.title)
    for s, title in enumerate(make.short for make in scenarios):
        runs = [summaries[c][s] for c in range(len(contenders))]
        table.add_row(title, "jobs done", *(f"{r.finished} of {r.jobs}" for r in runs))
        table.add_row("", "time", *(f"stuck at {r.seconds:g}s" if r.stuck
                                    else f"{r.seconds:g}s" for r in runs))
        table.add_row("", "pods bound", *(f"{r.pods_bound} of {r.pods}" for r in runs))
        table.add_row("", "partly bound", *(f"{r.partly_bound_s:g}s" for r in runs),
                      end_section=runs[0].jobs_split is None
                      and not any(r.nodes_bought is not None for r in runs))
        if runs[0].jobs_split is not None:
            table.add_row("", "split across racks",
                          *(f"{r.jobs_split} of {r.jobs} jobs" for r in runs), end_section=True)
        if any(r.nodes_bought is not None for r in runs):
            table.add_row("", "nodes bought", *(f"{r.nodes_bought}" for r in runs))
            table.add_row("", "idle node-s", *(f"{r.idle_node_s:g}" for r in runs),
                          end_section=True)
    return table


@click.command()
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              default=Path("demo-out"), show_default=True)
@click.option("--peers", is_flag=True,
              help="Add the peer schedulers (Volcano, YuniKorn, Kueue; built from the Go module "
                   "proxy on first use) and write their comparison (bench/results/peers.json, "
                   "docs/comparison.md, README).")
@click.option("--contender", "only", multiple=True,
              type=click.Choice([c.key for c in (*CONTENDERS, *PEERS)]),
              help="Run only these schedulers (repeatable); all by default.")
@click.option("--scenario", "only_scenarios", multiple=True,
              type=click.Choice([s.key for s in (*SCENARIOS, Autoscaling)]),
              help="Run only these scenarios (repeatable); all but autoscaling by default.")
def main(out: Path, peers: bool, only: tuple[str, ...], only_scenarios: tuple[str, ...]) -> None:
    """Run the seed workloads under each scheduler and write demo-out/."""
    console = Console()
    contenders = ([c for c in (*CONTENDERS, *PEERS) if c.key in only] if only
                  else [*CONTENDERS, *(PEERS if peers else ())])
    scenarios: list[type[Scenario]] = [
        s for s in (*SCENARIOS, Autoscaling)
        if (s.key in only_scenarios if only_scenarios else s in SCENARIOS)]
    out.mkdir(parents=True, exist_ok=True)
    logs = out / "logs"
    shutil.rmtree(logs, ignore_errors=True)
    logs.mkdir()
    bin_dir = ensure_binaries()
    if any(c.peer for c in contenders):
        ensure_peer_binaries()
    started = time.monotonic()
    runs: list[list[Run]] = []
    with Live("", console=console, refresh_per_second=8, transient=True) as live:
        for contender in contenders:
            runs.append(run_contender(contender, scenarios, bin_dir, logs, live))
    summaries = [[run.summary for run in row] for row in runs]
    console.print(summary_table(summaries, contenders, scenarios))
    by_scenario = [[runs[c][s] for c in range(len(contenders))] for s in range(len(scenarios))]
    titles = [c.title for c in contenders]
    scenario_titles = [run.summary.scenario for run in runs[0]]
    draw_timeline(by_scenario, titles, scenario_titles, out / "timeline.png")
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    write_html([[r.summary for r in row] for row in by_scenario], titles, scenario_titles,
               "timeline.png", out / "index.html", machine, POLL_S)
    write_json(summaries, out / "results.json")
    if peers:
        console.print(f"wrote {write_comparison(summaries, machine)}")
    console.print(f"wrote {out}/timeline.png, {out}/index.html, {out}/results.json "
                  f"in {time.monotonic() - started:.0f} s; every process stopped")


if __name__ == "__main__":
    main()
