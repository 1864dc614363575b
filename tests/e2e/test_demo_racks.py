"""The demo's racks scenario, played as ``make demo`` plays it, under gangsched: two 8-GPU
jobs on two racks whose fullest nodes lie in both, each job in one rack."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from demo.contenders import GANGSCHED, Contender
from demo.scenarios import Racks
from demo.timeline import Recorder, summarize
from devcluster.controlplane import LocalCluster
from tests.e2e.scenario import only_nodes
from tests.e2e.workspace import Workspace


def play(cluster: LocalCluster, ws: Workspace, contender: Contender) -> Iterator[int]:
    """Run the scenario to its end under the contender; yields the jobs split across racks
    and the jobs finished."""
    scenario = Racks(ws, contender)
    only_nodes(cluster, scenario.nodes, scenario.shape)
    recorder = Recorder()
    scenario.submit()
    started = time.monotonic()
    while scenario.finished() < scenario.jobs and time.monotonic() - started < 60:
        pods = ws.pods()
        recorder.observe(pods, time.monotonic() - started)
        scenario.step(pods, time.monotonic() - started)
        time.sleep(0.2)
    recorder.observe(ws.pods(), time.monotonic() - started)
    summary = summarize(scenario.title, contender.title, scenario.jobs, scenario.finished(),
                        recorder, time.monotonic() - started, None, scenario.racks).summary
    assert summary.jobs_split is not None
    yield summary.jobs_split
    yield summary.finished


@pytest.mark.usefixtures("gangsched")
def test_gangsched_keeps_each_job_of_the_racks_scenario_in_one_rack(
    cluster: LocalCluster, ws: Workspace,
) -> None:
    split, finished = play(cluster, ws, GANGSCHED)
    assert (split, finished) == (0, 2)
