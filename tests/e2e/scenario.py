"""What the scenario tests share: an exact cluster shape, wall times, per-node sums.

The scenarios compare kube-scheduler with gangsched on the same workload, so
each starts from exactly the nodes it names (a stray node left by another test
would give the workload room it should not have), and each records how long it
took under each scheduler in a results file the README quotes.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pykube

from devcluster.controlplane import LocalCluster, NodeShape
from tests.e2e.workspace import Workspace, node_of, phase_of, wait_for

TIMES_FILE = Path(os.environ.get("GANGSCHED_E2E_TIMES", "/tmp/gangsched-e2e-times.jsonl"))
PREFIX = "node"
TERMINAL = ("Succeeded", "Failed")


def only_nodes(cluster: LocalCluster, count: int, shape: NodeShape) -> list[str]:
    """Make the cluster exactly ``count`` nodes of ``shape``, deleting any other node."""
    for node in pykube.Node.objects(cluster.client):
        name = node.name
        if not (name.startswith(PREFIX + "-") and name[len(PREFIX) + 1:].isdigit()):
            node.delete()
    names = cluster.ensure_nodes(count, shape, prefix=PREFIX)
    deadline = time.monotonic() + 20
    while {n.name for n in pykube.Node.objects(cluster.client)} != set(names):
        if time.monotonic() > deadline:
            raise AssertionError("stray nodes did not go away")
        time.sleep(0.1)
    return names


@contextmanager
def fabric(
    cluster: LocalCluster, outer: str, inner: str, domains: Mapping[str, str],
    shape: NodeShape, name: str,
) -> Iterator[str]:
    """Two nodes of ``shape`` per inner domain (``domains``: inner value to outer value),
    labelled ``inner`` and ``outer``, and a Topology of outer, inner and host levels named
    ``name`` plus a suffix; yields the Topology's name, and removes it and the nodes after."""
    only_nodes(cluster, 0, shape)
    for domain, parent in domains.items():
        cluster.ensure_nodes(2, shape, prefix=domain, labels={outer: parent, inner: domain})
    name = f"{name}-{int(time.time() * 1000) % 10**8}"
    cluster.kubectl("create", "-f", "-", input=json.dumps({
        "apiVersion": "scheduling.gangsched.io/v1alpha1", "kind": "Topology",
        "metadata": {"name": name},
        "spec": {"levels": [{"nodeLabel": outer}, {"nodeLabel": inner},
                            {"nodeLabel": "kubernetes.io/hostname"}]},
    }))
    try:
        yield name
    finally:
        cluster.kubectl("delete", "topologies.scheduling.gangsched.io", name, "--wait=false")
        only_nodes(cluster, 0, shape)



def named(ws: Workspace, prefix: str) -> list[dict[str, Any]]:
    """The workspace's pods whose names start with ``prefix``."""
    return [pod for name, pod in ws.pods().items() if name.startswith(prefix)]


def domains_of(ws: Workspace, prefix: str) -> set[str]:
    """The domains (a node name up to its first ``-``, as :func:`fabric` names nodes) the
    pods named ``prefix``... are bound in."""
    return {str(node_of(pod)).split("-")[0] for pod in named(ws, prefix)}


def take_gpus(ws: Workspace, gpus: int, *nodes: str) -> None:
    """A pod taking ``gpus`` GPUs on each node, bound before this returns."""
    ws.create(*(ws.pod(f"fill-{node}", gpus=gpus, node_selector={"kubernetes.io/hostname": node})
                for node in nodes))
    wait_for(lambda: all(node_of(pod) for pod in named(ws, "fill-")), timeout=30,
             what="the fillers to bind")

@contextmanager
def timed(scenario: str, scheduler: str, **facts: Any) -> Iterator[dict[str, Any]]:
    """Record the wall time of the block (and any facts the test adds) to ``TIMES_FILE``.

    Written only when the block ends without an exception, so a failed run
    never leaves a figure someone could quote.
    """
    record: dict[str, Any] = {"scenario": scenario, "scheduler": scheduler, **facts}
    started = time.monotonic()
    yield record
    record["seconds"] = round(time.monotonic() - started, 2)
    record["at"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    with TIMES_FILE.open("a") as out:
        out.write(json.dumps(record) + "\n")
    print(f"\n[timing] {json.dumps(record)}")


def live(pod: Mapping[str, Any]) -> bool:
    """Bound and not finished: the pod holds room on its node."""
    return bool(node_of(pod)) and phase_of(pod) not in TERMINAL


def requests_of(pod: Mapping[str, Any]) -> dict[str, float]:
    """Summed container requests of a pod, cpu in cores, others as counts or bytes."""
    total: dict[str, float] = {}
    for container in pod.get("spec", {}).get("containers", []):
        for name, value in (container.get("resources", {}).get("requests") or {}).items():
            total[name] = total.get(name, 0.0) + _quantity(str(value))
    return total


def _quantity(text: str) -> float:
    suffixes = {"m": 1e-3, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "k": 1e3, "M": 1e6, "G": 1e9}
    for suffix, factor in sorted(suffixes.items(), key=lambda kv: -len(kv[0])):
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * factor
    return float(text)


def overcommitted(
    cluster: LocalCluster, pods: Iterable[Mapping[str, Any]]
) -> dict[str, dict[str, tuple[float, float]]]:
    """Per node, every resource whose live pods request more than the node's allocatable."""
    allocatable = {
        node.name: {k: _quantity(str(v)) for k, v in node.obj["status"]["allocatable"].items()}
        for node in pykube.Node.objects(cluster.client)
    }
    used: dict[str, dict[str, float]] = {}
    for pod in pods:
        if not live(pod):
            continue
        on = used.setdefault(str(node_of(pod)), {})
        for name, amount in requests_of(pod).items():
            on[name] = on.get(name, 0.0) + amount
    return {
        node: {name: (amount, allocatable.get(node, {}).get(name, 0.0))
               for name, amount in sums.items()
               if amount > allocatable.get(node, {}).get(name, 0.0) + 1e-9}
        for node, sums in used.items()
        if any(amount > allocatable.get(node, {}).get(name, 0.0) + 1e-9
               for name, amount in sums.items())
    }


def create_interleaved(creators: Sequence[Sequence[Callable[[], None]]]) -> None:
    """Run each sequence of creations on its own thread, as operators do, round by round.

    Thread ``i`` makes its ``k``-th object only once every thread made its
    ``(k-1)``-th, so the jobs' pods arrive interleaved (what lets kube-scheduler
    hand each job a part) while the calls of one round still race.
    """
    rounds = max(len(steps) for steps in creators)
    barrier = threading.Barrier(len(creators))
    errors: list[BaseException] = []

    def run(steps: Sequence[Callable[[], None]]) -> None:
        for k in range(rounds):
            try:
                if k < len(steps):
                    steps[k]()
            except BaseException as error:  # reported on the main thread below
                errors.append(error)
            barrier.wait(timeout=60)

    threads = [threading.Thread(target=run, args=(steps,)) for steps in creators]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
