"""Binding whole gangs through the pods' ``binding`` subresource.

The pods of a gang are bound concurrently (bounded), because a gang of 64
workers bound one request at a time would sit half-bound for seconds while
its first members already start. The caller has assumed every pod before the
first request goes out; the outcome of each pod comes back so the caller can
confirm or forget it.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson
import structlog
from kubernetes_asyncio import client
from prometheus_client import Histogram

from gangsched.core.model import NodeName, PodKey
from gangsched.core.placement import Placement

log = structlog.get_logger(__name__)

FIELD_MANAGER = "gangsched"
"""The field manager every write of ours names, so ``managedFields`` tell whose they are."""

BIND_SECONDS = Histogram(
    "gangsched_bind_seconds", "Latency of one binding call, from request to answer",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)


BIND_PARAMS = {"fieldManager": FIELD_MANAGER}
BIND_TIMEOUT = aiohttp.ClientTimeout(total=30)
"""A bind unanswered this long failed: its pod backs off and is placed again."""

NOT_LEADING = "not bound: this replica's lease was not renewed within the renew deadline"


@dataclass(frozen=True, slots=True)
class BindOutcome:
    pod: PodKey
    node: NodeName
    status: int
    """HTTP status of the binding call; 0 when the request itself failed."""
    detail: str = ""
    sent: bool = True
    """False when the request never went out (this replica was not sure it leads)."""

    @property
    def bound(self) -> bool:
        return 200 <= self.status <= 299

    @property
    def refused(self) -> bool:
        """Sent and not bound: the API server said no, or did not answer."""
        return self.sent and not self.bound


def status_message(body: str) -> str:
    """The ``message`` of a Kubernetes Status body, else the body itself."""
    try:
        status = json.loads(body)
    except ValueError:
        return body
    message = status.get("message") if isinstance(status, dict) else None
    return message if isinstance(message, str) and message else body


class Binder:
    """``may_bind`` is asked right before each request: a leader that cannot be sure it
    still holds its lease sends nothing, whatever it decided before."""

    def __init__(
        self,
        api: client.ApiClient,
        concurrency: int,
        may_bind: Callable[[], bool] = lambda: True,
    ) -> None:
        self._api = api
        self._url = f"{api.configuration.host}/api/v1/namespaces"
        rest = api.rest_client
        # What the generated client adds to every request on this connection pool.
        self._route: dict[str, Any] = {
            name: value for name, value in (("proxy", rest.proxy),
                                            ("proxy_headers", rest.proxy_headers),
                                            ("server_hostname", rest.server_hostname))
            if value
        }
        self._concurrency = concurrency
        self._may_bind = may_bind
        # Binds wait in one queue for a bounded set of workers, not as a coroutine
        # each: a backlog of 10,000 binds is 10,000 small tuples, not 10,000 frames.
        self._queue: deque[tuple[PodKey, NodeName, asyncio.Future[BindOutcome]]] = deque()
        self._workers: set[asyncio.Task[None]] = set()
        self._working = 0
        """Workers started and not yet returned (counted here, not by their tasks'
        done-callbacks, which run a turn of the loop later)."""
        self._outstanding = 0
        """Binds queued or in flight."""
        self._slot_free = asyncio.Event()
        self._slot_free.set()

    async def wait_slot_free(self) -> None:
        """Return once no bind waits for a slot: other writes go after binds."""
        await self._slot_free.wait()

    async def bind_gang(self, placement: Placement) -> list[BindOutcome]:
        loop = asyncio.get_running_loop()
        futures: list[asyncio.Future[BindOutcome]] = []
        for pod, node in placement.assignments:
            future: asyncio.Future[BindOutcome] = loop.create_future()
            self._queue.append((pod, node, future))
            futures.append(future)
        self._outstanding += len(futures)
        if self._outstanding > self._concurrency:
            self._slot_free.clear()
        # A worker for every bind, queued or in flight, up to the concurrency: a new
        # gang does not queue behind binds still waiting for their answer.
        while self._working < min(self._concurrency, self._outstanding):
            self._working += 1
            worker = asyncio.create_task(self._work())
            self._workers.add(worker)
            worker.add_done_callback(self._workers.discard)
        return list(await asyncio.gather(*futures))

    async def _work(self) -> None:
        """Bind queued pods one at a time until none is left."""
        try:
            await self._drain_queue()
        finally:
            self._working -= 1

    async def _drain_queue(self) -> None:
        while self._queue:
            pod, node, future = self._queue.popleft()
            try:
                outcome = await self._bind_one(pod, node)
            except asyncio.CancelledError:
                future.cancel()
                raise
            except Exception as error:  # not a refusal: the caller's gather raises it
                if not future.done():
                    future.set_exception(error)
                continue
            finally:
                self._outstanding -= 1
                if self._outstanding <= self._concurrency:
                    self._slot_free.set()
            if not future.done():  # the gang's bind was cancelled meanwhile
                future.set_result(outcome)

    async def _bind_one(self, pod: PodKey, node: NodeName) -> BindOutcome:
        if not self._may_bind():
            return BindOutcome(pod, node, 0, NOT_LEADING, sent=False)
        namespace, name = pod.split("/", 1)
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        started = time.perf_counter()
        try:
            async with await self._post(
                f"{self._url}/{namespace}/pods/{name}/binding", body
            ) as response:
                detail = ("" if 200 <= response.status <= 299
                          else status_message(await response.text())[:300])
                return BindOutcome(pod, node, response.status, detail)
        except (TimeoutError, aiohttp.ClientError) as error:
            return BindOutcome(pod, node, 0, str(error) or type(error).__name__)
        finally:
            BIND_SECONDS.observe(time.perf_counter() - started)

    async def _post(self, url: str, body: Mapping[str, Any]) -> aiohttp.ClientResponse:
        """POST ``body`` on the client's own connections, with its credentials.

        Not through the generated client: a bind is the one request sent
        thousands of times a second, and its per-call work (sanitising,
        parameter tuples, model checks) costs more than the request itself.
        """
        headers = {"Content-Type": "application/json", "Accept": "application/json",
                   "User-Agent": self._api.user_agent}
        await self._api.update_params_for_auth(headers, [], ["BearerToken"])  # tokens rotate
        response: aiohttp.ClientResponse = await self._api.rest_client.pool_manager.post(
            url, data=orjson.dumps(body), params=BIND_PARAMS, headers=headers,
            timeout=BIND_TIMEOUT, **self._route,
        )
        return response
