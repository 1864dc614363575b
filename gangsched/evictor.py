"""Evicting the victims of a preemption through the Eviction API, whole gangs or none.

The Eviction API, not a delete, because it honours PodDisruptionBudgets: a
429 means a budget forbids the eviction now. A budget is checked per pod,
so evicting a gang pod by pod could stop half-way and leave the gang below
its minMember, the very thing preemption must never do. So every pod of
every victim is first evicted as a dry run (the API server checks the
budgets and changes nothing); only if all of them would go are they
evicted for real.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

import aiohttp
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from gangsched.binder import FIELD_MANAGER, status_message
from gangsched.core.model import PodKey

NOT_LEADING = "not evicted: this replica's lease was not renewed within the renew deadline"


@dataclass(frozen=True, slots=True)
class EvictionOutcome:
    pod: PodKey
    status: int
    """HTTP status; 0 when the request itself failed."""
    detail: str = ""

    @property
    def evicted(self) -> bool:
        """Gone or going: a pod already deleted (404) needs no eviction."""
        return 200 <= self.status <= 299 or self.status == 404


class Evictor:
    """``may_evict`` is asked right before each request, as the binder's ``may_bind``: a
    leader that cannot be sure it still holds its lease evicts nothing."""

    def __init__(
        self,
        core: client.CoreV1Api,
        concurrency: int,
        may_evict: Callable[[], bool] = lambda: True,
    ) -> None:
        self._core = core
        self._slots = asyncio.Semaphore(concurrency)
        self._may_evict = may_evict

    async def evict_all(
        self, pods: tuple[PodKey, ...]
    ) -> tuple[list[EvictionOutcome], list[EvictionOutcome]]:
        """(refusals of the dry run, outcomes of the real evictions).

        Nothing is evicted when the dry run refuses any pod; the second list
        is then empty.
        """
        trial = await asyncio.gather(*(self._evict(pod, dry_run=True) for pod in pods))
        refused = [outcome for outcome in trial if not outcome.evicted]
        if refused:
            return refused, []
        done = await asyncio.gather(*(self._evict(pod, dry_run=False) for pod in pods))
        return [], list(done)

    async def _evict(self, pod: PodKey, *, dry_run: bool) -> EvictionOutcome:
        namespace, name = pod.split("/", 1)
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
        }
        extra = {"dry_run": "All"} if dry_run else {}
        async with self._slots:
            if not self._may_evict():
                return EvictionOutcome(pod, 0, NOT_LEADING)
            try:
                response = await self._core.create_namespaced_pod_eviction(
                    name, namespace, body, field_manager=FIELD_MANAGER,
                    _preload_content=False, **extra
                )
            except ApiException as error:
                return EvictionOutcome(pod, error.status or 0, str(error.reason))
            except (TimeoutError, aiohttp.ClientError) as error:
                return EvictionOutcome(pod, 0, str(error))
            try:
                detail = ("" if 200 <= response.status <= 299
                          else status_message(await response.text())[:300])
                return EvictionOutcome(pod, response.status, detail)
            finally:
                response.release()
