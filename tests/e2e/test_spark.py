"""Scenario 1: six Spark jobs on six CPUs.

Each job is a driver (1 CPU) that, once running, asks for two executors
(1 CPU each), and finishes only after both executors have. The test plays
Spark: it creates a job's executors when its driver runs and marks the driver
Succeeded when both executors have. Under kube-scheduler the six drivers take
all six CPUs and no executor ever fits; under gangsched the PodGroup declares
the whole job up front (``minMember: 1``, ``minResources: cpu 3``), so two
jobs run at a time and all six finish.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from devcluster.controlplane import LocalCluster, NodeShape
from tests.e2e.conftest import SchedulerProcess
from tests.e2e.scenario import live, only_nodes, overcommitted, timed
from tests.e2e.workspace import Workspace, node_of, phase_of, scheduled_condition, wait_for

JOBS = 6
EXECUTORS = 2
KUBE_OBSERVE_S = 10.0


@pytest.fixture
def six_cpus(cluster: LocalCluster) -> None:
    only_nodes(cluster, 3, NodeShape(cpu="2", memory="8Gi"))


def driver(job: int) -> str:
    return f"spark-{job}-driver"


def executor(job: int, i: int) -> str:
    return f"spark-{job}-exec-{i}"


@dataclass
class Spark:
    """The test playing spark-submit and six Spark drivers on one workspace."""

    ws: Workspace
    scheduler: str
    flavor: str = "gangsched"
    executors_made: set[int] = field(default_factory=set)
    finished: set[int] = field(default_factory=set)
    most_jobs_at_once: int = 0

    native_min_count: int = 1

    def _pod(self, name: str, job: int, **extra: Any) -> dict[str, Any]:
        grouped = self.scheduler == "gang" or self.flavor == "native"
        return self.ws.pod(name, cpu="1", scheduler=self.scheduler,
                           group=f"spark-{job}" if grouped else None, marker=self.flavor,
                           labels={"spark-app": f"spark-{job}"}, **extra)

    def submit(self) -> None:
        for job in range(JOBS):
            if self.flavor == "native":
                self.ws.create(self.ws.native_podgroup(f"spark-{job}",
                                                       min_count=self.native_min_count))
            elif self.scheduler == "gang":
                self.ws.create(self.ws.podgroup(f"spark-{job}", min_member=1,
                                                min_resources={"cpu": "3"}, flavor=self.flavor))
            self.ws.create(self._pod(driver(job), job))

    def step(self) -> dict[str, dict[str, Any]]:
        """Act as Spark on what the cluster shows now; return the pods it saw."""
        pods = self.ws.pods()
        active = [job for job in range(JOBS) if driver(job) in pods and live(pods[driver(job)])]
        self.most_jobs_at_once = max(self.most_jobs_at_once, len(active))
        for job in active:
            if phase_of(pods[driver(job)]) != "Running":
                continue
            if job not in self.executors_made:
                self.ws.create(*(self._pod(executor(job, i), job, run_for="3s")
                                 for i in range(EXECUTORS)))
                self.executors_made.add(job)
            elif all(phase_of(pods.get(executor(job, i), {})) == "Succeeded"
                     for i in range(EXECUTORS)):
                self.ws.finish_pod(driver(job))
                self.finished.add(job)
        return pods


@pytest.mark.parametrize(("flavor", "label"), [
    (None, "kube-scheduler"),
    # kube-scheduler 1.37's native PodGroup has no minResources: a group of the
    # driver (minCount 1) is all Spark can declare up front, and it deadlocks alike.
    ("native", "kube-scheduler 1.37 native gang (minCount 1)"),
])
@pytest.mark.usefixtures("six_cpus")
def test_kube_scheduler_starts_every_driver_and_no_job_finishes(
    ws: Workspace, cluster: LocalCluster, flavor: str | None, label: str
) -> None:
    spark = (Spark(ws, scheduler="kube") if flavor is None
             else Spark(ws, scheduler="kube", flavor=flavor, native_min_count=1))
    with timed("spark-6-jobs-6-cpus", label,
               outcome=f"deadlock: 0 of {JOBS} jobs finish in {KUBE_OBSERVE_S:.0f}s") as record:
        started = time.monotonic()
        spark.submit()
        wait_for(lambda: (spark.step(), len(spark.executors_made) == JOBS)[1], timeout=60,
                 what="all six drivers to run and ask for their executors")
        record["deadlocked_after_s"] = round(time.monotonic() - started, 2)
        deadline = time.monotonic() + KUBE_OBSERVE_S
        while time.monotonic() < deadline:
            pods = spark.step()
            executors = [p for name, p in pods.items() if "-exec-" in name]
            assert len(executors) == JOBS * EXECUTORS
            assert [node_of(p) for p in executors if node_of(p)] == [], \
                "an executor found room although six drivers hold all six CPUs"
            time.sleep(0.5)

    pods = ws.pods()
    assert spark.finished == set(), "no Spark job can finish without its executors"
    assert all(phase_of(pods[driver(j)]) == "Running" for j in range(JOBS))
    assert spark.most_jobs_at_once == JOBS
    reason = scheduled_condition(pods[executor(0, 0)])
    assert reason is not None and reason["reason"] == "Unschedulable", reason
    assert overcommitted(cluster, pods.values()) == {}


@pytest.mark.usefixtures("six_cpus")
def test_native_gang_of_the_whole_job_never_starts_a_driver(
    ws: Workspace, cluster: LocalCluster
) -> None:
    """The other native choice, ``minCount: 3``, waits for pods Spark makes only once
    the driver runs: the gang never forms and no job starts."""
    spark = Spark(ws, scheduler="kube", flavor="native", native_min_count=1 + EXECUTORS)
    with timed("spark-6-jobs-6-cpus", "kube-scheduler 1.37 native gang (minCount 3)",
               outcome=f"no driver starts: 0 of {JOBS} jobs finish in "
                       f"{KUBE_OBSERVE_S:.0f}s"):
        spark.submit()
        deadline = time.monotonic() + KUBE_OBSERVE_S
        while time.monotonic() < deadline:
            spark.step()
            time.sleep(0.5)
    pods = ws.pods()
    assert spark.finished == set() and spark.most_jobs_at_once == 0
    assert [n for n, p in pods.items() if node_of(p)] == [], "a gang of 3 with one pod formed"


@pytest.mark.parametrize("flavor", ["gangsched", "volcano"])
@pytest.mark.usefixtures("six_cpus")
def test_gangsched_runs_two_jobs_at_a_time_and_all_finish(
    ws: Workspace, cluster: LocalCluster, gangsched: SchedulerProcess, flavor: str
) -> None:
    spark = Spark(ws, scheduler="gang", flavor=flavor)
    worst: dict[str, Any] = {}

    def all_finished() -> bool:
        pods = spark.step()
        worst.update(overcommitted(cluster, pods.values()))
        return len(spark.finished) == JOBS

    with timed("spark-6-jobs-6-cpus", f"gangsched ({flavor} PodGroup)",
               outcome=f"{JOBS} of {JOBS} jobs finish"):
        spark.submit()
        wait_for(all_finished, timeout=120, interval=0.1,
                 what=f"all six Spark jobs to finish (finished: {sorted(spark.finished)})")

    assert spark.most_jobs_at_once == 2, (
        f"{spark.most_jobs_at_once} jobs ran at once; six CPUs hold two 3-CPU jobs"
    )
    assert worst == {}, f"nodes overcommitted: {worst}"
    pods = ws.pods()
    assert all(phase_of(p) == "Succeeded" for p in pods.values())
    assert len(pods) == JOBS * (1 + EXECUTORS)
    done = ("Succeeded", "Completed")
    wait_for(lambda: all(ws.podgroup_obj(f"spark-{j}", flavor).get("status", {}).get("phase")
                         in done for j in range(JOBS)),
             timeout=20, what="every Spark PodGroup to say it finished")

    # Finished jobs hold nothing once their pods are cleaned up, and stay finished.
    for name in pods:
        ws.delete_pod(name)
    wait_for(lambda: not ws.pods(), timeout=30, what="the finished pods to go")
    ws.create(ws.podgroup("after", min_member=6))
    ws.create(*(ws.pod(f"after-{i}", cpu="1", group="after") for i in range(6)))
    wait_for(lambda: all(node_of(p) for p in ws.pods().values()), timeout=30,
             what="a gang needing all six CPUs to bind after the Spark jobs")
    assert all(ws.podgroup_obj(f"spark-{j}", flavor)["status"]["phase"] in done
               for j in range(JOBS))
