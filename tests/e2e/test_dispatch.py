"""What the dispatcher promises, on the real API server.

- A status write refused for a while (an admission policy, a 5xx) goes out
  once the refusal ends: only what the API server accepted counts as written.
- A pod created again under an old name is another object: its first
  condition goes out at once, whatever was written for the old one.
- A Binding or Eviction decided for a pod names its UID: a pod created again
  under the same name is not bound nor evicted by it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes_asyncio import client

from devcluster.controlplane import LocalCluster, NodeShape
from gangsched.binder import Binder
from gangsched.core.model.objects import GangKey, NodeName, PodKey
from gangsched.core.placement.capacity import Placement
from gangsched.dispatcher import Dispatcher
from gangsched.evictor import Evictor
from tests.e2e.conftest import SchedulerProcess
from tests.e2e.scenario import only_nodes
from tests.e2e.test_bind_refusals import refusals, refusing_policy
from tests.e2e.workspace import PODGROUP_API, Workspace, node_of, scheduled_condition, wait_for

REFUSED = "podgroup writes are frozen in this namespace"


def _update_refused(ws: Workspace, group: str) -> bool:
    """Whether an update of the Volcano PodGroup ``group`` is refused now (a dry run)."""
    response = ws.api.patch(
        url=f"podgroups/{group}?dryRun=All", namespace=ws.name,
        version=PODGROUP_API["volcano"], json={"metadata": {"labels": {"probe": "1"}}},
        headers={"Content-Type": "application/merge-patch+json"})
    return not response.ok and REFUSED in response.text


@pytest.fixture
def frozen_podgroups(ws: Workspace) -> Iterator[list[Any]]:
    """Updates of Volcano PodGroups in ``ws`` (their status has no subresource) refused
    until the returned objects are deleted."""
    ws.create(ws.podgroup("canary", min_member=1, flavor="volcano"))
    policy = refusing_policy(
        f"freeze-podgroups-{ws.name}", ws.name,
        {"apiGroups": ["scheduling.volcano.sh"], "apiVersions": ["*"],
         "operations": ["UPDATE"], "resources": ["podgroups"]},
        REFUSED)
    with refusals(ws, policy, lambda: _update_refused(ws, "canary"),
                  "the admission policy to refuse PodGroup updates") as objects:
        yield objects


@pytest.fixture
def six_cpus(cluster: LocalCluster) -> None:
    only_nodes(cluster, 3, NodeShape(cpu="2", memory="8Gi"))


@pytest.mark.usefixtures("six_cpus")
def test_a_status_refused_for_a_while_is_written_once_the_refusal_ends(
    ws: Workspace, gangsched: SchedulerProcess, frozen_podgroups: list[Any]
) -> None:
    """training-operator creates no pods until its PodGroup is Inqueue: a status write that
    failed once must not be taken as written."""
    ws.create(ws.podgroup("job", min_member=2, min_resources={"cpu": "1"}, flavor="volcano"))
    wait_for(lambda: f"podgroup status {ws.name}/job" in gangsched.logs(), timeout=20,
             what="the status write to be refused")
    time.sleep(3)
    assert "status" not in ws.podgroup_obj("job", "volcano")

    for obj in reversed(frozen_podgroups):
        obj.delete()
    wait_for(lambda: ws.podgroup_obj("job", "volcano").get("status", {}).get("phase")
             == "Inqueue", timeout=30, what="the PodGroup's status once writes are allowed")


def test_a_pod_created_again_under_its_name_says_why_it_waits_at_once(
    ws: Workspace, gangsched: SchedulerProcess
) -> None:
    """Job retries, StatefulSets and operators reuse pod names: every new pod is told."""
    uids: set[str] = set()
    for round_ in range(10):
        ws.create(ws.pod("worker-0", cpu="1000"))
        created = time.monotonic()
        pod = wait_for(lambda: (p := ws.pods().get("worker-0")) and (
            (scheduled_condition(p) or {}).get("status") == "False") and p,
            timeout=5, what=f"round {round_}: the new pod's PodScheduled=False")
        assert time.monotonic() - created < 3, f"round {round_}: condition came late"
        uids.add(pod["metadata"]["uid"])
        ws.delete_pod("worker-0")
        wait_for(lambda: "worker-0" not in ws.pods(), timeout=10, what="the pod to go")
        time.sleep(1)
    assert len(uids) == 10


@pytest.mark.usefixtures("six_cpus")
async def test_a_bind_or_eviction_decided_for_a_pod_gone_since_does_not_touch_its_namesake(
    ws: Workspace, api_client: client.ApiClient
) -> None:
    """As a queued bind does when the pod was deleted and created again under its name."""
    nodes = await client.CoreV1Api(api_client).list_node()
    node = NodeName(nodes.items[0].metadata.name)

    def recreate() -> tuple[str, str]:
        ws.create(ws.pod("worker-0", cpu="1", scheduler="nobody"))
        old = ws.pods()["worker-0"]["metadata"]["uid"]
        ws.delete_pod("worker-0")
        wait_for(lambda: "worker-0" not in ws.pods(), timeout=10, what="the old pod to go")
        ws.create(ws.pod("worker-0", cpu="1", scheduler="nobody"))
        return old, ws.pods()["worker-0"]["metadata"]["uid"]

    old, new = await asyncio.to_thread(recreate)
    pod = PodKey(f"{ws.name}/worker-0")
    dispatcher = Dispatcher(bind_workers=2)
    placement = Placement(GangKey(pod), ((pod, node),))

    refused, done = await Evictor(client.CoreV1Api(api_client), dispatcher).evict_all(
        (pod,), uids={pod: old})
    assert [o.status for o in refused] == [409] and done == []

    binder = Binder(api_client, dispatcher)
    [outcome] = await binder.bind_gang(placement, uids={pod: old})
    assert outcome.status == 409, outcome
    assert node_of(ws.pods()["worker-0"]) is None

    [outcome] = await binder.bind_gang(placement, uids={pod: new})
    assert outcome.bound, outcome
    assert node_of(ws.pods()["worker-0"]) == node
