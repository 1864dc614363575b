"""The local control plane behaves like a real cluster: nodes, binding, teardown."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pykube
import pytest

from devcluster.controlplane import REPO, LocalCluster, NodeShape


@pytest.fixture
def namespace(cluster: LocalCluster) -> Iterator[str]:
    name = f"harness-{uuid.uuid4().hex[:6]}"
    cluster.kubectl("create", "namespace", name)
    yield name
    cluster.kubectl("delete", "namespace", name, "--wait=false")


def test_fake_node_reports_requested_allocatable(cluster: LocalCluster) -> None:
    names = cluster.ensure_nodes(2, NodeShape(cpu="3", memory="5Gi", gpus=2), prefix="alloc")
    try:
        for name in names:
            node = pykube.Node.objects(cluster.client).get(name=name).obj
            allocatable = node["status"]["allocatable"]
            assert allocatable["cpu"] == "3"
            assert allocatable["memory"] == "5Gi"
            assert allocatable["nvidia.com/gpu"] == "2"
            ready = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
            assert ready and ready[0]["status"] == "True"
    finally:
        cluster.ensure_nodes(0, prefix="alloc")


def test_reshaping_replaces_nodes_of_another_shape(cluster: LocalCluster) -> None:
    cluster.ensure_nodes(3, NodeShape(cpu="2"), prefix="shape")
    cluster.ensure_nodes(1, NodeShape(cpu="8"), prefix="shape")
    try:
        nodes = [n for n in pykube.Node.objects(cluster.client) if n.name.startswith("shape-")]
        assert [n.name for n in nodes] == ["shape-0"]
        assert nodes[0].obj["status"]["allocatable"]["cpu"] == "8"
    finally:
        cluster.ensure_nodes(0, prefix="shape")


def test_pod_bound_through_binding_subresource_runs(cluster: LocalCluster, namespace: str) -> None:
    (node,) = cluster.ensure_nodes(1, NodeShape(cpu="2"), prefix="bind")
    try:
        pod = pykube.Pod(
            cluster.client,
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "p", "namespace": namespace},
                "spec": {
                    "schedulerName": "nobody",
                    "containers": [{"name": "c", "image": "busybox",
                                    "resources": {"requests": {"cpu": "1"}}}],
                },
            },
        )
        pod.create()
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": "p", "namespace": namespace},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        response = cluster.client.post(
            url="pods/p/binding", namespace=namespace, version="v1", json=binding
        )
        assert response.status_code == 201, response.text
        deadline = time.monotonic() + 20
        while True:
            pod.reload()
            if pod.obj.get("status", {}).get("phase") == "Running":
                break
            assert time.monotonic() < deadline, pod.obj.get("status")
            time.sleep(0.2)
        assert pod.obj["spec"]["nodeName"] == node
    finally:
        cluster.ensure_nodes(0, prefix="bind")


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _processes_under(path: Path) -> list[str]:
    """Command lines of live processes that mention the cluster's directory."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(path) in args:
            found.append(args)
    return found


def test_make_cluster_up_then_down_leaves_nothing(tmp_path: Path) -> None:
    workdir = tmp_path / "cluster"
    env = {**os.environ, "GANGSCHED_CLUSTER_DIR": str(workdir)}
    try:
        _check_up_then_down(workdir, env)
    finally:  # never leave a cluster behind, whatever failed
        subprocess.run(["make", "-s", "cluster-down"], cwd=REPO, env=env,
                       capture_output=True, timeout=120)


def _check_up_then_down(workdir: Path, env: dict[str, str]) -> None:
    up = subprocess.run(
        ["make", "-s", "cluster-up", "NODES=2", "NODE_GPUS=1", "WITH_KUBE_SCHEDULER=1"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )
    assert up.returncode == 0, up.stderr
    export = up.stdout.strip().splitlines()[-1]
    assert export.startswith("export KUBECONFIG=") and "PATH=" in export
    kubeconfig = export.split("KUBECONFIG=")[1].split()[0]
    kubectl = Path(export.split("PATH=")[1].split(":")[0]) / "kubectl"
    nodes = subprocess.run(
        [str(kubectl), f"--kubeconfig={kubeconfig}", "get", "nodes", "-o", "name"],
        capture_output=True, text=True, check=True,
    )
    assert len(nodes.stdout.split()) == 2
    state = json.loads((workdir / "state.json").read_text())
    ports = [int(p) for name, p in state["ports"].items() if name in ("etcd", "apiserver")]
    assert all(_listening(p) for p in ports)
    assert _processes_under(workdir)

    down = subprocess.run(["make", "-s", "cluster-down"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert down.returncode == 0, down.stderr
    assert not any(_listening(p) for p in ports)
    assert _processes_under(workdir) == []


def _up(env: dict[str, str], *args: str) -> list[str]:
    """``make cluster-up``; returns the kubectl command line that reaches the new cluster."""
    up = subprocess.run(["make", "-s", "cluster-up", "NODES=1", *args], cwd=REPO, env=env,
                        capture_output=True, text=True, timeout=300)
    assert up.returncode == 0, up.stderr
    export = up.stdout.strip().splitlines()[-1]
    kubeconfig = export.split("KUBECONFIG=")[1].split()[0]
    kubectl = Path(export.split("PATH=")[1].split(":")[0]) / "kubectl"
    return [str(kubectl), f"--kubeconfig={kubeconfig}"]


def _down(env: dict[str, str]) -> None:
    subprocess.run(["make", "-s", "cluster-down"], cwd=REPO, env=env, capture_output=True,
                   timeout=120, check=True)


def test_make_cluster_up_starts_empty_unless_asked_to_keep_state(tmp_path: Path) -> None:
    env = {**os.environ, "GANGSCHED_CLUSTER_DIR": str(tmp_path / "cluster")}

    def namespaces(kubectl: list[str]) -> list[str]:
        out = subprocess.run([*kubectl, "get", "namespaces", "-o", "name"],
                             capture_output=True, text=True, check=True)
        return out.stdout.split()

    try:
        kubectl = _up(env)
        subprocess.run([*kubectl, "create", "namespace", "left-behind"], check=True,
                       capture_output=True)
        _down(env)
        kubectl = _up(env)
        assert "namespace/left-behind" not in namespaces(kubectl), "a new cluster is empty"
        subprocess.run([*kubectl, "create", "namespace", "kept"], check=True,
                       capture_output=True)
        _down(env)
        kubectl = _up(env, "KEEP_STATE=1")
        assert "namespace/kept" in namespaces(kubectl), "KEEP_STATE=1 keeps the objects"
    finally:
        subprocess.run(["make", "-s", "cluster-down"], cwd=REPO, env=env,
                       capture_output=True, timeout=120)
