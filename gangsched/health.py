"""The probes and the metrics page, each on its own path, served from the scheduler's loop.

Served by the same event loop that runs the scheduler, on purpose: a loop
stuck in a long synchronous call cannot answer, so the kubelet's probe times
out and restarts the process, which is what a liveness probe is for.

- ``/healthz`` (liveness): the scheduling loop is alive. While this replica
  schedules, a cycle must have run within ``stale_after_s`` (two resync
  periods: the loop runs one at least every period even when nothing
  changes). A follower, or a replica still listing the cluster, runs no
  cycles and is alive while it answers.
- ``/readyz`` (readiness): pods, nodes and PriorityClasses are listed in full,
  kopf has logged in, and no watch is failing (a list refused
  for want of a right, an API server that does not answer): its mirror would
  miss what changed. A follower is ready: it holds a warm
  mirror and takes over within one lease period; the body says it does not lead.
  The body also names the APIs this API server does not serve, and the features
  that are off for want of them (see :mod:`gangsched.discovery`).
- ``/metrics``: Prometheus text.

Every other path is a 404, so a probe pointed at a wrong path fails loudly
instead of reading the metrics page as health.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, Gauge, generate_latest

LEADER = Gauge("gangsched_leader", "1 while this replica schedules (holds the Lease), else 0")


@dataclass
class Health:
    """What the probes report, kept up to date by the parts of the process."""

    stale_after_s: float
    clock: Callable[[], float] = time.monotonic
    waiting_for: tuple[str, ...] = ("pods", "nodes", "priorityclasses", "kopf")
    """What has not finished listing (or, for kopf, starting) yet."""
    scheduling_since: float | None = None
    """When this replica started scheduling (leadership won, caches synced); None before."""
    last_cycle: float | None = None
    leader_election: bool = False
    failing: Callable[[], Mapping[str, str]] = dict
    """The watches whose last list or watch failed, and why."""
    unserved: Mapping[str, str] = field(default_factory=dict)
    """The APIs the API server does not serve, each with the features off for want of it."""

    def synced(self, part: str) -> None:
        self.waiting_for = tuple(p for p in self.waiting_for if p != part)

    def start_scheduling(self) -> None:
        self.scheduling_since = self.clock()
        LEADER.set(1)

    def stop_scheduling(self) -> None:
        self.scheduling_since = None
        LEADER.set(0)

    def cycle_ran(self) -> None:
        self.last_cycle = self.clock()

    def liveness(self) -> tuple[bool, str]:
        if self.scheduling_since is None:
            role = "follower, not leading" if self.leader_election else "starting"
            return True, f"ok: {role}"
        now = self.clock()
        since = max(self.scheduling_since, self.last_cycle or self.scheduling_since)
        quiet = now - since
        if quiet > self.stale_after_s:
            return False, (
                f"scheduling loop stalled: no cycle for {quiet:.1f}s "
                f"(at most {self.stale_after_s:g}s allowed)"
            )
        if self.last_cycle is None:
            return True, "ok: leading, no cycle yet"
        return True, f"ok: leading, last cycle {now - self.last_cycle:.1f}s ago"

    def readiness(self) -> tuple[bool, str]:
        ok, message = self._readiness()
        off = "; ".join(f"{api} not served: {features} off"
                        for api, features in sorted(self.unserved.items()))
        return ok, f"{message} ({off})" if off else message

    def _readiness(self) -> tuple[bool, str]:
        if self.waiting_for:
            return False, "not ready: waiting for " + ", ".join(self.waiting_for) + " to sync"
        if failing := self.failing():
            return False, "not ready: cannot watch " + ", ".join(
                f"{kind} ({why})" for kind, why in sorted(failing.items()))
        if self.scheduling_since is not None:
            return True, "ready: leading"
        if self.leader_election:
            return True, "ready: follower, not leading"
        return True, "ready: starting the scheduling loop"


@dataclass
class HealthServer:
    health: Health
    port: int
    host: str = "0.0.0.0"
    _runner: web.AppRunner | None = field(default=None, init=False)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/healthz", self._probe(self.health.liveness))
        app.router.add_get("/readyz", self._probe(self.health.readiness))
        app.router.add_get("/metrics", self._metrics)
        return app

    @staticmethod
    def _probe(
        check: Callable[[], tuple[bool, str]],
    ) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def handler(_: web.Request) -> web.Response:
            ok, message = check()
            return web.Response(status=200 if ok else 503, text=message + "\n")

        return handler

    @staticmethod
    async def _metrics(_: web.Request) -> web.Response:
        response = web.Response(body=generate_latest())
        response.content_type = CONTENT_TYPE_LATEST.split(";")[0]
        response.charset = "utf-8"
        return response

    async def start(self) -> None:
        self._runner = web.AppRunner(self.app(), access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.host, self.port).start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
