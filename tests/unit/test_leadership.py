"""A leader acts only while its lease is surely its own; an unreachable API server is a
failed renewal, never an exception out of the election."""

from __future__ import annotations

from kubernetes_asyncio.client import ApiClient, Configuration

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
