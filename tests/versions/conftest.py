"""The smoke subset ``make test-versions`` runs on each Kubernetes release it tests.

Collected only when ``GANGSCHED_VERSIONS`` is set (``python -m bench.versions`` sets it
to a file where the run writes which APIs the release serves, with
``GANGSCHED_BIN_DIR`` naming the release's binaries), so ``make test`` stays on the
pinned release. One control plane for the module: etcd, kube-apiserver,
kube-controller-manager and KWOK of the release (kube-scheduler is not run: a newer one
must not talk to an older API server), every CRD the suite uses, and one gangsched
speaking as the chart's ServiceAccount.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from devcluster.controlplane import ClusterOptions, LocalCluster, running_cluster
from gangsched.discovery import NEEDED
from tests.e2e.conftest import FOREIGN_CRDS, SchedulerProcess, start_gangsched, stop_gangsched
from tests.e2e.conftest import ws as ws  # the fixture the smoke tests take

REPORT = os.environ.get("GANGSCHED_VERSIONS")
collect_ignore_glob = [] if REPORT else ["test_*.py"]


def served(cluster: LocalCluster, group_version: str, resource: str) -> bool:
    """Whether the release's API server serves the resource (discovery, as gangsched asks)."""
    path = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
    answer = cluster.kubectl("get", "--raw", path, check=False)
    return answer.returncode == 0 and any(
        r["name"] == resource for r in json.loads(answer.stdout)["resources"])


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    options = ClusterOptions(nodes=0, with_controller_manager=True)
    with running_cluster(tmp_path_factory.mktemp("cluster"), options) as local:
        if REPORT:
            apis = {f"{api.group_version} {api.resource}": served(local, api.group_version,
                                                                  api.resource)
                    for api in NEEDED.values()}
            version = json.loads(local.kubectl("version", "-o", "json").stdout)
            Path(REPORT).write_text(json.dumps({
                "server": version["serverVersion"]["gitVersion"], "apis": apis}))
        try:
            local.apply_crds()
        except subprocess.CalledProcessError as error:
            pytest.fail(f"the CRDs do not apply: {error.stderr.strip()}")
        local.kubectl("apply", "-f", str(FOREIGN_CRDS))
        local.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                      "crd/podgroups.scheduling.x-k8s.io", "crd/podgroups.scheduling.volcano.sh")
        yield local


@pytest.fixture(scope="session")
def metrics_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def gangsched(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory,
              metrics_port: int) -> Iterator[SchedulerProcess]:
    log: Path = tmp_path_factory.mktemp("gangsched") / "gangsched.log"
    running = start_gangsched(cluster, log, "--scheduler-name=gang",
                              "--scheduler-name=volcano", f"--metrics-port={metrics_port}")
    yield running
    stop_gangsched(running)
