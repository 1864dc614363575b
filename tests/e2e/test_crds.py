"""The PodGroup and Queue CRDs, enforced by the real kube-apiserver.

The scheduler trusts what the API server stored: it never re-validates a
PodGroup. So these tests prove, through the real kubectl, that the schemas
install, that defaults land, that the printer columns read well, and that
each kind of bad object is refused with a message a user can act on (the
assertions are on kubectl's stderr, the text the user sees).

Every invalid object is a known-good object with exactly one field broken,
so a rejection can only be due to that field.
"""

from __future__ import annotations

import copy
import json
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, cast

import pytest

from devcluster.controlplane import REPO, LocalCluster

pytestmark = pytest.mark.e2e

GROUP = "scheduling.gangsched.io"
API_VERSION = f"{GROUP}/v1alpha1"
CRDS = REPO / "crds"

Manifest = dict[str, object]


@dataclass(frozen=True, slots=True)
class Scope:
    """Where this module's objects live, so they can all be removed at the end.

    Queues are cluster-scoped, so they cannot go in the namespace; they carry
    the `label` instead and are deleted by selector.
    """

    namespace: str
    label: str


@pytest.fixture(scope="module")
def scope(cluster: LocalCluster) -> Iterator[Scope]:
    cluster.apply_crds()
    run = uuid.uuid4().hex[:8]
    found = Scope(namespace=f"crds-{run}", label=f"gangsched-test=crds-{run}")
    cluster.kubectl("create", "namespace", found.namespace)
    yield found
    cluster.kubectl("delete", "queues", "-l", found.label, "--wait=false")
    cluster.kubectl("delete", "namespace", found.namespace, "--wait=false")


def podgroup(name: str, spec: Manifest | None = None) -> Manifest:
    body: Manifest = {
        "apiVersion": API_VERSION,
        "kind": "PodGroup",
        "metadata": {"name": name},
    }
    if spec is not None:
        body["spec"] = spec
    return body


def queue(scope: Scope, name: str, spec: Manifest | None = None) -> Manifest:
    key, value = scope.label.split("=")
    body: Manifest = {
        "apiVersion": API_VERSION,
        "kind": "Queue",
        "metadata": {"name": name, "labels": {key: value}},
    }
    if spec is not None:
        body["spec"] = spec
    return body


def create(
    cluster: LocalCluster, scope: Scope, body: Manifest, *, check: bool = True
) -> subprocess.CompletedProcess[str]:
    return cluster.kubectl(
        "create", "-n", scope.namespace, "-f", "-", input=json.dumps(body), check=check
    )


def patch_status(
    cluster: LocalCluster,
    kind: str,
    name: str,
    status: Manifest,
    *,
    namespace: str = "",
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    """Merge-patch `status` through the status subresource, as the scheduler writes it."""
    where = ("-n", namespace) if namespace else ()
    patch = json.dumps({"status": status})
    return cluster.kubectl(
        "patch",
        kind,
        name,
        *where,
        "--subresource=status",
        "--type=merge",
        "-p",
        patch,
        check=check,
    )


def get_json(cluster: LocalCluster, scope: Scope, kind: str, name: str) -> Manifest:
    out = cluster.kubectl("get", kind, name, "-n", scope.namespace, "-o", "json").stdout
    loaded: Manifest = json.loads(out)
    return loaded


def table(cluster: LocalCluster, *args: str) -> list[list[str]]:
    """`kubectl get` default output, split into header and rows of cells."""
    out = cluster.kubectl("get", *args).stdout
    return [line.split() for line in out.splitlines() if line.strip()]


def cell(cluster: LocalCluster, column: str, *args: str) -> str:
    """One column of the one row `kubectl get` prints, cut where the header puts it (an
    empty cell leaves nothing for a split to find)."""
    header, row = cluster.kubectl("get", *args).stdout.splitlines()[:2]
    start = header.index(column)
    after = header[start + len(column):]
    width = len(column) + len(after) - len(after.lstrip())
    return row[start:start + width].strip()


# -- installation -----------------------------------------------------------


@pytest.mark.parametrize("plural", ["podgroups", "queues", "topologies"])
def test_crd_is_established_with_its_names(
    cluster: LocalCluster, scope: Scope, plural: str
) -> None:
    crd = f"{plural}.{GROUP}"
    for condition in ("Established", "NamesAccepted"):
        jsonpath = f"jsonpath={{.status.conditions[?(@.type=='{condition}')].status}}"
        status = cluster.kubectl("get", "crd", crd, "-o", jsonpath).stdout
        assert status == "True", f"{crd} {condition}={status!r}"


def test_short_names_and_category_resolve(cluster: LocalCluster, scope: Scope) -> None:
    create(cluster, scope, podgroup("named", {"minMember": 1}))
    create(cluster, scope, queue(scope, f"named-{scope.namespace}"))
    assert "named" in cluster.kubectl("get", "gpg", "-n", scope.namespace, "-o", "name").stdout
    assert f"named-{scope.namespace}" in cluster.kubectl("get", "gq", "-o", "name").stdout
    assert f"named-{scope.namespace}" in cluster.kubectl("get", "queue", "-o", "name").stdout
    both = cluster.kubectl("get", "gangsched", "-n", scope.namespace, "-o", "name").stdout
    assert f"podgroup.{GROUP}/named" in both
    assert f"queue.{GROUP}/named-{scope.namespace}" in both


def test_default_queue_manifest_applies(cluster: LocalCluster, scope: Scope) -> None:
    cluster.kubectl("apply", "-f", str(REPO / "examples" / "default-queue.yaml"))
    spec = get_json(cluster, scope, "queue", "default")["spec"]
    assert isinstance(spec, dict)
    assert (spec["weight"], spec["state"]) == (1, "Open")


# -- valid objects and defaults ---------------------------------------------


def test_podgroup_defaults_apply_even_without_a_spec(cluster: LocalCluster, scope: Scope) -> None:
    create(cluster, scope, podgroup("bare"))
    assert get_json(cluster, scope, "gpg", "bare")["spec"] == {"minMember": 1, "queue": "default"}


def test_podgroup_with_every_field_is_accepted_as_written(
    cluster: LocalCluster, scope: Scope
) -> None:
    spec: Manifest = {
        "minMember": 3,
        "minResources": {
            "cpu": "500m",
            "memory": "2Gi",
            "ephemeral-storage": "1e9",
            "nvidia.com/gpu": 4,
            "hugepages-2Mi": 0,
        },
        "queue": "team-a.batch",
        "priorityClassName": "high-priority",
        "scheduleTimeoutSeconds": 600,
        "topology": {"name": "fabric", "required": "example.com/block", "subGroups": [
            {"name": "tp0", "minMember": 4, "required": "example.com/nvlink"},
            {"name": "stage.1", "minMember": 2, "required": "example.com/rack",
             "preferred": "example.com/nvlink"}]},
    }
    create(cluster, scope, podgroup("full", spec))
    assert get_json(cluster, scope, "gpg", "full")["spec"] == spec


def test_queue_defaults_apply(cluster: LocalCluster, scope: Scope) -> None:
    name = f"defaults-{scope.namespace}"
    create(cluster, scope, queue(scope, name, {"capability": {"cpu": 8, "memory": "32Gi"}}))
    assert get_json(cluster, scope, "queue", name)["spec"] == {
        "weight": 1,
        "state": "Open",
        "reclaimable": True,
        "capability": {"cpu": 8, "memory": "32Gi"},
    }


def test_status_is_a_subresource(cluster: LocalCluster, scope: Scope) -> None:
    """Status sent with the object is dropped; only the status subresource writes it.

    This is what keeps a user's `kubectl apply` from clobbering what the
    scheduler observed, and the scheduler's status writes from bumping the
    generation.
    """
    body = podgroup("status", {"minMember": 2})
    body["status"] = {"phase": "Running", "running": 2}
    create(cluster, scope, body)
    # A scheduler running in the session may have written a status of its own by now.
    written = cast(dict[str, Any], get_json(cluster, scope, "gpg", "status").get("status") or {})
    assert written.get("phase") != "Running" and written.get("running") != 2, written

    status = {
        "phase": "Inqueue",
        "scheduled": 1,
        "observedGeneration": 1,
        "conditions": [
            {
                "type": "Admitted",
                "status": "True",
                "reason": "Admitted",
                "message": "minResources fit in queue default",
                "lastTransitionTime": "2025-01-01T00:00:00Z",
                "observedGeneration": 1,
            }
        ],
    }
    patch_status(cluster, "gpg", "status", status, namespace=scope.namespace)
    stored = cast(dict[str, Any], get_json(cluster, scope, "gpg", "status"))
    # Merged into what a scheduler running in the session may have written.
    assert {k: stored["status"].get(k) for k in status} == status
    assert stored["metadata"]["generation"] == 1


# -- printer columns --------------------------------------------------------


def test_kubectl_get_gpg_shows_the_printer_columns(cluster: LocalCluster, scope: Scope) -> None:
    create(cluster, scope, podgroup("spark-1", {"minMember": 3, "queue": "spark"}))
    status: Manifest = {"phase": "Running", "scheduled": 3, "running": 2}
    patch_status(cluster, "gpg", "spark-1", status, namespace=scope.namespace)
    header, row = table(cluster, "gpg", "spark-1", "-n", scope.namespace)
    assert header == ["NAME", "PHASE", "MINMEMBER", "SCHEDULED", "RUNNING", "QUEUE",
                      "ESTIMATED-START", "AGE"]
    # A running group has no estimate: its cell is empty.
    assert row[:6] == ["spark-1", "Running", "3", "3", "2", "spark"]
    assert cell(cluster, "ESTIMATED-START", "gpg", "spark-1", "-n", scope.namespace) == ""


def test_kubectl_get_gpg_says_when_a_waiting_gang_is_expected_to_start(
    cluster: LocalCluster, scope: Scope
) -> None:
    for name, estimate in (("later", "2030-01-01T10:00:00Z"), ("unknown", "Unknown")):
        create(cluster, scope, podgroup(name, {"minMember": 2}))
        patch_status(cluster, "gpg", name, {"phase": "Inqueue", "estimatedStart": estimate},
                     namespace=scope.namespace)
        assert cell(cluster, "ESTIMATED-START", "gpg", name, "-n", scope.namespace) == estimate


def test_wide_output_says_why_a_gang_waits(cluster: LocalCluster, scope: Scope) -> None:
    create(cluster, scope, podgroup("waits", {"minMember": 4}))
    reason = "Unschedulable"
    message = "needs 8 nvidia.com/gpu on nodes matching the selector, 4 free"
    status: Manifest = {"phase": "Pending", "conditions": [{
        "type": "Scheduled", "status": "False", "reason": reason, "message": message,
        "lastTransitionTime": "2025-01-01T00:00:00Z"}]}
    patch_status(cluster, "gpg", "waits", status, namespace=scope.namespace)
    out = cluster.kubectl("get", "gpg", "waits", "-n", scope.namespace, "-o", "wide").stdout
    header, row = out.splitlines()
    assert header.split()[-2:] == ["REASON", "MESSAGE"]
    assert row.split()[0] == "waits"
    assert row.endswith(f"{reason}   {message}")


def test_kubectl_get_queue_shows_the_printer_columns(cluster: LocalCluster, scope: Scope) -> None:
    name = f"columns-{scope.namespace}"
    create(cluster, scope, queue(scope, name, {"weight": 3, "state": "Closed", "parent": "org"}))
    patch_status(cluster, "queue", name, {"running": 2, "pending": 5, "allocated": {"cpu": "6"}})
    header, row = table(cluster, "queue", name)
    assert header == ["NAME", "STATE", "WEIGHT", "PARENT", "RUNNING", "PENDING", "AGE"]
    assert row[:6] == [name, "Closed", "3", "org", "2", "5"]


# -- invalid objects --------------------------------------------------------

GOOD_PODGROUP: Manifest = {
    "minMember": 3,
    "minResources": {"cpu": "3", "memory": "6Gi"},
    "queue": "default",
    "scheduleTimeoutSeconds": 300,
    "topology": {"name": "fabric", "required": "block",
                 "subGroups": [{"name": "tp0", "minMember": 2, "required": "nvlink"}]},
}
GOOD_QUEUE: Manifest = {"weight": 2, "capability": {"cpu": "8", "memory": "32Gi"}, "state": "Open"}

# A quantity is checked by an OpenAPI pattern (strings) and minimum (integers), not CEL:
# Kubernetes 1.33 estimates any CEL rule on an int-or-string map value over budget.
QUANTITY = r"'^([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+|[KMGTPE]i|[numkMGTPE])?$'"
KEY_HINT = "keys must be resource names such as cpu, memory, ephemeral-storage or nvidia.com/gpu"


@dataclass(frozen=True, slots=True)
class Bad:
    """One field of a known-good object broken, and what the user must be told."""

    kind: str
    path: tuple[str, ...]
    value: object
    expected: tuple[str, ...]


BAD_SPECS = {
    "minMember-0": Bad(
        "PodGroup",
        ("minMember",),
        0,
        ("spec.minMember: Invalid value: 0", "should be greater than or equal to 1"),
    ),
    "minMember-two": Bad(
        "PodGroup",
        ("minMember",),
        "two",
        ("spec.minMember", "must be of type integer"),
    ),
    "minResources-cpu-lots": Bad(
        "PodGroup",
        ("minResources", "cpu"),
        "lots",
        ('spec.minResources.cpu: Invalid value: "lots"', f"should match {QUANTITY}"),
    ),
    # JSON numbers that are not integers cannot be int-or-string: the type check answers.
    "minResources-cpu-float": Bad(
        "PodGroup",
        ("minResources", "cpu"),
        0.5,
        ("spec.minResources.cpu", "must be of type integer,string"),
    ),
    "minResources-negative-int": Bad(
        "PodGroup",
        ("minResources", "nvidia.com/gpu"),
        -2,
        ("spec.minResources.nvidia.com/gpu: Invalid value: -2",
         "should be greater than or equal to 0"),
    ),
    "minResources-bad-key": Bad(
        "PodGroup",
        ("minResources", "gpus!"),
        1,
        ("spec.minResources", f'minResources {KEY_HINT}, not "gpus!"'),
    ),
    "scheduleTimeoutSeconds--5": Bad(
        "PodGroup",
        ("scheduleTimeoutSeconds",),
        -5,
        ("spec.scheduleTimeoutSeconds: Invalid value: -5", "should be greater than or equal to 1"),
    ),
    "unknown-spec-field": Bad(
        "PodGroup",
        ("minMembers",),
        3,
        ('unknown field "spec.minMembers"',),
    ),
    "queue-not-a-name": Bad(
        "PodGroup",
        ("queue",),
        "Team_A",
        ("spec.queue", "queue must be the name of a Queue: lowercase letters, digits"),
    ),
    "priorityClassName-not-a-name": Bad(
        "PodGroup",
        ("priorityClassName",),
        "High Priority",
        ("spec.priorityClassName", "priorityClassName must be the name of a PriorityClass"),
    ),
    "subGroup-minMember-0": Bad(
        "PodGroup",
        ("topology", "subGroups"),
        [{"name": "tp0", "minMember": 0, "required": "nvlink"}],
        ("spec.topology.subGroups[0].minMember: Invalid value: 0",
         "should be greater than or equal to 1"),
    ),
    "subGroup-twice": Bad(
        "PodGroup",
        ("topology", "subGroups"),
        [{"name": "tp0", "required": "nvlink"}, {"name": "tp0", "required": "rack"}],
        ("spec.topology.subGroups[1]: Duplicate value",),
    ),
    "subGroup-without-a-level": Bad(
        "PodGroup",
        ("topology", "subGroups"),
        [{"name": "tp0", "minMember": 2}],
        ("spec.topology.subGroups[0]",
         "a sub-group names a required level, a preferred level or both"),
    ),
    "subGroup-name-not-a-label-value": Bad(
        "PodGroup",
        ("topology", "subGroups"),
        [{"name": "tp 0", "required": "nvlink"}],
        ('spec.topology.subGroups[0].name: Invalid value: "tp 0"', "should match"),
    ),
    "weight-0": Bad(
        "Queue",
        ("weight",),
        0,
        ("spec.weight: Invalid value: 0", "should be greater than or equal to 1"),
    ),
    "weight--1": Bad(
        "Queue",
        ("weight",),
        -1,
        ("spec.weight: Invalid value: -1", "should be greater than or equal to 1"),
    ),
    "parent-not-a-name": Bad(
        "Queue",
        ("parent",),
        "Team_A",
        ("spec.parent", "parent must be the name of a Queue: lowercase letters, digits"),
    ),
    "reclaimable-not-a-bool": Bad(
        "Queue",
        ("reclaimable",),
        "no",
        ("spec.reclaimable: Invalid value", 'must be of type boolean'),
    ),
    "state-Paused": Bad(
        "Queue",
        ("state",),
        "Paused",
        ('spec.state: Unsupported value: "Paused"', 'supported values: "Open", "Closed"'),
    ),
    "capability-memory-negative": Bad(
        "Queue",
        ("capability", "memory"),
        "-1Gi",
        ('spec.capability.memory: Invalid value: "-1Gi"', f"should match {QUANTITY}"),
    ),
    "capability-bad-key": Bad(
        "Queue",
        ("capability", "GPU count"),
        "2",
        ("spec.capability", f'capability {KEY_HINT}, not "GPU count"'),
    ),
    "unknown-queue-field": Bad(
        "Queue",
        ("priority",),
        10,
        ('unknown field "spec.priority"',),
    ),
}


def broken(good: Manifest, path: tuple[str, ...], value: object) -> Manifest:
    spec = copy.deepcopy(good)
    node = spec
    for key in path[:-1]:
        child = node[key]
        assert isinstance(child, dict)
        node = child
    node[path[-1]] = value
    return spec


@pytest.mark.parametrize("bad", BAD_SPECS.values(), ids=BAD_SPECS.keys())
def test_invalid_spec_is_rejected_with_a_readable_message(
    cluster: LocalCluster, scope: Scope, bad: Bad
) -> None:
    name = f"bad-{uuid.uuid4().hex[:8]}"
    if bad.kind == "PodGroup":
        body = podgroup(name, broken(GOOD_PODGROUP, bad.path, bad.value))
    else:
        body = queue(scope, name, broken(GOOD_QUEUE, bad.path, bad.value))
    result = create(cluster, scope, body, check=False)
    assert result.returncode != 0, f"accepted: {json.dumps(body)}"
    for text in bad.expected:
        assert text in result.stderr


def test_good_objects_the_bad_ones_are_made_from_are_accepted(
    cluster: LocalCluster, scope: Scope
) -> None:
    create(cluster, scope, podgroup("good", GOOD_PODGROUP))
    create(cluster, scope, queue(scope, f"good-{scope.namespace}", GOOD_QUEUE))


BAD_STATUSES = {
    "phase-Bogus": (
        {"phase": "Bogus"},
        ('status.phase: Unsupported value: "Bogus"', '"Pending", "Inqueue", "Running"'),
    ),
    "running-negative": (
        {"running": -1},
        ("status.running: Invalid value: -1", "should be greater than or equal to 0"),
    ),
    "estimatedStart-not-a-time": (
        {"estimatedStart": "soon"},
        ("status.estimatedStart", "an RFC 3339 time in UTC, or Unknown"),
    ),
    "condition-status-Maybe": (
        {
            "conditions": [
                {
                    "type": "Admitted",
                    "status": "Maybe",
                    "reason": "Admitted",
                    "message": "",
                    "lastTransitionTime": "2025-01-01T00:00:00Z",
                }
            ]
        },
        ('status.conditions[0].status: Unsupported value: "Maybe"',),
    ),
}


@pytest.mark.parametrize(("status", "expected"), BAD_STATUSES.values(), ids=BAD_STATUSES.keys())
def test_invalid_status_is_rejected_by_the_status_subresource(
    cluster: LocalCluster, scope: Scope, status: Manifest, expected: tuple[str, ...]
) -> None:
    name = f"bad-status-{uuid.uuid4().hex[:8]}"
    create(cluster, scope, podgroup(name, {"minMember": 1}))
    result = patch_status(cluster, "gpg", name, status, namespace=scope.namespace, check=False)
    assert result.returncode != 0, f"accepted status {status}"
    for text in expected:
        assert text in result.stderr
