"""A leader acts only while its lease is surely its own; an unreachable API server is a
failed renewal, never an exception out of the election."""

from __future__ import annotations

import asyncio
import time

from kubernetes_asyncio.client import ApiClient, Configuration, V1Lease, V1LeaseSpec, V1ObjectMeta
from kubernetes_asyncio.leaderelection.leaderelectionrecord import LeaderElectionRecord

from gangsched.leadership import RENEW_DEADLINE_S, FencedLeaseLock, Leadership


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def lock_on(server: str, clock: Clock) -> FencedLeaseLock:
    configuration = Configuration(host=server)
    return FencedLeaseLock("gangsched", "default", "me", ApiClient(configuration), clock=clock)


def test_without_election_it_always_acts() -> None:
    assert Leadership().may_act()


async def test_acts_only_within_the_renew_deadline_of_its_last_write() -> None:
    clock = Clock()
    lock = lock_on("http://127.0.0.1:9", clock)
    leadership = Leadership(lock, clock=clock)
    assert not leadership.may_act(), "never written: not the leader yet"
    lock.written_at = clock.now
    clock.now += RENEW_DEADLINE_S - 0.5
    assert leadership.may_act()
    clock.now += 1  # frozen past the deadline: a follower may hold the lease by now
    assert not leadership.may_act()
    lock.written_at = clock.now  # renewed again
    assert leadership.may_act()
    await lock.api_instance.api_client.close()


async def test_unreachable_api_server_is_a_failed_attempt_not_an_exception() -> None:
    clock = Clock()
    lock = lock_on("http://127.0.0.1:9", clock)  # nothing listens on port 9
    found, failure = await lock.get("gangsched", "default")
    assert found is False and getattr(failure, "status", None) == 503
    assert lock.written_at is None
    await lock.api_instance.api_client.close()


async def test_a_silent_api_server_is_a_failed_attempt_within_the_call_timeout() -> None:
    """Behind a network partition a connection is accepted and never answered: the renew
    loop must see a failure in time to step down before the lease passes, not hang."""
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # reads until the client gives up, never answers

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    clock = Clock()
    configuration = Configuration(host=f"http://127.0.0.1:{port}")
    lock = FencedLeaseLock("gangsched", "default", "me", ApiClient(configuration), clock=clock,
                           call_timeout_s=0.2)
    started = time.monotonic()
    found, failure = await lock.get("gangsched", "default")
    assert found is False and getattr(failure, "status", None) == 503
    lock.lease_reference = V1Lease(metadata=V1ObjectMeta(name="gangsched"), spec=V1LeaseSpec())
    record = LeaderElectionRecord("me", "15", "2026-01-01 00:00:00.000000",
                                  "2026-01-01 00:00:00.000000")
    assert await lock.update("gangsched", "default", record) is False
    assert await lock.create("gangsched", "default", record) is False
    assert time.monotonic() - started < 3 * 0.2 + 1.0
    assert lock.written_at is None
    await lock.api_instance.api_client.close()
    server.close()
    await server.wait_closed()
