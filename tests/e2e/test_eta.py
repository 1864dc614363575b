"""When a waiting gang will start, and backfill into a starving gang's room, on the real
control plane: the estimate is published on the PodGroup, a short job uses the kept room
while a long one and one of unknown runtime do not, and the big gang starts on time."""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import UTC, datetime
from functools import partial
from typing import Any

from devcluster.controlplane import LocalCluster, NodeShape
from gangsched.core.model.runtimes import RUNTIME_ANNOTATION
from tests.e2e.conftest import SchedulerProcess
from tests.e2e.scenario import only_nodes
from tests.e2e.test_cycle_promises import SCHEDULER, STARVATION_S
from tests.e2e.test_cycle_promises import scheduler as scheduler  # the fixture, shared
from tests.e2e.workspace import Workspace, bound, scheduled_condition, wait_for

RUN_S = 30


def job(ws: Workspace, name: str, gpus: int, runtime: str | None) -> list[dict[str, Any]]:
    """A one-pod gang that runs ``runtime`` on the fake kubelets and says so (None: it says
    nothing, and runs five minutes)."""
    group = ws.podgroup(name, min_member=1)
    pod = ws.pod(f"{name}-0", gpus=gpus, group=name, scheduler=SCHEDULER,
                 run_for=runtime or "300s",
                 annotations={RUNTIME_ANNOTATION: runtime} if runtime else None)
    return [group, pod]


def _seconds(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()


def _held_for_starving(ws: Workspace, name: str) -> str | None:
    """The pod's PodScheduled message once it says the starving gang holds its room (its
    first may be that its PodGroup is not seen yet)."""
    condition: Mapping[str, Any] = scheduled_condition(ws.pods().get(f"{name}-0", {})) or {}
    message = str(condition.get("message") or "")
    return message if "starving gang" in message else None


def _bound(ws: Workspace, name: str) -> bool:
    return bool(bound([ws.pods().get(f"{name}-0", {})]))


def test_the_estimate_is_published_and_only_a_job_ending_before_it_backfills(
    cluster: LocalCluster, ws: Workspace, scheduler: SchedulerProcess
) -> None:
    only_nodes(cluster, 1, NodeShape(cpu="16", memory="64Gi", gpus=8))
    ws.create(*job(ws, "run", 4, f"{RUN_S}s"))
    wait_for(lambda: _bound(ws, "run") or None, timeout=20, what="the first job to run")
    ran_from = time.time()

    # The big gang needs the whole node: it waits for the first job to end, and says when.
    ws.create(*job(ws, "big", 8, "60s"))

    def estimate() -> str | None:
        status = ws.podgroup_obj("big").get("status") or {}
        return status.get("estimatedStart")

    published = wait_for(estimate, timeout=20, what="the big gang's estimated start")
    assert published != "Unknown"
    expected_end = ran_from + RUN_S
    assert abs(_seconds(published) - expected_end) <= 6, (published, expected_end)
    time.sleep(STARVATION_S + 1.0)  # it starves and keeps the 4 free GPUs

    ws.create(*job(ws, "short", 2, "8s"), *job(ws, "long", 2, "600s"), *job(ws, "blind", 2, None))
    wait_for(lambda: _bound(ws, "short") or None, timeout=20,
             what="the job that ends before the reservation to backfill")
    for name in ("long", "blind"):
        wait_for(partial(_held_for_starving, ws, name), timeout=20,
                 what=f"{name} to say the starving gang holds the room it would take")
        assert not _bound(ws, name)

    wait_for(lambda: _bound(ws, "big") or None, timeout=RUN_S + 20,
             what="the big gang to start once the first job ends")
    started = time.time()
    assert started - expected_end <= 10, "the backfilled job did not delay the big gang"
    assert (ws.podgroup_obj("big").get("status") or {}).get("estimatedStart") is None


def test_an_unreadable_runtime_is_told_once_in_an_event_on_the_pod_or_its_group(
    cluster: LocalCluster, ws: Workspace, scheduler: SchedulerProcess
) -> None:
    only_nodes(cluster, 1, NodeShape(cpu="16", memory="64Gi", gpus=8))
    negative = {RUNTIME_ANNOTATION: "-5m"}
    ws.create(
        ws.pod("lone-run", gpus=1, scheduler=SCHEDULER, annotations={RUNTIME_ANNOTATION: "soon"}),
        ws.pod("lone-wait", gpus=16, scheduler=SCHEDULER, annotations=negative),
        ws.podgroup("group", min_member=1),
        ws.pod("group-0", gpus=16, group="group", scheduler=SCHEDULER, annotations=negative),
    )

    def told(name: str) -> list[str]:
        return [str(e.get("message")) for e in ws.events(name)
                if (e.get("reason"), e.get("type")) == ("InvalidRuntime", "Warning")]

    for name, says in (("lone-run", "='soon' is not a duration"),
                       ("lone-wait", "='-5m' is negative"),
                       ("group", f"pod {ws.name}/group-0: annotation")):
        wait_for(partial(told, name), timeout=30, what=f"an InvalidRuntime Event on {name}")
        assert says in told(name)[0], told(name)
    wait_for(lambda: any(e.get("reason") == "FailedScheduling" for e in ws.events("lone-wait")),
             timeout=30, what="the waiting pod's FailedScheduling Event beside it")
    assert bound([ws.pods()["lone-run"]]), "the lone pod runs, its runtime unknown"
    time.sleep(5)  # cycles go on; the problems are told once
    assert [len(told(name)) for name in ("lone-run", "lone-wait", "group")] == [1, 1, 1]
