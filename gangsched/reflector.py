"""List+watch of one resource kind, feeding a sink with raw JSON objects.

Raw dicts (``_preload_content=False``) rather than client models: converting
thousands of pods into generated model classes costs more than the whole
scheduling pass, and the core reads plain dicts at its edge anyway.

The reflector lists, hands the sink the complete set (``replace``), then
watches from the list's resourceVersion. A 410 Gone (history compacted) or a
broken stream leads to a fresh list, so the sink never misses a deletion.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import aiohttp
import orjson
import structlog
from kubernetes_asyncio.client.exceptions import ApiException

from gangsched.core.kubeobjects.fields import RawObject

log = structlog.get_logger(__name__)

ListCall = Callable[..., Awaitable[Any]]


class Sink(Protocol):
    """Where objects go; ``upsert`` and ``delete`` say whether the change matters."""

    def listed(self, kind: str, page: list[RawObject], seen: set[str]) -> None:
        """Take one page of a list; add each object's key to ``seen``."""

    def list_done(self, kind: str, seen: set[str]) -> None:
        """Drop every object of the kind the list did not return."""

    def upsert(self, kind: str, obj: RawObject) -> bool: ...

    def delete(self, kind: str, obj: RawObject) -> bool: ...


class Gone(Exception):
    """The watch's resourceVersion is too old: re-list."""


async def raise_for_status(response: aiohttp.ClientResponse) -> None:
    """Turn a non-2xx raw response into Gone or ApiException, releasing it.

    Calls made with ``_preload_content=False`` skip the client's own status
    check, so every such call goes through here.
    """
    if 200 <= response.status <= 299:
        return
    body = await response.text()
    response.release()
    if response.status == 410:
        raise Gone()
    raise ApiException(status=response.status, reason=f"{response.reason}: {body[:300]}")


async def json_lines(response: aiohttp.ClientResponse) -> AsyncIterator[RawObject]:
    """Decode a watch stream, one JSON event a line, without a line-length limit."""
    buffer = b""
    async for chunk in response.content.iter_any():
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            if line.strip():
                yield orjson.loads(line)
    if buffer.strip():
        yield orjson.loads(buffer)


@dataclass
class Reflector:
    kind: str
    list_call: ListCall
    sink: Sink
    on_change: Callable[[], None]
    watch_timeout_s: int = 300
    page_size: int = 500
    synced: asyncio.Event = field(default_factory=asyncio.Event)
    failure: str | None = None
    """Why the last list or watch failed, until a list succeeds again: while it is set the
    mirror may be missing what changed, and the replica says it is not ready."""

    async def run(self) -> None:
        backoff = 0.2
        while True:
            try:
                version = await self._list()
                self.synced.set()
                self.failure = None
                backoff = 0.2
                while True:
                    version = await self._watch(version)
            except Gone:
                log.info("watch_expired", kind=self.kind)
            except ApiException as error:
                if error.status == 404:
                    # The resource is not served (an optional CRD): look again later.
                    self.synced.set()
                    await asyncio.sleep(30)
                    continue
                log.warning("list_watch_failed", kind=self.kind, status=error.status,
                            reason=error.reason)
                self.failure = f"{error.status} {error.reason}"
            except (TimeoutError, aiohttp.ClientError, orjson.JSONDecodeError) as error:
                log.warning("list_watch_failed", kind=self.kind, error=str(error))
                self.failure = str(error) or type(error).__name__
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 10.0)

    async def _list(self) -> str:
        """List in pages, each handed on as it comes: a cluster of many thousand pods is
        never one huge response, nor held raw all at once."""
        seen: set[str] = set()
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"limit": self.page_size, "_preload_content": False}
            if token:
                kwargs["_continue"] = token
            response = await self.list_call(**kwargs)
            await raise_for_status(response)
            try:
                body = orjson.loads(await response.read())
            finally:
                response.release()
            kind = body.get("kind", "").removesuffix("List")
            api_version = body.get("apiVersion", "")
            items: list[RawObject] = []
            for item in body.get("items") or []:  # list items come without kind/apiVersion
                if isinstance(item, dict):
                    item.setdefault("kind", kind)
                    item.setdefault("apiVersion", api_version)
                    items.append(item)
            self.sink.listed(self.kind, items, seen)
            metadata = body.get("metadata") or {}
            token = metadata.get("continue")
            if not token:
                break
        self.sink.list_done(self.kind, seen)
        self.on_change()
        return str(metadata.get("resourceVersion", ""))

    async def _watch(self, version: str) -> str:
        response = await self.list_call(
            watch=True,
            resource_version=version,
            allow_watch_bookmarks=True,
            timeout_seconds=self.watch_timeout_s,
            _preload_content=False,
            _request_timeout=self.watch_timeout_s + 30,
        )
        await raise_for_status(response)
        try:
            async for event in json_lines(response):
                kind, obj = event.get("type"), event.get("object") or {}
                if kind == "ERROR":
                    if obj.get("code") == 410:
                        raise Gone()
                    raise ApiException(status=obj.get("code", 500), reason=obj.get("message"))
                version = str(obj.get("metadata", {}).get("resourceVersion", version))
                if kind == "BOOKMARK":
                    continue
                if kind == "DELETED":
                    matters = self.sink.delete(self.kind, obj)
                else:
                    matters = self.sink.upsert(self.kind, obj)
                if matters:
                    self.on_change()
        finally:
            response.release()
        return version
