"""gangsched's identity as the chart deploys it: its ServiceAccount, ClusterRole and bindings.

The suite's schedulers run with a token of the ServiceAccount that
``helm template`` renders, bound to the ClusterRole the chart ships, so a
permission the code needs and the chart lacks fails a test here instead of a
user's install. The release is named ``suite`` in namespace ``default``:
tests that elect a leader use Leases there, which the chart's leader Role
covers, and the name stays clear of the releases the Helm tests install.
"""

from __future__ import annotations

import functools
import json
import re
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster.controlplane import REPO, LocalCluster

RELEASE = "suite"
NAMESPACE = "default"
SERVICE_ACCOUNT = f"system:serviceaccount:{NAMESPACE}:{RELEASE}"
"""The user the API server knows the suite's schedulers as (the chart's ServiceAccount)."""
WHOLE_SUITE = pytest.StashKey[bool]()
"""Set by conftest when every end-to-end module was collected and none was deselected:
only then is every right the chart grants expected to have been used."""
IDENTITY_KINDS = frozenset({"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
                            "RoleBinding"})
REFUSAL = re.compile(r"cannot \w+ resource|requires resource=")
"""What the API server says when it refuses a request for want of a right: RBAC's
``User ... cannot patch resource "x"`` and DRA's ``requires resource="resourceclaims/binding"``."""


@functools.cache
def _rendered(helm: Path) -> str:
    """The chart as ``helm template`` renders it with its default values (once a session)."""
    return subprocess.run(
        [str(helm), "template", RELEASE, str(REPO / "helm" / "gangsched"),
         "--namespace", NAMESPACE],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout


def render_chart(cluster: LocalCluster) -> list[dict[str, Any]]:
    """Every object the chart renders with its default values."""
    return [doc for doc in yaml.safe_load_all(_rendered(cluster.bin_dir / "helm"))
            if isinstance(doc, dict)]


def render_identity(cluster: LocalCluster) -> list[dict[str, Any]]:
    """The chart's ServiceAccount and RBAC objects, rendered with its default values."""
    return [doc for doc in render_chart(cluster) if doc.get("kind") in IDENTITY_KINDS]


def chart_args(cluster: LocalCluster) -> list[str]:
    """The arguments the chart's Deployment runs gangsched with (``run`` and its options)."""
    deployment = next(doc for doc in render_chart(cluster) if doc["kind"] == "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    return [str(arg) for arg in container["args"]]


def overridden(args: Iterable[str], overrides: Iterable[str]) -> list[str]:
    """``args`` with each option ``overrides`` names replaced by the overrides' values of it:
    every occurrence (``--scheduler-name`` repeated), and a flag's ``--no-`` form too."""
    overrides = list(overrides)
    named = {_option(arg) for arg in overrides}
    return [arg for arg in args if _option(arg) not in named] + overrides


def set_by_environment(arg: str, environ: Mapping[str, str]) -> bool:
    """Whether ``environ`` sets the option ``arg`` sets (``GANGSCHED_<FLAG>``), which
    a flag of that option would hide."""
    option = _option(arg)
    return option.startswith("--") and (
        "GANGSCHED_" + option[2:].upper().replace("-", "_")) in environ


def _option(arg: str) -> str:
    """The option an argument sets: ``--policy=spread`` and ``--no-preemption`` set
    ``--policy`` and ``--preemption``."""
    name = arg.split("=", 1)[0]
    return "--" + name.removeprefix("--no-") if name.startswith("--no-") else name


def deployed_kubeconfig(cluster: LocalCluster, *, without: str = "") -> Path:
    """A kubeconfig that speaks as the chart's ServiceAccount; made once per cluster.

    ``without`` names a resource the ClusterRole is rendered without, for an
    identity of its own (``suite-without-<resource>``): a chart that forgot a rule.
    """
    suffix = f"-without-{without}" if without else ""
    path = cluster.kubeconfig.with_name(f"gangsched-serviceaccount{suffix}.kubeconfig")
    if path.exists():
        return path
    identity = render_identity(cluster)
    if without:
        identity = [_without(doc, without, suffix) for doc in identity]
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(identity))
    account = next(str(doc["metadata"]["name"])
                   for doc in identity if doc["kind"] == "ServiceAccount")
    token = cluster.kubectl("create", "token", account, "--namespace", NAMESPACE,
                            "--duration=48h").stdout.strip()
    admin = json.loads(cluster.kubeconfig.read_text())
    config = {
        **admin,
        "users": [{"name": account, "user": {"token": token}}],
        "contexts": [{"name": "local", "context": {"cluster": "local", "user": account}}],
    }
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(config, indent=2))
    partial.rename(path)
    return path


def _without(doc: dict[str, Any], resource: str, suffix: str) -> dict[str, Any]:
    """One object of the identity renamed with ``suffix``, its rules without ``resource``."""
    doc = json.loads(json.dumps(doc))
    doc["metadata"]["name"] += suffix
    for ref in [doc.get("roleRef"), *doc.get("subjects", ())]:
        if isinstance(ref, dict):
            ref["name"] += suffix
    rules = [{**rule, "resources": [r for r in rule["resources"] if r != resource]}
             for rule in doc.get("rules", ())]
    if "rules" in doc:
        doc["rules"] = [rule for rule in rules if rule["resources"]]
    return doc


def refusals(log: str) -> list[str]:
    """The lines of a scheduler's log where the API server refused it for want of a right."""
    return [line for line in log.splitlines() if REFUSAL.search(line)]


def service_account_volume(cluster: LocalCluster, directory: Path) -> Path:
    """``directory`` filled as the kubelet fills the chart's pod's
    ``/var/run/secrets/kubernetes.io/serviceaccount``: the ServiceAccount's token, the
    cluster's CA certificate and the pod's namespace."""
    kubeconfig = json.loads(deployed_kubeconfig(cluster).read_text())
    authority = Path(kubeconfig["clusters"][0]["cluster"]["certificate-authority"])
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "token").write_text(kubeconfig["users"][0]["user"]["token"])
    (directory / "ca.crt").write_bytes(authority.read_bytes())
    (directory / "namespace").write_text(NAMESPACE)
    return directory
