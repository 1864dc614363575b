"""The examples in examples/ are valid and do what their comments say."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import yaml

from devcluster.controlplane import REPO, LocalCluster, NodeShape
from tests.e2e.conftest import SchedulerProcess
from tests.e2e.scenario import only_nodes
from tests.e2e.workspace import Workspace, bound, wait_for

EXAMPLES = REPO / "examples"


@pytest.fixture
def queues(cluster: LocalCluster) -> Iterator[None]:
    cluster.kubectl("apply", "-f", str(EXAMPLES / "queues.yaml"))
    yield
    cluster.kubectl("delete", "-f", str(EXAMPLES / "queues.yaml"), "--ignore-not-found")


def _in_namespace(path: str, namespace: str) -> str:
    return (EXAMPLES / path).read_text().replace("namespace: default", f"namespace: {namespace}")


@pytest.mark.usefixtures("queues")
def test_pytorch_ddp_job_runs_whole(
    cluster: LocalCluster, ws: Workspace, gangsched: SchedulerProcess
) -> None:
    only_nodes(cluster, 4, NodeShape(cpu="8", memory="32Gi", gpus=1))
    cluster.kubectl("apply", "-f", "-", input=_in_namespace("pytorch-ddp.yaml", ws.name))
    wait_for(lambda: len(bound(ws.pods().values())) == 4, timeout=60,
             what="all four DDP workers to bind")
    nodes = {p["spec"]["nodeName"] for p in ws.pods().values()}
    assert len(nodes) == 4, "one GPU per node: each worker on its own node"


def test_native_job_runs_whole_inside_one_zone(
    cluster: LocalCluster, ws: Workspace, gangsched: SchedulerProcess
) -> None:
    only_nodes(cluster, 0, NodeShape(cpu="8", memory="32Gi", gpus=2))
    shape = NodeShape(cpu="8", memory="32Gi", gpus=2)
    zone = "topology.kubernetes.io/zone"
    try:
        cluster.ensure_nodes(3, shape, prefix="zone-a", labels={zone: "a"})
        cluster.ensure_nodes(2, shape, prefix="zone-b", labels={zone: "b"})
        cluster.kubectl("apply", "-f", "-", input=_in_namespace("native-job.yaml", ws.name))
        wait_for(lambda: len(bound(ws.pods().values())) == 4, timeout=60,
                 what="all four workers of the native Job to bind")
        zones = {p["spec"]["nodeName"].rsplit("-", 1)[0] for p in ws.pods().values()}
        assert zones == {"zone-b"}, "the zone it fills exactly, all four in it"
    finally:
        only_nodes(cluster, 0, shape)


def test_spark_podgroup_is_accepted(cluster: LocalCluster, ws: Workspace) -> None:
    cluster.kubectl("apply", "-f", "-", input=_in_namespace("spark.yaml", ws.name))
    group = ws.podgroup_obj("spark-pi")
    assert group["spec"]["minResources"] == {"cpu": "3", "memory": "6Gi"}


def test_kubeflow_example_points_every_replica_at_gangsched() -> None:
    job = yaml.safe_load((EXAMPLES / "kubeflow-volcano.yaml").read_text())
    replicas = job["spec"]["pytorchReplicaSpecs"].values()
    assert all(r["template"]["spec"]["schedulerName"] == "gang" for r in replicas)
