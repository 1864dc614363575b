"""The scheduler's API client: a proxy from the environment is honoured, read once."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gangsched.app import api_client
from gangsched.kubeconfig import connection

SERVER = "https://10.20.30.40:6443"


def kubeconfig(tmp_path: Path) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "k", "cluster": {"server": SERVER,
                                               "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
    }))
    return str(path)


@pytest.mark.parametrize(("environment", "expected"), [
    ({"HTTPS_PROXY": "http://proxy.example:3128"}, "http://proxy.example:3128"),
    ({"https_proxy": "http://proxy.example:3128", "NO_PROXY": "10.20.30.40"}, None),
    ({"HTTP_PROXY": "http://plain.example:3128"}, None),  # the server speaks https
    ({}, None),
])
async def test_the_environment_s_proxy_carries_requests_to_the_api_server(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        environment: dict[str, str], expected: str | None) -> None:
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY",
                 "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    api = await api_client(connection(kubeconfig(tmp_path)), bind_concurrency=4)
    try:
        assert api.rest_client.proxy == expected
        # Looked up once here, not again per request by the session.
        assert not api.rest_client.pool_manager.trust_env
    finally:
        await api.close()
