"""kopf handlers for PodGroups (every flavour), native Workloads and Queues.

Event handlers only: they keep the mirror current and wake the scheduler.
They write nothing to the objects, so kopf's progress annotations and
finalizers never land on PodGroups an operator like training-operator owns,
and a PodGroup can be deleted while the scheduler is down. Status is written
by the scheduling loop, which knows the members.

kopf's part is the decorators in :func:`register`: each handler reads kopf's
event into one of our dataclasses (:class:`Change`) and awaits one method of
:class:`Watched`, which holds the logic and never sees a kopf type.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Generic, TypeVar

import kopf

from gangsched import kubeconfig
from gangsched.core.kubeobjects.fields import RawObject
from gangsched.core.kubeobjects.podgroups import GroupRecord, group_record_from_api
from gangsched.core.kubeobjects.queues import (
    QueueObject,
    WorkloadQueue,
    queue_from_api,
    workload_queue_from_api,
)
from gangsched.core.model import Flavor
from gangsched.mirror import Mirror

QUEUES = ("scheduling.gangsched.io", "v1alpha1", "queues")
WORKLOADS = ("scheduling.k8s.io", "v1beta1", "workloads")
ERROR_BACKOFFS = (0.25, 0.5, *([1.0] * 300))
"""Seconds between retries of a failed API request: every second for five minutes."""

Parsed = TypeVar("Parsed")


@dataclass(frozen=True, slots=True)
class Change(Generic[Parsed]):
    """One watch event, its object read once: added or modified, or deleted."""

    deleted: bool
    obj: Parsed

    @staticmethod
    def of(event: Mapping[str, Any], parse: Callable[[RawObject], Parsed]) -> Change[Parsed]:
        return Change(event.get("type") == "DELETED", parse(event.get("object") or {}))


def group_change(flavor: Flavor, event: Mapping[str, Any]) -> Change[GroupRecord]:
    return Change.of(event, lambda body: group_record_from_api(body, flavor))


@dataclass
class Watched:
    """What the handlers do, as plain functions of our own dataclasses: keep the mirror
    current, and wake the scheduler only when a cycle would decide differently."""

    mirror: Mirror
    on_change: Callable[[], None]

    async def group_changed(self, change: Change[GroupRecord]) -> None:
        """Mirror a PodGroup; reschedule unless only its status or generation moved."""
        if apply_group_change(self.mirror, change):
            self.on_change()

    async def queue_changed(self, change: Change[QueueObject]) -> None:
        if apply_queue_change(self.mirror, change):
            self.on_change()

    async def workload_changed(self, change: Change[WorkloadQueue]) -> None:
        mirror = self.mirror
        changed = (mirror.groups_and_queues.remove_workload(change.obj.key) if change.deleted
                   else mirror.groups_and_queues.set_workload_queue(change.obj))
        if changed:
            self.on_change()


def register(
    registry: kopf.OperatorRegistry,
    mirror: Mirror,
    on_change: Callable[[], None],
    *,
    in_cluster: bool,
) -> None:
    """Attach every handler to ``registry``; a separate registry keeps tests independent."""
    watched = Watched(mirror, on_change)

    def podgroup_handler(flavor: Flavor) -> None:
        @kopf.on.event(flavor.group, flavor.version, "podgroups", registry=registry,
                       id=f"podgroup-{flavor.group}")
        async def podgroup_event(event: Mapping[str, Any], **_: Any) -> None:
            """Mirror a PodGroup of this flavour and reschedule."""
            await watched.group_changed(group_change(flavor, event))

    for flavor in Flavor:
        podgroup_handler(flavor)

    @kopf.on.event(*WORKLOADS, registry=registry)
    async def workload_event(event: Mapping[str, Any], **_: Any) -> None:
        """Mirror a native Workload's queue annotation, which its PodGroups inherit."""
        await watched.workload_changed(Change.of(event, workload_queue_from_api))

    @kopf.on.event(*QUEUES, registry=registry)
    async def queue_event(event: Mapping[str, Any], **_: Any) -> None:
        """Mirror a Queue (weight, capability, state) and reschedule if one changed."""
        await watched.queue_changed(Change.of(event, queue_from_api))

    @kopf.on.login(registry=registry)
    def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
        """Use the same credentials as the scheduler: in-cluster, or the kubeconfig given."""
        if in_cluster:
            return kubeconfig.kopf_in_cluster_login()
        return kubeconfig.kopf_login(**kwargs)

    @kopf.on.startup(registry=registry)
    def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        """Quiet kopf: our handlers never fail, and its own events would only add noise."""
        settings.posting.level = logging.ERROR
        settings.watching.server_timeout = 300
        settings.watching.client_timeout = 330
        # After an API server outage, watch again within a second of its return,
        # not after kopf's default backoffs (up to 21 s between tries).
        settings.networking.error_backoffs = ERROR_BACKOFFS


def apply_group_change(mirror: Mirror, change: Change[GroupRecord]) -> bool:
    """Mirror the change; True when the group changed in a way a cycle must see.

    Our own status writes come back as events; they change nothing a cycle
    decides from, and waking the scheduler for them would loop it on itself.
    """
    record = change.obj
    before = mirror.groups_and_queues.groups.get(record.key)
    if change.deleted:
        mirror.groups_and_queues.remove_group(record.key, record.flavor)
    else:
        mirror.groups_and_queues.set_group(record)
    return _decides(before) != _decides(mirror.groups_and_queues.groups.get(record.key))


def _decides(group: GroupRecord | None) -> tuple[object, ...] | None:
    """What of a group a scheduling decision reads (not its status, not its generation)."""
    if group is None:
        return None
    spec = replace(group.spec, generation=0) if group.spec is not None else None
    return (group.flavor, group.uid, spec, group.error, group.policy)


def apply_queue_change(mirror: Mirror, change: Change[QueueObject]) -> bool:
    """Mirror the change; True when what a cycle reads of the queue changed (not when
    our own status write comes back)."""
    if change.deleted:
        return mirror.groups_and_queues.remove_queue(change.obj.spec.name)
    return mirror.groups_and_queues.set_queue(change.obj)
