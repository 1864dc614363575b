"""Probes and metrics of a running scheduler, read over HTTP as the kubelet and Prometheus do."""

from __future__ import annotations

import json
import platform
import re
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from devcluster.controlplane import LocalCluster, NodeShape, free_port
from gangsched import __version__
from gangsched.core.kubeobjects.queues import KUEUE_API
from tests.e2e.conftest import start_gangsched, stop_gangsched
from tests.e2e.deployed import deployed_kubeconfig
from tests.e2e.workspace import Workspace, node_of, phase_of, wait_for

ADD_ONS = frozenset({"karpenter.sh/v1", KUEUE_API})
"""APIs of add-ons a cluster may not run: their features are off and readiness says so."""


def readiness(port: int) -> str:
    """What ``/readyz`` says, after checking that what it names as off is only the add-ons
    this cluster does not run (every Kubernetes API gangsched reads is served here)."""
    body = get(port, "/readyz")[1]
    said, _, off = body.rstrip("\n").partition(" (")
    unserved = {part.split(" not served")[0] for part in off.rstrip(")").split("; ") if part}
    assert unserved <= ADD_ONS, body
    return said


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def metric(text: str, name: str, **labels: str) -> float | None:
    """The value of one sample of the Prometheus text, or None when it is absent."""
    wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    pattern = re.escape(name) + (r"\{" + re.escape(wanted) + r"\}" if labels else "") + r" (\S+)"
    found = re.search(r"^" + pattern + r"$", text, re.MULTILINE)
    return float(found.group(1)) if found else None


def queue_conditions(cluster: LocalCluster, queue: str) -> dict[str, dict[str, Any]]:
    found = json.loads(cluster.kubectl("get", "queue", queue, "-o", "json").stdout)
    return {c["type"]: c for c in (found.get("status") or {}).get("conditions") or []}


def assert_queue_conditions_follow_its_state(cluster: LocalCluster, port: int,
                                             queue: str, ws: Workspace) -> None:
    """Open while open, with a transition time that stays while it stays open; Closed once
    closed, beside the counts of the same status."""
    opened = wait_for(lambda: queue_conditions(cluster, queue).get("Open"), timeout=15,
                      what="the Queue's Open condition")
    assert (opened["status"], opened["reason"]) == ("True", "Open")
    cluster.kubectl("patch", "queue", queue, "--type=merge", "-p", '{"spec":{"state":"Closed"}}')
    closed = wait_for(lambda: (c := queue_conditions(cluster, queue).get("Open"))
                      and c["status"] == "False" and c, timeout=15, what="the Queue Closed")
    assert closed["reason"] == "Closed"
    assert closed["lastTransitionTime"] >= opened["lastTransitionTime"]

    def counts() -> tuple[int, str]:
        status = json.loads(cluster.kubectl("get", "queue", queue, "-o", "json").stdout)["status"]
        return status["running"], status["allocated"]["cpu"]

    # Running once the fake kubelet has started both pods, which a loaded machine delays.
    seen: list[tuple[int, str]] = []

    def counted() -> bool:
        seen.append(counts())
        return seen[-1] == (1, "2")

    try:
        wait_for(counted, timeout=90, what="the Queue to count the bound gang running")
    except AssertionError as error:
        group = (ws.podgroup_obj("fits").get("status") or {}).get("phase")
        phases = {name: phase_of(pod) for name, pod in ws.pods().items()}
        raise AssertionError(f"{error}; (running, allocated cpu) last seen {seen[-1:]}; "
                             f"pod phases {phases}; the PodGroup's phase {group}") from None
    share = metric(get(port, "/metrics")[1], "gangsched_queue_weight_share", queue=queue)
    cluster.kubectl("patch", "queue", queue, "--type=merge", "-p", '{"spec":{"weight":2}}')
    wait_for(lambda: metric(get(port, "/metrics")[1], "gangsched_queue_weight_share",
                            queue=queue) != share, timeout=15, what="the new weight's share")
    again = queue_conditions(cluster, queue)["Open"]
    assert again["lastTransitionTime"] == closed["lastTransitionTime"], \
        "a condition whose status held keeps its transition time"


def test_probes_answer_on_their_own_paths_and_metrics_count_gangs(
    cluster: LocalCluster, ws: Workspace, tmp_path: Path
) -> None:
    cluster.ensure_nodes(1, NodeShape(cpu="4"), prefix="probe")
    port = free_port()
    running = start_gangsched(cluster, tmp_path / "gangsched.log", "--scheduler-name=gang-probe",
                              f"--metrics-port={port}", "--log-format=json")
    try:
        wait_for(lambda: get(port, "/readyz")[0] == 200, timeout=30, what="/readyz 200")
        status, body = get(port, "/healthz")
        assert (status, body.startswith("ok: leading")) == (200, True), body
        assert readiness(port) == "ready: leading"
        assert get(port, "/anything")[0] == 404, "only /metrics serves the metrics page"
        assert metric(get(port, "/metrics")[1], "gangsched_leader") == 1.0

        # A queue of its own, so groups other tests left do not count.
        queue = f"probe-{ws.name}"
        ws.create({"apiVersion": "scheduling.gangsched.io/v1alpha1", "kind": "Queue",
                   "metadata": {"name": queue}, "spec": {"weight": 1}})
        ws.create(ws.podgroup("fits", min_member=2, queue=queue))
        # Pinned to the probe's node: nodes other tests left must not give room.
        pin = {"kubernetes.io/hostname": "probe-0"}
        ws.create(*(ws.pod(f"fits-{i}", cpu="1", scheduler="gang-probe", group="fits",
                           node_selector=pin) for i in range(2)))
        ws.create(ws.podgroup("too-big", min_member=2, queue=queue))
        ws.create(*(ws.pod(f"big-{i}", cpu="3", scheduler="gang-probe", group="too-big",
                           node_selector=pin) for i in range(2)))
        wait_for(lambda: all(node_of(ws.pods()[f"fits-{i}"]) for i in range(2)), timeout=30,
                 what="the small gang to bind")

        def counted() -> str | None:
            """The bound gang's wait observed, and the next cycle's count of pending gangs:
            only the one that does not fit (the bound one counts while it is binding)."""
            text = get(port, "/metrics")[1]
            done = (metric(text, "gangsched_gang_wait_seconds_count", queue=queue) == 1.0
                    and metric(text, "gangsched_pending_gangs", queue=queue) == 1.0)
            return text if done else None

        text = wait_for(counted, timeout=15, what="the gang's wait and one pending gang")
        assert metric(text, "gangsched_bind_seconds_count") == 2.0
        assert (metric(text, "gangsched_gang_wait_seconds_sum", queue=queue) or 0) < 30
        assert metric(text, "gangsched_queue_allocated", queue=queue, resource="cpu") == 2.0
        assert 0 < (metric(text, "gangsched_queue_dominant_share", queue=queue) or 0) <= 0.5, \
            "2 cores of at least the probe's 4"
        assert 0 < (metric(text, "gangsched_queue_weight_share", queue=queue) or 0) < 1
        assert metric(text, "gangsched_build_info", python=platform.python_version(),
                      version=__version__) == 1.0
        assert_queue_conditions_follow_its_state(cluster, port, queue, ws)
    finally:
        assert stop_gangsched(running) == 0
        cluster.ensure_nodes(0, prefix="probe")
        cluster.kubectl("delete", "queue", f"probe-{ws.name}", "--ignore-not-found")
    # One format per process: every line (kopf's too, when it says anything) is a JSON
    # object, and nothing in a healthy run is an error.
    lines = [json.loads(line) for line in running.logs().splitlines()]
    assert [line for line in lines if line["level"] == "error"] == []


def test_a_follower_is_ready_and_alive_but_does_not_lead(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    ha = ("--scheduler-name=gang-probe-ha", "--leader-elect", "--lease-name=gangsched-probe",
          "--lease-namespace=default")
    ports = free_port(), free_port()
    leader = start_gangsched(cluster, tmp_path / "leader.log", *ha, f"--metrics-port={ports[0]}")
    follower = start_gangsched(cluster, tmp_path / "follower.log", *ha,
                               f"--metrics-port={ports[1]}", ready="leader_election_started")
    try:
        wait_for(lambda: get(ports[1], "/readyz")[0] == 200, timeout=30,
                 what="the follower to be ready")
        assert readiness(ports[1]) == "ready: follower, not leading"
        assert get(ports[1], "/healthz") == (200, "ok: follower, not leading\n")
        assert metric(get(ports[1], "/metrics")[1], "gangsched_leader") == 0.0
        assert readiness(ports[0]) == "ready: leading"
        assert metric(get(ports[0], "/metrics")[1], "gangsched_leader") == 1.0
    finally:
        for running in (leader, follower):
            if running.proc.poll() is None:
                stop_gangsched(running)


def test_a_replica_that_cannot_watch_a_kind_says_it_is_not_ready(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    """A chart whose role lacks a rule: the watch is refused, so the mirror misses what that
    kind says, and the replica must not look ready while it schedules blind."""
    port = free_port()
    running = start_gangsched(cluster, tmp_path / "gangsched.log", "--scheduler-name=gang-blind",
                              f"--metrics-port={port}", ready="list_watch_failed",
                              kubeconfig=deployed_kubeconfig(cluster, without="csidrivers"))
    try:
        def refused() -> tuple[int, str] | None:
            answer = get(port, "/readyz")
            return answer if answer[1].startswith("not ready: cannot watch") else None

        status, body = wait_for(refused, timeout=30, what="the refused watch told")
        assert status == 503
        assert "csidrivers (403" in body, body
        assert get(port, "/healthz")[0] == 200, "alive: a restart would not give it the right"
    finally:
        stop_gangsched(running)


def test_a_signal_while_starting_stops_the_process_cleanly(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    """Before kopf and the watches are up (here: an API server that never answers). In a
    container the process is PID 1, where a signal with no handler is ignored: a rolling
    update would wait for the kill after the grace period."""
    config = json.loads(cluster.kubeconfig.read_text())
    config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{free_port()}"
    unreachable = tmp_path / "unreachable.kubeconfig"
    unreachable.write_text(json.dumps(config))
    running = start_gangsched(cluster, tmp_path / "gangsched.log", "--scheduler-name=gang-start",
                              ready="list_watch_failed", kubeconfig=unreachable)
    assert stop_gangsched(running, timeout=20) == 0, running.logs()[-2000:]
