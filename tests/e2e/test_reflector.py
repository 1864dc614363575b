"""List+watch against the real API server: paging through lists, then watching changes."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import Any

import pytest
from kubernetes_asyncio import client

from gangsched.reflector import Reflector
from tests.e2e.workspace import Workspace


class Recorder:
    """A sink that keeps what the reflector hands it, by name."""

    def __init__(self) -> None:
        self.objects: dict[str, Mapping[str, Any]] = {}
        self.pages = 0

    def listed(self, kind: str, page: list[Mapping[str, Any]], seen: set[str]) -> None:
        self.pages += 1
        for obj in page:
            seen.add(obj["metadata"]["name"])
            self.objects[obj["metadata"]["name"]] = obj

    def list_done(self, kind: str, seen: set[str]) -> None:
        self.objects = {name: obj for name, obj in self.objects.items() if name in seen}

    def upsert(self, kind: str, obj: Mapping[str, Any]) -> bool:
        self.objects[obj["metadata"]["name"]] = obj
        return True

    def delete(self, kind: str, obj: Mapping[str, Any]) -> bool:
        return self.objects.pop(obj["metadata"]["name"], None) is not None


@pytest.fixture
def core(api_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)


def _pods(ws: Workspace, count: int, prefix: str = "p") -> None:
    ws.create(*(ws.pod(f"{prefix}{i}", cpu="1", scheduler="nobody") for i in range(count)))


async def test_list_pages_through_every_object(ws: Workspace, core: client.CoreV1Api) -> None:
    _pods(ws, 7)
    sink = Recorder()

    def list_pods(**kwargs: Any) -> Any:
        return core.list_namespaced_pod(ws.name, **kwargs)

    reflector = Reflector("pods", list_pods, sink, lambda: None, page_size=2)
    sink.objects["gone"] = {}  # held from before, deleted while the watch was down
    version = await reflector._list()
    assert sorted(sink.objects) == [f"p{i}" for i in range(7)]
    assert sink.pages == 4
    assert all(o["kind"] == "Pod" for o in sink.objects.values())
    assert version


async def test_watch_sees_changes_and_deletions(ws: Workspace, core: client.CoreV1Api) -> None:
    _pods(ws, 2)
    sink = Recorder()
    changed = asyncio.Event()

    def list_pods(**kwargs: Any) -> Any:
        return core.list_namespaced_pod(ws.name, **kwargs)

    reflector = Reflector("pods", list_pods, sink, changed.set, watch_timeout_s=30)
    task = asyncio.create_task(reflector.run())
    try:
        await asyncio.wait_for(reflector.synced.wait(), 10)
        await asyncio.to_thread(ws.delete_pod, "p0")
        await asyncio.to_thread(_pods_named, ws, "late")
        for _ in range(100):
            if "late" in sink.objects and "p0" not in sink.objects:
                break
            await asyncio.sleep(0.1)
        assert sorted(sink.objects) == ["late", "p1"]
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def _pods_named(ws: Workspace, name: str) -> None:
    ws.create(ws.pod(name, cpu="1", scheduler="nobody"))
