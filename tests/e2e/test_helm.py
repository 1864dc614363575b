"""The Helm chart installs on the real API server with least-privilege RBAC."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pykube
import pytest

from devcluster.controlplane import REPO, LocalCluster

CHART = REPO / "helm" / "gangsched"
RELEASE, NAMESPACE = "gangsched", "gangsched-system"
SA = f"system:serviceaccount:{NAMESPACE}:{RELEASE}"


def helm(cluster: LocalCluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(cluster.bin_dir / "helm"), f"--kubeconfig={cluster.kubeconfig}", *args],
        capture_output=True, text=True, timeout=120, check=False,
    )


@pytest.fixture(scope="module")
def release(cluster: LocalCluster) -> Iterator[None]:
    result = helm(cluster, "install", RELEASE, str(CHART), "--namespace", NAMESPACE,
                  "--create-namespace", "--wait=false")
    assert result.returncode == 0, result.stderr
    yield
    helm(cluster, "uninstall", RELEASE, "--namespace", NAMESPACE)


@pytest.mark.usefixtures("release")
def test_chart_creates_a_hardened_deployment(cluster: LocalCluster) -> None:
    deployment = pykube.Deployment.objects(cluster.client, namespace=NAMESPACE).get(name=RELEASE)
    pod = deployment.obj["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert "--leader-elect" in container["args"]
    assert "--scheduler-name=gang" in container["args"]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"


def can(cluster: LocalCluster, verb: str, resource: str, *extra: str) -> bool:
    result = cluster.kubectl("auth", "can-i", verb, resource, f"--as={SA}", *extra, check=False)
    return result.stdout.strip() == "yes"


@pytest.mark.usefixtures("release")
@pytest.mark.parametrize(
    ("verb", "resource", "extra"),
    [
        ("watch", "pods", ("--all-namespaces",)),
        ("watch", "nodes", ()),
        ("watch", "priorityclasses.scheduling.k8s.io", ()),
        ("create", "pods", ("--subresource=binding", "-n", "team-a")),
        ("create", "pods", ("--subresource=eviction", "-n", "team-a")),
        ("patch", "pods", ("--subresource=status", "-n", "team-a")),
        ("create", "events", ("-n", "team-a")),
        ("patch", "podgroups.scheduling.gangsched.io", ("--subresource=status", "-n", "team-a")),
        ("patch", "podgroups.scheduling.volcano.sh", ("-n", "team-a")),
        ("patch", "podgroups.scheduling.x-k8s.io", ("--subresource=status", "-n", "team-a")),
        ("create", "queues.scheduling.gangsched.io", ()),
        ("update", "leases.coordination.k8s.io", ("-n", NAMESPACE)),
        ("watch", "podgroups.scheduling.k8s.io", ("--all-namespaces",)),
        ("patch", "podgroups.scheduling.k8s.io", ("--subresource=status", "-n", "team-a")),
        ("watch", "workloads.scheduling.k8s.io", ("--all-namespaces",)),
    ],
)
def test_service_account_may_do_what_scheduling_needs(
    cluster: LocalCluster, verb: str, resource: str, extra: tuple[str, ...]
) -> None:
    assert can(cluster, verb, resource, *extra)


@pytest.mark.usefixtures("release")
@pytest.mark.parametrize(
    ("verb", "resource", "extra"),
    [
        ("delete", "pods", ("-n", "team-a")),
        ("update", "pods", ("-n", "team-a")),
        ("patch", "nodes", ()),
        ("get", "secrets", ("-n", "team-a")),
        ("delete", "podgroups.scheduling.gangsched.io", ("-n", "team-a")),
        ("update", "leases.coordination.k8s.io", ("-n", "kube-system")),
        ("patch", "podgroups.scheduling.volcano.sh", ("--subresource=status", "-n", "team-a")),
        ("patch", "podgroups.scheduling.k8s.io", ("-n", "team-a")),
        ("patch", "workloads.scheduling.k8s.io", ("-n", "team-a")),
    ],
)
def test_service_account_may_do_nothing_more(
    cluster: LocalCluster, verb: str, resource: str, extra: tuple[str, ...]
) -> None:
    assert not can(cluster, verb, resource, *extra)
