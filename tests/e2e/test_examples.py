"""The examples in examples/ are valid and do what their comments say."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import yaml

from devcluster.controlplane import REPO, LocalCluster, NodeShape
from tests.e2e.conftest import SchedulerProcess
from tests.e2e.scenario import only_nodes
from tests.e2e.test_explain_status import gangsched_cli
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


def test_queue_tree_example_is_a_valid_tree_and_its_leaf_takes_gangs(
    cluster: LocalCluster, ws: Workspace, gangsched: SchedulerProcess
) -> None:
    """The queue-tree example: every Queue valid, `gangsched status` draws the tree, and a
    gang of its leaf queue binds and is counted there."""
    only_nodes(cluster, 2, NodeShape(cpu="8", memory="32Gi", gpus=1))
    manifests = _in_namespace("queue-tree.yaml", ws.name)
    queue_names = [doc["metadata"]["name"] for doc in yaml.safe_load_all(manifests)
                   if doc["kind"] == "Queue"]
    cluster.kubectl("apply", "-f", "-", input=manifests)
    try:
        for i in range(2):
            ws.create(ws.pod(f"sweep-{i}", gpus=1, group="sweep"))
        wait_for(lambda: len(bound(ws.pods().values())) == 2, timeout=60,
                 what="both members of the research-batch gang to bind")
        listed = json.loads(cluster.kubectl("get", "queues", "-o", "json").stdout)["items"]
        queues = {q["metadata"]["name"]: q for q in listed if q["metadata"]["name"] in queue_names}
        assert sorted(queues) == sorted(queue_names)
        for name, queue in queues.items():
            conditions = (queue.get("status") or {}).get("conditions") or []
            assert not [c for c in conditions if c["type"] == "Invalid"
                        and c["status"] == "True"], (name, conditions)
        shown = gangsched_cli(cluster, "status", "-A")
        assert "│  └─ platform-training" in shown and "   └─ research-batch" in shown, shown
    finally:
        cluster.kubectl("delete", "-f", "-", "--ignore-not-found", input=manifests)
