"""Kubeconfig read once, as kubectl reads it, for every client the process holds.

Three clients talk to the API server: kubernetes_asyncio (the scheduler's
watches and writes), kopf (the PodGroup and Queue handlers) and pykube-ng
(the CLI). Each reads kubeconfig its own way and each lacks part of what
users' kubeconfigs hold: pykube reads one file and runs exec plugins of
``client.authentication.k8s.io/v1beta1`` but not ``v1`` (what EKS, GKE and
AKS write today); kopf's own login runs no exec plugin and ignores
``--context``; kubernetes_asyncio lets the last of several files name the
current context where kubectl lets the first. This module is the one
reader: it merges the files of ``KUBECONFIG`` by kubectl's rules, picks the
context, makes relative paths absolute, and runs exec plugins (``v1``,
``v1beta1``, ``v1alpha1``), so that every client is handed the same single
context with credentials it understands.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog
import yaml

if TYPE_CHECKING:
    import kopf
    import pykube

DEFAULT_PATH = Path("~/.kube/config")
EXEC_APIS = frozenset(f"client.authentication.k8s.io/{v}" for v in ("v1", "v1beta1", "v1alpha1"))
EXEC_TIMEOUT_S = 60.0
"""An exec plugin that may open a browser is given a minute, as kubectl's own users wait."""
RENEW_BEFORE = timedelta(seconds=60)
"""A plugin's token is asked for again this long before it expires, so no request carries
one that expires on the way."""

RETRY_AFTER = timedelta(seconds=10)
Entry = dict[str, Any]
log = structlog.get_logger(__name__)


class KubeconfigError(Exception):
    """No kubeconfig, no such context, or an exec plugin that gave no credentials."""


@dataclass(frozen=True, slots=True)
class Context:
    """One context of the merged kubeconfig, with every path in it absolute."""

    name: str
    cluster: Entry
    user: Entry
    namespace: str | None

    def document(self) -> Entry:
        """A kubeconfig of this context alone (``kubectl config view --minify --flatten``)."""
        context: Entry = {"cluster": self.name, "user": self.name}
        if self.namespace:
            context["namespace"] = self.namespace
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": self.name,
            "clusters": [{"name": self.name, "cluster": self.cluster}],
            "users": [{"name": self.name, "user": self.user}],
            "contexts": [{"name": self.name, "context": context}],
        }


def paths(kubeconfig: str | None) -> list[Path]:
    """The files to merge: those listed (``--kubeconfig`` or ``$KUBECONFIG``, separated as
    ``PATH`` is) that exist, else ``~/.kube/config``; none means in-cluster."""
    listed = [Path(p).expanduser() for p in (kubeconfig or "").split(os.pathsep) if p]
    if listed:
        existing = [p for p in listed if p.is_file()]
        if not existing:
            raise KubeconfigError(f"no kubeconfig at {kubeconfig}")
        return existing
    default = DEFAULT_PATH.expanduser()
    return [default] if default.is_file() else []


_PATH_KEYS = {"cluster": ("certificate-authority",),
              "user": ("client-certificate", "client-key", "tokenFile")}


def _absolute(kind: str, entry: Entry, base: Path) -> Entry:
    """kubectl resolves a relative path against the file that holds it, not the working
    directory; so does an exec command that names a path rather than a program on PATH."""
    entry = dict(entry)
    for key in _PATH_KEYS[kind]:
        if isinstance(entry.get(key), str) and entry[key]:
            entry[key] = str((base / Path(entry[key]).expanduser()).resolve())
    plugin = entry.get("exec")
    if kind == "user" and isinstance(plugin, dict):
        command = str(plugin.get("command") or "")
        if os.sep in command and not Path(command).is_absolute():
            entry["exec"] = {**plugin, "command": str((base / command).resolve())}
    return entry


def load(kubeconfig: str | None, context: str | None = None) -> Context | None:
    """The context to use, merged as kubectl merges: for each named cluster, user and
    context, and for ``current-context``, the first file that sets it wins.

    None when there is no kubeconfig at all: the caller runs in a pod and uses
    its service account.
    """
    files = paths(kubeconfig)
    if not files:
        if context:
            raise KubeconfigError(f"context {context!r} given, but no kubeconfig found")
        return None
    current: str | None = None
    entries: dict[str, dict[str, tuple[Entry, Path]]] = {
        "clusters": {}, "users": {}, "contexts": {}}
    for path in files:
        try:
            document = yaml.safe_load(path.read_text()) or {}
        except (OSError, yaml.YAMLError) as error:
            raise KubeconfigError(f"{path}: {error}") from error
        if not isinstance(document, dict):
            raise KubeconfigError(f"{path}: not a kubeconfig")
        current = current or document.get("current-context") or None
        for plural, named in entries.items():
            for item in document.get(plural) or []:
                singular = plural.removesuffix("s")
                named.setdefault(str(item.get("name")),
                                 (dict(item.get(singular) or {}), path.parent))
    name = context or current
    if not name:
        raise KubeconfigError(f"no current-context in {os.pathsep.join(map(str, files))}; "
                              "give --context")
    if name not in entries["contexts"]:
        raise KubeconfigError(f"no context {name!r} in {os.pathsep.join(map(str, files))}")
    chosen = entries["contexts"][name][0]
    cluster_name, user_name = str(chosen.get("cluster")), str(chosen.get("user", ""))
    if cluster_name not in entries["clusters"]:
        raise KubeconfigError(f"context {name!r} names cluster {cluster_name!r}, "
                              "which no kubeconfig defines")
    cluster, cluster_base = entries["clusters"][cluster_name]
    user, user_base = entries["users"].get(user_name, ({}, files[0].parent))
    return Context(name=name, cluster=_absolute("cluster", cluster, cluster_base),
                   user=_absolute("user", user, user_base),
                   namespace=chosen.get("namespace") or None)


# ---- exec credential plugins --------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Credentials:
    """What an exec plugin gave: a token, or a client certificate and key (PEM)."""

    token: str | None
    certificate: str | None
    key: str | None
    expires: datetime | None


def run_plugin(plugin: Mapping[str, Any], cluster: Mapping[str, Any]) -> Credentials:
    """Run an exec credential plugin as kubectl does: its ``env`` added to ours, the
    ``KUBERNETES_EXEC_INFO`` it may read, and an ``ExecCredential`` of its own
    ``apiVersion`` read back from its standard output."""
    api = str(plugin.get("apiVersion") or "")
    if api not in EXEC_APIS:
        raise KubeconfigError(f"exec plugin apiVersion {api!r} is none of "
                              f"{', '.join(sorted(EXEC_APIS))}")
    if plugin.get("interactiveMode") == "Always":
        raise KubeconfigError(f"exec plugin {plugin.get('command')} must be interactive, "
                              "and gangsched never prompts")
    spec: Entry = {"interactive": False}
    if plugin.get("provideClusterInfo"):
        spec["cluster"] = {k: v for k, v in {
            "server": cluster.get("server"),
            "tls-server-name": cluster.get("tls-server-name"),
            "insecure-skip-tls-verify": cluster.get("insecure-skip-tls-verify"),
            "certificate-authority-data": cluster.get("certificate-authority-data"),
            "proxy-url": cluster.get("proxy-url"),
        }.items() if v is not None}
    env = dict(os.environ)
    env.update({str(e["name"]): str(e["value"]) for e in plugin.get("env") or []})
    env["KUBERNETES_EXEC_INFO"] = json.dumps(
        {"apiVersion": api, "kind": "ExecCredential", "spec": spec})
    command = [str(plugin.get("command")), *map(str, plugin.get("args") or [])]
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True,
                              timeout=EXEC_TIMEOUT_S, check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise KubeconfigError(f"exec plugin {command[0]}: {error}") from error
    if done.returncode != 0:
        raise KubeconfigError(f"exec plugin {command[0]} exited {done.returncode}: "
                              f"{done.stderr.strip()[:300]}")
    try:
        answer = json.loads(done.stdout)
    except json.JSONDecodeError as error:
        raise KubeconfigError(f"exec plugin {command[0]} printed no ExecCredential: "
                              f"{error}") from error
    if not isinstance(answer, dict) or answer.get("apiVersion") != api:
        raise KubeconfigError(f"exec plugin {command[0]} answered with apiVersion "
                              f"{answer.get('apiVersion') if isinstance(answer, dict) else None!r},"
                              f" not {api}")
    status = answer.get("status") or {}
    token = status.get("token") or None
    certificate = status.get("clientCertificateData") or None
    key = status.get("clientKeyData") or None
    if not token and not (certificate and key):
        raise KubeconfigError(f"exec plugin {command[0]} gave neither a token nor a client "
                              "certificate and key")
    stamp = status.get("expirationTimestamp")
    expires = datetime.fromisoformat(str(stamp).replace("Z", "+00:00")) if stamp else None
    return Credentials(token=token, certificate=certificate, key=key, expires=expires)


def with_credentials(context: Context) -> tuple[Entry, datetime | None]:
    """The context's user with an exec plugin (or a ``tokenFile``) replaced by the token
    or certificate it gave, and when that expires, for clients that cannot run plugins
    or read token files themselves."""
    plugin = context.user.get("exec")
    if not isinstance(plugin, dict):
        token_file = context.user.get("tokenFile")
        if token_file and not context.user.get("token"):
            try:
                return {**context.user, "token": Path(token_file).read_text().strip()}, None
            except OSError as error:
                raise KubeconfigError(f"tokenFile {token_file}: {error}") from error
        return context.user, None
    given = run_plugin(plugin, context.cluster)
    user = {k: v for k, v in context.user.items() if k != "exec"}
    if given.token:
        user["token"] = given.token
    if given.certificate and given.key:
        user["client-certificate-data"] = base64.b64encode(given.certificate.encode()).decode()
        user["client-key-data"] = base64.b64encode(given.key.encode()).decode()
    return user, given.expires


# ---- one entry point per client -----------------------------------------------------------


def pykube_client(kubeconfig: str | None, context: str | None) -> pykube.HTTPClient:
    """The CLI's client: kubeconfig as kubectl reads it, else the pod's service account."""
    import pykube

    chosen = load(kubeconfig, context)
    try:
        if chosen is None:
            return pykube.HTTPClient(pykube.KubeConfig.from_service_account())
        user, _ = with_credentials(chosen)
        document = chosen.document()
        document["users"] = [{"name": chosen.name, "user": user}]
        return pykube.HTTPClient(pykube.KubeConfig(document))
    except (pykube.exceptions.PyKubeError, FileNotFoundError) as error:
        raise KubeconfigError(f"no usable kubeconfig: {error}") from error


def minified_file(kubeconfig: str | None, context: str | None, directory: Path) -> Path | None:
    """The chosen context written alone to ``directory`` (mode 0600), for ``run``: the
    scheduler's client and kopf then read this one file and cannot disagree on the
    context. Exec plugins stay, so credentials are asked for again when they expire."""
    chosen = load(kubeconfig, context)
    if chosen is None:
        return None
    path = directory / "kubeconfig"
    path.touch(mode=0o600)
    path.write_text(yaml.safe_dump(chosen.document(), sort_keys=False))
    return path


def renew_exec_credentials(configuration: Any, kubeconfig: str) -> None:
    """Keep the scheduler's client's exec-plugin token fresh (EKS's lasts 15 minutes).

    kubernetes_asyncio runs the plugin once, when the kubeconfig is loaded, and
    renews only if a task the caller keeps runs its ``refresh_token``; the
    client configuration's ``refresh_api_key_hook``, which it awaits before
    every request (the binder's too), asks the plugin again, in a thread and
    once for all requests waiting, when the token is near its expiry. A plugin
    that fails keeps the old token for ``RETRY_AFTER`` and is asked again.
    """
    chosen = load(kubeconfig)
    plugin = chosen.user.get("exec") if chosen is not None else None
    if chosen is None or not isinstance(plugin, dict):
        return
    cluster = chosen.cluster
    renew_at = [datetime.min.replace(tzinfo=UTC)]
    lock = asyncio.Lock()

    async def renew(config: Any) -> None:
        if datetime.now(UTC) < renew_at[0]:
            return
        async with lock:
            if datetime.now(UTC) < renew_at[0]:
                return
            try:
                given = await asyncio.to_thread(run_plugin, plugin, cluster)
            except KubeconfigError as error:
                log.warning("exec_plugin_failed", error=str(error))
                renew_at[0] = datetime.now(UTC) + RETRY_AFTER
                return
            if given.token:
                config.api_key["BearerToken"] = f"Bearer {given.token}"
            # A plugin that names no expiry keeps its first token, as kubectl keeps it.
            renew_at[0] = (given.expires - RENEW_BEFORE if given.expires
                           else datetime.max.replace(tzinfo=UTC))

    configuration.refresh_api_key_hook = renew


def kopf_login(**_: Any) -> kopf.ConnectionInfo:
    """kopf's login from ``$KUBECONFIG``, exec plugins included; kopf logs in again when
    the API server refuses an expired token, which runs the plugin again."""
    import kopf

    try:
        chosen = load(os.environ.get("KUBECONFIG"))
        if chosen is None:
            raise KubeconfigError("no kubeconfig")
        user, expires = with_credentials(chosen)
    except KubeconfigError as error:
        raise kopf.LoginError(str(error)) from error
    cluster = chosen.cluster
    return kopf.ConnectionInfo(
        server=str(cluster.get("server")),
        ca_path=cluster.get("certificate-authority"),
        ca_data=cluster.get("certificate-authority-data"),
        insecure=cluster.get("insecure-skip-tls-verify"),
        certificate_path=user.get("client-certificate"),
        certificate_data=user.get("client-certificate-data"),
        private_key_path=user.get("client-key"),
        private_key_data=user.get("client-key-data"),
        username=user.get("username"),
        password=user.get("password"),
        token=user.get("token"),
        default_namespace=chosen.namespace,
        proxy_url=cluster.get("proxy-url"),
        expiration=expires,
    )


def kopf_in_cluster_login(
    environ: Mapping[str, str] | None = None,
    token_file: str | None = None, ca_file: str | None = None,
) -> kopf.ConnectionInfo:
    """kopf's login in a pod, from the same endpoint and files as the scheduler's client.

    kopf's own in-cluster login talks to a hard-coded
    ``https://kubernetes.default.svc``; the scheduler's client, as client-go,
    to ``KUBERNETES_SERVICE_HOST:KUBERNETES_SERVICE_PORT``. Where the name does
    not resolve (no cluster DNS for the scheduler, a custom cluster domain),
    kopf would never see a PodGroup while the rest of the process works. The
    token is read again at each login, so a rotated token is picked up when
    kopf logs in again after a refusal.
    """
    import kopf
    from kubernetes_asyncio.client import Configuration
    from kubernetes_asyncio.config.config_exception import ConfigException
    from kubernetes_asyncio.config.incluster_config import (
        SERVICE_CERT_FILENAME,
        SERVICE_TOKEN_FILENAME,
        InClusterConfigLoader,
    )

    configuration = Configuration()
    loader = InClusterConfigLoader(
        token_filename=token_file or SERVICE_TOKEN_FILENAME,
        cert_filename=ca_file or SERVICE_CERT_FILENAME,
        try_refresh_token=False, environ=dict(os.environ if environ is None else environ))
    try:
        loader.load_and_set(configuration)
    except ConfigException as error:
        raise kopf.LoginError(f"no in-cluster configuration: {error}") from error
    token = str(configuration.api_key["BearerToken"]).removeprefix("Bearer ").strip()
    namespace_file = Path(token_file or SERVICE_TOKEN_FILENAME).with_name("namespace")
    return kopf.ConnectionInfo(
        server=str(configuration.host), ca_path=configuration.ssl_ca_cert, token=token,
        default_namespace=(namespace_file.read_text().strip()
                           if namespace_file.is_file() else None),
    )

