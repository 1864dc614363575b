"""Writes coalesce per object: the latest wins, a burst costs one request, workers are bounded."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from gangsched.writequeue import WriteQueue


class Server:
    """Stands in for the network only: records what reached it and how many at once."""

    def __init__(self) -> None:
        self.received: list[str] = []
        self.in_flight = 0
        self.most_in_flight = 0

    async def send(self, what: str, make: Callable[[], Awaitable[Any]]) -> bool:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        await asyncio.sleep(0.01)
        self.received.append(await make())
        self.in_flight -= 1
        return True


def body(text: str) -> Callable[[], Awaitable[str]]:
    async def make() -> str:
        return text
    return make


async def test_a_burst_for_one_object_sends_only_the_latest() -> None:
    server = Server()
    queue = WriteQueue(server.send, workers=1)
    queue.put("blocker", "w", body("first of another object"))  # keeps the worker busy
    for version in range(100):
        queue.put("pod-a", "w", body(f"pod-a v{version}"))
    assert len(queue) <= 2, "one entry per object, however many changes"
    await queue.drain()
    assert server.received == ["first of another object", "pod-a v99"]


async def test_objects_go_out_oldest_first_with_bounded_workers() -> None:
    server = Server()
    queue = WriteQueue(server.send, workers=3)
    for name in range(20):
        queue.put(name, "w", body(f"object {name}"))
    await queue.drain()
    assert server.received == [f"object {n}" for n in range(20)]
    assert server.most_in_flight == 3
    assert len(queue) == 0


async def test_a_write_queued_as_the_last_worker_stops_still_goes_out() -> None:
    server = Server()
    queue = WriteQueue(server.send, workers=1)
    queue.put("a", "w", body("a"))
    await queue.drain()
    queue.put("b", "w", body("b"))
    await queue.drain()
    assert server.received == ["a", "b"]


async def test_writes_wait_their_turn_and_coalesce_meanwhile() -> None:
    server = Server()
    turn = asyncio.Event()

    async def wait_turn() -> None:
        await turn.wait()

    queue = WriteQueue(server.send, workers=2, wait_turn=wait_turn)
    for version in range(10):
        queue.put("group-a", "w", body(f"group-a v{version}"))
        queue.put("group-b", "w", body(f"group-b v{version}"))
        await asyncio.sleep(0)
    await asyncio.sleep(0.05)
    assert server.received == [], "nothing goes out before its turn"
    turn.set()
    await queue.drain()
    assert sorted(server.received) == ["group-a v9", "group-b v9"]
