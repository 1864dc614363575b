"""The limit a scheduler can reach here: bindings POSTed and nothing else.

``python -m bench.barebinder --kubeconfig K --namespace N`` lists the pods of
``N`` that have no node and binds each to the next node in round-robin order
(the nodes whose names start with ``--node-prefix``), ``--in-flight`` requests
at a time over one aiohttp connection pool. No scheduling, no watch, no status
and no Event: what is left of a bind is the API server's own work and the
client's request. Exits non-zero if any binding is refused.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import ssl
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiohttp


def _ssl_context(kubeconfig: Path) -> tuple[str, ssl.SSLContext]:
    """The server and a TLS context from a kubeconfig with client-certificate auth."""
    config = json.loads(kubeconfig.read_text())
    cluster = config["clusters"][0]["cluster"]
    user = config["users"][0]["user"]
    context = ssl.create_default_context(cafile=cluster["certificate-authority"])
    context.load_cert_chain(user["client-certificate"], user["client-key"])
    return str(cluster["server"]), context


async def _list(session: aiohttp.ClientSession, url: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    params = {"limit": "500"}
    while True:
        async with session.get(url, params=params) as response:
            response.raise_for_status()
            body = await response.json()
        items.extend(body.get("items") or [])
        token = body["metadata"].get("continue")
        if not token:
            return items
        params = {"limit": "500", "continue": token}


async def bind_all(server: str, tls: ssl.SSLContext, namespace: str, node_prefix: str,
                   in_flight: int) -> dict[str, Any]:
    connector = aiohttp.TCPConnector(ssl=tls, limit=in_flight)
    async with aiohttp.ClientSession(connector=connector) as session:
        nodes = sorted(n["metadata"]["name"] for n in await _list(session, f"{server}/api/v1/nodes")
                       if n["metadata"]["name"].startswith(node_prefix))
        pods = [p["metadata"]["name"]
                for p in await _list(session, f"{server}/api/v1/namespaces/{namespace}/pods")
                if not p["spec"].get("nodeName")]
        slots = asyncio.Semaphore(in_flight)
        refused: list[str] = []

        async def bind(pod: str, node: str) -> None:
            body = {"apiVersion": "v1", "kind": "Binding",
                    "metadata": {"name": pod, "namespace": namespace},
                    "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
            async with slots, session.post(
                f"{server}/api/v1/namespaces/{namespace}/pods/{pod}/binding", json=body
            ) as response:
                if response.status >= 300:
                    refused.append(f"{pod}: {response.status} {(await response.text())[:200]}")

        started = time.monotonic()
        await asyncio.gather(*(bind(pod, node) for pod, node in zip(pods, itertools.cycle(nodes))))
        return {"pods": len(pods), "nodes": len(nodes), "refused": refused,
                "bind_s": round(time.monotonic() - started, 2)}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.barebinder", description=__doc__)
    parser.add_argument("--kubeconfig", type=Path, required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--node-prefix", default="")
    parser.add_argument("--in-flight", type=int, default=64)
    args = parser.parse_args(argv)
    server, tls = _ssl_context(args.kubeconfig)
    result = asyncio.run(bind_all(server, tls, args.namespace, args.node_prefix,
                                  args.in_flight))
    print(json.dumps(result))
    sys.exit(1 if result["refused"] else 0)


if __name__ == "__main__":
    main()
