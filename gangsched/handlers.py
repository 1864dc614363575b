"""kopf handlers for PodGroups (all three flavours) and Queues.

Event handlers only: they keep the mirror current and wake the scheduler.
They write nothing to the objects, so kopf's progress annotations and
finalizers never land on PodGroups an operator like training-operator owns,
and a PodGroup can be deleted while the scheduler is down. Status is written
by the scheduling loop, which knows the members.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import kopf

from gangsched.core.groups import Flavor
from gangsched.mirror import Mirror

QUEUES = ("scheduling.gangsched.io", "v1alpha1", "queues")


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
            apply_group_event(mirror, flavor, event)
            on_change()

    for flavor in Flavor:
        podgroup_handler(flavor)

    @kopf.on.event(*QUEUES, registry=registry)
    async def queue_event(event: Mapping[str, Any], **_: Any) -> None:
        """Mirror a Queue (weight, capability, state) and reschedule."""
        apply_queue_event(mirror, event)
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
        settings.posting.level = 40  # logging.ERROR
        settings.watching.server_timeout = 300
        settings.watching.client_timeout = 330


def apply_group_event(mirror: Mirror, flavor: Flavor, event: Mapping[str, Any]) -> None:
    body = event.get("object") or {}
    if event.get("type") == "DELETED":
        mirror.delete_group(flavor, body)
    else:
        mirror.upsert_group(flavor, body)


def apply_queue_event(mirror: Mirror, event: Mapping[str, Any]) -> None:
    body = event.get("object") or {}
    if event.get("type") == "DELETED":
        mirror.delete_queue(body)
    else:
        mirror.upsert_queue(body)
