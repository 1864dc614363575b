"""One real control plane per test session, reshaped by each test as it needs.

kube-scheduler and kube-controller-manager run beside it: the scenarios compare
gangsched with kube-scheduler on the same nodes, and namespaces are deleted and
Jobs run as on a real cluster.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from devcluster.controlplane import ClusterOptions, LocalCluster, running_cluster


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/e2e/" in str(item.fspath):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    options = ClusterOptions(nodes=0, with_kube_scheduler=True, with_controller_manager=True)
    with running_cluster(tmp_path_factory.mktemp("cluster"), options) as local:
        local.apply_crds()
        yield local
