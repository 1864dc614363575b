"""One connection configuration, read once as kubectl reads it, for every client.

Three clients talk to the API server: kubernetes_asyncio (the scheduler's
watches and writes), kopf (embedded in the scheduler's loop) and pykube-ng
(the CLI). Each reads kubeconfig its own way and each lacks part of what
users' kubeconfigs hold: pykube reads one file and runs exec plugins of
``client.authentication.k8s.io/v1beta1`` but not ``v1`` (what EKS, GKE and
AKS write today); kopf's own login runs no exec plugin, ignores
``--context`` and, in a pod, talks to a hard-coded
``https://kubernetes.default.svc``; kubernetes_asyncio lets the last of
several files name the current context where kubectl lets the first.

So :func:`connection` is the one place that decides where the API server is
and who we are to it: the context of the kubeconfig files (merged by
kubectl's rules, relative paths made absolute), else, in a pod, the service
account as client-go reads it (``KUBERNETES_SERVICE_HOST``/``PORT``, the
mounted CA and token file). Every client is derived from that one
:class:`Context`: :func:`pykube_client`, :func:`configure` and
:func:`kopf_login`, each running exec plugins (``v1``, ``v1beta1``,
``v1alpha1``) or reading the token file as it needs.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
from collections.abc import Awaitable, Callable, Mapping
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


IN_CLUSTER = "in-cluster"


def in_cluster(environ: Mapping[str, str] | None = None, token_file: str | None = None,
               ca_file: str | None = None) -> Context:
    """The pod's service account as a context, where client-go finds it: the API server at
    ``KUBERNETES_SERVICE_HOST:KUBERNETES_SERVICE_PORT`` (not a DNS name that may not
    resolve), the mounted CA, and the token file, read again as the kubelet rotates it."""
    from kubernetes_asyncio.client import Configuration
    from kubernetes_asyncio.config.config_exception import ConfigException
    from kubernetes_asyncio.config.incluster_config import (
        SERVICE_CERT_FILENAME,
        SERVICE_TOKEN_FILENAME,
        InClusterConfigLoader,
    )

    token_file = token_file or SERVICE_TOKEN_FILENAME
    found = Configuration()
    loader = InClusterConfigLoader(
        token_filename=token_file, cert_filename=ca_file or SERVICE_CERT_FILENAME,
        try_refresh_token=False, environ=dict(os.environ if environ is None else environ))
    try:
        loader.load_and_set(found)
    except ConfigException as error:
        raise KubeconfigError(f"no kubeconfig, and no in-cluster configuration: "
                              f"{error}") from error
    namespace_file = Path(token_file).with_name("namespace")
    return Context(name=IN_CLUSTER,
                   cluster={"server": str(found.host),
                            "certificate-authority": str(found.ssl_ca_cert)},
                   user={"tokenFile": token_file},
                   namespace=(namespace_file.read_text().strip()
                              if namespace_file.is_file() else None))


def connection(kubeconfig: str | None, context: str | None = None) -> Context:
    """Where every client of the process connects, and as whom: the kubeconfig's context as
    kubectl picks it, else (in a pod) the service account's."""
    chosen = load(kubeconfig, context)
    return chosen if chosen is not None else in_cluster()


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


# ---- every client made from the one connection ------------------------------------------

TOKEN_FILE_REREAD = timedelta(seconds=60)
"""How often a token file is read again: the kubelet rotates a service account's token
there, and client-go reads it again as often."""


def _credentialed(chosen: Context) -> tuple[Entry, datetime | None]:
    """The context as a kubeconfig whose user holds the credentials themselves (an exec
    plugin run, a token file read), and when they expire."""
    user, expires = with_credentials(chosen)
    document = chosen.document()
    document["users"] = [{"name": chosen.name, "user": user}]
    return document, expires


def pykube_client(chosen: Context) -> pykube.HTTPClient:
    """The CLI's client."""
    import pykube

    document, _ = _credentialed(chosen)
    try:
        return pykube.HTTPClient(pykube.KubeConfig(document))
    except (pykube.exceptions.PyKubeError, FileNotFoundError) as error:
        raise KubeconfigError(f"no usable kubeconfig: {error}") from error


async def configure(configuration: Any, chosen: Context) -> None:
    """Set up the scheduler's kubernetes_asyncio client, with its credentials kept fresh.

    The configuration's ``refresh_api_key_hook``, which kubernetes_asyncio
    awaits before every request (the binder's too), asks an exec plugin again
    (in a thread, once for all requests waiting) when its token is near its
    expiry, and reads a token file again every ``TOKEN_FILE_REREAD``. A plugin
    that fails keeps the old token for ``RETRY_AFTER`` and is asked again.
    """
    from kubernetes_asyncio import config

    document, expires = _credentialed(chosen)
    await config.load_kube_config_from_dict(document, client_configuration=configuration)
    plugin, token_file = chosen.user.get("exec"), chosen.user.get("tokenFile")
    if isinstance(plugin, dict):
        cluster = chosen.cluster

        def ask() -> tuple[str | None, datetime]:
            given = run_plugin(plugin, cluster)
            return given.token, _renew_time(given.expires)

        configuration.refresh_api_key_hook = _renewing(ask, _renew_time(expires),
                                                       "exec_plugin_failed")
    elif isinstance(token_file, str) and not chosen.user.get("token"):
        def reread() -> tuple[str | None, datetime]:
            user, _ = with_credentials(chosen)
            return user.get("token"), datetime.now(UTC) + TOKEN_FILE_REREAD

        configuration.refresh_api_key_hook = _renewing(
            reread, datetime.now(UTC) + TOKEN_FILE_REREAD, "token_file_unreadable")


def _renew_time(expires: datetime | None) -> datetime:
    """A plugin that names no expiry keeps its first token, as kubectl keeps it."""
    return expires - RENEW_BEFORE if expires else datetime.max.replace(tzinfo=UTC)


def _renewing(ask: Callable[[], tuple[str | None, datetime]], first: datetime, failed: str
              ) -> Callable[[Any], Awaitable[None]]:
    """A refresh hook that asks for a token again (in a thread) once the last one is due."""
    renew_at = [first]
    lock = asyncio.Lock()

    async def renew(config: Any) -> None:
        if datetime.now(UTC) < renew_at[0]:
            return
        async with lock:
            if datetime.now(UTC) < renew_at[0]:
                return
            try:
                token, renew_at[0] = await asyncio.to_thread(ask)
            except KubeconfigError as error:
                log.warning(failed, error=str(error))
                renew_at[0] = datetime.now(UTC) + RETRY_AFTER
                return
            if token:
                config.api_key["BearerToken"] = f"Bearer {token}"

    return renew


def kopf_login(chosen: Context) -> kopf.ConnectionInfo:
    """kopf's login, exec plugins included; kopf logs in again when the API server refuses
    an expired token, which runs the plugin (or reads the token file) again."""
    import kopf

    try:
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
