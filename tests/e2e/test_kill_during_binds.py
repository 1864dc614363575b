"""SIGKILL the scheduler while gangs bind: the next one leaves no gang partly bound.

A gang's pods are bound concurrently, so a scheduler killed in the middle
leaves a gang with some members on nodes and the rest pending. The replica
that starts next must finish such a gang first, not strand its members nor
give their room to another gang, and must not bind anything twice.

Ten tries on one set of nodes (``GANGSCHED_KILL_TRIES`` asks for more), each
killing the scheduler at a random moment just after five gangs are created on
nodes with room for four; each try's scheduler is the one the next try kills.
The seed is printed, and ``GANGSCHED_KILL_SEED`` replays a run.
"""

from __future__ import annotations

import functools
import os
import random
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pykube

from devcluster.controlplane import LocalCluster, NodeShape
from tests.e2e.conftest import SchedulerProcess, start_gangsched, stop_gangsched
from tests.e2e.scenario import overcommitted
from tests.e2e.workspace import Workspace, node_of, scheduled_condition, wait_for

NAME = "gang-kill"
POOL = {"gangsched.io/pool": "kill"}
NODES = 4
GANGS = 5
SIZE = 4
"""Four nodes of 4 CPUs and 4 GPUs; gangs of four 1-CPU 1-GPU pods: four gangs fit, one waits."""
TRIES = int(os.environ.get("GANGSCHED_KILL_TRIES", "10"))
"""Ten in the suite (each run draws new moments); ``GANGSCHED_KILL_TRIES`` asks for more."""
KILL_AFTER_S = (0.02, 0.3)
RESOLVE_S = 20.0
"""From a restart until every gang is whole or waits whole: generous, the machine is shared."""


def _try_gangs(ws: Workspace, attempt: int) -> None:
    """Five gangs, their pods created round by round: every gang becomes whole in the last
    round, so all of them are placed and bound together right after it."""
    label = {"try": str(attempt)}
    for g in range(GANGS):
        group = ws.podgroup(f"t{attempt}-g{g}", min_member=SIZE)
        group["metadata"]["labels"] = label
        ws.create(group)
    for i in range(SIZE):
        ws.create(*(ws.pod(f"t{attempt}-g{g}-{i}", cpu="1", gpus=1, scheduler=NAME,
                           group=f"t{attempt}-g{g}", labels=label, node_selector=POOL)
                    for g in range(GANGS)))


def _gangs(pods: Mapping[str, Mapping[str, Any]], attempt: int) -> dict[str, list[Any]]:
    members: dict[str, list[Any]] = {f"t{attempt}-g{g}": [] for g in range(GANGS)}
    for name, pod in pods.items():
        group = name.rsplit("-", 1)[0]
        if group in members:
            members[group].append(pod)
    return members


def _partly_bound(gangs: Mapping[str, list[Any]]) -> list[str]:
    return [g for g, pods in gangs.items() if 0 < sum(1 for p in pods if node_of(p)) < SIZE]


def _waits_with_reason(pod: Mapping[str, Any]) -> bool:
    condition = scheduled_condition(pod) or {}
    return (condition.get("status") == "False" and condition.get("reason") == "Unschedulable"
            and "nvidia.com/gpu" in str(condition.get("message", "")))


def _resolved(ws: Workspace, attempt: int) -> dict[str, list[Any]] | None:
    """The try's gangs once four are bound whole and the fifth waits whole, saying why."""
    gangs = _gangs(ws.pods(), attempt)
    whole = [g for g, pods in gangs.items() if len(pods) == SIZE and all(map(node_of, pods))]
    waiting = [g for g, pods in gangs.items()
               if len(pods) == SIZE and all(_waits_with_reason(p) and not node_of(p)
                                            for p in pods)]
    return gangs if len(whole) == GANGS - 1 and len(waiting) == 1 else None


def _clear(ws: Workspace, attempt: int) -> None:
    selector = {"try": str(attempt)}
    for pod in pykube.Pod.objects(ws.api, namespace=ws.name).filter(selector=selector):
        pod.delete()
    group_class = pykube.object_factory(ws.api, "scheduling.gangsched.io/v1alpha1", "PodGroup")
    for group in group_class.objects(ws.api, namespace=ws.name).filter(selector=selector):
        group.delete()
    wait_for(lambda: not any(n.startswith(f"t{attempt}-") for n in ws.pods()), timeout=30,
             what=f"the pods of try {attempt} to go")


def test_a_scheduler_killed_while_gangs_bind_leaves_none_partly_bound_after_a_restart(
    cluster: LocalCluster, ws: Workspace, tmp_path: Path
) -> None:
    seed = int(os.environ.get("GANGSCHED_KILL_SEED", str(random.randrange(2**32))))
    print(f"\n[kill] seed {seed} (GANGSCHED_KILL_SEED={seed} replays it)")
    rng = random.Random(seed)
    cluster.ensure_nodes(NODES, NodeShape(cpu="4", gpus=4), prefix="kill", labels=POOL)
    args = (f"--scheduler-name={NAME}", f"--namespace={ws.name}")
    running: SchedulerProcess = start_gangsched(cluster, tmp_path / "start.log", *args)
    partly_at_kill = 0
    try:
        for attempt in range(TRIES):
            _try_gangs(ws, attempt)
            delay = rng.uniform(*KILL_AFTER_S)
            time.sleep(delay)
            running.proc.kill()
            running.proc.wait()
            split = _partly_bound(_gangs(ws.pods(), attempt))
            partly_at_kill += bool(split)

            running = start_gangsched(cluster, tmp_path / f"try-{attempt}.log", *args)
            restarted = time.monotonic()
            gangs = wait_for(functools.partial(_resolved, ws, attempt), timeout=RESOLVE_S,
                             what=f"try {attempt} (killed {delay * 1000:.0f} ms after the "
                             f"gangs, {split or 'none'} partly bound): four gangs bound whole "
                             "and the fifth waiting whole with a reason")
            print(f"[kill] try {attempt}: killed after {delay * 1000:.0f} ms, partly bound "
                  f"{split or 'none'}, resolved {time.monotonic() - restarted:.1f}s "
                  "after the restart")
            assert overcommitted(cluster, (p for pods in gangs.values() for p in pods)) == {}
            assert "Traceback" not in running.logs(), running.logs()[-3000:]
            _clear(ws, attempt)
        print(f"[kill] {partly_at_kill} of {TRIES} kills left a gang partly bound")
    finally:
        if running.proc.poll() is None:
            stop_gangsched(running)
        cluster.ensure_nodes(0, prefix="kill")
