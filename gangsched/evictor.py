"""Evicting the victims of a preemption through the Eviction API, whole gangs or none.

The Eviction API, not a delete, because it honours PodDisruptionBudgets: a
429 means a budget forbids the eviction now. A budget is checked per pod,
so evicting a gang pod by pod could stop half-way and leave the gang below
its minMember, the very thing preemption must never do. So every pod of
every victim is first evicted as a dry run (the API server checks the
budgets and changes nothing); only if all of them would go are they
evicted for real.

Each Eviction carries the UID of the pod chosen as a victim: a pod deleted
and created again under the same name meanwhile is not the victim, and the
API server refuses (409) rather than evict it.

A running gang's own budget (core.disruption), which keeps consolidation and
drains from taking its members one by one, is created here too, and deleted
before its gang is evicted whole: it would refuse that eviction. Should
another budget then refuse it, the next cycle creates it again.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubernetes_asyncio import client

from gangsched.binder import FIELD_MANAGER
from gangsched.core.actions import WriteBudget
from gangsched.core.model.objects import PodKey
from gangsched.dispatcher import Answer, Call, Dispatcher, Rank, answer_of


@dataclass(frozen=True, slots=True)
class EvictionOutcome:
    pod: PodKey
    status: int
    """HTTP status; 0 when the request itself failed or never went out."""
    detail: str = ""
    sent: bool = True
    """False when the request never went out (this replica was not sure it leads)."""

    @property
    def evicted(self) -> bool:
        """Gone or going: a pod already deleted (404) needs no eviction."""
        return 200 <= self.status <= 299 or self.status == 404


class Evictor:
    """Hands evictions to the dispatcher, which fences them by leadership as binds are."""

    def __init__(self, core: client.CoreV1Api, dispatcher: Dispatcher,
                 policy: client.PolicyV1Api | None = None) -> None:
        self._core = core
        self._dispatcher = dispatcher
        self._policy = policy or client.PolicyV1Api(core.api_client)

    def write_budget(self, budget: WriteBudget) -> None:
        """Create a running gang's budget, owned by its PodGroup; one that exists already
        (409) is left as it is, and the step asks no more once the watch shows it."""
        namespace, name = budget.group.split("/", 1)
        label, value = budget.label
        body = {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": namespace, "ownerReferences": [{
                "apiVersion": budget.group_api, "kind": "PodGroup", "name": name,
                "uid": budget.group_uid, "controller": True,
                "blockOwnerDeletion": False}]},
            "spec": {"minAvailable": budget.min_available,
                     "selector": {"matchLabels": {label: value}}},
        }
        self._dispatcher.submit(Call(
            (f"poddisruptionbudget/{budget.group}", ""), Rank.STATUS,
            f"disruption budget {budget.group}",
            lambda: answer_of(self._policy.create_namespaced_pod_disruption_budget(
                namespace, body, field_manager=FIELD_MANAGER, _preload_content=False)),
            state=(budget.group_uid, budget.min_available, budget.label), retry=True,
        ))

    async def drop_budgets(self, budgets: tuple[str, ...]) -> list[Answer]:
        """Delete the victims' own budgets (``namespace/name``) before their eviction."""
        loop = asyncio.get_running_loop()
        futures: list[asyncio.Future[Answer]] = []
        for key in budgets:
            done: asyncio.Future[Answer] = loop.create_future()
            namespace, name = key.split("/", 1)
            self._dispatcher.submit(Call(
                (f"poddisruptionbudget/{key}", "delete"), Rank.EVICT,
                f"delete disruption budget {key}",
                functools.partial(self._delete_budget, namespace, name), done=done))
            futures.append(done)
        return list(await asyncio.gather(*futures))

    async def _delete_budget(self, namespace: str, name: str) -> Answer:
        return await answer_of(self._policy.delete_namespaced_pod_disruption_budget(
            name, namespace, _preload_content=False))

    async def evict_all(
        self, pods: tuple[PodKey, ...], uids: Mapping[PodKey, str] | None = None
    ) -> tuple[list[EvictionOutcome], list[EvictionOutcome]]:
        """(refusals of the dry run, outcomes of the real evictions).

        Nothing is evicted when the dry run refuses any pod; the second list
        is then empty. ``uids``: the UID of each victim pod decided on.
        """
        uids = uids or {}
        trial = await self._evict(pods, uids, dry_run=True)
        refused = [outcome for outcome in trial if not outcome.evicted]
        if refused:
            return refused, []
        return [], await self._evict(pods, uids, dry_run=False)

    async def _evict(self, pods: tuple[PodKey, ...], uids: Mapping[PodKey, str], *,
                     dry_run: bool) -> list[EvictionOutcome]:
        loop = asyncio.get_running_loop()
        futures: list[asyncio.Future[Answer]] = []
        for pod in pods:
            done: asyncio.Future[Answer] = loop.create_future()
            uid = uids.get(pod, "")
            self._dispatcher.submit(Call(
                (uid or f"pod/{pod}", ""), Rank.EVICT, "evict dry run" if dry_run else "evict",
                functools.partial(self._request, pod, uid, dry_run), done=done))
            futures.append(done)
        answers = await asyncio.gather(*futures)
        return [EvictionOutcome(pod, answer.status, answer.detail, answer.sent)
                for pod, answer in zip(pods, answers, strict=True)]

    async def _request(self, pod: PodKey, uid: str, dry_run: bool) -> Answer:
        namespace, name = pod.split("/", 1)
        body: dict[str, Any] = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
        }
        if uid:
            body["deleteOptions"] = {"preconditions": {"uid": uid}}
        extra = {"dry_run": "All"} if dry_run else {}
        return await answer_of(self._core.create_namespaced_pod_eviction(
            name, namespace, body, field_manager=FIELD_MANAGER, _preload_content=False, **extra))
