"""The probes' verdicts, with an injected clock: what the kubelet acts on."""

from __future__ import annotations

from gangsched.health import Health


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_not_ready_until_every_cache_is_synced_then_ready() -> None:
    health = Health(stale_after_s=10, clock=Clock())
    ok, message = health.readiness()
    assert not ok
    assert message == "not ready: waiting for pods, nodes, priorityclasses, kopf to sync"
    for part in ("pods", "nodes", "priorityclasses"):
        health.synced(part)
    assert health.readiness() == (False, "not ready: waiting for kopf to sync")
    health.synced("kopf")
    assert health.readiness()[0]


def test_a_follower_is_alive_and_ready_but_says_it_does_not_lead() -> None:
    clock = Clock()
    health = Health(stale_after_s=10, clock=clock, leader_election=True)
    for part in health.waiting_for:
        health.synced(part)
    clock.now += 3600  # a follower runs no cycles, however long it waits
    assert health.liveness() == (True, "ok: follower, not leading")
    assert health.readiness() == (True, "ready: follower, not leading")


def test_the_leader_is_alive_while_cycles_run_and_not_once_they_stop() -> None:
    clock = Clock()
    health = Health(stale_after_s=10, clock=clock, leader_election=True)
    health.start_scheduling()
    clock.now += 9
    assert health.liveness() == (True, "ok: leading, no cycle yet")
    health.cycle_ran()
    clock.now += 4
    assert health.liveness() == (True, "ok: leading, last cycle 4.0s ago")
    clock.now += 7
    ok, message = health.liveness()
    assert not ok
    assert message == "scheduling loop stalled: no cycle for 11.0s (at most 10s allowed)"
    health.cycle_ran()
    assert health.liveness()[0]


def test_losing_the_lease_makes_it_a_follower_again() -> None:
    clock = Clock()
    health = Health(stale_after_s=10, clock=clock, leader_election=True)
    health.start_scheduling()
    clock.now += 60
    assert not health.liveness()[0]
    health.stop_scheduling()
    assert health.liveness() == (True, "ok: follower, not leading")


def test_a_failing_watch_makes_a_synced_replica_unready_until_it_lists_again() -> None:
    failing: dict[str, str] = {}
    health = Health(stale_after_s=10, clock=Clock(), failing=lambda: dict(failing))
    for part in health.waiting_for:
        health.synced(part)
    health.start_scheduling()
    assert health.readiness() == (True, "ready: leading")
    failing["csidrivers"] = "403 Forbidden"
    assert health.readiness() == (False, "not ready: cannot watch csidrivers (403 Forbidden)")
    assert health.liveness()[0], "alive: restarting gives it no right it lacks"
    failing.clear()
    assert health.readiness()[0]
