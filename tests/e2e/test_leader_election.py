"""Two replicas with --leader-elect: only the leader binds; the other takes over when it stops."""

from __future__ import annotations

import signal
import time
from pathlib import Path

from devcluster.controlplane import LocalCluster, NodeShape
from tests.e2e.conftest import SchedulerProcess, start_gangsched, stop_gangsched
from tests.e2e.scenario import overcommitted
from tests.e2e.workspace import Workspace, node_of, wait_for


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
        ws.create(ws.pod("after", cpu="1", scheduler="gang-ha"))
        wait_for(lambda: node_of(ws.pods()["after"]), timeout=60,
                 what="the standby to take the lease and bind")
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
