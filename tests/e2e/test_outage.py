"""An outage of the API server or of etcd behind it: replicas ride it out, and gangs bind
soon after it ends.

Runs on a control plane of its own, so stopping its API server or etcd
disturbs no other test. Two ``--leader-elect`` replicas watch it. When
kube-apiserver stops, connections are refused; when etcd stops, the API server
still answers, from its caches or with errors and timeouts. During a short
outage (shorter than the lease) the leader may keep its lease; during a long
one (longer than the lease) nobody can renew, the leader steps down with a
clear log line and the follower, which never exits, takes over when the
server is back. Either way a gang created after the return binds within
seconds, and no pod is lost.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from devcluster.controlplane import ClusterOptions, LocalCluster, NodeShape, running_cluster
from tests.e2e.conftest import SchedulerProcess, start_gangsched, stop_gangsched
from tests.e2e.workspace import Workspace, bound, node_of, wait_for

ARGS = ("--scheduler-name=gang-outage", "--leader-elect", "--lease-name=gangsched-outage",
        "--lease-namespace=default")
RETURN_BOUND_S = 10.0
OUTAGES = {"kube-apiserver": LocalCluster.restart_apiserver, "etcd": LocalCluster.restart_etcd}


@pytest.fixture
def own_cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    options = ClusterOptions(nodes=0)
    with running_cluster(tmp_path / "cluster", options) as local:
        local.apply_crds()
        local.ensure_nodes(2, NodeShape(cpu="4"), prefix="outage")
        yield local


def _gang(ws: Workspace, name: str, size: int) -> None:
    ws.create(ws.podgroup(name, min_member=size))
    ws.create(*(ws.pod(f"{name}-{i}", cpu="500m", scheduler="gang-outage", group=name)
                for i in range(size)))


@pytest.mark.parametrize("down_s", [5.0, 30.0])
@pytest.mark.parametrize("part", sorted(OUTAGES))
def test_replicas_survive_an_outage_and_gangs_bind_after_it(
    own_cluster: LocalCluster, tmp_path: Path, part: str, down_s: float
) -> None:
    cluster = own_cluster
    ws = Workspace(cluster)
    replicas: list[SchedulerProcess] = []
    try:
        replicas.append(start_gangsched(cluster, tmp_path / "first.log", *ARGS))
        replicas.append(start_gangsched(cluster, tmp_path / "second.log", *ARGS,
                                        ready="leader_election_started"))
        leader, follower = replicas
        _gang(ws, "before", 2)
        wait_for(lambda: len(bound(ws.pods().values())) == 2, timeout=30,
                 what="the gang created before the outage to bind")
        before = {name: node_of(pod) for name, pod in ws.pods().items()}

        OUTAGES[part](cluster, down_s)
        returned = time.monotonic()
        _gang(ws, "after", 3)
        wait_for(lambda: len(bound(ws.pods().values())) == 5,
                 timeout=RETURN_BOUND_S + 20,  # + one lease period when the lease passes
                 what="the gang created after the outage to bind")
        took = time.monotonic() - returned
        leader_ran_on = leader.proc.poll() is None
        print(f"\n[outage] {part} down {down_s:g}s: the gang created after it bound in "
              f"{took:.1f}s; the first leader {'ran on' if leader_ran_on else 'exited'}")
        assert follower.proc.poll() is None, f"the follower exited:\n{follower.logs()[-2000:]}"
        if leader_ran_on:
            assert took <= RETURN_BOUND_S, f"the leader kept the lease but took {took:.1f}s"
        else:
            assert "leadership_lost" in leader.logs(), leader.logs()[-2000:]
            assert "leader_elected" in follower.logs()
        after = {name: node_of(p) for name, p in ws.pods().items()}
        assert {name: after.get(name) for name in before} == before, "a pod was lost or moved"
        for running in replicas:
            assert "Traceback" not in running.logs(), running.logs()[-3000:]
    finally:
        for running in replicas:
            if running.proc.poll() is None:
                stop_gangsched(running)


def test_a_podgroup_deleted_right_after_an_outage_releases_its_reservation(
    own_cluster: LocalCluster, tmp_path: Path
) -> None:
    """The watch comes back with a fresh list that no longer holds the group, and says
    nothing of its deletion; its reservation must go all the same."""
    cluster = own_cluster
    ws = Workspace(cluster)
    running = start_gangsched(cluster, tmp_path / "gangsched.log",
                              "--scheduler-name=gang-outage")
    try:
        ws.create(ws.podgroup("spark", min_member=1, min_resources={"cpu": "6"}))
        wait_for(lambda: (ws.podgroup_obj("spark").get("status") or {}).get("phase")
                 == "Inqueue", timeout=30, what="the PodGroup admitted, 6 of 8 CPUs reserved")
        cluster.restart_apiserver(20.0)
        returned = time.monotonic()
        ws.delete_podgroup("spark")
        _gang(ws, "after", 6)  # 3 CPUs: more than the 2 left beside the reservation
        wait_for(lambda: len(bound(ws.pods().values())) == 6, timeout=30,
                 what="the gang to bind once the deleted group's reservation is gone")
        print(f"\n[outage] bound {time.monotonic() - returned:.1f}s after the return")
    finally:
        assert stop_gangsched(running) == 0
