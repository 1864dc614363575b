"""Bad, odd and absurd input never stops the scheduler: a valid gang after it still binds.

Each case creates what a careless user, a buggy operator or a hostile tenant
might (objects the API server accepts), then a plain gang of two that must
bind within seconds while the scheduler keeps running. What the bad object
itself gets is the business of other tests; here it must only not hurt
anyone else.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pykube
import pytest

from devcluster.controlplane import LocalCluster, NodeShape
from tests.e2e.conftest import SchedulerProcess
from tests.e2e.scenario import only_nodes
from tests.e2e.workspace import Workspace, bound, wait_for

SHAPE = NodeShape(cpu="8", memory="32Gi", gpus=2, pods=1000)


def _with_spec(manifest: dict[str, Any], **spec: Any) -> dict[str, Any]:
    manifest["spec"].update(spec)
    return manifest


def _requests(manifest: dict[str, Any], **requests: str) -> dict[str, Any]:
    # Extended resources cannot be overcommitted: the API wants their limit too.
    limits = {k: v for k, v in requests.items() if k not in ("cpu", "memory")}
    manifest["spec"]["containers"][0]["resources"] = {"requests": dict(requests),
                                                      "limits": limits}
    return manifest


def _many(ws: Workspace, manifests: list[dict[str, Any]]) -> None:
    local = threading.local()

    def create(manifest: dict[str, Any]) -> None:
        api = getattr(local, "api", None)
        if api is None:
            api = local.api = pykube.HTTPClient(ws.cluster.client.config, timeout=60)
        pykube.Pod(api, manifest).create()

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(create, manifests))


def _highest_priority(ws: Workspace, cluster: LocalCluster) -> None:
    """A pod at the highest priority a user may give (PriorityClass value 10^9)."""
    priority_class = pykube.object_factory(cluster.client, "scheduling.k8s.io/v1",
                                           "PriorityClass")
    if priority_class.objects(cluster.client).get_or_none(name="top") is None:
        priority_class(cluster.client, {
            "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": "top"}, "value": 1_000_000_000}).create()
    ws.create(_with_spec(ws.pod("urgent", cpu="1"), priorityClassName="top"))


def _delete_group_after_pods(ws: Workspace, _: LocalCluster) -> None:
    ws.create(ws.podgroup("fleeting", min_member=2))
    ws.create(*(ws.pod(f"fleeting-{i}", cpu="1", group="fleeting") for i in range(2)))
    ws.delete_podgroup("fleeting")


def _gang_of_500(ws: Workspace, _: LocalCluster) -> None:
    ws.create(ws.podgroup("army", min_member=500))
    _many(ws, [ws.pod(f"army-{i}", cpu="100m", group="army") for i in range(500)])


def _delete_node_mid_bind(ws: Workspace, cluster: LocalCluster) -> None:
    ws.create(ws.podgroup("doomed", min_member=4))
    ws.create(*(ws.pod(f"doomed-{i}", cpu="1", group="doomed") for i in range(4)))
    pykube.Node.objects(cluster.client).get(name="node-1").delete()


CASES: dict[str, Callable[[Workspace, LocalCluster], None]] = {
    "minMember larger than any job": lambda ws, _: ws.create(
        ws.podgroup("huge", min_member=100000)),
    "minResources no cluster holds": lambda ws, _: ws.create(
        ws.podgroup("greedy", min_member=1, min_resources={"cpu": "100000"})),
    "minResources of a resource no node has": lambda ws, _: ws.create(
        ws.podgroup("widgets", min_member=1, min_resources={"example.com/widget": "5"})),
    "pod asking a million cpus": lambda ws, _: ws.create(
        _requests(ws.pod("absurd-cpu"), cpu="1000000")),
    "pod asking an exbibyte": lambda ws, _: ws.create(
        _requests(ws.pod("absurd-memory"), memory="1Ei")),
    "pod asking nothing at all": lambda ws, _: ws.create(ws.pod("nothing")),
    "pod asking a resource no node has": lambda ws, _: ws.create(
        _requests(ws.pod("widget"), **{"example.com/widget": "1"})),
    "pod created with nodeName of a missing node": lambda ws, _: ws.create(
        _with_spec(ws.pod("preplaced-missing", cpu="1"), nodeName="no-such-node")),
    "pod created with nodeName of a real node": lambda ws, _: ws.create(
        _with_spec(ws.pod("preplaced", cpu="1"), nodeName="node-0")),
    "pod naming a missing PodGroup": lambda ws, _: ws.create(
        ws.pod("orphan", cpu="1", group="nobody")),
    "pod naming a missing native PodGroup": lambda ws, _: ws.create(
        ws.pod("native-orphan", cpu="1", group="nobody", marker="native")),
    "PodGroup naming a missing queue": lambda ws, _: ws.create(
        ws.podgroup("lost", min_member=1, queue="no-such-queue"),
        ws.pod("lost-0", cpu="1", group="lost")),
    "native gang with fewer pods than minCount": lambda ws, _: ws.create(
        ws.native_podgroup("short", min_count=3),
        ws.pod("short-0", cpu="1", group="short", marker="native")),
    "node selector no node matches": lambda ws, _: ws.create(
        ws.pod("nowhere", cpu="1", node_selector={"zone": "mars"})),
    "affinity Gt on a label that is no number": lambda ws, _: ws.create(_with_spec(
        ws.pod("gt", cpu="1"),
        affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "Gt", "values": ["7"]}]}]}}})),
    "init container larger than the node": lambda ws, _: ws.create(_with_spec(
        ws.pod("init", cpu="1"),
        initContainers=[{"name": "setup", "image": "busybox",
                         "resources": {"requests": {"cpu": "64"}}}])),
    "fifty containers": lambda ws, _: ws.create(_with_spec(
        ws.pod("wide"),
        containers=[{"name": f"c{i}", "image": "busybox",
                     "resources": {"requests": {"cpu": "10m"}}} for i in range(50)])),
    "priority at the highest a user may give": _highest_priority,
    "two group markers naming different groups": lambda ws, _: ws.create(
        ws.podgroup("one", min_member=1), ws.native_podgroup("two", min_count=1),
        _with_spec(ws.pod("both", cpu="1", group="one"),
                   schedulingGroup={"podGroupName": "two"})),
    "PodGroup deleted right after its pods": _delete_group_after_pods,
    "node deleted while a gang binds": _delete_node_mid_bind,
    "a gang of 500 pods": _gang_of_500,
    "1,000 gangs of one": lambda ws, _: _many(
        ws, [ws.pod(f"solo-{i}", cpu="10m") for i in range(1000)]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_valid_gang_binds_after_bad_input(
    case: str, ws: Workspace, cluster: LocalCluster, gangsched: SchedulerProcess
) -> None:
    only_nodes(cluster, 2, SHAPE)
    CASES[case](ws, cluster)
    ws.create(ws.podgroup("valid", min_member=2))
    ws.create(*(ws.pod(f"valid-{i}", cpu="100m", group="valid") for i in range(2)))
    wait_for(lambda: len(bound(p for n, p in ws.pods().items() if n.startswith("valid-"))) == 2,
             timeout=60, what=f"the valid gang to bind after: {case}")
    assert gangsched.proc.poll() is None, "the scheduler stopped"
    assert "Traceback" not in gangsched.logs(), gangsched.logs()[-3000:]
