"""One connection, from kubeconfig as kubectl reads it or from the pod's service account,
handed alike to the CLI's, the scheduler's and kopf's clients."""

from __future__ import annotations

import json
import os
import stat
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client

from gangsched import kubeconfig as connections
from gangsched.kubeconfig import (
    Context,
    KubeconfigError,
    configure,
    connection,
    in_cluster,
    kopf_login,
    load,
    pykube_client,
)


def kubeconfig(path: Path, *, current: str | None, contexts: dict[str, tuple[str, str]],
               clusters: dict[str, dict[str, Any]], users: dict[str, dict[str, Any]]) -> Path:
    document: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": n, "cluster": c} for n, c in clusters.items()],
        "users": [{"name": n, "user": u} for n, u in users.items()],
        "contexts": [{"name": n, "context": {"cluster": c, "user": u, "namespace": f"ns-{n}"}}
                     for n, (c, u) in contexts.items()],
    }
    if current:
        document["current-context"] = current
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(document))
    return path


def exec_plugin(directory: Path, api: str, answer: dict[str, Any] | None = None,
                exit_code: int = 0) -> Path:
    """A credential plugin that records what kubectl would hand it and prints ``answer``."""
    answer = answer if answer is not None else {"token": "from-plugin",
                                                "expirationTimestamp": "2030-01-02T03:04:05Z"}
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / "plugin"
    credential = json.dumps({"apiVersion": api, "kind": "ExecCredential", "status": answer})
    record = f'printf "%s %s\\n" "$KUBERNETES_EXEC_INFO" "$PLUGIN_ENV" >> "{directory}/calls"'
    answers = (f"echo refused >&2; exit {exit_code}" if exit_code
               else f"cat <<'EOF'\n{credential}\nEOF")
    script.write_text(f"#!/bin/sh\n{record}\n{answers}\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def with_plugin(tmp_path: Path, api: str, **kwargs: Any) -> Path:
    exec_plugin(tmp_path, api, **kwargs)
    return kubeconfig(
        tmp_path / "config", current="c",
        contexts={"c": ("k", "u")},
        clusters={"k": {"server": "https://127.0.0.1:6443"}},
        users={"u": {"exec": {"apiVersion": api, "command": "./plugin",
                              "env": [{"name": "PLUGIN_ENV", "value": "given"}]}}},
    )


def test_several_files_merge_as_kubectl_merges_them_the_first_one_wins(tmp_path: Path) -> None:
    first = kubeconfig(tmp_path / "a" / "config", current="one",
                       contexts={"one": ("k1", "u1")},
                       clusters={"k1": {"server": "https://first:6443"}},
                       users={"u1": {"token": "t1"}})
    second = kubeconfig(tmp_path / "b" / "config", current="two",
                        contexts={"two": ("k2", "u2"), "one": ("k2", "u2")},
                        clusters={"k1": {"server": "https://shadowed:6443"},
                                  "k2": {"server": "https://second:6443",
                                         "certificate-authority": "ca.crt"}},
                        users={"u2": {"token": "t2"}})
    listed = os.pathsep.join([str(tmp_path / "missing"), str(first), str(second)])

    chosen = load(listed)
    assert chosen is not None
    assert (chosen.name, chosen.cluster["server"], chosen.user, chosen.namespace) == \
        ("one", "https://first:6443", {"token": "t1"}, "ns-one")

    other = load(listed, "two")
    assert other is not None
    assert other.cluster == {"server": "https://second:6443",
                             "certificate-authority": str(tmp_path / "b" / "ca.crt")}, \
        "a relative path is read from the directory of the file that holds it"
    assert other.user == {"token": "t2"}


def test_no_kubeconfig_and_no_such_context_are_plain_errors(tmp_path: Path) -> None:
    with pytest.raises(KubeconfigError, match="no kubeconfig at"):
        load(str(tmp_path / "missing"))
    config_path = kubeconfig(tmp_path / "config", current=None, contexts={"c": ("k", "u")},
                             clusters={"k": {"server": "https://x"}}, users={"u": {}})
    with pytest.raises(KubeconfigError, match="no current-context"):
        load(str(config_path))
    with pytest.raises(KubeconfigError, match="no context 'other'"):
        load(str(config_path), "other")


@pytest.mark.parametrize("api", ["client.authentication.k8s.io/v1",
                                 "client.authentication.k8s.io/v1beta1"])
def test_an_exec_plugin_gives_the_cli_and_kopf_their_token(tmp_path: Path, api: str) -> None:
    chosen = connection(str(with_plugin(tmp_path, api)))

    api_client = pykube_client(chosen)
    assert api_client.config.user["token"] == "from-plugin"
    assert api_client.url == "https://127.0.0.1:6443"

    login = kopf_login(chosen)
    assert (login.server, login.token, login.default_namespace) == \
        ("https://127.0.0.1:6443", "from-plugin", "ns-c")
    assert login.expiration is not None and login.expiration.year == 2030

    calls = (tmp_path / "calls").read_text().splitlines()
    assert len(calls) == 2
    info, env = calls[0].rsplit(" ", 1)
    assert json.loads(info) == {"apiVersion": api, "kind": "ExecCredential",
                                "spec": {"interactive": False}}
    assert env == "given"


def test_a_plugin_that_gives_a_certificate_becomes_client_certificate_data(
    tmp_path: Path,
) -> None:
    api = "client.authentication.k8s.io/v1"
    config_path = with_plugin(tmp_path, api, answer={
        "clientCertificateData": "-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n",
        "clientKeyData": "-----BEGIN PRIVATE KEY-----\ny\n-----END PRIVATE KEY-----\n",
    })
    user = pykube_client(connection(str(config_path))).config.user
    assert user["client-certificate"].bytes().startswith(b"-----BEGIN CERTIFICATE-----")
    assert user["client-key"].bytes().startswith(b"-----BEGIN PRIVATE KEY-----")


@pytest.mark.parametrize(("answer", "exit_code", "message"), [
    ({}, 0, "neither a token nor a client certificate"),
    ({"token": "t"}, 3, "exited 3: refused"),
])
def test_a_plugin_that_gives_nothing_usable_is_an_error(
    tmp_path: Path, answer: dict[str, Any], exit_code: int, message: str
) -> None:
    config_path = with_plugin(tmp_path, "client.authentication.k8s.io/v1",
                              answer=answer, exit_code=exit_code)
    with pytest.raises(KubeconfigError, match=message):
        pykube_client(connection(str(config_path)))


async def test_the_schedulers_client_reads_the_chosen_context_exec_included(
    tmp_path: Path,
) -> None:
    api = "client.authentication.k8s.io/v1"
    config_path = with_plugin(tmp_path / "home", api)
    other = kubeconfig(tmp_path / "other", current="elsewhere",
                       contexts={"elsewhere": ("x", "y")},
                       clusters={"x": {"server": "https://elsewhere:6443"}}, users={"y": {}})

    configuration = client.Configuration()
    await configure(configuration, connection(os.pathsep.join([str(other), str(config_path)]),
                                              "c"))
    assert configuration.host == "https://127.0.0.1:6443"
    assert configuration.api_key["BearerToken"] == "Bearer from-plugin"


async def test_the_schedulers_client_asks_the_plugin_again_once_its_token_expires(
    tmp_path: Path,
) -> None:
    api = "client.authentication.k8s.io/v1"
    directory = tmp_path / "plugin"
    directory.mkdir()
    script = directory / "plugin"
    # Each call gives a new token that expires at once, as a short-lived one soon does.
    script.write_text(
        "#!/bin/sh\n"
        f'echo call >> "{directory}/calls"\n'
        f'n=$(wc -l < "{directory}/calls")\n'
        f'printf \'{{"apiVersion": "{api}", "kind": "ExecCredential", "status": '
        '{"token": "token-%s", "expirationTimestamp": "2020-01-01T00:00:00Z"}}\' "$n"\n'
    )
    script.chmod(0o755)
    config_path = kubeconfig(
        directory / "config", current="c", contexts={"c": ("k", "u")},
        clusters={"k": {"server": "https://127.0.0.1:6443"}},
        users={"u": {"exec": {"apiVersion": api, "command": "./plugin"}}})

    configuration = client.Configuration()
    await configure(configuration, connection(str(config_path)))
    first = (await configuration.auth_settings())["BearerToken"]["value"]
    second = (await configuration.auth_settings())["BearerToken"]["value"]
    assert (first, second) == ("Bearer token-2", "Bearer token-3")


def service_account(tmp_path: Path) -> tuple[Path, Path]:
    """A pod's mounted service account: its token, CA and namespace files."""
    account = tmp_path / "serviceaccount"
    account.mkdir()
    (account / "token").write_text("sa-token\n")
    (account / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n")
    (account / "namespace").write_text("gangsched-system")
    return account / "token", account / "ca.crt"


@pytest.mark.parametrize(("host", "server"), [("10.96.0.1", "https://10.96.0.1:443"),
                                               ("fd00::1", "https://[fd00::1]:443")])
async def test_in_a_pod_every_client_reaches_the_api_where_client_go_does(
    tmp_path: Path, host: str, server: str
) -> None:
    """From KUBERNETES_SERVICE_HOST/PORT and the mounted token, never a DNS name that may
    not resolve: the scheduler's client, kopf's login and the CLI's alike."""
    token, ca = service_account(tmp_path)
    environ = {"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": "443"}
    chosen = in_cluster(environ, str(token), str(ca))

    login = kopf_login(chosen)
    scheduler = client.Configuration()
    await configure(scheduler, chosen)
    cli = pykube_client(chosen)
    assert login.server == scheduler.host == cli.url == server
    assert (login.token, login.ca_path, login.default_namespace) == \
        ("sa-token", str(ca), "gangsched-system")
    assert scheduler.api_key["BearerToken"] == "Bearer sa-token"
    assert scheduler.ssl_ca_cert == str(ca)
    assert cli.config.user["token"] == "sa-token"


async def test_in_a_pod_a_rotated_token_is_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kubelet rotates the service account's token in its file: the scheduler's client
    sends the new one once it reads the file again, kopf's at its next login."""
    token, ca = service_account(tmp_path)
    chosen = in_cluster({"KUBERNETES_SERVICE_HOST": "10.96.0.1",
                         "KUBERNETES_SERVICE_PORT": "443"}, str(token), str(ca))
    monkeypatch.setattr(connections, "TOKEN_FILE_REREAD", timedelta(0))
    scheduler = client.Configuration()
    await configure(scheduler, chosen)
    assert (await scheduler.auth_settings())["BearerToken"]["value"] == "Bearer sa-token"
    token.write_text("rotated\n")
    assert (await scheduler.auth_settings())["BearerToken"]["value"] == "Bearer rotated"
    assert kopf_login(chosen).token == "rotated"


def test_without_kubeconfig_outside_a_pod_the_error_says_what_is_missing(
    tmp_path: Path
) -> None:
    with pytest.raises(KubeconfigError, match="host/port is not set"):
        in_cluster({}, str(tmp_path / "token"), str(tmp_path / "ca.crt"))


def test_every_client_is_made_from_the_one_context_chosen(tmp_path: Path) -> None:
    """--context picks the context for every client, not only for one of them."""
    path = kubeconfig(tmp_path / "config", current="one",
                      contexts={"one": ("k1", "u1"), "two": ("k2", "u2")},
                      clusters={"k1": {"server": "https://one:6443"},
                                "k2": {"server": "https://two:6443"}},
                      users={"u1": {"token": "t1"}, "u2": {"token": "t2"}})
    chosen = connection(str(path), "two")
    assert isinstance(chosen, Context)
    login, cli = kopf_login(chosen), pykube_client(chosen)
    assert (login.server, login.token, login.default_namespace) == \
        ("https://two:6443", "t2", "ns-two")
    assert (cli.url, cli.config.user["token"]) == ("https://two:6443", "t2")
