"""Two replicas with --leader-elect: only the leader binds; the other takes over when it stops."""

from __future__ import annotations

from pathlib import Path

from devcluster.controlplane import LocalCluster, NodeShape
from tests.e2e.conftest import start_gangsched, stop_gangsched
from tests.e2e.workspace import Workspace, node_of, wait_for

HA = ("--scheduler-name=gang-ha", "--leader-elect", "--lease-name=gangsched-ha",
      "--lease-namespace=default")


def test_standby_takes_over_when_the_leader_stops(
    cluster: LocalCluster, ws: Workspace, tmp_path: Path
) -> None:
    cluster.ensure_nodes(1, NodeShape(cpu="4"), prefix="ha")
    first = start_gangsched(cluster, tmp_path / "first.log", *HA)
    second = start_gangsched(cluster, tmp_path / "second.log", *HA,
                             ready="leader_election_started")
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
