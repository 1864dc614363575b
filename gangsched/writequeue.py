"""A bounded, coalescing queue of writes to the API server, as client-go's workqueue.

One entry per object: a write queued for an object that already waits
replaces the waiting one (the latest desired state wins), so the queue never
holds more than one write per object however often a cycle changes its mind,
and a burst of changes costs one request, not one each. A fixed number of
workers send them, oldest object first.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Any

Send = Callable[[str, Callable[[], Awaitable[Any]]], Awaitable[bool]]


class WriteQueue:
    """``wait_turn`` is awaited before each write is taken from the queue: while
    it waits, writes queued for the same object still replace each other."""

    def __init__(self, send: Send, workers: int,
                 wait_turn: Callable[[], Awaitable[None]] | None = None) -> None:
        self._send = send
        self._workers = workers
        self._wait_turn = wait_turn
        self._pending: dict[Hashable, tuple[str, Callable[[], Awaitable[Any]]]] = {}
        self._running: set[asyncio.Task[None]] = set()

    def __len__(self) -> int:
        return len(self._pending)

    def put(self, key: Hashable, what: str, make: Callable[[], Awaitable[Any]]) -> None:
        """Queue the write for ``key``, replacing one that has not gone out yet."""
        self._pending[key] = (what, make)
        # A worker that just found the queue empty is done but may not have left
        # the set yet: count only live ones, or this write could wait for the next.
        if sum(not task.done() for task in self._running) < self._workers:
            task = asyncio.create_task(self._work())
            self._running.add(task)
            task.add_done_callback(self._running.discard)

    async def _work(self) -> None:
        while self._pending:
            if self._wait_turn is not None:
                await self._wait_turn()
                if not self._pending:
                    return
            key = next(iter(self._pending))
            what, make = self._pending.pop(key)
            await self._send(what, make)

    async def drain(self) -> None:
        """Wait until every queued write went out (shutdown, tests)."""
        while self._running:
            await asyncio.gather(*list(self._running), return_exceptions=True)
