"""Binding whole gangs through the pods' ``binding`` subresource.

The pods of a gang are bound concurrently (bounded, by the dispatcher's bind
workers), because a gang of 64 workers bound one request at a time would sit
half-bound for seconds while its first members already start. The caller has
assumed every pod before the first request goes out; the outcome of each pod
comes back so the caller can confirm or forget it.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson
import structlog
from kubernetes_asyncio import client
from prometheus_client import Histogram

from gangsched.core.fit.volumes import SELECTED_NODE_ANNOTATION
from gangsched.core.model.objects import NodeName, PodKey
from gangsched.core.placement.capacity import Placement
from gangsched.dispatcher import Answer, Call, Dispatcher, Rank, answer_of, status_message

log = structlog.get_logger(__name__)

FIELD_MANAGER = "gangsched"
"""The field manager every write of ours names, so ``managedFields`` tell whose they are."""

BIND_SECONDS = Histogram(
    "gangsched_bind_seconds", "Latency of one binding call, from request to answer",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)


MERGE_PATCH = "application/merge-patch+json"
BIND_PARAMS = {"fieldManager": FIELD_MANAGER}
BIND_TIMEOUT = aiohttp.ClientTimeout(total=30)
"""A bind unanswered this long failed: its pod backs off and is placed again."""


@dataclass(frozen=True, slots=True)
class BindOutcome:
    pod: PodKey
    node: NodeName
    status: int
    """HTTP status of the binding call; 0 when the request itself failed."""
    detail: str = ""
    sent: bool = True
    """False when the request never went out (this replica was not sure it leads, or
    a newer call for the pod replaced it)."""

    @property
    def bound(self) -> bool:
        return 200 <= self.status <= 299

    @property
    def refused(self) -> bool:
        """Sent and not bound: the API server said no, or did not answer."""
        return self.sent and not self.bound


class Binder:
    """Hands binds to the dispatcher and turns its answers into outcomes.

    Each Binding carries the UID of the pod decided on: a pod deleted and
    created again under the same name while its bind waited is another pod,
    and the API server refuses the bind (409) instead of binding it unseen.
    """

    def __init__(self, api: client.ApiClient, dispatcher: Dispatcher) -> None:
        self._api = api
        self._dispatcher = dispatcher
        self._url = f"{api.configuration.host}/api/v1/namespaces"
        rest = api.rest_client
        # What the generated client adds to every request on this connection pool.
        self._route: dict[str, Any] = {
            name: value for name, value in (("proxy", rest.proxy),
                                            ("proxy_headers", rest.proxy_headers),
                                            ("server_hostname", rest.server_hostname))
            if value
        }

    async def bind_gang(
        self, placement: Placement, uids: Mapping[PodKey, str] | None = None
    ) -> list[BindOutcome]:
        """Bind every pod of the placement; ``uids``: the UID of each pod decided on."""
        loop = asyncio.get_running_loop()
        uids = uids or {}
        futures: list[asyncio.Future[Answer]] = []
        for pod, node in placement.assignments:
            done: asyncio.Future[Answer] = loop.create_future()
            uid = uids.get(pod, "")
            self._dispatcher.submit(Call(
                (uid or f"pod/{pod}", ""), Rank.BIND, "bind",
                functools.partial(self._bind_one, pod, uid, node), done=done))
            futures.append(done)
        answers = await asyncio.gather(*futures)
        return [
            BindOutcome(pod, node, answer.status, answer.detail, answer.sent)
            for (pod, node), answer in zip(placement.assignments, answers, strict=True)
        ]

    def select_claim_node(self, claim: str, node: NodeName | None) -> None:
        """Give a WaitForFirstConsumer claim the node its pod was placed on (None: take
        it back). It ranks with other writes a Binding waits for, above evictions and
        status writes, and is retried until accepted or replaced; the pod's Binding
        itself waits until the watch shows the claim bound (core.provisioning)."""
        namespace, name = claim.split("/", 1)
        body = {"metadata": {"annotations": {SELECTED_NODE_ANNOTATION: node}}}
        self._dispatcher.submit(Call(
            (f"persistentvolumeclaim/{claim}", ""), Rank.ALLOCATE, f"claim node {claim}",
            lambda: answer_of(client.CoreV1Api(self._api).patch_namespaced_persistent_volume_claim(
                name, namespace, body, field_manager=FIELD_MANAGER, _content_type=MERGE_PATCH,
                _preload_content=False)),
            retry=True,
        ))

    async def _bind_one(self, pod: PodKey, uid: str, node: NodeName) -> Answer:
        namespace, name = pod.split("/", 1)
        metadata = {"name": name, "namespace": namespace}
        if uid:
            metadata["uid"] = uid
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": metadata,
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        started = time.perf_counter()
        try:
            async with await self._post(
                f"{self._url}/{namespace}/pods/{name}/binding", body
            ) as response:
                detail = ("" if 200 <= response.status <= 299
                          else status_message(await response.text())[:300])
                return Answer(response.status, detail)
        except (TimeoutError, aiohttp.ClientError) as error:
            return Answer(0, str(error) or type(error).__name__)
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
