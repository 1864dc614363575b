"""Leader election on a Lease, fenced: a leader acts only while its lease is surely its own.

kubernetes-asyncio's election finds out it lost the lease only when its renew
loop next runs. A leader frozen (SIGSTOP, a long GC pause, a starved VM) or
cut off from the API server wakes up still believing it leads, while another
replica took the lease once it expired; until the renew loop notices, both
bind into the same room. kube-scheduler's rule closes that window: a leader
gives up after ``renew_deadline`` without a successful renewal, and
``renew_deadline`` is shorter than ``lease_duration``, the time a follower
waits before taking over. :meth:`Leadership.may_act` applies that rule before
every cycle and every bind, on a monotonic clock that keeps counting while
the process is frozen.

The lock also never lets a connection error escape: an API server restart
must look like a failed renewal (retried, then leadership lost), not crash
every replica at once. Nor does it wait on a silent connection: the client
has no timeout of its own, and behind a network partition a Lease read would
hang for good, the renew loop with it, and the cut-off leader would never
step down. Every Lease call gives up after ``LEASE_CALL_TIMEOUT_S``, so one
renewal (a read and a write) fits within the renew deadline.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import aiohttp
import structlog
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException
from kubernetes_asyncio.leaderelection.leaderelectionrecord import LeaderElectionRecord
from kubernetes_asyncio.leaderelection.resourcelock.leaselock import LeaseLock

log = structlog.get_logger(__name__)

LEASE_DURATION_S = 15
RENEW_DEADLINE_S = 10
RETRY_PERIOD_S = 2
LEASE_CALL_TIMEOUT_S = RENEW_DEADLINE_S / 2
UNREACHABLE = 503


def _unreachable(detail: str) -> ApiException:
    """A connection failure in the shape the election expects of a failed read."""
    failure = ApiException(status=UNREACHABLE, reason=f"API server unreachable: {detail}")
    failure.body = json.dumps({"code": UNREACHABLE, "message": detail}).encode()
    return failure


class FencedLeaseLock(LeaseLock):  # type: ignore[misc]  # the library is untyped
    """A LeaseLock that notes when it last wrote the Lease and turns connection errors
    and calls that outlast ``call_timeout_s`` into failed attempts."""

    def __init__(self, name: str, namespace: str, identity: str, api_client: ApiClient,
                 *, clock: Callable[[], float] = time.monotonic,
                 call_timeout_s: float = LEASE_CALL_TIMEOUT_S) -> None:
        super().__init__(name, namespace, identity, api_client)
        self.clock = clock
        self.call_timeout_s = call_timeout_s
        self.written_at: float | None = None

    async def get(
        self, name: str, namespace: str
    ) -> tuple[bool, LeaderElectionRecord] | tuple[bool, Exception] | tuple[bool, None]:
        try:
            async with asyncio.timeout(self.call_timeout_s):
                found: tuple[bool, LeaderElectionRecord] | tuple[bool, Exception] = (
                    await super().get(name, namespace))
        except (aiohttp.ClientError, TimeoutError) as error:
            return False, _unreachable(self._log_unreachable(error))
        return found

    async def create(
        self, name: str, namespace: str, election_record: LeaderElectionRecord
    ) -> bool:
        return self._noted(await self._guarded(super().create(name, namespace,
                                                              election_record)))

    async def update(
        self, name: str, namespace: str, updated_record: LeaderElectionRecord
    ) -> bool:
        return self._noted(await self._guarded(super().update(name, namespace,
                                                              updated_record)))

    async def _guarded(self, attempt: Awaitable[bool]) -> bool:
        try:
            async with asyncio.timeout(self.call_timeout_s):
                return await attempt
        except (aiohttp.ClientError, TimeoutError) as error:
            self._log_unreachable(error)
            return False

    def _log_unreachable(self, error: Exception) -> str:
        detail = str(error) or f"no answer within {self.call_timeout_s:g}s"
        log.warning("lease_unreachable", lease=f"{self.namespace}/{self.name}", error=detail)
        return detail

    async def release(self) -> bool:
        """Give the Lease up: no holder, so a follower takes it at its next try
        (``RETRY_PERIOD_S``) instead of waiting ``LEASE_DURATION_S`` for it to run out.

        As client-go's ``ReleaseOnCancel``. The Lease is read again and written with
        that read's resourceVersion, so the write fails rather than clear a Lease
        another replica took meanwhile. Called only once nothing of this process
        acts any more.
        """
        released = await self._guarded(self._clear())
        if released:
            self.written_at = None
            log.info("lease_released", lease=f"{self.namespace}/{self.name}")
        return released

    async def _clear(self) -> bool:
        try:
            lease = await self.api_instance.read_namespaced_lease(self.name, self.namespace)
            if lease.spec is None or lease.spec.holder_identity != self.identity:
                return False
            lease.spec.holder_identity = None
            lease.spec.lease_duration_seconds = 1
            await self.api_instance.replace_namespaced_lease(
                name=self.name, namespace=self.namespace, body=lease)
        except ApiException as error:
            log.warning("lease_release_refused", lease=f"{self.namespace}/{self.name}",
                        status=error.status)
            return False
        return True

    def _noted(self, written: bool) -> bool:
        if written:
            self.written_at = self.clock()
        return written


@dataclass
class Leadership:
    """Whether this process may schedule now; without election it always may."""

    lock: FencedLeaseLock | None = None
    renew_deadline_s: float = RENEW_DEADLINE_S
    clock: Callable[[], float] = time.monotonic
    _fenced: bool = field(default=False, repr=False)

    def may_act(self) -> bool:
        """True while the last successful write of the Lease is younger than the renew
        deadline: a follower cannot have taken the lease yet."""
        if self.lock is None:
            return True
        written = self.lock.written_at
        fresh = written is not None and self.clock() - written < self.renew_deadline_s
        if not fresh and not self._fenced and written is not None:
            log.error("leadership_unsure", lease=f"{self.lock.namespace}/{self.lock.name}",
                      since_renewal_s=round(self.clock() - written, 1),
                      renew_deadline_s=self.renew_deadline_s)
        self._fenced = not fresh
        return fresh

    async def release(self) -> None:
        """On a clean stop: hand the Lease over at once if this process surely holds it."""
        if self.lock is not None and self.may_act():
            await self.lock.release()
