"""The binder: every pod handed to it is bound, whenever it is handed over, and each
Binding names the pod decided on by its UID."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest
from kubernetes_asyncio import client

from gangsched.binder import Binder
from gangsched.core.model.objects import GangKey, NodeName, PodKey
from gangsched.core.placement.capacity import Placement
from gangsched.dispatcher import Dispatcher


def placement(gang: str, size: int) -> Placement:
    return Placement(GangKey(f"ns/{gang}"),
                     tuple((PodKey(f"ns/{gang}-{i}"), NodeName("n1")) for i in range(size)))


class Response:
    """What the connection pool answers: 201 for every Binding, after a turn of the loop."""

    status = 201

    async def __aenter__(self) -> Response:
        await asyncio.sleep(0.001)
        return self

    async def __aexit__(self, *_: object) -> None:
        return None

    async def text(self) -> str:
        return ""


@pytest.fixture
async def posted() -> list[Mapping[str, Any]]:
    return []


@pytest.fixture
async def binder(monkeypatch: pytest.MonkeyPatch, posted: list[Mapping[str, Any]]) -> Binder:
    """A binder whose POSTs are recorded and answered 201, sending nothing."""
    binder = Binder(client.ApiClient(client.Configuration()), Dispatcher(bind_workers=4))

    async def post(url: str, body: Mapping[str, Any]) -> Response:
        posted.append(body)
        return Response()

    monkeypatch.setattr(binder, "_post", post)
    return binder


async def test_a_gang_handed_over_as_the_last_one_finishes_is_bound(binder: Binder) -> None:
    assert all(o.bound for o in await binder.bind_gang(placement("first", 3)))
    # At once, before the loop has run the callbacks of the workers that just finished.
    second = await asyncio.wait_for(binder.bind_gang(placement("second", 3)), timeout=2)
    assert [o.pod for o in second] == [f"ns/second-{i}" for i in range(3)]


async def test_more_binds_than_workers_all_go_out(binder: Binder) -> None:
    gangs = [asyncio.create_task(binder.bind_gang(placement(f"g{i}", 3))) for i in range(5)]
    outcomes = await asyncio.wait_for(asyncio.gather(*gangs), timeout=5)
    assert sum(len(o) for o in outcomes) == 15 and all(x.bound for o in outcomes for x in o)


async def test_each_binding_carries_the_uid_of_the_pod_decided_on(
        binder: Binder, posted: list[Mapping[str, Any]]) -> None:
    gang = placement("g", 2)
    await binder.bind_gang(gang, uids={gang.assignments[0][0]: "uid-0"})
    by_name = {body["metadata"]["name"]: body["metadata"] for body in posted}
    assert by_name["g-0"]["uid"] == "uid-0"
    assert "uid" not in by_name["g-1"]  # a pod the mirror no longer held: name alone
