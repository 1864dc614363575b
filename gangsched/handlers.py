"""kopf handlers for PodGroups (every flavour), native Workloads and Queues.

Event handlers only: they keep the mirror current and wake the scheduler.
They write nothing to the objects, so kopf's progress annotations and
finalizers never land on PodGroups an operator like training-operator owns,
and a PodGroup can be deleted while the scheduler is down. Status is written
by the scheduling loop, which knows the members.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import kopf

from gangsched.core.groups import Flavor, group_key_of
from gangsched.mirror import GroupRecord, Mirror

QUEUES = ("scheduling.gangsched.io", "v1alpha1", "queues")
WORKLOADS = ("scheduling.k8s.io", "v1beta1", "workloads")
ERROR_BACKOFFS = (0.25, 0.5, *([1.0] * 300))
"""Seconds between retries of a failed API request: every second for five minutes."""


def register(
    registry: kopf.OperatorRegistry,
    mirror: Mirror,
    on_change: Callable[[], None],
    *,
    in_cluster: bool,
) -> None:
    """Attach every handler to ``registry``; a separate registry keeps tests independent."""

    def podgroup_handler(flavor: Flavor) -> None:
        @kopf.on.event(flavor.group, flavor.version, "podgroups", registry=registry,
                       id=f"podgroup-{flavor.group}")
        async def podgroup_event(event: Mapping[str, Any], **_: Any) -> None:
            """Mirror a PodGroup of this flavour and reschedule."""
            if apply_group_event(mirror, flavor, event):
                on_change()

    for flavor in Flavor:
        podgroup_handler(flavor)

    @kopf.on.event(*WORKLOADS, registry=registry)
    async def workload_event(event: Mapping[str, Any], **_: Any) -> None:
        """Mirror a native Workload's queue annotation, which its PodGroups inherit."""
        body = event.get("object") or {}
        changed = (mirror.delete_workload(body) if event.get("type") == "DELETED"
                   else mirror.upsert_workload(body))
        if changed:
            on_change()

    @kopf.on.event(*QUEUES, registry=registry)
    async def queue_event(event: Mapping[str, Any], **_: Any) -> None:
        """Mirror a Queue (weight, capability, state) and reschedule if one changed."""
        if apply_queue_event(mirror, event):
            on_change()

    @kopf.on.login(registry=registry)
    def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
        """Use the same credentials as the scheduler: in-cluster, or the kubeconfig given."""
        if in_cluster:
            return kopf.login_with_service_account(**kwargs)
        return kopf.login_with_kubeconfig(**kwargs)

    @kopf.on.startup(registry=registry)
    def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        """Quiet kopf: our handlers never fail, and its own events would only add noise."""
        settings.posting.level = logging.ERROR
        settings.watching.server_timeout = 300
        settings.watching.client_timeout = 330
        # After an API server outage, watch again within a second of its return,
        # not after kopf's default backoffs (up to 21 s between tries).
        settings.networking.error_backoffs = ERROR_BACKOFFS


def apply_group_event(mirror: Mirror, flavor: Flavor, event: Mapping[str, Any]) -> bool:
    """Mirror the event; True when the group changed in a way a cycle must see.

    Our own status writes come back as events; they change nothing a cycle
    decides from, and waking the scheduler for them would loop it on itself.
    """
    body = event.get("object") or {}
    key = group_key_of(body)
    before = mirror.groups.get(key)
    if event.get("type") == "DELETED":
        mirror.delete_group(flavor, body)
    else:
        mirror.upsert_group(flavor, body)
    after = mirror.groups.get(key)
    return _decides(before) != _decides(after)


def _decides(group: GroupRecord | None) -> tuple[object, ...] | None:
    """What of a group a scheduling decision reads (not its status, not its generation)."""
    if group is None:
        return None
    spec = replace(group.spec, generation=0) if group.spec is not None else None
    return (group.flavor, group.uid, spec, group.error, group.policy)


def apply_queue_event(mirror: Mirror, event: Mapping[str, Any]) -> bool:
    """Mirror the event; True when what a cycle reads of the queue changed (not when
    our own status write comes back)."""
    body = event.get("object") or {}
    if event.get("type") == "DELETED":
        return mirror.delete_queue(body)
    return mirror.upsert_queue(body)
