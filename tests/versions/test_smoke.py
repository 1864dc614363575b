"""What must work on every Kubernetes release gangsched supports: its CRDs, a gang of
each PodGroup flavour the release serves, devices where it serves them, the chart's
RBAC, and a plain word about what the release lacks. A check a release cannot take (it
does not serve the API) is skipped saying so: ``bench.versions`` records it as not
applicable."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

import pytest
import yaml

from devcluster import fakedriver
from devcluster.controlplane import REPO, ClusterOptions, LocalCluster, NodeShape, running_cluster
from gangsched.core.model.objects import PodKey
from gangsched.core.reasons import DevicesNotServed, render
from gangsched.discovery import DEVICES, NATIVE, NEEDED
from tests.e2e.conftest import SchedulerProcess, start_gangsched, stop_gangsched
from tests.e2e.deployed import refusals
from tests.e2e.workspace import Workspace, bound, wait_for
from tests.versions.conftest import served

pytestmark = pytest.mark.e2e
NODES = NodeShape(cpu="16", memory="64Gi")


def needs(cluster: LocalCluster, group_version: str, resource: str) -> None:
    if not served(cluster, group_version, resource):
        pytest.skip(f"not served: {group_version} {resource}")


@pytest.fixture(scope="module")
def nodes(cluster: LocalCluster) -> list[str]:
    return cluster.ensure_nodes(2, NODES)


def members(ws: Workspace, gang: str) -> list[str]:
    return [name for name, pod in ws.pods().items()
            if name.startswith(f"{gang}-") and bound([pod])]


def test_crds_apply_and_are_established(cluster: LocalCluster) -> None:
    names = [doc["metadata"]["name"] for path in sorted((REPO / "crds").glob("*.yaml"))
             for doc in yaml.safe_load_all(path.read_text())
             if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition"]
    assert names
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                    *(f"crd/{name}" for name in names))


@pytest.mark.parametrize("flavor", ["gangsched", "volcano", "coscheduling"])
@pytest.mark.usefixtures("nodes", "gangsched")
def test_a_podgroup_of_the_flavour_binds_whole(ws: Workspace, flavor: str) -> None:
    ws.create(ws.podgroup("train", min_member=3, flavor=flavor))
    ws.create(*(ws.pod(f"train-{i}", cpu="2", group="train", marker=flavor) for i in range(3)))
    wait_for(lambda: len(members(ws, "train")) == 3, timeout=30, what="the gang bound whole")


@pytest.mark.usefixtures("nodes", "gangsched")
def test_a_native_podgroup_binds_whole(cluster: LocalCluster, ws: Workspace) -> None:
    needs(cluster, NATIVE, "podgroups")
    ws.create(ws.native_podgroup("train", min_count=3))
    ws.create(*(ws.pod(f"train-{i}", cpu="2", group="train", marker="native")
                for i in range(3)))
    wait_for(lambda: len(members(ws, "train")) == 3, timeout=30, what="the gang bound whole")


@pytest.mark.usefixtures("gangsched")
def test_a_gang_claiming_fake_gpus_binds_with_its_devices(
    cluster: LocalCluster, nodes: list[str], ws: Workspace
) -> None:
    needs(cluster, DEVICES, "resourceclaims")
    fakedriver.publish(cluster.client, nodes)
    try:
        ws.create(fakedriver.claim_template(ws.name, "two", 2))
        ws.create(ws.podgroup("train", min_member=2))
        ws.create(*(fakedriver.claiming(ws.pod(f"train-{i}", group="train"), "two")
                    for i in range(2)))
        wait_for(lambda: len(members(ws, "train")) == 2, timeout=60,
                 what="the gang bound with its claims")
        claims = json.loads(cluster.kubectl("get", "resourceclaims", "-n", ws.name,
                                            "-o", "json").stdout)["items"]
        assert len(claims) == 2 and all(c["status"].get("allocation") for c in claims)
    finally:
        fakedriver.remove(cluster.client)


def test_gangsched_names_what_the_release_does_not_serve_once_and_stays_ready(
    cluster: LocalCluster, gangsched: SchedulerProcess, metrics_port: int
) -> None:
    absent = {api.group_version for api in NEEDED.values()
              if not served(cluster, api.group_version, api.resource)}
    logged = re.findall(r"api_not_served\s.*?api=(\S+)", gangsched.logs())
    assert sorted(logged) == sorted(absent), "one log line for each API not served"
    base = f"http://127.0.0.1:{metrics_port}"
    ready = wait_for(lambda: _get(f"{base}/readyz"), timeout=30, what="gangsched ready")
    assert {api for api in absent if f"{api} not served" in ready} == absent
    metrics = _get(f"{base}/metrics") or ""
    zero = set(re.findall(r'gangsched_api_served\{api="([^"]+)",resource="[^"]+"\} 0\.0',
                          metrics))
    assert zero == absent


def _get(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return str(answer.read().decode())
    except OSError:
        return None


def test_pods_with_claims_wait_saying_the_devices_api_is_off(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    """A release (or a cluster) without ``resource.k8s.io/v1`` that still keeps a pod's
    ResourceClaims: the pod waits, and says why."""
    if not served(cluster, DEVICES, "resourceclaims"):
        pytest.skip(f"not served: {DEVICES} (this release drops a pod's resourceClaims "
                    f"while DRA is off)")
    options = ClusterOptions(nodes=1, shape=NODES, without_apis=(DEVICES,))
    with running_cluster(tmp_path / "cluster", options) as bare:
        bare.apply_crds()
        running = start_gangsched(bare, tmp_path / "gangsched.log", "--scheduler-name=gang")
        try:
            ws = Workspace(bare)
            ws.create(ws.podgroup("train", min_member=1))
            pod = ws.pod("train-0", group="train")
            pod["spec"]["resourceClaims"] = [{"name": "gpus", "resourceClaimName": "two"}]
            ws.create(pod)
            reason = DevicesNotServed(PodKey(f"{ws.name}/train-0"), claims=1, api=DEVICES)
            wait_for(lambda: render(reason) in _scheduled_message(ws, "train-0"), timeout=30,
                     what="the pod's PodScheduled=False condition to name the API")
        finally:
            stop_gangsched(running)


def _scheduled_message(ws: Workspace, name: str) -> str:
    for condition in (ws.pods()[name].get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return str(condition.get("message", ""))
    return ""


def test_the_charts_rbac_was_enough(gangsched: SchedulerProcess) -> None:
    """Last: every request of the run above, made as the chart's ServiceAccount."""
    assert gangsched.proc.poll() is None, "gangsched is still running"
    assert not refusals(gangsched.logs()), "\n".join(refusals(gangsched.logs())[:20])
