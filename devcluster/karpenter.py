"""Karpenter's KWOK provider, run out of cluster against the local control plane.

It is the real Karpenter (``sigs.k8s.io/karpenter``, its ``kwok`` main package,
built by ``cluster/build.sh karpenter``): it reads pending pods that say
``PodScheduled=False, reason=Unschedulable``, batches them, makes NodeClaims under
the NodePools' limits and requirements, and consolidates nodes it made. Its
cloud is KWOK: a NodeClaim becomes a Node object at once, carrying the
NodePool's template labels; the template's ``type: kwok`` label is what lets the
harness's KWOK (:mod:`devcluster.controlplane`) make that node Ready and run its
pods. Two quirks of the provider: a node's capacity is the sum of the requests
that made it (so a NodePool's ``status.resources`` counts requests), and
``limits.nodes`` is ignored.

Leader election is off and there are no webhooks; the instance types are
:data:`INSTANCE_TYPES` (cpu and GPU shapes in two zones), given by
``INSTANCE_TYPES_FILE_PATH``. No NodePool, no node: Karpenter acts only on the
NodePools a test or the demo applies (:func:`nodepool`).

:class:`Ledger` samples what it costs: NodeClaims launched, and node-seconds
idle (a node Karpenter made with no running pod of the watched namespace on it).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pykube

from devcluster.build import built
from devcluster.controlplane import KWOK_LABEL, ClusterError, LocalCluster, free_port

NODEPOOL_API = "karpenter.sh/v1"
NODECLASS_API = "karpenter.kwok.sh/v1alpha1"
NODECLASS = "default"
POOL_LABEL = "karpenter.sh/nodepool"
ZONE_LABEL = "topology.kubernetes.io/zone"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
ZONES = ("zone-a", "zone-b")
GPU = "nvidia.com/gpu"
CRDS = {"nodepools": "karpenter.sh", "nodeclaims": "karpenter.sh",
        "nodeoverlays": "karpenter.sh", "kwoknodeclasses": "karpenter.kwok.sh"}
"""The CRDs ``cluster/build.sh karpenter`` copies beside its bin/, by their group."""
READY_TIMEOUT_S = 60.0


def _instance_type(name: str, cpu: int, gpus: int, price: float) -> dict[str, Any]:
    resources = {"cpu": str(cpu), "memory": f"{cpu * 4}Gi", "pods": "110"}
    if gpus:
        resources[GPU] = str(gpus)
    return {
        "name": name, "architecture": "amd64", "operatingSystems": ["linux"],
        "resources": resources,
        "offerings": [{"Price": price, "Available": True, "Requirements": [
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
            {"key": ZONE_LABEL, "operator": "In", "values": [zone]},
        ]} for zone in ZONES],
    }


INSTANCE_TYPES = (
    _instance_type("c-2x", 2, 0, 0.1),
    _instance_type("c-4x", 4, 0, 0.2),
    _instance_type("c-8x", 8, 0, 0.4),
    _instance_type("g-1gpu", 4, 1, 1.0),
    _instance_type("g-2gpu", 8, 2, 2.0),
)
"""The cloud's shapes: a price doubling with size, so Karpenter buys the smallest that fits."""


def ensure_karpenter() -> Path:
    """Build or reuse the pinned Karpenter (``cluster/build.sh karpenter``); its bin directory,
    the CRDs in ``../crds`` beside it."""
    return built("karpenter", override="GANGSCHED_KARPENTER_BIN")


def crd(kind: str) -> Path:
    """One of Karpenter's pinned CRDs (a key of :data:`CRDS`), as the build copied it."""
    return ensure_karpenter().parent / "crds" / f"{kind}.yaml"


def nodepool(
    name: str,
    *,
    limits: Mapping[str, str],
    instance_types: Sequence[str] = ("c-2x", "c-4x", "c-8x"),
    zones: Sequence[str] = ZONES,
    consolidate_after: str = "5s",
    policy: str = "WhenEmptyOrUnderutilized",
    startup_taints: Sequence[str] = (),
) -> dict[str, Any]:
    """A NodePool of KWOK nodes the harness's KWOK runs (its ``type: kwok`` template label);
    ``startup_taints`` (``key=value:Effect``) are put on each node it launches, for whatever
    readies the node to remove (Karpenter expects them to go)."""
    taints = [{"key": key, "value": value, "effect": effect}
              for key, rest in (taint.split("=", 1) for taint in startup_taints)
              for value, effect in [rest.split(":", 1)]]
    return {
        "apiVersion": NODEPOOL_API, "kind": "NodePool", "metadata": {"name": name},
        "spec": {
            "limits": dict(limits),
            "disruption": {"consolidationPolicy": policy, "consolidateAfter": consolidate_after,
                           "budgets": [{"nodes": "100%"}]},
            "template": {
                "metadata": {"labels": {KWOK_LABEL[0]: KWOK_LABEL[1]}},
                "spec": {
                    "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass",
                                     "name": NODECLASS},
                    "expireAfter": "Never",
                    **({"startupTaints": taints} if taints else {}),
                    "requirements": [
                        {"key": INSTANCE_TYPE_LABEL, "operator": "In",
                         "values": list(instance_types)},
                        {"key": ZONE_LABEL, "operator": "In", "values": list(zones)},
                    ],
                },
            },
        },
    }


@dataclass
class Karpenter:
    """One Karpenter process on ``cluster``; :meth:`stop` ends it and what it made."""

    cluster: LocalCluster
    workdir: Path
    batch_idle: str = "1s"
    batch_max: str = "10s"
    proc: subprocess.Popen[bytes] | None = None

    @property
    def log_path(self) -> Path:
        return self.workdir / "karpenter.log"

    def logs(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def start(self) -> None:
        """CRDs, a Ready KWOKNodeClass, then the process; returns once it answers ready."""
        bin_dir = ensure_karpenter()
        files = [arg for kind in CRDS for arg in ("-f", str(crd(kind)))]
        self.cluster.kubectl("apply", "--server-side", "--force-conflicts", *files)
        self.cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                             *(f"crd/{kind}.{group}" for kind, group in CRDS.items()))
        self._ready_nodeclass()
        self.workdir.mkdir(parents=True, exist_ok=True)
        types = self.workdir / "instance-types.json"
        types.write_text(json.dumps(list(INSTANCE_TYPES)))
        health = free_port()
        env = {**os.environ, "KUBECONFIG": str(self.cluster.kubeconfig),
               "DISABLE_LEADER_ELECTION": "true", "INSTANCE_TYPES_FILE_PATH": str(types),
               "METRICS_PORT": str(free_port()), "HEALTH_PROBE_PORT": str(health),
               "BATCH_IDLE_DURATION": self.batch_idle, "BATCH_MAX_DURATION": self.batch_max,
               "LOG_LEVEL": "debug", "CPU_REQUESTS": "1000"}
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen([str(bin_dir / "karpenter")], env=env, stdout=log,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not _answers(f"http://127.0.0.1:{health}/readyz"):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise ClusterError(f"karpenter did not start:\n{self.logs()[-3000:]}")
            time.sleep(0.2)

    def _ready_nodeclass(self) -> None:
        """The KWOKNodeClass, its status set Ready by hand: no controller of the KWOK
        provider sets it, and Karpenter launches nothing for a class not Ready."""
        self.cluster.kubectl("apply", "-f", "-", input=json.dumps({
            "apiVersion": NODECLASS_API, "kind": "KWOKNodeClass",
            "metadata": {"name": NODECLASS}, "spec": {}}))
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.cluster.kubectl("patch", "kwoknodeclass", NODECLASS, "--subresource=status",
                             "--type=merge", "-p", json.dumps({"status": {"conditions": [{
                                 "type": "Ready", "status": "True", "reason": "Ready",
                                 "message": "", "lastTransitionTime": now,
                                 "observedGeneration": 1}]}}))

    def apply(self, *pools: Mapping[str, Any]) -> None:
        self.cluster.kubectl("apply", "-f", "-", input=json.dumps(
            {"apiVersion": "v1", "kind": "List", "items": list(pools)}))

    def nodeclaims(self) -> list[dict[str, Any]]:
        kind = pykube.object_factory(self.cluster.client, NODEPOOL_API, "NodeClaim")
        return [claim.obj for claim in kind.objects(self.cluster.client)]

    def nodes(self) -> list[dict[str, Any]]:
        return [node.obj for node in pykube.Node.objects(self.cluster.client)
                if POOL_LABEL in node.obj["metadata"].get("labels", {})]

    def clear(self, timeout: float = 60.0) -> None:
        """Delete every NodePool and NodeClaim and wait until Karpenter's nodes are gone."""
        self.cluster.kubectl("delete", "nodepools.karpenter.sh,nodeclaims.karpenter.sh",
                             "--all", "--wait=false")
        deadline = time.monotonic() + timeout
        while self.nodeclaims() or self.nodes():
            if time.monotonic() > deadline:
                raise ClusterError(f"Karpenter's nodes did not go:\n{self.logs()[-3000:]}")
            time.sleep(0.2)

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


@contextlib.contextmanager
def running_karpenter(cluster: LocalCluster, workdir: Path, *, batch_idle: str = "1s",
                      batch_max: str = "10s") -> Iterator[Karpenter]:
    """Karpenter for the block; after it, its NodePools, NodeClaims and nodes are gone."""
    karpenter = Karpenter(cluster, workdir, batch_idle, batch_max)
    karpenter.start()
    try:
        yield karpenter
    finally:
        with contextlib.suppress(ClusterError):
            karpenter.clear()
        karpenter.stop()


@dataclass
class Ledger:
    """What Karpenter bought while it ran, sampled every ``interval`` seconds in a thread.

    ``launched`` holds every NodeClaim seen; ``idle_s`` sums, over Karpenter's nodes,
    the seconds a node stood with no running pod of ``namespace`` on it.
    """

    karpenter: Karpenter
    namespace: str
    interval: float = 0.5
    launched: dict[str, float] = field(default_factory=dict)
    """NodeClaim name → when it was first seen (monotonic)."""
    idle_s: float = 0.0
    node_s: float = 0.0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> Ledger:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        api = self.karpenter.cluster.client
        last = time.monotonic()
        while not self._stop.wait(self.interval):
            now = time.monotonic()
            for claim in self.karpenter.nodeclaims():
                self.launched.setdefault(claim["metadata"]["name"], now)
            busy = {pod.obj["spec"].get("nodeName")
                    for pod in pykube.Pod.objects(api, namespace=self.namespace)
                    if pod.obj.get("status", {}).get("phase") not in ("Succeeded", "Failed")}
            nodes = [node["metadata"]["name"] for node in self.karpenter.nodes()]
            self.node_s += (now - last) * len(nodes)
            self.idle_s += (now - last) * sum(1 for name in nodes if name not in busy)
            last = now

    def launched_since(self, since: float) -> list[str]:
        return [name for name, seen in self.launched.items() if seen >= since]
