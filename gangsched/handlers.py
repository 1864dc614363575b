"""kopf, embedded in the scheduler's event loop: its login and its settings.

kopf delivers nothing into the mirror: PodGroups of every flavour, Queues and
Workloads are list-watched by :mod:`gangsched.reflector` into
:mod:`gangsched.feed` like every other kind, whose relists see what was
deleted while a watch was down (kopf's relists report only what they find).
Status, conditions and Events of PodGroups and Queues are planned by the cycle,
which knows the members, and written through the dispatcher; so kopf puts no
progress annotation or finalizer on a PodGroup an operator like
training-operator owns, and a PodGroup can be deleted while the scheduler is
down.
"""

from __future__ import annotations

import logging
from typing import Any

import kopf

from gangsched import kubeconfig
from gangsched.kubeconfig import Context

ERROR_BACKOFFS = (0.25, 0.5, *([1.0] * 300))
"""Seconds between retries of a failed API request: every second for five minutes."""


def register(registry: kopf.OperatorRegistry, connection: Context) -> None:
    """Attach kopf's login and settings to ``registry``; a separate registry keeps tests
    independent."""

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo | None:
        """Log in where the scheduler's client connects, as whom it connects."""
        return kubeconfig.kopf_login(connection)

    @kopf.on.startup(registry=registry)
    def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        """Quiet kopf: its own events would only add noise, and with no resource to
        handle it need not watch CustomResourceDefinitions or Namespaces (nor be
        granted them)."""
        settings.posting.level = logging.ERROR
        settings.scanning.disabled = True
        settings.watching.server_timeout = 300
        settings.watching.client_timeout = 330
        # After an API server outage, watch again within a second of its return,
        # not after kopf's default backoffs (up to 21 s between tries).
        settings.networking.error_backoffs = ERROR_BACKOFFS
