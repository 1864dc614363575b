"""Two replicas with --leader-elect: only the leader binds; the other takes over when it stops."""

from __future__ import annotations

import json
import signal
import time
from datetime import datetime
from pathlib import Path

from devcluster.controlplane import LocalCluster, NodeShape
from tests.e2e.conftest import SchedulerProcess, start_gangsched, stop_gangsched
from tests.e2e.scenario import overcommitted
from tests.e2e.tcpproxy import TcpProxy
from tests.e2e.workspace import Workspace, node_of, wait_for

CUT_S = 25.0
"""Longer than the 15 s lease: the standby takes over while the leader is cut off."""


def leader_and_standby(
    cluster: LocalCluster, tmp_path: Path, name: str
) -> tuple[SchedulerProcess, SchedulerProcess]:
    """Two replicas serving ``schedulerName: name`` on one Lease; the first leads once a
    pod of that name is bound."""
    args = (f"--scheduler-name={name}", "--leader-elect", f"--lease-name=gangsched-{name}",
            "--lease-namespace=default")
    first = start_gangsched(cluster, tmp_path / "first.log", *args)
    second = start_gangsched(cluster, tmp_path / "second.log", *args,
                             ready="leader_election_started")
    return first, second


def test_standby_takes_over_when_the_leader_stops(
    cluster: LocalCluster, ws: Workspace, tmp_path: Path
) -> None:
    cluster.ensure_nodes(1, NodeShape(cpu="4"), prefix="ha")
    first, second = leader_and_standby(cluster, tmp_path, "gang-ha")
    try:
        ws.create(ws.pod("before", cpu="1", scheduler="gang-ha"))
        wait_for(lambda: node_of(ws.pods()["before"]), timeout=30, what="leader to bind")
        assert "gang_placed" in first.logs()
        assert "gang_placed" not in second.logs(), "a follower must not schedule"

        assert stop_gangsched(first) == 0
        assert "lease_released" in first.logs()
        # A rolling update: the leader stopped cleanly gave the Lease up, so the standby
        # takes it at its next try rather than after the 15 s lease runs out.
        stopped = time.monotonic()
        ws.create(ws.pod("after-stop", cpu="1", scheduler="gang-ha"))
        wait_for(lambda: node_of(ws.pods()["after-stop"]), timeout=60,
                 what="the standby to take the lease and bind")
        assert time.monotonic() - stopped < 5.0
        assert "leader_elected" in second.logs()
    finally:
        for running in (first, second):
            if running.proc.poll() is None:
                stop_gangsched(running)
        cluster.ensure_nodes(0, prefix="ha")


def test_a_frozen_leader_binds_nothing_after_it_wakes(
    cluster: LocalCluster, ws: Workspace, tmp_path: Path
) -> None:
    """SIGSTOP the leader past its lease; the standby takes over; SIGCONT: the old leader
    must not place or bind anything, since it cannot know whether it still leads."""
    cluster.ensure_nodes(2, NodeShape(cpu="4"), prefix="fence")
    first, second = leader_and_standby(cluster, tmp_path, "gang-fence")
    try:
        ws.create(ws.pod("before", cpu="1", scheduler="gang-fence"))
        wait_for(lambda: node_of(ws.pods()["before"]), timeout=30, what="leader to bind")
        first.proc.send_signal(signal.SIGSTOP)
        wait_for(lambda: "leader_elected" in second.logs(), timeout=40,
                 what="the standby to take the lease from the frozen leader")
        # Work that arrives while the old leader sleeps: the new leader places it.
        ws.create(*(ws.pod(f"during-{i}", cpu="1", scheduler="gang-fence") for i in range(3)))
        wait_for(lambda: all(node_of(p) for n, p in ws.pods().items() if n.startswith("during")),
                 timeout=30, what="the new leader to bind")
        placed_before_wake = first.logs().count("gang_placed")
        first.proc.send_signal(signal.SIGCONT)
        # A steady stream, as a busy cluster has: both would see these pending.
        for i in range(12):
            ws.create(ws.pod(f"after-{i}", cpu="250m", scheduler="gang-fence"))
            time.sleep(0.5)
        wait_for(lambda: all(node_of(p) for n, p in ws.pods().items() if n.startswith("after")),
                 timeout=30, what="the new leader to bind work created after the wake-up")
        code = first.proc.wait(timeout=30)
        logs = first.logs()
        assert code != 0 and "leadership_lost" in logs, "the old leader steps down and exits"
        assert logs.count("gang_placed") == placed_before_wake, \
            "the old leader placed gangs after it woke"
        assert "leadership_unsure" in logs
        assert overcommitted(cluster, ws.pods().values()) == {}
    finally:
        if first.proc.poll() is None:
            first.proc.send_signal(signal.SIGCONT)
        for running in (first, second):
            if running.proc.poll() is None:
                stop_gangsched(running)
        cluster.ensure_nodes(0, prefix="fence")


def _kubeconfig_through(cluster: LocalCluster, port: int, path: Path) -> Path:
    """The cluster's kubeconfig with its server at ``port`` on 127.0.0.1 (the certificate
    names 127.0.0.1, so TLS through a plain TCP forwarder holds)."""
    config = json.loads(cluster.kubeconfig.read_text())
    config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{port}"
    path.write_text(json.dumps(config))
    return path


def _logged_at(running: SchedulerProcess, event: str) -> list[float]:
    """When a replica running with ``--log-format=json`` logged ``event``, in POSIX seconds."""
    times = []
    for line in running.logs().splitlines():
        if line.startswith("{") and (record := json.loads(line)).get("event") == event:
            times.append(datetime.fromisoformat(record["timestamp"]).timestamp())
    return times


def test_a_leader_cut_off_by_the_network_steps_down_and_places_nothing_once_another_leads(
    cluster: LocalCluster, ws: Workspace, tmp_path: Path
) -> None:
    """The leader reaches the API server through a proxy that blackholes it past its lease
    while pods keep coming; the standby takes over; the cut heals. The old leader gives up
    while still cut off (a lease call that hangs must not hang it), places nothing after
    the new leader's first placement, and no node is overcommitted."""
    cluster.ensure_nodes(2, NodeShape(cpu="4"), prefix="cut")
    args = ("--scheduler-name=gang-cut", "--leader-elect", "--lease-name=gangsched-gang-cut",
            "--lease-namespace=default")
    replicas: list[SchedulerProcess] = []
    try:
        with TcpProxy(cluster.ports["apiserver"]) as proxy:
            first = start_gangsched(
                cluster, tmp_path / "first.log", *args, log_format="json",
                kubeconfig=_kubeconfig_through(cluster, proxy.port, tmp_path / "proxied"))
            replicas.append(first)
            second = start_gangsched(cluster, tmp_path / "second.log", *args,
                                     log_format="json", ready="leader_election_started")
            replicas.append(second)
            ws.create(ws.pod("before", cpu="1", scheduler="gang-cut"))
            wait_for(lambda: node_of(ws.pods()["before"]), timeout=30, what="leader to bind")
            assert _logged_at(first, "gang_placed") and not _logged_at(second, "gang_placed")

            proxy.cut()
            for i in range(int(CUT_S)):  # a busy cluster: work keeps arriving
                ws.create(ws.pod(f"during-{i}", cpu="100m", scheduler="gang-cut"))
                time.sleep(1.0)
            healed_at = time.time()
            proxy.heal()
            for i in range(6):
                ws.create(ws.pod(f"after-{i}", cpu="100m", scheduler="gang-cut"))
                time.sleep(0.5)
            wait_for(lambda: all(node_of(p) for p in ws.pods().values()), timeout=30,
                     what="the new leader to bind the pods created during and after the cut")
            code = first.proc.wait(timeout=30)
        placed_by_new = _logged_at(second, "gang_placed")
        assert placed_by_new, "the standby never took over"
        late = [round(t - placed_by_new[0], 2) for t in _logged_at(first, "gang_placed")
                if t >= placed_by_new[0]]
        assert not late, f"the old leader placed gangs {late} s after the new leader's first"
        lost = _logged_at(first, "leadership_lost")
        assert code != 0 and lost, f"the old leader must step down:\n{first.logs()[-3000:]}"
        assert lost[0] < healed_at, (
            f"the old leader stepped down only {lost[0] - healed_at:.1f}s after the heal: "
            "cut off, it kept waiting for the API server")
        assert second.proc.poll() is None and "Traceback" not in second.logs()
        assert overcommitted(cluster, ws.pods().values()) == {}
    finally:
        for running in replicas:
            if running.proc.poll() is None:
                stop_gangsched(running)
        cluster.ensure_nodes(0, prefix="cut")
