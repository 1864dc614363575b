"""One gangsched serves several scheduler names, so it can stand in for Volcano or coscheduling.

mpi-operator in Volcano mode writes ``schedulerName: volcano`` on every pod it
creates; giving gangsched that name too is all the change a user needs. A
scheduler running beside it with the same PodGroup API keeps the groups only
its pods name.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import pykube
import pytest

from devcluster.controlplane import LocalCluster, NodeShape
from tests.e2e.conftest import start_gangsched, stop_gangsched
from tests.e2e.scenario import only_nodes
from tests.e2e.test_explain_status import run_cli
from tests.e2e.test_helm import CHART
from tests.e2e.workspace import PODGROUP_API, Workspace, bound, node_of, wait_for


def _one_gang_per_name(ws: Workspace, names: tuple[str, ...]) -> None:
    for name in names:
        ws.create(ws.podgroup(f"{name}-job", min_member=2, flavor="volcano"))
        ws.create(*(ws.pod(f"{name}-job-{i}", cpu="1", scheduler=name, group=f"{name}-job",
                           marker="volcano") for i in range(2)))
    wait_for(lambda: len(bound(ws.pods().values())) == 2 * len(names), timeout=30,
             what=f"the gangs of every scheduler name {names} to bind")


@pytest.mark.parametrize("how", ["flags", "environment"])
def test_every_scheduler_name_given_is_served(
    ws: Workspace, cluster: LocalCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    how: str,
) -> None:
    only_nodes(cluster, 3, NodeShape(cpu="2", memory="8Gi"))
    names = ("gang-one", "gang-two")  # not volcano: the session's gangsched serves that
    if how == "flags":
        extra = tuple(f"--scheduler-name={name}" for name in names)
    else:
        monkeypatch.setenv("GANGSCHED_SCHEDULER_NAME", " ".join(names))
        extra = ()
    own = start_gangsched(cluster, tmp_path / "gangsched.log", f"--namespace={ws.name}", *extra)
    try:
        _one_gang_per_name(ws, names)
        assert "gang-one" in own.logs() and "gang-two" in own.logs()
    finally:
        assert stop_gangsched(own) == 0, own.logs()[-3000:]


def test_a_scheduler_given_namespaces_leaves_other_namespaces_groups_alone(
    ws: Workspace, cluster: LocalCluster, tmp_path: Path
) -> None:
    only_nodes(cluster, 3, NodeShape(cpu="2", memory="8Gi"))
    other = Workspace(cluster)
    try:
        # A group elsewhere that a scheduler acting on it would refuse admission,
        # and say so in its log.
        other.create(other.podgroup("elsewhere", min_member=1, min_resources={"cpu": "100"}))
        other.create(other.pod("elsewhere-0", cpu="1", scheduler="gang-scoped",
                               group="elsewhere"))
        own = start_gangsched(cluster, tmp_path / "gangsched.log", f"--namespace={ws.name}",
                              "--scheduler-name=gang-scoped")
        try:
            ws.create(ws.podgroup("here", min_member=2))
            ws.create(*(ws.pod(f"here-{i}", cpu="1", scheduler="gang-scoped", group="here")
                        for i in range(2)))
            wait_for(lambda: len(bound(ws.pods().values())) == 2, timeout=30,
                     what="the gang of its own namespace to bind")
            wait_for(lambda: "cycle=" in own.logs(), timeout=10, what="a cycle")
        finally:
            assert stop_gangsched(own) == 0, own.logs()[-3000:]
        assert other.name not in own.logs(), own.logs()[-3000:]
        assert bound(other.pods().values()) == []
    finally:
        other.close()


def test_chart_takes_a_list_of_scheduler_names(cluster: LocalCluster) -> None:
    rendered = subprocess.run(
        [str(cluster.bin_dir / "helm"), "template", "gangsched", str(CHART),
         "--set", "schedulerNames={gang,volcano}"],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout
    assert "- --scheduler-name=gang\n" in rendered
    assert "- --scheduler-name=volcano\n" in rendered


def _synced(ws: Workspace, name: str) -> None:
    """A gang of ours created now binds and gets its status: the scheduler has seen
    everything created before it, and run a cycle over it."""
    ws.create(ws.podgroup(name, min_member=1))
    ws.create(ws.pod(f"{name}-0", cpu="100m", group=name))
    wait_for(lambda: node_of(ws.pods()[f"{name}-0"]) and
             (ws.podgroup_obj(name).get("status") or {}).get("phase") is not None,
             timeout=30, what=f"{name} to bind and get its status")
    time.sleep(1)  # the writes of that cycle for other groups, had it any


@pytest.mark.usefixtures("gangsched")
def test_a_podgroup_only_another_schedulers_pods_name_is_left_to_it(
    ws: Workspace, cluster: LocalCluster
) -> None:
    """scheduler-plugins' coscheduling beside gangsched, on the same PodGroup API: its
    group gets no status and no Event from gangsched, until a pod of ours names it."""
    only_nodes(cluster, 2, NodeShape(cpu="2", memory="8Gi"))
    ws.create(*(ws.pod(f"theirs-{i}", cpu="1", scheduler="scheduler-plugins-scheduler",
                       group="shared", marker="coscheduling") for i in range(2)))
    _synced(ws, "sync-pods")  # their pods are in gangsched's mirror before their group
    ws.create(ws.podgroup("shared", min_member=1, flavor="coscheduling"))
    cls = pykube.object_factory(ws.api, PODGROUP_API["coscheduling"], "PodGroup")
    written: dict[str, Any] = {"phase": "Scheduling", "scheduled": 0, "occupiedBy": "them"}
    cls.objects(ws.api, namespace=ws.name).get(name="shared").patch(
        {"status": written}, subresource="status")
    _synced(ws, "sync-group")
    assert ws.podgroup_obj("shared", "coscheduling").get("status") == written
    assert ws.events("shared") == []
    assert bound(p for n, p in ws.pods().items() if n.startswith("theirs")) == []
    told = run_cli("explain", "podgroup/shared", "-n", ws.name,
                   kubeconfig=cluster.kubeconfig, expect=1)
    assert f"PodGroup {ws.name}/shared is another scheduler's" in told.stderr, told.stderr

    ws.create(ws.pod("ours-0", cpu="1", group="shared", marker="coscheduling"))
    wait_for(lambda: node_of(ws.pods()["ours-0"]), timeout=30, what="our pod of it to bind")
    status = wait_for(
        lambda: (s if (s := ws.podgroup_obj("shared", "coscheduling").get("status") or {})
                 .get("scheduled") == 1 else None),
        timeout=20, what="gangsched to count its pod in the group's status")
    assert status["phase"] != "Scheduling", status
