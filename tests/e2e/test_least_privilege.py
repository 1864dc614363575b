"""The chart's ClusterRole is what the scheduler uses, no more and no less.

The session's API server keeps an audit log of the chart's ServiceAccount
(:mod:`tests.e2e.deployed`), as which every scheduler of the suite runs. This
module runs last and reads it: no request of that account was refused for
want of a right, and, when the whole suite ran, every verb the chart grants
was used at least once. A grant nothing used is a right an attacker who takes
the scheduler's token gets for free.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from devcluster.controlplane import LocalCluster
from tests.e2e.deployed import NAMESPACE, WHOLE_SUITE, render_identity

ON_FAILURE_ONLY = {
    ("resource.k8s.io", "resourceclaims", "delete"):
        "a claim the scheduler made for a pod's extended resources is deleted only when "
        "another write of its gang is refused (tests/e2e/test_dra_extended.py provokes "
        "it, but the garbage collector may delete the claim first)",
}
"""Rights the code uses only on a failure path a run may not reach, and why they stay."""

SYNTHETIC = {("resource.k8s.io", "resourceclaims/binding", "patch"):
             ("resource.k8s.io", "resourceclaims/status", "patch")}
"""Rights the API server checks inside another request, never asked for on their own: a
claim's allocation or reservedFor written through its status needs ``resourceclaims/binding``."""


@dataclass(frozen=True, slots=True)
class Request:
    group: str
    resource: str
    """With its subresource: ``pods/binding``."""
    verb: str
    namespace: str
    code: int
    message: str
    forbidden: bool
    """The authorizer said no (not, say, a namespace being deleted, which is a 403 too)."""


def requests(log: Path) -> Iterator[Request]:
    with log.open() as lines:
        for line in lines:
            event: dict[str, Any] = json.loads(line)
            ref = event.get("objectRef") or {}
            if not ref.get("resource"):
                continue  # discovery and other non-resource paths: every account may
            resource = ref["resource"] + (f"/{ref['subresource']}" if ref.get("subresource")
                                          else "")
            status = event.get("responseStatus") or {}
            decision = (event.get("annotations") or {}).get("authorization.k8s.io/decision")
            yield Request(ref.get("apiGroup", ""), resource, event["verb"],
                          ref.get("namespace", ""), int(status.get("code", 0)),
                          str(status.get("message", "")), decision == "forbid")


def granted(cluster: LocalCluster) -> set[tuple[str, str, str]]:
    return {(group, resource, verb)
            for doc in render_identity(cluster) if doc["kind"] in ("ClusterRole", "Role")
            for rule in doc["rules"] for group in rule["apiGroups"]
            for resource in rule["resources"] for verb in rule["verbs"]}


def refused(request: Request) -> bool:
    """Refused for want of a right: by the authorizer, or by DRA's check of the synthetic
    ``resourceclaims/binding`` right inside a status write (a 422 that names it)."""
    return request.forbidden or "requires resource=" in request.message


def test_the_schedulers_asked_nothing_the_chart_does_not_grant(cluster: LocalCluster) -> None:
    seen = list(requests(cluster.audit_log))
    assert seen, "the audit log holds the chart ServiceAccount's requests"
    denied = sorted({(r.group, r.resource, r.verb, r.code) for r in seen if refused(r)})
    assert not denied, f"refused to the chart's ServiceAccount: {denied}"


def test_every_right_the_chart_grants_was_used(
    cluster: LocalCluster, request: pytest.FixtureRequest
) -> None:
    if not request.config.stash.get(WHOLE_SUITE, False):
        pytest.skip("only the whole end-to-end suite uses every right")
    used = {(r.group, r.resource, r.verb) for r in requests(cluster.audit_log)
            if not refused(r) and (r.resource != "leases" or r.namespace == NAMESPACE)}
    # A watch is a list with watch=true; the audit log says which.
    unused = sorted(grant for grant in granted(cluster)
                    if SYNTHETIC.get(grant, grant) not in used and grant not in ON_FAILURE_ONLY)
    assert not unused, f"granted by the chart and never used by the suite: {unused}"
