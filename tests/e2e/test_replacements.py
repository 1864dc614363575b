"""A running gang that loses a member gets its room back before any waiting gang.

Operators create a replacement only after the old pod is gone (deleted, or
Failed under an ExitCode restart policy), a moment later. Meanwhile the room
is held for the gang, its PodGroup says so, and a waiting gang that would fit
into it waits; if no replacement comes, the room is given up after the grace.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from devcluster.controlplane import LocalCluster, NodeShape
from tests.e2e.conftest import start_gangsched, stop_gangsched
from tests.e2e.scenario import only_nodes
from tests.e2e.workspace import Workspace, bound, node_of, phase_of, wait_for

GRACE_S = 8.0
"""Long enough that a loaded machine still shows the held room before the grace ends."""
NAME = "gang-replacements"


def members(ws: Workspace, prefix: str) -> list[dict[str, Any]]:
    return [p for name, p in ws.pods().items() if name.startswith(prefix)]


def test_a_lost_member_gets_its_room_back_and_an_unreplaced_one_frees_it_after_the_grace(
    ws: Workspace, cluster: LocalCluster, tmp_path: Path
) -> None:
    only_nodes(cluster, 3, NodeShape(cpu="2", memory="8Gi"))
    own = start_gangsched(cluster, tmp_path / "gangsched.log", f"--scheduler-name={NAME}",
                          f"--namespace={ws.name}", f"--replacement-grace-seconds={GRACE_S:g}")
    try:
        def pod(name: str, group: str) -> dict[str, Any]:
            return ws.pod(name, cpu="1", group=group, scheduler=NAME)

        ws.create(ws.podgroup("train", min_member=4))
        ws.create(*(pod(f"train-{i}", "train") for i in range(4)))
        wait_for(lambda: all(phase_of(p) == "Running" for p in members(ws, "train-"))
                 and len(members(ws, "train-")) == 4, timeout=30, what="the job to run")
        ws.create(ws.podgroup("waiter", min_member=3))
        ws.create(*(pod(f"waiter-{i}", "waiter") for i in range(3)))
        wait_for(lambda: ws.podgroup_obj("waiter").get("status", {}).get("conditions"),
                 timeout=20, what="the waiting gang to say why it waits")

        # A worker is deleted; its operator brings the replacement a moment later.
        ws.delete_pod("train-3")
        wait_for(lambda: "train-3" not in ws.pods(), timeout=20, what="the worker to go")
        status = wait_for(
            lambda: (s := ws.podgroup_obj("train").get("status", {})).get("conditions")
            and s["conditions"][0]["reason"] == "ReplacementHeld" and s,
            timeout=10, what="the job's PodGroup to say it holds the room")
        assert status["phase"] == "Running", status
        assert "departed member" in status["conditions"][0]["message"], status
        time.sleep(1.0)
        assert bound(members(ws, "waiter-")) == [], "the waiting gang took the held room"
        ws.create(pod("train-3", "train"))
        wait_for(lambda: node_of(ws.pods()["train-3"]), timeout=20,
                 what="the replacement to bind into the held room")
        assert bound(members(ws, "waiter-")) == []

        # A worker fails and nothing replaces it: after the grace the room is free again.
        ws.finish_pod("train-2", "Failed")
        failed_at = time.monotonic()
        wait_for(lambda: len(bound(members(ws, "waiter-"))) == 3, timeout=GRACE_S + 20,
                 interval=0.1, what="the waiting gang to get the room once the grace ended")
        waited = time.monotonic() - failed_at
        assert waited >= GRACE_S - 1.0, f"room given away {waited:.1f}s after the failure"
        logs = own.logs()
        assert "replacement_held" in logs and "replacement_hold_released" in logs
    finally:
        assert stop_gangsched(own) == 0, own.logs()[-3000:]
