"""The binder's queue: every pod handed to it is bound, whenever it is handed over."""

from __future__ import annotations

import asyncio

import pytest
from kubernetes_asyncio import client

from gangsched.binder import Binder, BindOutcome
from gangsched.core.model import GangKey, NodeName, PodKey
from gangsched.core.placement import Placement


def placement(gang: str, size: int) -> Placement:
    return Placement(GangKey(f"ns/{gang}"),
                     tuple((PodKey(f"ns/{gang}-{i}"), NodeName("n1")) for i in range(size)))


@pytest.fixture
async def binder(monkeypatch: pytest.MonkeyPatch) -> Binder:
    """A binder whose binding call answers 201 after a turn of the loop, sending nothing."""
    binder = Binder(client.ApiClient(client.Configuration()), concurrency=4)

    async def bound(pod: PodKey, node: NodeName) -> BindOutcome:
        await asyncio.sleep(0.001)
        return BindOutcome(pod, node, 201)

    monkeypatch.setattr(binder, "_bind_one", bound)
    return binder


async def test_a_gang_handed_over_as_the_last_one_finishes_is_bound(binder: Binder) -> None:
    assert all(o.bound for o in await binder.bind_gang(placement("first", 3)))
    # At once, before the loop has run the callbacks of the workers that just finished.
    second = await asyncio.wait_for(binder.bind_gang(placement("second", 3)), timeout=2)
    assert [o.pod for o in second] == [f"ns/second-{i}" for i in range(3)]


async def test_more_binds_than_workers_all_go_out_and_writes_wait_for_them(
        binder: Binder) -> None:
    gangs = [asyncio.create_task(binder.bind_gang(placement(f"g{i}", 3))) for i in range(5)]
    await asyncio.sleep(0)
    waiting_writes = asyncio.create_task(binder.wait_slot_free())
    await asyncio.sleep(0)
    assert not waiting_writes.done()  # 15 binds for 4 slots: other writes wait
    outcomes = await asyncio.wait_for(asyncio.gather(*gangs), timeout=5)
    assert sum(len(o) for o in outcomes) == 15 and all(x.bound for o in outcomes for x in o)
    await asyncio.wait_for(waiting_writes, timeout=1)
