"""One real control plane per test session, reshaped by each test as it needs.

kube-scheduler and kube-controller-manager run beside it: the scenarios compare
gangsched with kube-scheduler on the same nodes, and namespaces are deleted and
Jobs run as on a real cluster. kube-scheduler gang-schedules native PodGroups
(Kubernetes 1.37) and the Job controller creates them, so the native gang
scheduler is measured in the same run as gangsched.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Generator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kubernetes_asyncio import client, config

from devcluster.controlplane import ClusterOptions, LocalCluster, running_cluster
from tests.e2e.deployed import (
    SERVICE_ACCOUNT,
    WHOLE_SUITE,
    chart_args,
    deployed_kubeconfig,
    overridden,
    refusals,
    set_by_environment,
)
from tests.e2e.workspace import Workspace

E2E = Path(__file__).parent
FOREIGN_CRDS = E2E / "foreign-crds"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/e2e/" in str(item.fspath):
            item.add_marker(pytest.mark.e2e)
    # The CRD tests check what the API server stores before any scheduler writes
    # status: they run before the first test that starts the session's scheduler.
    # The least-privilege tests read what every scheduler of the session asked: last.
    items.sort(key=lambda item: (not str(item.fspath).endswith("tests/e2e/test_crds.py"),
                                 str(item.fspath).endswith("test_least_privilege.py")))
    modules = {Path(str(item.fspath)).name for item in items}
    config.stash[WHOLE_SUITE] = (
        not config.option.keyword and not config.option.markexpr
        and not config.getoption("deselect")
        and {path.name for path in E2E.glob("test_*.py")} <= modules)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """On a failure, attach the tail of the scheduler's log to the report."""
    report = yield
    running = getattr(item, "funcargs", {}).get("gangsched")
    if report.failed and isinstance(running, SchedulerProcess):
        report.sections.append(("gangsched log (tail)", running.logs()[-6000:]))
    return report


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    options = ClusterOptions(nodes=0, with_kube_scheduler=True, with_controller_manager=True,
                             native_gang=True, with_provisioner=True,
                             audited_users=(SERVICE_ACCOUNT,))
    with running_cluster(tmp_path_factory.mktemp("cluster"), options) as local:
        local.apply_crds()
        local.kubectl("apply", "-f", str(FOREIGN_CRDS))
        local.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                      "crd/podgroups.scheduling.x-k8s.io", "crd/podgroups.scheduling.volcano.sh")
        yield local


@pytest.fixture
async def api_client(cluster: LocalCluster) -> AsyncIterator[client.ApiClient]:
    """The scheduler's own asyncio client, on the session cluster's kubeconfig."""
    configuration = client.Configuration()
    await config.load_kube_config(config_file=str(cluster.kubeconfig),
                                  client_configuration=configuration)
    async with client.ApiClient(configuration) as api:
        yield api


@pytest.fixture
def ws(cluster: LocalCluster) -> Iterator[Workspace]:
    """A fresh namespace for one test, emptied and deleted afterwards."""
    workspace = Workspace(cluster)
    yield workspace
    workspace.close()


SUITE_OVERRIDES = (
    # Several schedulers run at once on this one host: the chart's port would be
    # taken by the first; a test that probes the endpoints gives a port of its own.
    "--metrics-port=0",
    # A failed test's log shows every cycle (cycle_done lines).
    "--log-level=debug",
    # The chart's one Lease would let one of the session's schedulers schedule and
    # keep every other waiting; a test that elects a leader names a Lease of its own.
    "--no-leader-elect",
)
"""What every scheduler of the suite runs with in place of the chart's arguments; the
kubeconfig (no pod here: the token comes in a kubeconfig) and the log format (console
for the reader of a failed test's log, json where a test parses the lines) besides."""


@dataclass
class SchedulerProcess:
    """gangsched running as users run it: the ``gangsched run`` command, in its own process."""

    proc: subprocess.Popen[bytes]
    log_path: Path

    def logs(self) -> str:
        return self.log_path.read_text(errors="replace")


def start_gangsched(
    cluster: LocalCluster, log_path: Path, *extra: str, ready: str = "scheduler_started",
    kubeconfig: Path | None = None, log_format: str = "console",
) -> SchedulerProcess:
    """gangsched as the chart deploys it: speaking as the chart's ServiceAccount, with the
    chart's ClusterRole (:mod:`tests.e2e.deployed`), run with the arguments the chart's
    Deployment gives it but for :data:`SUITE_OVERRIDES` and ``extra`` (each option
    named there replaces the chart's); ``kubeconfig`` reaches the cluster another way
    (through a proxy, as another identity)."""
    suite = [f"--kubeconfig={kubeconfig or deployed_kubeconfig(cluster)}",
             f"--log-format={log_format}", *SUITE_OVERRIDES]
    # An option a test sets in the environment, as the chart's `env` value may, would
    # be hidden by the chart's flag for it: that flag is left out.
    chart = [arg for arg in chart_args(cluster) if not set_by_environment(arg, os.environ)]
    log = log_path.open("ab")
    proc = subprocess.Popen(
        [sys.executable, "-m", "gangsched", *overridden(overridden(chart, suite), extra)],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
    )
    running = SchedulerProcess(proc, log_path)
    deadline = time.monotonic() + 30
    while ready not in running.logs():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"gangsched did not start:\n{running.logs()[-3000:]}")
        time.sleep(0.1)
    return running


def stop_gangsched(running: SchedulerProcess, timeout: float = 10) -> int:
    running.proc.send_signal(signal.SIGTERM)
    try:
        return running.proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        running.proc.kill()
        running.proc.wait()
        raise


@pytest.fixture(scope="session")
def gangsched(
    cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SchedulerProcess]:
    """One scheduler for the session; its log is printed when a test fails.

    It serves ``volcano`` too, as a user standing in for Volcano would run it:
    operators in Volcano mode (mpi-operator) write that name on their pods.
    """
    # The chart's Lease and leader election as the Deployment runs them: no other
    # scheduler of the session holds that Lease.
    running = start_gangsched(cluster, tmp_path_factory.mktemp("gangsched") / "gangsched.log",
                              "--scheduler-name=gang", "--scheduler-name=volcano",
                              "--leader-elect")
    yield running
    code = stop_gangsched(running)
    assert code == 0, running.logs()[-3000:]
    refused = refusals(running.logs())
    assert not refused, "the API server refused the chart's ServiceAccount:\n" + "\n".join(
        refused[:20])
