"""What gangsched writes to the API: whose it is, which object it is for, and that it is whole."""

from __future__ import annotations

from typing import Any

import pykube
import pytest

from devcluster.controlplane import LocalCluster, NodeShape
from tests.e2e.conftest import SchedulerProcess
from tests.e2e.scenario import only_nodes
from tests.e2e.test_operators import contradictions
from tests.e2e.workspace import Workspace, bound, node_of, wait_for


@pytest.fixture
def six_cpus(cluster: LocalCluster) -> None:
    only_nodes(cluster, 3, NodeShape(cpu="2", memory="8Gi"))


def two_cpus_left(ws: Workspace) -> None:
    """kube-scheduler's pods take four of the six CPUs, so a gang of two 2-CPU pods waits."""
    ws.create(*(ws.pod(f"blocker-{i}", cpu="2", scheduler="kube") for i in range(2)))
    wait_for(lambda: len(bound(p for n, p in ws.pods().items() if n.startswith("blocker")))
             == 2, timeout=30, what="the blockers to run")


def managers(obj: dict[str, Any]) -> set[tuple[str, str]]:
    """(manager, subresource) of every managedFields entry."""
    return {(str(e.get("manager")), str(e.get("subresource", "")))
            for e in obj["metadata"].get("managedFields") or []}


@pytest.mark.usefixtures("six_cpus")
def test_every_write_carries_the_field_manager_gangsched(
    ws: Workspace, gangsched: SchedulerProcess
) -> None:
    """Pod conditions, PodGroup status and Events say they are gangsched's, not a library's."""
    two_cpus_left(ws)
    ws.create(ws.podgroup("pair", min_member=2))
    ws.create(*(ws.pod(f"pair-{i}", cpu="2", group="pair") for i in range(2)))
    wait_for(lambda: all(("gangsched", "status") in managers(ws.pods()[f"pair-{i}"])
                         for i in range(2)),
             timeout=20, what="the waiting pods' conditions, written by gangsched")
    ws.delete_pod("blocker-0")
    wait_for(lambda: all(node_of(ws.pods()[f"pair-{i}"]) for i in range(2)), timeout=20,
             what="the gang to bind")
    wait_for(lambda: ws.podgroup_obj("pair").get("status", {}).get("phase") == "Running",
             timeout=20, what="the PodGroup to be Running")

    group = ws.podgroup_obj("pair")
    assert ("gangsched", "status") in managers(group), managers(group)
    events = [e for e in ws.events("pair-0") + ws.events("pair")
              if e.get("reportingComponent") == "gangsched"]
    assert events and all(("gangsched", "") in managers(e) for e in events), events
    written = [managers(o) for o in (group, *ws.pods().values(), *events)]
    foreign = {m for entries in written for m, _ in entries if m.startswith("OpenAPI")}
    assert not foreign, f"writes under the client library's name: {foreign}"


@pytest.mark.usefixtures("six_cpus")
def test_a_volcano_podgroup_that_runs_keeps_no_unschedulable_condition(
    ws: Workspace, gangsched: SchedulerProcess
) -> None:
    two_cpus_left(ws)
    ws.create(ws.podgroup("vc", min_member=2, flavor="volcano"))
    ws.create(*(ws.pod(f"vc-{i}", cpu="2", group="vc", marker="volcano") for i in range(2)))
    waiting = wait_for(
        lambda: [c for c in ws.podgroup_obj("vc", "volcano").get("status", {}).get("conditions")
                 or [] if c.get("type") == "Unschedulable"],
        timeout=20, what="the Volcano PodGroup to say why it waits")
    assert "cpu" in waiting[0]["message"], waiting

    ws.delete_pod("blocker-0")
    status = wait_for(
        lambda: (s := ws.podgroup_obj("vc", "volcano").get("status", {})).get("phase")
        == "Running" and s, timeout=20, what="the Volcano PodGroup to run")
    assert contradictions(status) == [], status
    assert [c["type"] for c in status["conditions"]] == ["Scheduled"], status


@pytest.mark.usefixtures("six_cpus")
def test_a_podgroup_created_again_under_the_same_name_gets_its_own_status(
    ws: Workspace, gangsched: SchedulerProcess
) -> None:
    """A resubmitted job: its operator waits for the new PodGroup's Inqueue before any pod."""

    def run_job() -> str:
        ws.create(ws.podgroup("job", min_member=2, min_resources={"cpu": "2"}, flavor="volcano"))
        group = wait_for(lambda: (g := ws.podgroup_obj("job", "volcano")).get("status", {})
                         .get("phase") == "Inqueue" and g, timeout=20,
                         what="the PodGroup to be admitted (Inqueue) before it has pods")
        ws.create(*(ws.pod(f"job-{i}", cpu="1", group="job", marker="volcano")
                    for i in range(2)))
        wait_for(lambda: ws.podgroup_obj("job", "volcano").get("status", {}).get("phase")
                 == "Running", timeout=20, what="the job to run")
        return str(group["metadata"]["uid"])

    first = run_job()
    # Deleted as a foreground deletion deletes it: its pods first, then the group.
    for i in range(2):
        ws.delete_pod(f"job-{i}")
    wait_for(lambda: not ws.pods(), timeout=20, what="the pods to go")
    wait_for(lambda: ws.podgroup_obj("job", "volcano").get("status", {}).get("running") == 0,
             timeout=20, what="the old group's status to count no pod")
    ws.delete_podgroup("job", "volcano")
    wait_for(lambda: not any(g["metadata"]["name"] == "job" for g in _volcano_groups(ws)),
             timeout=20, what="the old PodGroup to go")

    second = run_job()
    assert second != first


def _volcano_groups(ws: Workspace) -> list[dict[str, Any]]:
    cls = pykube.object_factory(ws.api, "scheduling.volcano.sh/v1beta1", "PodGroup")
    return [g.obj for g in cls.objects(ws.api, namespace=ws.name)]
