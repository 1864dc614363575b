"""The demo's DRA scenario, played as ``make demo`` plays it, under gangsched."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from typing import Any

import pykube
import pytest

from demo.contenders import GANGSCHED
from demo.scenarios import RESOURCE_API, Cliques
from devcluster import fakedriver
from devcluster.controlplane import LocalCluster
from tests.e2e.scenario import only_nodes
from tests.e2e.workspace import Workspace, node_of


@pytest.fixture
def cliques(cluster: LocalCluster, ws: Workspace) -> Iterator[Cliques]:
    scenario = Cliques(ws, GANGSCHED)
    only_nodes(cluster, scenario.nodes, scenario.shape)
    yield scenario
    fakedriver.remove(cluster.client)


def cliques_held(ws: Workspace, prefix: str) -> list[set[str]]:
    """For each claim of the pods named ``prefix...``, the cliques of its devices."""
    cls = pykube.object_factory(ws.api, RESOURCE_API, "ResourceClaim")
    held = []
    for claim in cls.objects(ws.api, namespace=ws.name):
        if not claim.name.startswith(prefix):
            continue
        allocation: Mapping[str, Any] = (claim.obj.get("status") or {}).get("allocation") or {}
        results = (allocation.get("devices") or {}).get("results") or []
        # The fake driver's gpu-0..3 are clique ``<node>-a``, gpu-4..7 ``<node>-b``.
        held.append({f"{r['pool']}-{'a' if int(r['device'].split('-')[1]) < 4 else 'b'}"
                     for r in results})
    return held


@pytest.mark.usefixtures("gangsched")
def test_every_job_of_the_dra_scenario_finishes_with_each_worker_in_one_clique(
    ws: Workspace, cliques: Cliques,
) -> None:
    """The serving pods share one clique, so the jobs find five whole cliques: two
    jobs at a time, every worker's four GPUs in one clique, all four jobs done."""
    cliques.submit()
    started = time.monotonic()
    serving_clique: set[str] = set()
    while cliques.finished() < cliques.jobs and time.monotonic() - started < 90:
        pods = ws.pods()
        if cliques.jobs_created and not serving_clique:
            serving = cliques_held(ws, "serving-")
            if len(serving) == cliques.serving and all(serving):
                serving_clique = set().union(*serving)
                assert len(serving_clique) == 1, f"serving pods break {serving}"
        for held in cliques_held(ws, "cliques-"):
            assert len(held) <= 1, f"a worker's GPUs span cliques {held}"
        cliques.step(pods, time.monotonic() - started)
        time.sleep(0.2)
    assert serving_clique, "the serving pods' claims were never seen allocated"
    assert cliques.finished() == cliques.jobs
    assert all(node_of(pod) for pod in ws.pods().values())
