"""Forgets PodGroups, Queues and Workloads the watches missed being deleted.

kopf watches these objects; when its watch is cut (an API server restart, a
"too old resource version") it lists them again and reports what it finds,
but nothing for what it no longer finds. An object deleted in that gap stays
in the mirror for good: a deleted PodGroup keeps its reservation, a deleted
Queue its cap. So every ``interval`` the sweeper lists them (from the API
server's watch cache) and drops what the mirror holds and the cluster does
not.

Only entries the mirror held before the list was asked for are dropped: one
the watch added meanwhile may be too new for the list, and must stay.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import aiohttp
import structlog
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from gangsched.core.kubeobjects.fields import RawObject, object_ref
from gangsched.core.model import Flavor, QueueName
from gangsched.feed import Feed
from gangsched.handlers import QUEUES, WORKLOADS
from gangsched.mirror import Mirror

log = structlog.get_logger(__name__)

NOT_SERVED = 404
TOO_MANY = 429


class Sweeper:
    def __init__(
        self, api: client.ApiClient, mirror: Mirror, on_change: Callable[[], None],
        interval: float = 10.0,
    ) -> None:
        self._custom = client.CustomObjectsApi(api)
        self._mirror = mirror
        self._on_change = on_change
        self._interval = interval

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            try:
                if await self.sweep():
                    self._on_change()
            except (ApiException, aiohttp.ClientError, TimeoutError) as error:
                log.warning("sweep_failed", error=str(error))

    async def _list(self, group: str, version: str, plural: str
                    ) -> list[RawObject] | None:
        """Every object (from the watch cache); None when the API does not serve them."""
        try:
            found = await self._custom.list_cluster_custom_object(
                group, version, plural, resource_version="0")
        except ApiException as error:
            if error.status == NOT_SERVED:
                return None
            raise
        items: list[RawObject] = found.get("items") or []
        return items

    async def _names(
        self, group: str, version: str, plural: str
    ) -> set[tuple[str, str]] | None:
        """``(namespace/name, uid)`` of every object; None when the API does not serve it."""
        items = await self._list(group, version, plural)
        if items is None:
            return None
        return {(ref.key, ref.uid) for ref in map(object_ref, items)}

    async def prime(self, timeout: float = 30.0) -> None:
        """Fill the mirror with every PodGroup, Queue and Workload before the first cycle.

        kopf reports them as its watches start, which may be after the pods'
        list: a first cycle before that would tell every member of a gang
        that its PodGroup does not exist. An API server still filling its
        cache answers 429; that is waited out, up to ``timeout``.
        """
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            try:
                await self._prime_once()
                return
            except ApiException as error:
                if error.status != TOO_MANY or asyncio.get_running_loop().time() > deadline:
                    log.warning("prime_failed", error=str(error.reason))
                    return
                await asyncio.sleep(0.5)
            except (aiohttp.ClientError, TimeoutError) as error:
                log.warning("prime_failed", error=str(error))
                return

    async def _prime_once(self) -> None:
        """Namespaced objects only of the namespaces served, as kopf watches them."""
        mirror, feed = self._mirror, Feed(self._mirror)
        for flavor in Flavor:
            for item in await self._list(flavor.group, flavor.version, "podgroups") or ():
                if mirror.in_scope(object_ref(item).namespace):
                    feed.upsert_group(flavor, item)
        for item in await self._list(*QUEUES) or ():
            feed.upsert_queue(item)
        for item in await self._list(*WORKLOADS) or ():
            if mirror.in_scope(object_ref(item).namespace):
                feed.upsert_workload(item)

    async def sweep(self) -> bool:
        """One pass; True when something was forgotten."""
        mirror = self._mirror.groups_and_queues
        groups_before = {key: (record.flavor, record.uid) for key, record in mirror.groups.items()}
        queues_before = set(mirror.queues)
        workloads_before = set(mirror.workload_queues)
        forgotten = False
        for flavor in Flavor:
            listed = await self._names(flavor.group, flavor.version, "podgroups")
            uid_of = dict(listed or ())
            for key, (owner, uid) in groups_before.items():
                current = mirror.groups.get(key)
                if owner is not flavor or current is None or current.uid != uid:
                    continue  # another flavour's, or changed since the list was asked for
                if (listed is None or uid_of.get(key) != uid) and mirror.remove_group(key):
                    log.warning("podgroup_forgotten", group=key, flavor=flavor.value,
                                reason="deleted while the watch was down")
                    forgotten = True
        listed_queues = await self._names(*QUEUES)
        if listed_queues is not None:
            queue_names = {QueueName(name) for name, _ in listed_queues}
            for name in queues_before - queue_names:
                if mirror.remove_queue(name):
                    log.warning("queue_forgotten", queue=name,
                                reason="deleted while the watch was down")
                    forgotten = True
        listed_workloads = await self._names(*WORKLOADS)
        workload_names = {name for name, _ in listed_workloads or ()}
        for workload in workloads_before - workload_names:
            forgotten = mirror.remove_workload(workload) or forgotten
        return forgotten

