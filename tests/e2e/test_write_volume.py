"""A large gang still being created costs the API server a few writes per pod, not dozens.

While an operator creates a 300-pod gang, the figures of why it waits could
change with every pod. Each pod's condition and Event must follow
the reason at a bounded rate (the latest wins), and once the reason settles
nothing more is written. Counted from the API server's own request metrics
and its Events.
"""

from __future__ import annotations

import re
import time
from concurrent.futures import ThreadPoolExecutor

import pykube

from devcluster.controlplane import LocalCluster, NodeShape
from tests.e2e.conftest import SchedulerProcess
from tests.e2e.scenario import only_nodes
from tests.e2e.workspace import Workspace, scheduled_condition, wait_for

PODS = 300
STATUS_PATCHES = re.compile(
    r'apiserver_request_total\{[^}]*resource="pods"[^}]*subresource="status"[^}]*'
    r'verb="PATCH"[^}]*\} (\d+)')


def pod_status_patches(cluster: LocalCluster) -> int:
    metrics = cluster.kubectl("get", "--raw", "/metrics").stdout
    return sum(int(count) for count in STATUS_PATCHES.findall(metrics))


def test_a_gang_being_created_costs_few_writes_per_pod(
    ws: Workspace, cluster: LocalCluster, gangsched: SchedulerProcess
) -> None:
    only_nodes(cluster, 2, NodeShape(cpu="8", memory="32Gi"))
    before = pod_status_patches(cluster)
    ws.create(ws.podgroup("wide", min_member=PODS))
    config = cluster.client.config

    def create(index: int) -> None:
        api = pykube.HTTPClient(config, timeout=60)
        pykube.Pod(api, ws.pod(f"wide-{index}", cpu="1", group="wide")).create()

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(create, range(PODS)))
    created_in = time.monotonic() - started

    def settled() -> bool:
        conditions = [scheduled_condition(p) for p in ws.pods().values()]
        return all(c is not None and "waits for its members" not in c["message"]
                   for c in conditions)

    wait_for(settled, timeout=60, what="every pod to carry the settled reason")
    time.sleep(12)  # past the gap between Events: the settled reason goes out once more
    patches = pod_status_patches(cluster) - before
    events = [e for e in pykube.Event.objects(ws.api, namespace=ws.name)
              if e.obj["reason"] == "FailedScheduling"]
    print(f"\n[writes] {PODS} pods created in {created_in:.1f}s: {patches} pod status "
          f"patches, {len(events)} FailedScheduling Events")
    # One write while the gang waits for its members, one once it is whole
    # (measured: 585 of each for 300 pods).
    assert patches <= 2.5 * PODS, f"{patches} condition writes for {PODS} pods"
    assert len(events) <= 2.5 * PODS, f"{len(events)} Events for {PODS} pods"
    assert all(not (p.get("spec") or {}).get("nodeName") for p in ws.pods().values())
