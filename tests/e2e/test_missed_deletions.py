"""PodGroups, Queues and Workloads deleted while the watch was down: the relist that
follows forgets them, against the real API server.

The reflectors reach the API server through a TCP proxy that is cut: their watches go
silent, and what the server says meanwhile (the deletions) is lost, as in a network
partition. Once it heals, the stranded streams break and each reflector lists again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path
from typing import Any

import pykube
import pytest
from kubernetes_asyncio import client, config

from devcluster.controlplane import LocalCluster
from gangsched.core.model.objects import Flavor, GangKey, QueueName
from gangsched.feed import CUSTOM_KINDS, Feed, group_kind
from gangsched.mirror import Mirror
from gangsched.reflector import Reflector
from tests.e2e.tcpproxy import TcpProxy
from tests.e2e.workspace import Workspace

QUEUE_ANNOTATION = "scheduling.gangsched.io/queue"


@pytest.fixture
async def proxied(cluster: LocalCluster, tmp_path: Path
                  ) -> AsyncIterator[tuple[TcpProxy, client.ApiClient]]:
    """A client of the session's API server whose connections a proxy can cut."""
    with TcpProxy(cluster.ports["apiserver"]) as proxy:
        kubeconfig = json.loads(cluster.kubeconfig.read_text())
        kubeconfig["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{proxy.port}"
        path = tmp_path / "proxied"
        path.write_text(json.dumps(kubeconfig))
        configuration = client.Configuration()
        await config.load_kube_config(config_file=str(path), client_configuration=configuration)
        async with client.ApiClient(configuration) as api:
            yield proxy, api


def _workload(ws: Workspace, name: str, queue: str) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "Workload",
            "metadata": {"name": name, "namespace": ws.name,
                         "annotations": {QUEUE_ANNOTATION: queue}},
            "spec": {"podGroupTemplates": [
                {"name": "workers", "schedulingPolicy": {"gang": {"minCount": 1}}}]}}


def _queue(ws: Workspace, name: str) -> dict[str, Any]:
    return {"apiVersion": "scheduling.gangsched.io/v1alpha1", "kind": "Queue",
            "metadata": {"name": name, "labels": {"gangsched-test": ws.name}},
            "spec": {"weight": 2}}


def _delete(cluster: LocalCluster, api_version: str, kind: str, name: str,
            namespace: str | None = None) -> None:
    cls = pykube.object_factory(cluster.client, api_version, kind)
    objects = cls.objects(cluster.client, namespace=namespace) if namespace else \
        cls.objects(cluster.client)
    objects.get(name=name).delete()


async def _until(check: Any, what: str, timeout: float = 30.0) -> None:
    for _ in range(int(timeout * 10)):
        if check():
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


async def test_what_was_deleted_while_the_watch_was_cut_is_forgotten_on_the_relist(
    cluster: LocalCluster, ws: Workspace, proxied: tuple[TcpProxy, client.ApiClient]
) -> None:
    """A PodGroup deleted during the cut would keep its reservation, a Queue its cap, a
    Workload its queue for its PodGroups: each is forgotten once the watch is back; a
    PodGroup deleted and made again under the same name is held as the new object."""
    proxy, api = proxied
    gone_queue, kept_queue = f"gone-{ws.name}", f"kept-{ws.name}"
    ws.create(ws.podgroup("kept", min_member=1), ws.podgroup("gone", min_member=1),
              ws.podgroup("recreated", min_member=1),
              ws.native_podgroup("native-gone", min_count=1),
              _queue(ws, gone_queue), _queue(ws, kept_queue),
              _workload(ws, "gone", kept_queue), _workload(ws, "kept", kept_queue))
    mirror = Mirror(scheduler_names=frozenset({"gang"}))
    held = mirror.groups_and_queues
    feed = Feed(mirror)
    woken = asyncio.Event()
    custom = client.CustomObjectsApi(api)
    kinds = (group_kind(Flavor.GANGSCHED), group_kind(Flavor.NATIVE), "queues", "workloads")
    reflectors = [Reflector(kind, partial(custom.list_cluster_custom_object,
                                          *CUSTOM_KINDS[kind]), feed, woken.set)
                  for kind in kinds]
    tasks = [asyncio.create_task(r.run()) for r in reflectors]
    try:
        await asyncio.wait_for(asyncio.gather(*(r.synced.wait() for r in reflectors)), 30)
        mine = {GangKey(f"{ws.name}/{n}") for n in ("kept", "gone", "recreated", "native-gone")}
        await _until(lambda: mine <= set(held.groups), "the PodGroups' list")
        old_uid = held.groups[GangKey(f"{ws.name}/recreated")].uid
        assert {gone_queue, kept_queue} <= set(held.queues)
        assert {f"{ws.name}/gone", f"{ws.name}/kept"} <= set(held.workload_queues)

        proxy.cut()
        await asyncio.to_thread(ws.delete_podgroup, "gone")
        await asyncio.to_thread(ws.delete_podgroup, "recreated")
        await asyncio.to_thread(ws.delete_podgroup, "native-gone", "native")
        await asyncio.to_thread(_delete, cluster, "scheduling.gangsched.io/v1alpha1", "Queue",
                                gone_queue)
        await asyncio.to_thread(_delete, cluster, "scheduling.k8s.io/v1beta1", "Workload",
                                "gone", ws.name)
        await asyncio.to_thread(ws.create, ws.podgroup("recreated", min_member=3))
        await asyncio.sleep(1.0)
        # Cut off, the watches heard none of it.
        assert mine <= set(held.groups) and gone_queue in held.queues
        woken.clear()
        proxy.heal()

        def forgotten() -> bool:
            recreated = held.groups.get(GangKey(f"{ws.name}/recreated"))
            return (recreated is not None and recreated.uid != old_uid
                    and GangKey(f"{ws.name}/gone") not in held.groups
                    and GangKey(f"{ws.name}/native-gone") not in held.groups
                    and gone_queue not in held.queues
                    and f"{ws.name}/gone" not in held.workload_queues)

        await _until(forgotten, "the relist to forget what was deleted during the cut")
        recreated = held.groups[GangKey(f"{ws.name}/recreated")]
        assert recreated.spec is not None and recreated.spec.min_member == 3
        assert GangKey(f"{ws.name}/kept") in held.groups
        assert QueueName(kept_queue) in held.queues
        assert held.workload_queues[f"{ws.name}/kept"] == kept_queue
        assert woken.is_set(), "what the relist forgot wakes the scheduler"
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for name in (gone_queue, kept_queue):
            with contextlib.suppress(pykube.exceptions.ObjectDoesNotExist):
                await asyncio.to_thread(_delete, cluster, "scheduling.gangsched.io/v1alpha1",
                                        "Queue", name)
