"""A leader whose scheduling loop fails gives the lease up and exits; the standby schedules.

The failure is injected with ``GANGSCHED_FAIL_CYCLE_AFTER`` (every cycle after the
N-th raises, as a bug in the cycle would) on the first replica only.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from devcluster.controlplane import LocalCluster, NodeShape
from gangsched.scheduler import FAIL_CYCLE_AFTER_ENV
from tests.e2e.conftest import SchedulerProcess, start_gangsched, stop_gangsched
from tests.e2e.workspace import Workspace, node_of, wait_for


def test_a_leader_whose_loop_fails_exits_and_the_standby_takes_over(
    cluster: LocalCluster, ws: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster.ensure_nodes(1, NodeShape(cpu="4"), prefix="crash")
    args = ("--scheduler-name=gang-crash", "--leader-elect", "--lease-name=gangsched-gang-crash",
            "--lease-namespace=default")
    replicas: list[SchedulerProcess] = []
    try:
        with monkeypatch.context() as env:
            env.setenv(FAIL_CYCLE_AFTER_ENV, "2")
            first = start_gangsched(cluster, tmp_path / "first.log", *args)
        replicas.append(first)
        second = start_gangsched(cluster, tmp_path / "second.log", *args,
                                 ready="leader_election_started")
        replicas.append(second)
        assert "leader_elected" in first.logs() and "leader_elected" not in second.logs()

        code = first.proc.wait(timeout=60)
        logs = first.logs()
        assert code != 0, "a leader that cannot schedule must not stay up"
        assert "InjectedFault" in logs and "leadership_given_up" in logs, logs[-3000:]

        ws.create(ws.pod("after", cpu="1", scheduler="gang-crash"))
        wait_for(lambda: node_of(ws.pods()["after"]), timeout=60,
                 what="the standby to take the lease and bind")
        assert "leader_elected" in second.logs() and "gang_placed" in second.logs()
        assert second.proc.poll() is None
    finally:
        for running in replicas:
            if running.proc.poll() is None:
                stop_gangsched(running)
        cluster.ensure_nodes(0, prefix="crash")
