"""Kueue 0.19 admits, gangsched places: no deadlock between the two.

Kueue (out of cluster, :mod:`tests.e2e.kueue`) decides which Job may start from its
ClusterQueue's quota; gangsched places the Job's pods all at once. A PodGroup of a Job
Kueue keeps suspended holds no room in gangsched, so the Job Kueue admits is never
stuck behind one Kueue will not start.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from functools import partial
from typing import Any

import pykube
import pytest

from devcluster.controlplane import LocalCluster, NodeShape
from tests.e2e.conftest import SchedulerProcess, start_gangsched, stop_gangsched
from tests.e2e.kueue import flavor_and_queues, kueue
from tests.e2e.scenario import only_nodes
from tests.e2e.test_explain_status import as_json
from tests.e2e.workspace import Workspace, wait_for

SCHEDULER = "gang-with-kueue"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


@pytest.fixture(scope="module")
def partnered(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory
              ) -> Iterator[SchedulerProcess]:
    """Kueue, and a gangsched started after Kueue's API is served (it reads Kueue's
    Workloads only where the API server serves them when it starts)."""
    workdir = tmp_path_factory.mktemp("kueue")
    with kueue(cluster, workdir):
        running = start_gangsched(cluster, workdir / "gangsched.log",
                                  f"--scheduler-name={SCHEDULER}")
        yield running
        assert stop_gangsched(running) == 0


def job(ws: Workspace, name: str, *, pods: int, cpu: str, run_for: str) -> dict[str, Any]:
    """A Job Kueue admits (suspended, with its queue's label), whose pods are gangsched's
    and in PodGroup ``name``."""
    template = ws.pod("unused", cpu=cpu, scheduler=SCHEDULER, group=name, run_for=run_for)
    template["spec"]["restartPolicy"] = "Never"
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": ws.name, "labels": {QUEUE_LABEL: "jobs"}},
        "spec": {"parallelism": pods, "completions": pods, "suspend": True,
                 "template": {"metadata": template["metadata"] | {"name": None},
                              "spec": template["spec"]}},
    }


def owned_podgroup(ws: Workspace, name: str, *, pods: int, cpu: int) -> dict[str, Any]:
    """The Job's PodGroup, owned by the Job as an operator makes it."""
    uid = pykube.Job.objects(ws.api, namespace=ws.name).get(name=name).obj["metadata"]["uid"]
    group = ws.podgroup(name, min_member=pods, min_resources={"cpu": str(pods * cpu)})
    group["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": uid}]
    return group


def complete(ws: Workspace, name: str) -> bool:
    found = pykube.Job.objects(ws.api, namespace=ws.name).get(name=name).obj
    return any(c["type"] == "Complete" and c["status"] == "True"
               for c in (found.get("status") or {}).get("conditions") or [])


def explained(cluster: LocalCluster, ws: Workspace, group: str) -> Any:
    return as_json(cluster, "explain", f"podgroup/{group}", "-n", ws.name,
                   f"--scheduler-name={SCHEDULER}", expect=3)


def test_jobs_kueue_keeps_suspended_hold_no_room_and_all_three_finish(
    cluster: LocalCluster, ws: Workspace, partnered: SchedulerProcess
) -> None:
    """The reversed order: gangsched sees the PodGroups of job-2 and job-1 first, Kueue
    admits job-0 first. Quota and nodes fit one job at a time."""
    only_nodes(cluster, 3, NodeShape(cpu="2", memory="8Gi"))
    flavor_and_queues(cluster, ws.name, {"cpu": "3"})
    for i in range(3):
        ws.create(job(ws, f"job-{i}", pods=3, cpu="1", run_for="2s"))
        time.sleep(1.1)  # Kueue orders by creation time, to the second
    for i in (2, 1):
        ws.create(owned_podgroup(ws, f"job-{i}", pods=3, cpu=1))
    answer = wait_for(lambda: (a := explained(cluster, ws, "job-1"))["code"]
                      == "SuspendedByKueue" and a, timeout=30,
                      what="job-1 to wait for Kueue")
    assert f"{ws.name}/job-1" in answer["reason"], answer
    ws.create(owned_podgroup(ws, "job-0", pods=3, cpu=1))
    for name in ("job-0", "job-1", "job-2"):
        wait_for(partial(complete, ws, name), timeout=90, what=f"{name} to complete")


def test_a_job_kueue_admits_that_no_node_fits_waits_in_gangsched_and_the_next_runs(
    cluster: LocalCluster, ws: Workspace, partnered: SchedulerProcess
) -> None:
    """Fragmentation: Kueue's quota (6 CPU) holds a job of two 2-CPU pods, but no node has
    2 CPU (four nodes of 1.5 CPU). It waits in gangsched, saying why, and the next job
    Kueue admits runs beside it."""
    only_nodes(cluster, 4, NodeShape(cpu="1500m", memory="8Gi"))
    flavor_and_queues(cluster, ws.name, {"cpu": "6"})
    ws.create(job(ws, "wide", pods=2, cpu="2", run_for="2s"))
    ws.create(owned_podgroup(ws, "wide", pods=2, cpu=2))
    answer = wait_for(lambda: (a := explained(cluster, ws, "wide"))["code"] not in (
        None, "SuspendedByKueue") and a, timeout=30, what="the admitted job to wait for room")
    assert answer["code"] == "DoesNotFit", answer
    ws.create(job(ws, "narrow", pods=2, cpu="1", run_for="2s"))
    ws.create(owned_podgroup(ws, "narrow", pods=2, cpu=1))
    wait_for(lambda: complete(ws, "narrow"), timeout=90, what="the narrow job to complete")


def kueue_pod(ws: Workspace, name: str, group: str, size: int) -> dict[str, Any]:
    """A pod of Kueue's plain-pod group ``group``, as Kueue's webhook leaves it: labelled
    as managed, gated until Kueue admits the group."""
    manifest = ws.pod(name, cpu="1", scheduler=SCHEDULER, group=group, run_for="10s",
                      labels={"kueue.x-k8s.io/managed": "true", QUEUE_LABEL: "jobs",
                              "kueue.x-k8s.io/pod-group-name": group},
                      annotations={"kueue.x-k8s.io/pod-group-total-count": str(size)})
    manifest["spec"]["restartPolicy"] = "Never"
    manifest["spec"]["schedulingGates"] = [{"name": "kueue.x-k8s.io/admission"}]
    return manifest


def test_kueues_pod_groups_wait_gated_by_kueue_and_run_whole_in_turn(
    cluster: LocalCluster, ws: Workspace, partnered: SchedulerProcess
) -> None:
    """Two pod groups of three, quota for one: the second waits behind Kueue's gate,
    holding nothing, and runs whole once the first is done."""
    only_nodes(cluster, 3, NodeShape(cpu="2", memory="8Gi"))
    flavor_and_queues(cluster, ws.name, {"cpu": "3"})
    for group in ("first", "second"):
        ws.create(ws.podgroup(group, min_member=3))
        ws.create(*(kueue_pod(ws, f"{group}-{i}", group, 3) for i in range(3)))
        time.sleep(1.1)  # Kueue orders by creation time, to the second
    answer = wait_for(lambda: (a := explained(cluster, ws, "second"))["code"]
                      == "GatedByKueue" and a, timeout=30,
                      what="the second group to wait behind Kueue's gate")

    def succeeded(group: str) -> bool:
        pods = [p for name, p in ws.pods().items() if name.startswith(f"{group}-")]
        return len(pods) == 3 and all(p["status"].get("phase") == "Succeeded" for p in pods)

    wait_for(lambda: succeeded("first"), timeout=90, what="the first group to finish")
    wait_for(lambda: succeeded("second"), timeout=90, what="the second group to finish")
    assert answer["verdict"] == "waiting", answer
