"""Binds the API server refuses back off, and the gang says why it waits.

An admission policy here refuses every binding in the test's namespace, as a
policy, a revoked permission or a failing webhook would. The scheduler must
not hammer the API server with retries, must tell the pods and their
PodGroup the API's own words, and must bind the gang whole once bindings are
allowed again.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pykube
import pytest

from devcluster.controlplane import LocalCluster, NodeShape
from gangsched.core.stages.backoff import MAX_S
from tests.e2e.conftest import SchedulerProcess
from tests.e2e.scenario import only_nodes
from tests.e2e.workspace import Workspace, bound, scheduled_condition, wait_for

FROZEN = "bindings are frozen in this namespace"
ADMISSION = "admissionregistration.k8s.io/v1"
FROZEN_S = 6.0


@pytest.fixture
def six_cpus(cluster: LocalCluster) -> None:
    only_nodes(cluster, 3, NodeShape(cpu="2", memory="8Gi"))


def refusing_policy(name: str, namespace: str, rule: Mapping[str, Any],
                    message: str) -> list[dict[str, Any]]:
    """A ValidatingAdmissionPolicy and its binding refusing the requests ``rule`` matches
    in ``namespace``, with ``message``."""
    return [
        {"apiVersion": ADMISSION, "kind": "ValidatingAdmissionPolicy",
         "metadata": {"name": name},
         "spec": {
             "failurePolicy": "Fail",
             "matchConstraints": {"resourceRules": [dict(rule)]},
             "validations": [{"expression": "false", "message": message,
                              "reason": "Forbidden"}],
         }},
        {"apiVersion": ADMISSION, "kind": "ValidatingAdmissionPolicyBinding",
         "metadata": {"name": name},
         "spec": {
             "policyName": name, "validationActions": ["Deny"],
             "matchResources": {"namespaceSelector": {
                 "matchLabels": {"kubernetes.io/metadata.name": namespace}}},
         }},
    ]


def _policy_objects(namespace: str) -> list[dict[str, Any]]:
    return refusing_policy(
        f"freeze-bindings-{namespace}", namespace,
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
         "resources": ["pods/binding"]},
        FROZEN)


@contextlib.contextmanager
def refusals(ws: Workspace, manifests: list[dict[str, Any]], refused: Callable[[], bool],
             what: str) -> Iterator[list[Any]]:
    """The policy of ``manifests`` in force (once ``refused`` says so) until the objects
    yielded are deleted, or the block ends."""
    objects = [pykube.object_factory(ws.api, m["apiVersion"], m["kind"])(ws.api, m)
               for m in manifests]
    for obj in objects:
        obj.create()
    wait_for(refused, timeout=20, what=what)
    yield objects
    for obj in reversed(objects):
        if obj.exists():
            obj.delete()


def _binding_refused(ws: Workspace, pod: str) -> bool:
    """Whether a binding of ``pod`` is refused now (the policy took effect); a dry run,
    so the pod is never bound."""
    response = ws.api.post(
        url=f"pods/{pod}/binding?dryRun=All", namespace=ws.name, version="v1",
        json={"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod},
              "target": {"apiVersion": "v1", "kind": "Node", "name": "nowhere"}})
    return not response.ok and FROZEN in response.text


@pytest.fixture
def frozen_bindings(ws: Workspace) -> Iterator[list[Any]]:
    """Bindings in ``ws`` refused until the returned objects are deleted."""
    ws.create(ws.pod("canary", cpu="1", scheduler="nobody"))
    with refusals(ws, _policy_objects(ws.name), lambda: _binding_refused(ws, "canary"),
                  "the admission policy to refuse bindings") as objects:
        yield objects


def _bind_attempts(gangsched: SchedulerProcess, ws: Workspace) -> int:
    return sum(1 for line in gangsched.logs().splitlines()
               if "bind_failed" in line and f"{ws.name}/trio-" in line)


@pytest.mark.usefixtures("six_cpus")
def test_refused_binds_back_off_say_why_and_bind_whole_once_allowed(
    ws: Workspace, gangsched: SchedulerProcess, frozen_bindings: list[Any]
) -> None:
    ws.create(ws.podgroup("trio", min_member=3))
    ws.create(*(ws.pod(f"trio-{i}", cpu="1", group="trio") for i in range(3)))
    wait_for(lambda: _bind_attempts(gangsched, ws) > 0, timeout=20,
             what="the first bind attempt")
    first_refusal = time.monotonic()

    # The pods and their PodGroup quote the API server's answer.
    def pod_message(name: str) -> str | None:
        condition = scheduled_condition(ws.pods()[name]) or {}
        message = str(condition.get("message", ""))
        return message if condition.get("status") == "False" and FROZEN in message else None

    message = wait_for(lambda: pod_message("trio-0"), timeout=15,
                       what="a pod's PodScheduled condition to quote the refusal")
    assert "was refused" in message, message
    wait_for(lambda: pod_message("trio-2"), timeout=15, what="every member to say it")

    def group_message() -> str | None:
        conditions = ws.podgroup_obj("trio").get("status", {}).get("conditions") or [{}]
        text = str(conditions[0].get("message", ""))
        return text if FROZEN in text else None

    wait_for(group_message, timeout=15, what="the PodGroup to quote the refusal")
    wait_for(lambda: any(FROZEN in str(e.get("message")) and e.get("reason") == "FailedScheduling"
                         for e in ws.events("trio-0")),
             timeout=15, what="a FailedScheduling Event quoting the refusal")

    # Backing off, not hammering: 1, 2, 4 s apart, so a handful of tries per pod.
    time.sleep(max(0.0, FROZEN_S - (time.monotonic() - first_refusal)))
    attempts = _bind_attempts(gangsched, ws)
    assert bound(ws.pods().values()) == []
    assert 3 <= attempts <= 3 * 5, f"{attempts} refused bind attempts in {FROZEN_S}s"

    for obj in reversed(frozen_bindings):
        obj.delete()
    wait_for(lambda: len(bound(p for n, p in ws.pods().items() if n.startswith("trio-"))) == 3,
             timeout=MAX_S + 15, what="the gang to bind whole once bindings are allowed")
    wait_for(lambda: ws.podgroup_obj("trio").get("status", {}).get("phase") == "Running",
             timeout=15, what="the PodGroup to be Running")
