"""kube-scheduler as the oracle of "may this pod go on this node".

A seeded generator makes random nodes (labels, zones, taints, allocatable with
huge pages, cordons, declared features; some without a hostname label or sharing
one, some not Ready and untainted, as no controller here taints them) with pods
already bound to them by ``nodeName`` (with labels, some with their own required
anti-affinity), and random pods (requests and limits, init and sidecar
containers, pod-level requests with huge pages, restart rules, node selectors,
required node affinity with every operator, tolerations, host ports, required pod
affinity and anti-affinity, some selecting namespaces by their labels,
DoNotSchedule spread constraints).
Most nodes have a CSINode whose EBS and PD drivers attach few volumes, so the
pods' inline EBS and PD disks (counted as their CSI drivers' volumes) meet
those limits too.
For every (pod, node) pair kube-scheduler is asked by a probe pinned to the
node with a ``matchFields`` term, and gangsched's own filter answers from
the same objects parsed by ``gangsched.core.kubeobjects``. Any pair where
they differ is a bug on one side.

The probes of one pod go to every node at once; so that a probe bound on one
node is not counted by the inter-pod rules of the others, every selector of a
probe excludes the other probes by their ``oracle-probe`` label (and still
matches the probe itself, which the rules' self-match cases need).
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pykube

from devcluster.controlplane import KWOK_LABEL, LocalCluster
from gangsched.core.fit.interpod import pod_rules_refusal
from gangsched.core.fit.namespaces import NamespaceLabels, resolve_pod
from gangsched.core.fit.nodefit import node_excluded_reason
from gangsched.core.fit.volumes import Storage
from gangsched.core.kubeobjects.nodes import node_from_api
from gangsched.core.kubeobjects.pods import pod_from_api
from gangsched.core.kubeobjects.storage import csi_node_from_api
from gangsched.core.model.objects import Gang, GangKey, Node, NodeName, Pod
from gangsched.core.model.resources import Resources
from gangsched.core.placement.snapshot import Snapshot
from gangsched.core.placement.volumelimits import limit_volumes, limited_snapshot

SEED_VARIABLE = "GANGSCHED_ORACLE_SEED"
"""Set to replay a run: the seed is printed at its start."""
PREFIX = "oracle"
ZONES = ("a", "b", "c")
TAINT_KEYS = ("dedicated", "gpu")
EXTENDED = "example.com/dev"
HOST_PORTS = (8080, 9100)
"""Few, so that probes and the pods already on a node ask for the same ones."""
OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
POD_LABELS = {"app": ("web", "db", "cache"), "role": ("a", "b")}
TOPOLOGY_KEYS = ("kubernetes.io/hostname", "kubernetes.io/hostname",
                 "topology.kubernetes.io/zone", "topology.kubernetes.io/zone",
                 "topology.kubernetes.io/zone", "example.com/rack")
"""Keys inter-pod terms use; no node carries the rack label."""
PROBE_LABEL = "oracle-probe"
TEAM_LABEL = "oracle-team"
"""The run's namespace is labelled ``a``; a term's ``namespaceSelector`` asks for a team."""


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


RESTART_ALL = "RestartAllContainersOnContainerExits"
"""The node feature a container's restart rule restarting every container needs (the
other features NodeDeclaredFeatures infers come from fields 1.37 keeps behind alpha
gates)."""
SHARED_HOSTNAME = f"{PREFIX}-shared"
HUGEPAGES = "hugepages-2Mi"


UNLABELLED, SHARING, NOT_READY = (5,), (3, 4), (7,)
"""Of every eight nodes, by index: the one without a hostname label, the two sharing
one value, the one not Ready."""


def node_name(index: int) -> str:
    return f"{PREFIX}-{index}"


def _hostname(index: int) -> dict[str, str]:
    """Most nodes are labelled with their own name; some have no hostname label, or
    share one value with another: host ports stay per node object."""
    if index % 8 in UNLABELLED:
        return {}
    return {"kubernetes.io/hostname": SHARED_HOSTNAME if index % 8 in SHARING
            else node_name(index)}


def node_manifest(rng: random.Random, index: int) -> dict[str, Any]:
    """A node, most often managed by KWOK (Ready); some that nothing manages, whose
    Ready condition stays False and that no controller taints (nor cordons, nor fills
    with pods: what keeps pods off it is its readiness alone)."""
    name = node_name(index)
    ready = index % 8 not in NOT_READY
    labels = {**({KWOK_LABEL[0]: KWOK_LABEL[1]} if ready else {}), **_hostname(index),
              "topology.kubernetes.io/zone": rng.choice(ZONES)}
    for key, values in (("tier", ("gold", "silver")), ("rank", ("1", "5", "10", "x"))):
        if rng.random() < 0.6:
            labels[key] = rng.choice(values)
    allocatable = {"cpu": rng.choice(("1", "2", "3500m")) if ready else "16",
                   "memory": rng.choice(("1Gi", "2Gi", "4Gi")) if ready else "16Gi",
                   "pods": str(rng.choice((2, 3, 110)) if ready else 110)}
    if rng.random() < 0.4:
        allocatable[EXTENDED] = str(rng.choice((1, 2)))
    if rng.random() < 0.4:
        allocatable[HUGEPAGES] = rng.choice(("64Mi", "256Mi"))
    taints = [_taint(rng) for _ in range(rng.choice((0, 0, 1, 2)))] if ready else []
    unique = {(t["key"], t["effect"]): t for t in taints}
    status: dict[str, Any] = {"allocatable": allocatable, "capacity": dict(allocatable)}
    if rng.random() < 0.5:
        status["declaredFeatures"] = rng.choice(([RESTART_ALL], [RESTART_ALL, "SomeOther"],
                                                 ["SomeOther"]))
    if not ready:
        status["conditions"] = [{"type": "Ready", "status": "False", "reason": "KubeletDown"}]
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels,
                     "annotations": {"kwok.x-k8s.io/node": "fake"}},
        "spec": {"taints": list(unique.values()), "unschedulable": ready and rng.random() < 0.1},
        "status": status,
    }


CSI_DRIVERS = ("ebs.csi.aws.com", "pd.csi.storage.gke.io")
"""The drivers inline EBS and PD disks migrated to: what their volume limits count."""


def csi_node_manifest(rng: random.Random, node: str) -> dict[str, Any] | None:
    """The CSINode a node's drivers would register, each with a limit of a few volumes
    (now and then none at all); now and then no CSINode."""
    if rng.random() < 0.2:
        return None
    drivers = []
    for driver in CSI_DRIVERS:
        entry: dict[str, Any] = {"name": driver, "nodeID": node}
        if rng.random() < 0.8:
            entry["allocatable"] = {"count": rng.choice((0, 1, 1, 2))}
        drivers.append(entry)
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": node},
            "spec": {"drivers": drivers}}


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


def _with_host_ports(rng: random.Random, containers: Sequence[dict[str, Any]]) -> None:
    """Now and then, host ports from a few, so that pods meet on them: TCP or UDP, on
    every address or on one of two (the KWOK nodes' own among them), each on a random
    container of the pod and none twice, as the API requires."""
    if rng.random() >= 0.3:
        return
    choices = [(number, protocol, ip) for number in HOST_PORTS for protocol in ("TCP", "UDP")
               for ip in ("", "10.1.0.1", "10.1.0.2")]
    for number, protocol, ip in rng.sample(choices, rng.choice((1, 1, 2))):
        port: dict[str, Any] = {"containerPort": number, "hostPort": number}
        if protocol != "TCP" or rng.random() < 0.3:
            port["protocol"] = protocol
        if ip:
            port["hostIP"] = ip
        rng.choice(containers).setdefault("ports", []).append(port)


def _inline_disk(rng: random.Random) -> dict[str, Any]:
    read_only = rng.random() < 0.4
    match rng.choice(("gce", "ebs", "iscsi", "rbd")):
        case "gce":
            return {"gcePersistentDisk": {"pdName": rng.choice(("pd-a", "pd-b")),
                                          "readOnly": read_only}}
        case "ebs":
            return {"awsElasticBlockStore": {"volumeID": rng.choice(("vol-a", "vol-b"))}}
        case "iscsi":
            return {"iscsi": {"targetPortal": "10.2.0.1:3260", "lun": 0, "readOnly": read_only,
                              "iqn": rng.choice(("iqn.2020-01.io.example:a",
                                                 "iqn.2020-01.io.example:b"))}}
    monitors = rng.sample(["10.3.0.1:6789", "10.3.0.2:6789", "10.3.0.3:6789"], rng.choice((1, 2)))
    return {"rbd": {"monitors": monitors, "image": rng.choice(("img-a", "img-b")),
                    "readOnly": read_only}}


def _with_inline_disks(rng: random.Random, spec: dict[str, Any]) -> None:
    """Now and then, inline disks from a few, so that pods meet on them (read-only or
    not), as kube-scheduler's VolumeRestrictions reads them."""
    if rng.random() >= 0.2:
        return
    spec["volumes"] = [{"name": f"disk-{i}", **_inline_disk(rng)}
                       for i in range(rng.choice((1, 1, 2)))]


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


def pod_labels(rng: random.Random) -> dict[str, str]:
    return {key: rng.choice(values) for key, values in POD_LABELS.items() if rng.random() < 0.7}


def _label_selector(rng: random.Random) -> dict[str, Any]:
    """A selector over pod labels: matchLabels, matchExpressions or both; rarely empty."""
    selector: dict[str, Any] = {}
    if rng.random() < 0.6:
        key = rng.choice(tuple(POD_LABELS))
        selector["matchLabels"] = {key: rng.choice(POD_LABELS[key])}
    if rng.random() < 0.4 or (not selector and rng.random() < 0.8):
        key = rng.choice(tuple(POD_LABELS))
        operator = rng.choice(("In", "NotIn", "Exists", "DoesNotExist"))
        requirement: dict[str, Any] = {"key": key, "operator": operator}
        if operator in ("In", "NotIn"):
            requirement["values"] = rng.sample(POD_LABELS[key], rng.choice((1, 2)))
        selector["matchExpressions"] = [requirement]
    return selector


def _label_key_outside(rng: random.Random, selector: Mapping[str, Any]) -> list[str]:
    """A ``matchLabelKeys`` entry: a key the selector does not name (the API's rule)."""
    named = {*selector.get("matchLabels", {}),
             *(r["key"] for r in selector.get("matchExpressions", []))}
    free = [key for key in POD_LABELS if key not in named]
    return [rng.choice(free)] if free else []


def _namespace_selector(rng: random.Random) -> dict[str, Any]:
    """A non-empty selector over the namespaces' team label: it picks the run's namespace
    (team ``a``) or not."""
    if rng.random() < 0.5:
        return {"matchLabels": {TEAM_LABEL: rng.choice(("a", "b"))}}
    operator = rng.choice(("In", "NotIn", "Exists", "DoesNotExist"))
    requirement: dict[str, Any] = {"key": TEAM_LABEL, "operator": operator}
    if operator in ("In", "NotIn"):
        requirement["values"] = [rng.choice(("a", "b"))]
    return {"matchExpressions": [requirement]}


def _pod_term(rng: random.Random) -> dict[str, Any]:
    term: dict[str, Any] = {"labelSelector": _label_selector(rng),
                            "topologyKey": rng.choice(TOPOLOGY_KEYS)}
    draw = rng.random()
    if draw < 0.15:
        term["namespaceSelector"] = {}
    elif draw < 0.4:
        term["namespaceSelector"] = _namespace_selector(rng)
    if rng.random() < 0.15:
        term["matchLabelKeys"] = _label_key_outside(rng, term["labelSelector"])
    return term


def _spread(rng: random.Random, key: str) -> dict[str, Any]:
    constraint: dict[str, Any] = {
        "maxSkew": rng.choice((1, 1, 2)), "topologyKey": key,
        "whenUnsatisfiable": "DoNotSchedule", "labelSelector": _label_selector(rng),
        # A probe is pinned by node affinity, so Honor counts the pinned node's domain
        # alone: Ignore, more often, counts them all.
        "nodeAffinityPolicy": rng.choice(("Honor", "Ignore", "Ignore")),
    }
    if rng.random() < 0.3:
        constraint["nodeTaintsPolicy"] = rng.choice(("Honor", "Ignore"))
    if rng.random() < 0.2:
        constraint["minDomains"] = rng.choice((2, 3, 4))
    if rng.random() < 0.15:
        constraint["matchLabelKeys"] = _label_key_outside(rng, constraint["labelSelector"])
    return constraint


def pod_rules(rng: random.Random) -> dict[str, Any]:
    """Required inter-pod terms and spread constraints, each present now and then."""
    spec: dict[str, Any] = {}
    affinity: dict[str, Any] = {}
    for kind in ("podAffinity", "podAntiAffinity"):
        if rng.random() < 0.4:
            affinity[kind] = {"requiredDuringSchedulingIgnoredDuringExecution": [
                _pod_term(rng) for _ in range(rng.choice((1, 1, 2)))]}
    if affinity:
        spec["affinity"] = affinity
    if rng.random() < 0.5:
        keys = rng.sample(sorted(set(TOPOLOGY_KEYS)), rng.choice((1, 1, 2)))
        spec["topologySpreadConstraints"] = [_spread(rng, key) for key in keys]
    return spec


def probe_spec(rng: random.Random) -> dict[str, Any]:
    """A random pod spec without a node: what the probes of one pod share.

    Half the pods exercise node rules and room (:func:`pod_spec`); the other
    half are small pods that tolerate every taint and carry inter-pod rules,
    so that those rules, not the others, decide most of their pairs.
    """
    return _inter_pod_spec(rng) if rng.random() < 0.5 else pod_spec(rng)


def _with_restart_rules(rng: random.Random, containers: Sequence[dict[str, Any]]) -> None:
    """Now and then a container's restart rule: one that restarts every container needs
    nodes declaring the feature; a plain restart needs none."""
    if rng.random() >= 0.25:
        return
    action = rng.choice(("RestartAllContainers", "RestartAllContainers", "Restart"))
    rng.choice(containers).update(restartPolicy="Never", restartPolicyRules=[
        {"action": action, "exitCodes": {"operator": "In", "values": [42]}}])


def _with_pod_level_hugepages(rng: random.Random, spec: dict[str, Any]) -> None:
    """Now and then pod-level requests with huge pages (and the cpu and memory they
    need), the containers asking nothing of their own."""
    if rng.random() >= 0.15:
        return
    for container in spec["containers"]:
        container["resources"] = {}
    for container in spec.get("initContainers", []):
        container["resources"] = {}
    amounts = {"cpu": "100m", "memory": "64Mi", HUGEPAGES: rng.choice(("32Mi", "128Mi"))}
    spec["resources"] = {"requests": amounts, "limits": dict(amounts)}


def pod_spec(rng: random.Random) -> dict[str, Any]:
    """A random pod spec with node rules and requests, and no inter-pod rule."""
    spec: dict[str, Any] = {"containers": [_container(rng, f"c{i}")
                                           for i in range(rng.choice((1, 1, 2)))]}
    _with_restart_rules(rng, spec["containers"])
    inits = []
    for i in range(rng.choice((0, 0, 1, 2))):
        extra = {"restartPolicy": "Always"} if rng.random() < 0.5 else {}
        inits.append(_container(rng, f"init{i}", **extra))
    _with_host_ports(rng, [*spec["containers"], *inits])
    _with_inline_disks(rng, spec)
    if inits:
        spec["initContainers"] = inits
    _with_pod_level_hugepages(rng, spec)
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


def _inter_pod_spec(rng: random.Random) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "image": "busybox",
                        "resources": {"requests": {"cpu": "10m"}}}],
        "tolerations": [{"operator": "Exists"}],
    }
    if rng.random() < 0.3:
        spec["nodeSelector"] = {"tier": rng.choice(("gold", "silver"))}
    while len(spec) == 2:
        spec.update(pod_rules(rng))
    return spec


def pinned(spec: Mapping[str, Any], node: str) -> dict[str, Any]:
    """The spec, allowed on ``node`` only: a ``matchFields`` requirement in every term."""
    pin = {"key": "metadata.name", "operator": "In", "values": [node]}
    out = dict(spec)
    required = (spec.get("affinity", {}).get("nodeAffinity", {})
                .get("requiredDuringSchedulingIgnoredDuringExecution"))
    terms = [{**term, "matchFields": [pin]} for term in required["nodeSelectorTerms"]] \
        if required else [{"matchFields": [pin]}]
    out["affinity"] = {**spec.get("affinity", {}), "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}
    return out


def isolated(spec: Mapping[str, Any], node: str, nodes: Sequence[str]) -> dict[str, Any]:
    """The spec with every pod selector of its rules blind to the other probes.

    ``oracle-probe NotIn [the others]`` matches the probe itself and every pod
    that is not a probe, so each probe is judged against the existing pods
    alone, as if it were the only one.
    """
    others = [f"{PROBE_LABEL}-{n}" for n in nodes if n != node]
    blind = {"key": PROBE_LABEL, "operator": "NotIn", "values": others or ["none"]}

    def narrowed(selector: Mapping[str, Any]) -> dict[str, Any]:
        return {**selector,
                "matchExpressions": [*selector.get("matchExpressions", []), blind]}

    out = dict(spec)
    affinity = dict(out.get("affinity", {}))
    for kind in ("podAffinity", "podAntiAffinity"):
        if kind in affinity:
            required = affinity[kind]["requiredDuringSchedulingIgnoredDuringExecution"]
            affinity[kind] = {"requiredDuringSchedulingIgnoredDuringExecution": [
                {**term, "labelSelector": narrowed(term["labelSelector"])} for term in required]}
    if affinity:
        out["affinity"] = affinity
    if "topologySpreadConstraints" in out:
        out["topologySpreadConstraints"] = [
            {**c, "labelSelector": narrowed(c["labelSelector"])}
            for c in out["topologySpreadConstraints"]]
    return out


@dataclass(frozen=True, slots=True)
class Verdict:
    pod: int
    node: str
    kube: bool
    ours: bool
    why: str


@dataclass(frozen=True, slots=True)
class Cluster:
    """What our side reads, parsed once per pod: the nodes, the pods on them, and the
    namespaces' labels their terms are resolved against."""

    nodes: Mapping[NodeName, Node]
    pods: tuple[Pod, ...]
    namespaces: NamespaceLabels
    storage: Storage
    """The CSINodes: the drivers' volume limits."""

    @staticmethod
    def read(cluster: LocalCluster) -> Cluster:
        """Every node and every pod but the probes: kube-scheduler counts them all."""
        nodes = {node.name: node for node in (
            node_from_api(n.obj) for n in pykube.Node.objects(cluster.client))}
        namespaces = {ns.name: dict(ns.labels)
                      for ns in pykube.Namespace.objects(cluster.client)}
        pods = tuple(resolve_pod(pod_from_api(p.obj), namespaces)
                     for p in pykube.Pod.objects(cluster.client, namespace=pykube.all)
                     if "probe" not in p.labels)
        csi_nodes = (csi_node_from_api(n.obj) for n in _csi_nodes(cluster))
        return Cluster(nodes, pods, namespaces,
                       Storage(csi_nodes={n.node: n for n in csi_nodes}))

    def room_on(self, pod: Pod, node: Node) -> tuple[Pod, Node, Resources]:
        """The pod, the node and its free room as a cycle sees them: the pod's volumes of
        drivers some node limits are requests, and the node offers its limits less the
        volumes attached there (core.placement.volumelimits)."""
        (gang,), limits = limit_volumes((Gang(GangKey("probe"), 1, (pod,)),), self.storage)
        snapshot = limited_snapshot(Snapshot.build(self.nodes.values(), self.pods), limits,
                                    self.storage)
        usage = snapshot.nodes[node.name]
        return gang.pending[0], usage.node, usage.free


def _csi_nodes(cluster: LocalCluster) -> Any:
    return pykube.object_factory(cluster.client, "storage.k8s.io/v1", "CSINode").objects(
        cluster.client)


def our_verdict(probe: Mapping[str, Any], node: Node, seen: Cluster) -> str | None:
    """gangsched's own filter on the objects kube-scheduler saw: None when it accepts
    the pair, else why not (node rules, room, then inter-pod rules)."""
    pod, node, free = seen.room_on(resolve_pod(pod_from_api(probe), seen.namespaces), node)
    excluded = node_excluded_reason(pod.rules, node)
    if excluded is not None:
        return excluded
    if not pod.requests.fits(free):
        return f"room: {', '.join(pod.requests.short_of(free).names())}"
    refusal = pod_rules_refusal(pod, node.name, seen.nodes, seen.pods)
    if refusal is not None:
        return f"{refusal.rule.value} {refusal.topology_key}={refusal.domain}"
    return None


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
    cluster: LocalCluster, namespace: str, names: Sequence[str], timeout: float = 60,
    verdict: Callable[[Mapping[str, Any]], bool | None] = kube_verdict,
) -> dict[str, dict[str, Any]]:
    """The probes once kube-scheduler has given each its verdict (as ``verdict`` reads it)."""
    deadline = time.monotonic() + timeout
    while True:
        pods = {p.name: p.obj for p in pykube.Pod.objects(cluster.client, namespace=namespace)}
        if all(name in pods and verdict(pods[name]) is not None for name in names):
            return pods
        if time.monotonic() > deadline:
            pending = [n for n in names if n not in pods or verdict(pods[n]) is None]
            raise AssertionError(f"kube-scheduler gave no verdict on {pending}")
        time.sleep(0.2)


def make_nodes(cluster: LocalCluster, rng: random.Random, count: int) -> list[str]:
    manifests = [node_manifest(rng, i) for i in range(count)]
    remove_nodes(cluster)
    for manifest in manifests:
        pykube.Node(cluster.client, manifest).create()
    names = [m["metadata"]["name"] for m in manifests]
    kind = pykube.object_factory(cluster.client, "storage.k8s.io/v1", "CSINode")
    for name in names:
        if (csi_node := csi_node_manifest(rng, name)) is not None:
            kind(cluster.client, csi_node).create()
    cluster.wait_nodes_ready([m["metadata"]["name"] for m in manifests
                              if KWOK_LABEL[0] in m["metadata"]["labels"]])
    return names


def remove_nodes(cluster: LocalCluster) -> None:
    """Every node goes: a node left by another test would be a domain of the probes'
    spread constraints on kube-scheduler's side."""
    for node in pykube.Node.objects(cluster.client):
        node.delete()
    for csi_node in _csi_nodes(cluster):
        csi_node.delete()
    deadline = time.monotonic() + 30
    while pykube.Node.objects(cluster.client):
        if time.monotonic() > deadline:
            raise AssertionError("nodes did not go")
        time.sleep(0.1)


def _pod(namespace: str, name: str, spec: Mapping[str, Any], **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {"schedulerName": "default-scheduler", "terminationGracePeriodSeconds": 0,
                     **spec}}


def place_existing(cluster: LocalCluster, namespace: str, rng: random.Random,
                   nodes: Sequence[str], *, inter_pod: bool = False) -> None:
    """Pods bound by ``nodeName``, as a DaemonSet or another scheduler leaves them:
    labelled, and with ``inter_pod`` some with their own required anti-affinity, and
    one holding every host port on the node without a hostname label and on one of the
    two sharing one."""
    for node in nodes:
        for i in range(rng.choice((0, 1, 2))):
            spec: dict[str, Any] = {"containers": [_container(rng, "main")], "nodeName": node,
                                    "tolerations": [{"operator": "Exists"}]}
            if inter_pod:
                _with_host_ports(rng, spec["containers"])
                _with_inline_disks(rng, spec)
            if inter_pod and rng.random() < 0.3:
                spec["affinity"] = {"podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [_pod_term(rng)]}}
            manifest = _pod(namespace, f"existing-{node}-{i}", spec, **pod_labels(rng))
            pykube.Pod(cluster.client, manifest).create()
        if inter_pod and int(node.rsplit("-", 1)[1]) % 8 in (*UNLABELLED, SHARING[0]):
            ports = [{"containerPort": n, "hostPort": n} for n in HOST_PORTS]
            spec = {"containers": [{"name": "main", "image": "busybox", "ports": ports}],
                    "nodeName": node, "tolerations": [{"operator": "Exists"}]}
            pykube.Pod(cluster.client, _pod(namespace, f"ports-{node}", spec)).create()


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
              labels: Mapping[str, str], nodes: Sequence[str]) -> list[Verdict]:
    """One pod on every node at once (one probe per node), answered by both sides."""
    seen = Cluster.read(cluster)
    probes = {node: _pod(namespace, f"p{index}-{node}",
                         isolated(pinned(spec, node), node, nodes), probe="yes",
                         **labels, **{PROBE_LABEL: f"{PROBE_LABEL}-{node}"})
              for node in nodes}
    for manifest in probes.values():
        pykube.Pod(cluster.client, manifest).create()
    resolved = wait_resolved(cluster, namespace, [m["metadata"]["name"] for m in probes.values()])
    verdicts = []
    for node, manifest in probes.items():
        kube = kube_verdict(resolved[manifest["metadata"]["name"]])
        why = our_verdict(manifest, seen.nodes[NodeName(node)], seen)
        verdicts.append(Verdict(index, node, bool(kube), why is None, why or "accepted"))
    _clear_probes(cluster, namespace)
    return verdicts


PLAIN_SPEC: Mapping[str, Any] = {
    "containers": [{"name": "main", "image": "busybox",
                    "resources": {"requests": {"cpu": "10m"}}}],
    "tolerations": [{"operator": "Exists"}],
}
"""The last probe of every run: small, unlabelled, tolerating every taint and asking for no
rule, so that only room and the pods already there can refuse it (the node not Ready has
room for it)."""


def run(cluster: LocalCluster, namespace: str, rng: random.Random, *, nodes: int,
        pods: int) -> list[Verdict]:
    """Every (pod, node) pair of a generated cluster, with both verdicts: ``pods``
    generated pods, then :data:`PLAIN_SPEC` as pod number ``pods``."""
    names = make_nodes(cluster, rng, nodes)
    cluster.kubectl("label", "namespace", namespace, f"{TEAM_LABEL}=a", "--overwrite")
    try:
        place_existing(cluster, namespace, rng, names, inter_pod=True)
        verdicts = []
        for index in range(pods):
            verdicts.extend(probe_pod(cluster, namespace, index, probe_spec(rng),
                                      pod_labels(rng), names))
        verdicts.extend(probe_pod(cluster, namespace, pods, PLAIN_SPEC, {}, names))
        return verdicts
    finally:
        remove_nodes(cluster)
