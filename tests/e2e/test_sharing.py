"""Sharing a GPU cluster, measured: weighted fair share, work conservation, bounded starvation.

The figures go to ``$GANGSCHED_SHARING_RESULTS`` (``/tmp/gangsched-sharing.json``
unless set; ``bench/results/sharing.json`` holds the ones the README quotes,
written with ``GANGSCHED_SHARING_RESULTS=bench/results/sharing.json``): GPU-seconds
are integrated by sampling the live pods every ``SAMPLE_S``, so they do not
depend on the API's one-second timestamps.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pykube
import pytest

from devcluster.controlplane import LocalCluster, NodeShape
from tests.e2e.conftest import SchedulerProcess, start_gangsched, stop_gangsched
from tests.e2e.scenario import live, only_nodes, requests_of
from tests.e2e.workspace import Workspace, node_of, wait_for

RESULTS = Path(os.environ.get("GANGSCHED_SHARING_RESULTS", "/tmp/gangsched-sharing.json"))
SAMPLE_S = 0.25
GPU = "nvidia.com/gpu"


def record(name: str, figures: Mapping[str, Any]) -> None:
    """Merge one scenario's figures into the results file the README quotes."""
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    results[name] = {**figures, "at": time.strftime("%Y-%m-%dT%H:%M:%S")}
    RESULTS.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    print(f"\n[sharing] {name}: {json.dumps(figures)}")


def gpus_in_use(pods: Mapping[str, Mapping[str, Any]], by: Callable[[str], str]) -> dict[str, int]:
    """Live GPUs per key (``by`` maps a pod name to its queue or role)."""
    used: dict[str, int] = {}
    for name, pod in pods.items():
        if live(pod):
            key = by(name)
            used[key] = used.get(key, 0) + int(requests_of(pod).get(GPU, 0))
    return used


def pending(pods: Mapping[str, Mapping[str, Any]], prefix: str) -> int:
    return sum(1 for name, pod in pods.items() if name.startswith(prefix) and not node_of(pod))


@pytest.fixture
def queues(cluster: LocalCluster, ws: Workspace) -> Iterator[dict[str, str]]:
    names = {"heavy": f"{ws.name}-heavy", "light": f"{ws.name}-light"}
    factory = pykube.object_factory(cluster.client, "scheduling.gangsched.io/v1alpha1", "Queue")
    for role, weight in (("heavy", 3), ("light", 1)):
        factory(cluster.client, {
            "apiVersion": "scheduling.gangsched.io/v1alpha1", "kind": "Queue",
            "metadata": {"name": names[role]}, "spec": {"weight": weight},
        }).create()
    yield names
    cluster.kubectl("delete", "queue", *names.values(), "--ignore-not-found")


def flood(ws: Workspace, queue: str, role: str, gangs: int, run_for: str) -> list[dict[str, Any]]:
    """Identical 2-GPU gangs (one pod each, so a gang's GPUs are freed at one instant)
    that run ``run_for`` each, as PodGroup and pod."""
    manifests: list[dict[str, Any]] = []
    for i in range(gangs):
        group = f"{role}-{i:03d}"
        manifests.append(ws.podgroup(group, min_member=1, queue=queue))
        manifests.append(ws.pod(f"{group}-0", cpu="100m", gpus=2, group=group, run_for=run_for))
    return manifests


def sample_gpu_seconds(
    ws: Workspace, roles: tuple[str, ...], seconds: float
) -> tuple[dict[str, float], list[dict[str, int]], float]:
    """GPU-seconds per role over about ``seconds`` (the third value: exactly how long);
    every sample must find each role backlogged."""
    totals = dict.fromkeys(roles, 0.0)
    samples: list[dict[str, int]] = []
    first = last = time.monotonic()
    end = first + seconds
    while time.monotonic() < end:
        time.sleep(SAMPLE_S)
        pods = ws.pods()
        now = time.monotonic()
        used = gpus_in_use(pods, lambda name: name.split("-", 1)[0])
        for role in roles:
            assert pending(pods, f"{role}-"), f"queue {role} ran out of work: not flooded"
            totals[role] += used.get(role, 0) * (now - last)
        samples.append(used)
        last = now
    return totals, samples, last - first


@pytest.mark.usefixtures("gangsched")
def test_two_queues_weighted_three_to_one_share_gpu_seconds_three_to_one(
    cluster: LocalCluster, ws: Workspace, queues: dict[str, str]
) -> None:
    only_nodes(cluster, 2, NodeShape(cpu="32", memory="128Gi", gpus=4))
    heavy = flood(ws, queues["heavy"], "heavy", 36, "2s")
    light = flood(ws, queues["light"], "light", 14, "2s")
    # Interleaved, so neither queue is ahead merely by arriving first.
    for i in range(max(len(heavy), len(light)) // 2):
        ws.create(*heavy[2 * i: 2 * i + 2], *light[2 * i: 2 * i + 2])
    wait_for(lambda: sum(gpus_in_use(ws.pods(), lambda n: "all").values()) == 8, timeout=30,
             what="both queues to fill the 8 GPUs")
    # The first gangs of both queues land together on the empty cluster, two
    # each; only once they finish does the weighted order decide. Measure after.
    time.sleep(2.5)
    totals, _, window = sample_gpu_seconds(ws, ("heavy", "light"), 14.0)
    ratio = totals["heavy"] / totals["light"]
    utilisation = sum(totals.values()) / (8 * window)
    record("fair_share_3_to_1", {
        "cluster": "2 nodes x 4 GPUs", "gang": "1 pod x 2 GPUs, runs 2 s",
        "window_s": round(window, 1), "gpu_seconds": {k: round(v, 1) for k, v in totals.items()},
        "ratio": round(ratio, 3), "utilisation": round(utilisation, 3),
    })
    assert 2.7 <= ratio <= 3.3, f"GPU-seconds {totals} are {ratio:.2f}:1, not within 10% of 3:1"


@pytest.mark.usefixtures("gangsched")
def test_a_queue_alone_uses_the_whole_cluster(
    cluster: LocalCluster, ws: Workspace, queues: dict[str, str]
) -> None:
    only_nodes(cluster, 2, NodeShape(cpu="32", memory="128Gi", gpus=4))
    ws.create(*flood(ws, queues["light"], "light", 24, "2s"))
    wait_for(lambda: sum(gpus_in_use(ws.pods(), lambda n: "all").values()) == 8, timeout=30,
             what="the weight-1 queue to take all 8 GPUs")
    totals, samples, window = sample_gpu_seconds(ws, ("light",), 8.0)
    utilisation = totals["light"] / (8 * window)
    record("one_queue_alone", {
        "cluster": "2 nodes x 4 GPUs", "queue weight": 1, "window_s": round(window, 1),
        "utilisation": round(utilisation, 3), "most_gpus_at_once": max(
            s.get("light", 0) for s in samples),
    })
    assert max(s.get("light", 0) for s in samples) == 8
    assert utilisation >= 0.85


STARVATION_S = 5.0
SMALL_RUN_S = 3.0
BOUND_S = STARVATION_S + SMALL_RUN_S + 4.0
"""The big gang starts at most this long after it arrives: the starvation threshold, the
longest a small gang runs once the hold stops new ones, and 4 s of cycles, binds and KWOK."""


@pytest.fixture
def starvation_scheduler(
    cluster: LocalCluster, tmp_path: Path
) -> Iterator[SchedulerProcess]:
    running = start_gangsched(cluster, tmp_path / "gangsched.log", "--scheduler-name=gang-starve",
                              f"--starvation-seconds={STARVATION_S:g}")
    yield running
    stop_gangsched(running)


def test_a_sixteen_gpu_gang_starts_within_the_bound_in_a_stream_of_small_gangs(
    cluster: LocalCluster, ws: Workspace, starvation_scheduler: SchedulerProcess
) -> None:
    only_nodes(cluster, 4, NodeShape(cpu="64", memory="256Gi", gpus=8))
    run_for = f"{SMALL_RUN_S:g}s"
    stop = threading.Event()
    errors: list[BaseException] = []

    def stream() -> None:
        """1- and 2-GPU gangs of one pod, kept well ahead of what 32 GPUs can run."""
        i = 0
        try:
            while not stop.is_set():
                pods = ws.pods()
                if pending(pods, "small-") < 24:
                    ws.create(*(ws.pod(f"small-{i + k:04d}", cpu="100m", gpus=1 + (i + k) % 2,
                                       scheduler="gang-starve", run_for=run_for)
                                for k in range(12)))
                    i += 12
                time.sleep(0.3)
        except BaseException as error:  # reported on the main thread
            errors.append(error)

    feeder = threading.Thread(target=stream)
    feeder.start()
    try:
        wait_for(lambda: sum(gpus_in_use(ws.pods(), lambda n: "all").values()) >= 30,
                 timeout=30, what="the stream to fill the cluster")
        started = time.monotonic()
        ws.create(ws.podgroup("big", min_member=16))
        ws.create(*(ws.pod(f"big-{k:02d}", cpu="100m", gpus=1, group="big",
                           scheduler="gang-starve", run_for=run_for) for k in range(16)))
        used = 0.0
        last = started
        waited = None
        end = started + 30.0
        while time.monotonic() < end:
            time.sleep(SAMPLE_S)
            pods = ws.pods()
            now = time.monotonic()
            used += sum(gpus_in_use(pods, lambda n: "all").values()) * (now - last)
            last = now
            assert pending(pods, "small-"), "the stream ran dry: the cluster was not kept busy"
            if waited is None and all(node_of(pods.get(f"big-{k:02d}", {})) for k in range(16)):
                waited = now - started
        assert not errors, errors
    finally:
        stop.set()
        feeder.join(timeout=30)
    utilisation = used / (32 * (last - started))
    record("starvation_bound", {
        "cluster": "4 nodes x 8 GPUs", "stream": "1- and 2-GPU pods, 3 s each",
        "big_gang": "16 pods x 1 GPU", "starvation_seconds": STARVATION_S,
        "bound_s": BOUND_S, "started_after_s": None if waited is None else round(waited, 1),
        "window_s": round(last - started, 1), "utilisation": round(utilisation, 3),
    })
    assert waited is not None, "the 16-GPU gang never started"
    assert waited <= BOUND_S, f"the 16-GPU gang started after {waited:.1f}s, bound {BOUND_S}s"
    assert utilisation >= 0.85
