"""kube-scheduler as the oracle of "may this pod go on this node".

A seeded generator makes random nodes (labels, zones, taints, allocatable,
cordons) with pods already bound to them by ``nodeName``, and random pods
(requests and limits, init and sidecar containers, node selectors, required
node affinity with every operator, tolerations). For every (pod, node) pair
kube-scheduler is asked by a probe pinned to the node with a ``matchFields``
term, and gangsched's own filter answers from the same objects parsed by
``gangsched.core.kubeobjects``. Any pair where they differ is a bug on one side.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pykube

from devcluster.controlplane import KWOK_LABEL, LocalCluster
from gangsched.core.kubeobjects import node_from_api, pod_from_api
from gangsched.core.nodefit import node_excluded_reason
from gangsched.core.resources import Resources

SEED_VARIABLE = "GANGSCHED_ORACLE_SEED"
"""Set to replay a run: the seed is printed at its start."""
PREFIX = "oracle"
ZONES = ("a", "b", "c")
TAINT_KEYS = ("dedicated", "gpu")
EXTENDED = "example.com/dev"
OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


def seed() -> int:
    """The run's seed: the environment's when replaying, a fresh one otherwise."""
    given = os.environ.get(SEED_VARIABLE)
    return int(given) if given else random.SystemRandom().randrange(2**31)


def _taint(rng: random.Random) -> dict[str, str]:
    taint = {"key": rng.choice(TAINT_KEYS),
             "effect": rng.choice(("NoSchedule", "NoExecute", "PreferNoSchedule"))}
    if rng.random() < 0.7:
        taint["value"] = rng.choice(("x", "y"))
    return taint


def node_manifest(rng: random.Random, index: int) -> dict[str, Any]:
    name = f"{PREFIX}-{index}"
    labels = {KWOK_LABEL[0]: KWOK_LABEL[1], "kubernetes.io/hostname": name,
              "topology.kubernetes.io/zone": rng.choice(ZONES)}
    for key, values in (("tier", ("gold", "silver")), ("rank", ("1", "5", "10", "x"))):
        if rng.random() < 0.6:
            labels[key] = rng.choice(values)
    allocatable = {"cpu": rng.choice(("1", "2", "3500m")),
                   "memory": rng.choice(("1Gi", "2Gi", "4Gi")),
                   "pods": str(rng.choice((2, 3, 110)))}
    if rng.random() < 0.4:
        allocatable[EXTENDED] = str(rng.choice((1, 2)))
    taints = [_taint(rng) for _ in range(rng.choice((0, 0, 1, 2)))]
    unique = {(t["key"], t["effect"]): t for t in taints}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels,
                     "annotations": {"kwok.x-k8s.io/node": "fake"}},
        "spec": {"taints": list(unique.values()), "unschedulable": rng.random() < 0.1},
        "status": {"allocatable": allocatable, "capacity": dict(allocatable)},
    }


def _requests(rng: random.Random) -> dict[str, Any]:
    requests: dict[str, str] = {}
    if rng.random() < 0.8:
        requests["cpu"] = rng.choice(("100m", "500m", "1", "2"))
    if rng.random() < 0.6:
        requests["memory"] = rng.choice(("128Mi", "512Mi", "1Gi", "3Gi"))
    if rng.random() < 0.15:
        requests[EXTENDED] = "1"
    resources: dict[str, Any] = {"requests": requests}
    if EXTENDED in requests:
        resources["limits"] = {EXTENDED: requests[EXTENDED]}
    elif requests and rng.random() < 0.3:
        resources = {"limits": requests}  # requests default to the limits
    return resources


def _container(rng: random.Random, name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "image": "busybox", "resources": _requests(rng), **extra}


def _requirement(rng: random.Random) -> dict[str, Any]:
    operator = rng.choice(OPERATORS)
    key = rng.choice(("tier", "rank", "topology.kubernetes.io/zone"))
    if operator in ("Gt", "Lt"):
        return {"key": "rank", "operator": operator, "values": [rng.choice(("0", "3", "7"))]}
    if operator in ("Exists", "DoesNotExist"):
        return {"key": key, "operator": operator}
    pool = {"tier": ("gold", "silver"), "rank": ("1", "5"), "topology.kubernetes.io/zone": ZONES}
    return {"key": key, "operator": operator, "values": rng.sample(pool[key], rng.choice((1, 2)))}


def _toleration(rng: random.Random) -> dict[str, Any]:
    if rng.random() < 0.1:
        return {"operator": "Exists"}
    keys = (*TAINT_KEYS, "node.kubernetes.io/unschedulable")
    toleration: dict[str, Any] = {"key": rng.choice(keys)}
    if rng.random() < 0.5:
        toleration["operator"] = "Exists"
    else:
        toleration.update(operator="Equal", value=rng.choice(("x", "y")))
    if rng.random() < 0.6:
        toleration["effect"] = rng.choice(("NoSchedule", "NoExecute"))
    return toleration


def pod_spec(rng: random.Random) -> dict[str, Any]:
    """A random pod spec without a node: what the probes of one pod share."""
    spec: dict[str, Any] = {"containers": [_container(rng, f"c{i}")
                                           for i in range(rng.choice((1, 1, 2)))]}
    inits = []
    for i in range(rng.choice((0, 0, 1, 2))):
        extra = {"restartPolicy": "Always"} if rng.random() < 0.5 else {}
        inits.append(_container(rng, f"init{i}", **extra))
    if inits:
        spec["initContainers"] = inits
    if rng.random() < 0.3:
        spec["nodeSelector"] = {"tier": rng.choice(("gold", "silver"))}
    if rng.random() < 0.5:
        terms = [{"matchExpressions": [_requirement(rng) for _ in range(rng.choice((1, 2)))]}
                 for _ in range(rng.choice((1, 1, 2)))]
        spec["affinity"] = {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}
    if rng.random() < 0.6:
        spec["tolerations"] = [_toleration(rng) for _ in range(rng.choice((1, 2)))]
    return spec


def pinned(spec: Mapping[str, Any], node: str) -> dict[str, Any]:
    """The spec, allowed on ``node`` only: a ``matchFields`` requirement in every term."""
    pin = {"key": "metadata.name", "operator": "In", "values": [node]}
    out = dict(spec)
    required = (spec.get("affinity", {}).get("nodeAffinity", {})
                .get("requiredDuringSchedulingIgnoredDuringExecution"))
    terms = [{**term, "matchFields": [pin]} for term in required["nodeSelectorTerms"]] \
        if required else [{"matchFields": [pin]}]
    out["affinity"] = {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}
    return out


@dataclass(frozen=True, slots=True)
class Verdict:
    pod: int
    node: str
    kube: bool
    ours: bool
    why: str


def our_verdict(probe: Mapping[str, Any], node_obj: Mapping[str, Any], used: Resources) -> bool:
    """gangsched's own filter on the objects kube-scheduler saw: rules, then room."""
    pod = pod_from_api(probe)
    node = node_from_api(node_obj)
    return (node_excluded_reason(pod.rules, node) is None
            and pod.requests.fits(node.allocatable - used))


def used_on(cluster: LocalCluster, namespace: str, node: str) -> Resources:
    total = Resources.zero()
    for pod in pykube.Pod.objects(cluster.client, namespace=namespace):
        if pod.obj["spec"].get("nodeName") == node and "probe" not in pod.labels:
            total += pod_from_api(pod.obj).requests
    return total


def kube_verdict(pod: Mapping[str, Any]) -> bool | None:
    """True once bound, False once kube-scheduler said Unschedulable, None meanwhile."""
    if pod["spec"].get("nodeName"):
        return True
    for condition in pod.get("status", {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("reason") == "Unschedulable":
            return False
    return None


def table(disagreements: Sequence[Verdict]) -> str:
    rows = [f"{'pod':>4} {'node':<10} {'kube':<5} {'ours':<5} why"]
    rows += [f"{v.pod:>4} {v.node:<10} {v.kube!s:<5} {v.ours!s:<5} {v.why}"
             for v in disagreements]
    return "\n".join(rows)


def wait_resolved(
    cluster: LocalCluster, namespace: str, names: Sequence[str], timeout: float = 60
) -> dict[str, dict[str, Any]]:
    """The probes once kube-scheduler has given each its verdict."""
    deadline = time.monotonic() + timeout
    while True:
        pods = {p.name: p.obj for p in pykube.Pod.objects(cluster.client, namespace=namespace)}
        if all(name in pods and kube_verdict(pods[name]) is not None for name in names):
            return pods
        if time.monotonic() > deadline:
            pending = [n for n in names if n not in pods or kube_verdict(pods[n]) is None]
            raise AssertionError(f"kube-scheduler gave no verdict on {pending}")
        time.sleep(0.2)


def make_nodes(cluster: LocalCluster, rng: random.Random, count: int) -> list[str]:
    manifests = [node_manifest(rng, i) for i in range(count)]
    remove_nodes(cluster)
    for manifest in manifests:
        pykube.Node(cluster.client, manifest).create()
    names = [m["metadata"]["name"] for m in manifests]
    cluster.wait_nodes_ready(names)
    return names


def remove_nodes(cluster: LocalCluster) -> None:
    for node in pykube.Node.objects(cluster.client):
        if node.name.startswith(PREFIX + "-"):
            node.delete()


def _pod(namespace: str, name: str, spec: Mapping[str, Any], **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {"schedulerName": "default-scheduler", "terminationGracePeriodSeconds": 0,
                     **spec}}


def place_existing(cluster: LocalCluster, namespace: str, rng: random.Random,
                   nodes: Sequence[str]) -> None:
    """Pods bound by ``nodeName``, as a DaemonSet or another scheduler leaves them."""
    for node in nodes:
        for i in range(rng.choice((0, 1, 2))):
            spec = {"containers": [_container(rng, "main")], "nodeName": node,
                    "tolerations": [{"operator": "Exists"}]}
            pykube.Pod(cluster.client, _pod(namespace, f"existing-{node}-{i}", spec)).create()


def _clear_probes(cluster: LocalCluster, namespace: str) -> None:
    cluster.kubectl("delete", "pods", "-n", namespace, "-l", "probe=yes", "--grace-period=0",
                    "--force", "--wait=false")
    deadline = time.monotonic() + 30
    while pykube.Pod.objects(cluster.client, namespace=namespace).filter(
            selector={"probe": "yes"}):
        if time.monotonic() > deadline:
            raise AssertionError("probes did not go")
        time.sleep(0.1)


def probe_pod(cluster: LocalCluster, namespace: str, index: int, spec: Mapping[str, Any],
              nodes: Sequence[str]) -> list[Verdict]:
    """One pod on every node at once (one probe per node), answered by both sides."""
    probes = {node: _pod(namespace, f"p{index}-{node}", pinned(spec, node), probe="yes")
              for node in nodes}
    for manifest in probes.values():
        pykube.Pod(cluster.client, manifest).create()
    resolved = wait_resolved(cluster, namespace, [m["metadata"]["name"] for m in probes.values()])
    verdicts = []
    for node, manifest in probes.items():
        kube = kube_verdict(resolved[manifest["metadata"]["name"]])
        node_obj = pykube.Node.objects(cluster.client).get(name=node).obj
        ours = our_verdict(manifest, node_obj, used_on(cluster, namespace, node))
        reason = node_excluded_reason(pod_from_api(manifest).rules, node_from_api(node_obj))
        verdicts.append(Verdict(index, node, bool(kube), ours, reason or "room"))
    _clear_probes(cluster, namespace)
    return verdicts


def run(cluster: LocalCluster, namespace: str, rng: random.Random, *, nodes: int,
        pods: int) -> list[Verdict]:
    """Every (pod, node) pair of a generated cluster, with both verdicts."""
    names = make_nodes(cluster, rng, nodes)
    try:
        place_existing(cluster, namespace, rng, names)
        verdicts = []
        for index in range(pods):
            verdicts.extend(probe_pod(cluster, namespace, index, pod_spec(rng), names))
        return verdicts
    finally:
        remove_nodes(cluster)
