"""The demo's Kueue contender, played as ``make demo-peers`` plays it: Kueue (out of
cluster) admits the scenario's pod groups by a ClusterQueue as large as its nodes, and
kube-scheduler places what Kueue admitted."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from demo.contenders import KUEUE, kueue_quota
from demo.scenarios import Training
from devcluster.controlplane import LocalCluster
from tests.e2e.kueue import flavor_and_queues, kueue
from tests.e2e.scenario import only_nodes
from tests.e2e.workspace import Workspace, node_of, phase_of


@pytest.fixture(scope="module")
def kueue_running(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory
                  ) -> Iterator[Path]:
    workdir = tmp_path_factory.mktemp("kueue-demo")
    with kueue(cluster, workdir):
        yield workdir


@pytest.mark.usefixtures("kueue_running")
def test_kueue_admits_the_training_jobs_one_at_a_time_and_each_runs_whole(
    cluster: LocalCluster, ws: Workspace,
) -> None:
    """Three jobs of four 1-GPU workers on 4 GPUs, quota for 4: Kueue lifts its gate from
    one job's workers at a time, so no two jobs ever hold GPUs together, and all three
    finish."""
    scenario = Training(ws, KUEUE)
    only_nodes(cluster, scenario.nodes, scenario.shape)
    assert kueue_quota(scenario.nodes, scenario.shape)["nvidia.com/gpu"] == "4"
    flavor_and_queues(cluster, ws.name, kueue_quota(scenario.nodes, scenario.shape))
    scenario.submit()
    started = time.monotonic()
    holding_at_once = 0
    while scenario.finished() < scenario.jobs and time.monotonic() - started < 60:
        pods = ws.pods()
        holding = {name.rsplit("-worker-", 1)[0] for name, pod in pods.items()
                   if node_of(pod) and phase_of(pod) != "Succeeded"}
        holding_at_once = max(holding_at_once, len(holding))
        scenario.step(pods, time.monotonic() - started)
        time.sleep(0.2)
    assert (scenario.finished(), holding_at_once) == (scenario.jobs, 1)
