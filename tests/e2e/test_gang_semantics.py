"""Gang semantics users rely on, against the real control plane with kube-scheduler beside us.

Sharing nodes with kube-scheduler without overcommitting them, saying why a
gang waits, PodGroups that arrive late or are broken or deleted, schedule
timeouts, and stopping cleanly.
"""

from __future__ import annotations

import re
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from devcluster.controlplane import LocalCluster, NodeShape
from tests.e2e.conftest import SchedulerProcess, start_gangsched
from tests.e2e.scenario import create_interleaved, live, only_nodes, overcommitted, timed
from tests.e2e.workspace import (
    Workspace,
    bound,
    node_of,
    phase_of,
    scheduled_condition,
    wait_for,
)

FIGURES = re.compile(r"\d")


@pytest.fixture
def six_cpus(cluster: LocalCluster) -> None:
    only_nodes(cluster, 3, NodeShape(cpu="2", memory="8Gi"))


def _members(ws: Workspace, prefix: str) -> list[dict[str, Any]]:
    return [p for name, p in ws.pods().items() if name.startswith(prefix)]


def _unschedulable(pod: dict[str, Any], reason: str = "Unschedulable") -> str | None:
    condition = scheduled_condition(pod)
    if condition and condition.get("status") == "False" and condition["reason"] == reason:
        return str(condition.get("message", ""))
    return None


def _all_waiting(ws: Workspace, prefix: str, count: int,
                 reason: str = "Unschedulable") -> list[str] | None:
    """The PodScheduled=False messages of the ``count`` pods named ``prefix*``, once all say why."""
    messages = [_unschedulable(p, reason) for p in _members(ws, prefix)]
    if len(messages) == count and all(messages):
        return [str(m) for m in messages]
    return None


def _condition(group: dict[str, Any]) -> dict[str, Any]:
    conditions = group.get("status", {}).get("conditions") or [{}]
    return dict(conditions[0])


def _assert_scheduler_healthy(gangsched: SchedulerProcess) -> None:
    assert gangsched.proc.poll() is None, gangsched.logs()[-3000:]
    logs = gangsched.logs()
    for sign in ("Traceback", "task_ended"):
        assert sign not in logs, logs[logs.index(sign) - 2000:][:4000]


# ---- sharing nodes with kube-scheduler -------------------------------------------------


def test_pods_of_both_schedulers_never_overcommit_shared_nodes(
    ws: Workspace, cluster: LocalCluster, gangsched: SchedulerProcess
) -> None:
    """gangsched counts kube-scheduler's pods, and kube-scheduler counts gangsched's.

    Seven CPUs of twelve go to kube-scheduler's pods first. Then gangs and
    single pods wanting sixteen CPUs arrive at once, each running two seconds,
    so gangsched fills the five CPUs left over several waves, with binds in
    flight while the next cycle runs. Last, a gang takes those five CPUs for
    good and kube-scheduler gets more pods: it must find no room.

    The two schedulers never pick from the same free room at the same
    instant here: each decides from its own cache, so two binds landing
    within the watch latency of each other can overcommit a node, which a
    real kubelet then refuses (OutOfcpu). Nothing a secondary scheduler does
    can close that window; what must hold is that neither ever binds into
    room the other's pods already hold.
    """
    only_nodes(cluster, 3, NodeShape(cpu="4", memory="16Gi"))
    worst: dict[str, Any] = {}
    partly_since: dict[str, float] = {}
    stuck: set[str] = set()
    gangs, gang_size, solos = 4, 3, 4

    def check() -> dict[str, dict[str, Any]]:
        pods = ws.pods()
        worst.update(overcommitted(cluster, pods.values()))
        now = time.monotonic()
        for g in range(gangs):
            placed = sum(1 for i in range(gang_size) if node_of(pods.get(f"g{g}-{i}", {})))
            if 0 < placed < gang_size:
                # Binds of one gang are concurrent: a poll may land between them,
                # but a gang must never stay partly bound.
                if now - partly_since.setdefault(f"g{g}", now) > 2.0:
                    stuck.add(f"g{g}: {placed} of {gang_size}")
            else:
                partly_since.pop(f"g{g}", None)
        return pods

    ws.create(*(ws.pod(f"kube-{i}", cpu="1", scheduler="kube") for i in range(7)))
    wait_for(lambda: len(bound(_members(ws, "kube-"))) == 7, timeout=30,
             what="kube-scheduler to place seven pods")

    for g in range(gangs):
        ws.create(ws.podgroup(f"g{g}", min_member=gang_size))
    members = [[lambda g=g, i=i: ws.create(ws.pod(f"g{g}-{i}", cpu="1", group=f"g{g}",
                                                  run_for="2s"))
                for i in range(gang_size)] for g in range(gangs)]
    singles = [lambda i=i: ws.create(ws.pod(f"solo-{i}", cpu="1", run_for="2s"))
               for i in range(solos)]
    ours = [n for g in range(gangs) for n in (f"g{g}-{i}" for i in range(gang_size))]
    ours += [f"solo-{i}" for i in range(solos)]
    with timed("shared-nodes-16-cpu-of-gangs-on-5-left", "gangsched beside kube-scheduler",
               outcome="every gang and pod ran in waves, no node overcommitted"):
        create_interleaved([*members, singles])
        wait_for(lambda: all(phase_of(check().get(n, {})) == "Succeeded" for n in ours),
                 timeout=90, interval=0.1, what="every gangsched pod to run and finish")
    assert worst == {}, f"nodes overcommitted (requested, allocatable): {worst}"
    assert stuck == set(), f"gangs left partly bound: {stuck}"

    ws.create(ws.podgroup("hold", min_member=5))
    ws.create(*(ws.pod(f"hold-{i}", cpu="1", group="hold") for i in range(5)))
    wait_for(lambda: len(bound(_members(ws, "hold-"))) == 5, timeout=30,
             what="a gang to take exactly the five CPUs kube-scheduler's pods left")
    check()
    assert worst == {}, f"nodes overcommitted (requested, allocatable): {worst}"
    ws.create(*(ws.pod(f"kube-late-{i}", cpu="1", scheduler="kube") for i in range(3)))
    wait_for(lambda: _all_waiting(ws, "kube-late-", 3), timeout=30,
             what="kube-scheduler to find no room left by gangsched's pods")
    pods = check()

    assert worst == {}, f"nodes overcommitted (requested, allocatable): {worst}"
    assert bound(_members(ws, "kube-late-")) == []
    assert sum(1 for p in pods.values() if live(p)) == 12, "all twelve CPUs in use"
    _assert_scheduler_healthy(gangsched)


# ---- saying why ---------------------------------------------------------------------------


@pytest.mark.usefixtures("six_cpus")
def test_gang_larger_than_the_cluster_says_why_and_binds_nothing(
    ws: Workspace, gangsched: SchedulerProcess
) -> None:
    ws.create(ws.podgroup("huge", min_member=4))
    ws.create(*(ws.pod(f"huge-{i}", cpu="2", group="huge") for i in range(4)))

    # While the pods are still being created the gang waits for its members;
    # once all four exist, every one says what the cluster lacks.
    def settled() -> list[str] | None:
        messages = _all_waiting(ws, "huge-", 4)
        return messages if messages and all("cpu" in m for m in messages) else None

    messages = wait_for(settled, timeout=30,
                        what="PodScheduled=False naming cpu on every member of the huge gang")
    print(f"\n[reason] {messages[0]}")
    message = messages[0]
    assert FIGURES.search(message), message
    assert len(set(messages)) == 1, "every member says the same thing"

    def said() -> dict[str, Any] | None:
        condition = _condition(ws.podgroup_obj("huge"))
        return condition if "cpu" in condition.get("message", "") else None

    condition = wait_for(said, timeout=20, what="the PodGroup's condition naming cpu")
    assert condition["status"] == "False" and condition["reason"] == "Unschedulable", condition
    assert FIGURES.search(condition["message"]), condition
    assert ws.podgroup_obj("huge")["status"]["phase"] in ("Pending", "Inqueue")
    wait_for(lambda: any(e["reason"] == "FailedScheduling" and "cpu" in e["message"]
                         for e in ws.events("huge-0")),
             timeout=20, what="a FailedScheduling Event naming cpu")

    # It holds nothing: a small gang after it is placed at once.
    ws.create(ws.podgroup("small", min_member=2))
    ws.create(*(ws.pod(f"small-{i}", cpu="1", group="small") for i in range(2)))
    wait_for(lambda: len(bound(_members(ws, "small-"))) == 2, timeout=30,
             what="the small gang to bind beside the huge one")
    assert bound(_members(ws, "huge-")) == []


# ---- PodGroups that come late, go away or are broken -------------------------------------------


@pytest.mark.usefixtures("six_cpus")
def test_podgroup_created_after_its_pods_still_works(
    ws: Workspace, gangsched: SchedulerProcess
) -> None:
    ws.create(*(ws.pod(f"late-{i}", cpu="1", group="late") for i in range(3)))
    # No node would let them run: autoscalers must not add any for them.
    messages = wait_for(lambda: _all_waiting(ws, "late-", 3, "GangWaiting"), timeout=30,
                        what="the pods to say their PodGroup does not exist")
    assert all("PodGroup" in m and "late" in m and "exist" in m for m in messages), messages
    assert bound(_members(ws, "late-")) == []

    ws.create(ws.podgroup("late", min_member=3))
    wait_for(lambda: len(bound(_members(ws, "late-"))) == 3, timeout=30,
             what="the gang to bind once its PodGroup exists")
    wait_for(lambda: ws.podgroup_obj("late").get("status", {}).get("phase") == "Running",
             timeout=20, what="the PodGroup to be Running")


@pytest.mark.usefixtures("six_cpus")
def test_deleting_podgroups_and_pods_midway_loses_nothing(
    ws: Workspace, gangsched: SchedulerProcess
) -> None:
    # A Spark-like job holds 3 of its 4 CPUs in reserve; a 3-CPU gang cannot pass it.
    ws.create(ws.podgroup("held", min_member=1, min_resources={"cpu": "4"}))
    ws.create(ws.pod("held-driver", cpu="1", group="held"))
    wait_for(lambda: phase_of(ws.pods()["held-driver"]) == "Running", timeout=30,
             what="the driver to run")
    ws.create(ws.podgroup("mid", min_member=3))
    ws.create(*(ws.pod(f"mid-{i}", cpu="1", group="mid") for i in range(3)))
    # A gang seen before all its pods exist first says it is short of members: the
    # settled reason is the reservation.
    wait_for(lambda: all("reserved" in m for m in _all_waiting(ws, "mid-", 3) or [""]),
             timeout=30, what="the gang to wait behind the reservation")

    # Deleting the PodGroup gives its reservation back; its running pod runs on.
    ws.delete_podgroup("held")
    wait_for(lambda: len(bound(_members(ws, "mid-"))) == 3, timeout=30,
             what="the gang to take the room the deleted PodGroup had reserved")
    assert phase_of(ws.pods()["held-driver"]) == "Running"

    # Pods and PodGroups deleted while a gang is being placed or bound.
    ws.create(ws.podgroup("racing", min_member=2))
    ws.create(*(ws.pod(f"racing-{i}", cpu="1", group="racing") for i in range(2)))
    ws.delete_pod("racing-0")
    ws.delete_podgroup("racing")
    ws.delete_podgroup("mid")
    ws.delete_pod("mid-0")
    ws.delete_pod("held-driver")
    assert all(live(p) for p in _members(ws, "mid-")), "a deleted PodGroup's pods run on"

    # Nothing leaked: once the rest goes, a gang needing every CPU binds whole.
    for name in ("mid-1", "mid-2", "racing-1"):
        ws.delete_pod(name)
    wait_for(lambda: set(ws.pods()) == set(), timeout=30, what="the deleted pods to go")
    ws.create(ws.podgroup("after", min_member=6))
    ws.create(*(ws.pod(f"after-{i}", cpu="1", group="after") for i in range(6)))
    wait_for(lambda: len(bound(_members(ws, "after-"))) == 6, timeout=30,
             what="a gang needing all six CPUs to bind: no room leaked in assumptions "
                  "or reservations")
    _assert_scheduler_healthy(gangsched)


@pytest.mark.usefixtures("six_cpus")
def test_invalid_foreign_podgroup_is_reported_and_stops_no_other_gang(
    ws: Workspace, gangsched: SchedulerProcess
) -> None:
    # Volcano's open schema lets "lots" through; only gangsched can say it is wrong.
    ws.create(ws.podgroup("bad", min_member=1, min_resources={"cpu": "lots"}, flavor="volcano"))
    ws.create(ws.pod("bad-0", cpu="1", group="bad", marker="volcano"))
    ws.create(ws.podgroup("good", min_member=2))
    ws.create(*(ws.pod(f"good-{i}", cpu="1", group="good") for i in range(2)))

    wait_for(lambda: len(bound(_members(ws, "good-"))) == 2, timeout=30,
             what="the valid gang to bind beside the invalid PodGroup")
    events = wait_for(lambda: [e for e in ws.events("bad") if e["reason"] == "InvalidSpec"],
                      timeout=20, what="an InvalidSpec Event on the Volcano PodGroup")
    assert "minResources" in events[0]["message"] and "lots" in events[0]["message"], events
    status = wait_for(lambda: ws.podgroup_obj("bad", "volcano").get("status"), timeout=20,
                      what="the Volcano PodGroup's status")
    assert status["phase"] == "Pending", status
    assert any("lots" in c.get("message", "") for c in status.get("conditions") or []), status
    message = wait_for(lambda: _unschedulable(ws.pods()["bad-0"], "GangWaiting"), timeout=20,
                       what="its pod to say why it waits")
    assert "invalid" in message and "lots" in message, message
    assert node_of(ws.pods()["bad-0"]) is None

    # Said once, not once per cycle: later cycles (another gang) add no Event.
    ws.create(ws.pod("later", cpu="1"))
    wait_for(lambda: node_of(ws.pods()["later"]), timeout=30, what="a later pod to bind")
    time.sleep(1)
    assert len([e for e in ws.events("bad") if e["reason"] == "InvalidSpec"]) == 1
    _assert_scheduler_healthy(gangsched)


# ---- timeouts ---------------------------------------------------------------------------


@pytest.mark.usefixtures("six_cpus")
def test_schedule_timeout_marks_unschedulable_and_the_gang_keeps_waiting(
    ws: Workspace, gangsched: SchedulerProcess
) -> None:
    ws.create(*(ws.pod(f"blocker-{i}", cpu="2", scheduler="kube") for i in range(2)))
    wait_for(lambda: all(phase_of(p) == "Running" for p in _members(ws, "blocker-"))
             and len(_members(ws, "blocker-")) == 2, timeout=30, what="the blockers to run")
    ws.create(ws.podgroup("slow", min_member=4, timeout_seconds=2))
    ws.create(*(ws.pod(f"slow-{i}", cpu="1", group="slow") for i in range(4)))

    group = wait_for(
        lambda: (g := ws.podgroup_obj("slow")).get("status", {}).get("phase") == "Unschedulable"
        and g, timeout=30, what="the PodGroup to turn Unschedulable after its timeout")
    condition = _condition(group)
    assert condition["reason"] == "ScheduleTimeout", condition
    assert "2s" in condition["message"] and "cpu" in condition["message"], condition
    # The Event follows the status: Events rank below status writes, and a group's
    # warnings are paced (a new one at most every EVENT_CHANGE_GAP_S).
    wait_for(lambda: any(e["reason"] == "ScheduleTimeout" for e in ws.events("slow")),
             timeout=20, what="a ScheduleTimeout Event on the PodGroup")
    assert bound(_members(ws, "slow-")) == []

    ws.delete_pod("blocker-0")
    wait_for(lambda: len(bound(_members(ws, "slow-"))) == 4, timeout=30,
             what="the gang to bind once room appears")
    wait_for(lambda: ws.podgroup_obj("slow").get("status", {}).get("phase") == "Running",
             timeout=20, what="the PodGroup to be Running")


# ---- the process --------------------------------------------------------------------------


def test_gangsched_stops_within_seconds_of_sigterm(
    ws: Workspace, cluster: LocalCluster, tmp_path: Path
) -> None:
    only_nodes(cluster, 3, NodeShape(cpu="2", memory="8Gi"))
    # A scheduler name and namespace of its own, so it never competes with the session's.
    name = "gang-sigterm"
    own = start_gangsched(cluster, tmp_path / "gangsched.log", f"--scheduler-name={name}",
                          f"--namespace={ws.name}")
    try:
        ws.create(ws.pod("proof", cpu="1", scheduler=name))
        wait_for(lambda: node_of(ws.pods()["proof"]), timeout=30, what="it to schedule")
        # Busy: a gang waiting for room it will never get, so cycles keep going.
        ws.create(*(ws.pod(f"waiting-{i}", cpu="2", scheduler=name) for i in range(4)))
        wait_for(lambda: sum(1 for p in _members(ws, "waiting-") if _unschedulable(p)) >= 1,
                 timeout=30, what="a pod to wait")
        with timed("sigterm-to-exit", "gangsched", outcome="exit code 0"):
            started = time.monotonic()
            own.proc.send_signal(signal.SIGTERM)
            code = own.proc.wait(timeout=15)
            stopped_in = time.monotonic() - started
    finally:
        if own.proc.poll() is None:
            own.proc.kill()
            own.proc.wait()
    assert code == 0, own.logs()[-3000:]
    assert stopped_in < 5.0, f"took {stopped_in:.1f}s to stop"
    assert "stopped" in own.logs()
