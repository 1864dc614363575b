"""The sweeper against the real API server: what the cluster no longer holds is forgotten."""

from __future__ import annotations

import asyncio

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from gangsched.core.groups import Flavor
from gangsched.core.model import GangKey, QueueName, QueueSpec
from gangsched.feed import Feed
from gangsched.mirror import Mirror
from gangsched.sweeper import Sweeper
from tests.e2e.workspace import Workspace


@pytest.fixture
def api(api_client: client.ApiClient) -> client.ApiClient:
    return api_client


async def sweep(sweeper: Sweeper) -> bool:
    """One sweep; a just-started API server answers 429 while its watch cache fills."""
    for _ in range(50):
        try:
            return await sweeper.sweep()
        except ApiException as error:
            if error.status != 429:
                raise
            await asyncio.sleep(0.2)
    raise AssertionError("the API server's cache did not come up")


def _group(ws: Workspace, name: str, uid: str = "") -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": ws.name, "uid": uid,
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"minMember": 1}}


async def test_sweep_forgets_what_is_gone_and_keeps_what_is_there(
    ws: Workspace, api: client.ApiClient
) -> None:
    ws.create(ws.podgroup("kept"))
    kept = ws.podgroup_obj("kept")
    mirror = Mirror(scheduler_names=frozenset({"gang"}))
    Feed(mirror).upsert_group(Flavor.GANGSCHED, kept)
    Feed(mirror).upsert_group(Flavor.GANGSCHED, _group(ws, "gone", uid="0000-gone"))
    # Same name as a live group, but the UID of an earlier one: that object is gone.
    ws.create(ws.podgroup("recreated"))
    Feed(mirror).upsert_group(Flavor.GANGSCHED, _group(ws, "recreated", uid="0000-old"))
    Feed(mirror).upsert_queue({"metadata": {"name": f"gone-{ws.name}"}, "spec": {"weight": 2}})
    mirror.groups_and_queues.workload_queues[f"{ws.name}/gone"] = QueueName("research")

    forgotten = await sweep(Sweeper(api, mirror, on_change=lambda: None))

    assert forgotten
    assert set(mirror.groups_and_queues.groups) == {f"{ws.name}/kept"}
    assert QueueName(f"gone-{ws.name}") not in mirror.groups_and_queues.queues
    assert f"{ws.name}/gone" not in mirror.groups_and_queues.workload_queues
    assert await sweep(Sweeper(api, mirror, on_change=lambda: None)) is False


async def test_an_entry_the_watch_adds_during_the_sweep_stays(
    ws: Workspace, api: client.ApiClient
) -> None:
    mirror = Mirror(scheduler_names=frozenset({"gang"}))
    sweeper = Sweeper(api, mirror, on_change=lambda: None)
    # Added by the watch after the sweep took its snapshot: a list asked for
    # before it existed cannot speak for it.
    original = sweeper._names

    async def late_arrival(group: str, version: str, plural: str) -> set[tuple[str, str]] | None:
        if plural == "podgroups" and group == Flavor.GANGSCHED.group:
            Feed(mirror).upsert_group(Flavor.GANGSCHED, _group(ws, "newborn", uid="0000-new"))
            mirror.groups_and_queues.queues[QueueName("newborn")] = QueueSpec(QueueName("newborn"))
        return await original(group, version, plural)

    sweeper._names = late_arrival  # type: ignore[method-assign]
    await sweep(sweeper)
    assert f"{ws.name}/newborn" in mirror.groups_and_queues.groups
    assert QueueName("newborn") in mirror.groups_and_queues.queues


async def test_prime_fills_the_mirror_before_the_first_cycle(
    ws: Workspace, api: client.ApiClient
) -> None:
    ws.create(ws.podgroup("early", min_member=2), ws.native_podgroup("native", min_count=2))
    mirror = Mirror(scheduler_names=frozenset({"gang"}))
    await Sweeper(api, mirror, on_change=lambda: None).prime()
    assert {f"{ws.name}/early", f"{ws.name}/native"} <= set(mirror.groups_and_queues.groups)
    assert mirror.groups_and_queues.groups[GangKey(f"{ws.name}/native")].flavor is Flavor.NATIVE
