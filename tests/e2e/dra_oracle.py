"""The fit oracle (``tests/e2e/oracle.py``) with device claims: kube-scheduler's
DynamicResources plugin against gangsched's allocator, on the same slices and claims.

A seeded generator publishes fake GPUs on a few nodes (4 or 8 per node, H100
of 80Gi or A100 of 40Gi, two cliques per node), lets kube-scheduler allocate
some of them to pods already there, then makes random claims: counts,
``allocationMode: All``, CEL selectors over the model, the index and the
memory capacity, a one-clique ``matchAttribute`` constraint, ``firstAvailable``
alternatives. Each claim is asked of every node at once by probes pinned to
it, one claim per probe; gangsched answers from
:func:`gangsched.core.dra.allocator.allocate_on_node` over the objects read
from the API server before the probes, and from the required anti-affinity of
the pods already on the node (the neighbours below), which kube-scheduler
holds against every probe whose labels it selects. Any pair where they differ
is a bug on one side.

Some probes ask no claim but ``example.com/gpu: N`` in their container
requests, which no node lists and a DeviceClass of the run names (all GPUs,
or one model): kube-scheduler makes and allocates a claim for the probe,
gangsched allocates the claim :mod:`gangsched.core.dra.extended` makes.

Some claims ask their devices with admin access (the namespace is labelled
for it): devices in use are theirs too. And some probes carry rules beside
their claim, on nodes in two zones where plain pods run bound by name
(labelled, some holding host ports, some with their own required
anti-affinity): host ports, required and preferred pod affinity and
anti-affinity, DoNotSchedule and ScheduleAnyway spread, as the fit oracle
draws them. Their claim is their own, with or without admin access, or the
claim of a pod already running, shared. gangsched answers those from the
whole placement of a gang of one (:class:`gangsched.core.placement.capacity.Capacity`)
on the objects read before the probes: node rules, room, devices and rules
together, as a cycle decides.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import pykube

from devcluster import fakedriver
from devcluster.controlplane import LocalCluster, NodeShape
from gangsched.core.dra.allocator import NodeAllocation, allocate_on_node
from gangsched.core.dra.devices import Inventory
from gangsched.core.dra.extended import extended_claim, served_by_devices
from gangsched.core.dra.parse import (
    device_class_from_api,
    resource_claim_from_api,
    slice_from_api,
)
from gangsched.core.fit.interpod import pod_rules_refusal
from gangsched.core.fit.namespaces import resolve_pod
from gangsched.core.kubeobjects.pods import pod_from_api
from gangsched.core.model.objects import Gang, GangKey, NodeName
from gangsched.core.model.resources import Resources
from gangsched.core.placement.capacity import Capacity, Placement, Snapshot
from gangsched.core.reasons import render
from tests.e2e import oracle

PREFIX = "dra-oracle"
RESOURCE_API = "resource.k8s.io/v1"
GPU = fakedriver.DRIVER
PLAIN = {"containers": [{"name": "main", "image": "busybox",
                         "resources": {"requests": {"cpu": "100m"}, "claims": [{"name": "dev"}]}}],
         "tolerations": [{"operator": "Exists"}]}
MODELS = (fakedriver.GpuModel("H100", "80Gi"), fakedriver.GpuModel("A100", "40Gi"))
EXTENDED = "example.com/gpu"
EXTENDED_CLASS = "dra-oracle-extended"
EXTENDED_SHARE = 0.25
"""Of the probes, those asking the extended resource rather than a claim."""
RULED_SHARE = 0.35
"""Of the probes, those with rules beside their claim."""
ADMIN_SHARE = 0.1
"""Of the requests, those asking their devices with admin access."""
ADMIN_LABEL = "resource.kubernetes.io/admin-access"
"""The namespace label that lets its claims ask admin access."""
ZONE = "topology.kubernetes.io/zone"
RULED = "ruled "
"""How the verdict of a probe with rules begins."""
KEPT_OFF = "kept off by "
"""How gangsched's answer for a probe without rules begins when the pods on its node
keep it off."""


def _kind(cluster: LocalCluster, kind: str) -> type[pykube.objects.APIObject]:
    return pykube.object_factory(cluster.client, RESOURCE_API, kind)  # type: ignore[no-any-return]


def _selector(rng: random.Random) -> list[dict[str, Any]]:
    choices = [
        f'device.attributes["{GPU}"].model == "{rng.choice(MODELS).name}"',
        f'device.attributes["{GPU}"].index {rng.choice(("<", ">="))} {rng.randrange(1, 8)}',
        f'device.capacity["{GPU}"].memory.compareTo(quantity("{rng.choice(("40Gi", "64Gi"))}"))'
        " >= 0",
    ]
    return [{"cel": {"expression": expression}}
            for expression in rng.sample(choices, rng.choice((0, 0, 1, 2)))]


def _exactly(rng: random.Random, *, admin: bool = True) -> dict[str, Any]:
    """A request; ``admin``: maybe with admin access, which a ``firstAvailable``
    alternative cannot ask (the API server drops it there)."""
    request: dict[str, Any] = {"deviceClassName": fakedriver.DEVICE_CLASS}
    if admin and rng.random() < ADMIN_SHARE:
        request["adminAccess"] = True
    if rng.random() < 0.15:
        request["allocationMode"] = "All"
    else:
        request["count"] = rng.choice((1, 1, 2, 2, 3, 4, 5, 8))
    selectors = _selector(rng)
    if selectors:
        request["selectors"] = selectors
    return request


def claim_spec(rng: random.Random) -> dict[str, Any]:
    """A random claim: one or two requests, maybe alternatives, maybe one clique."""
    requests: list[dict[str, Any]] = []
    for number in range(rng.choice((1, 1, 1, 2))):
        if rng.random() < 0.2:
            alternatives = [{"name": f"alt{i}", **_exactly(rng, admin=False)} for i in range(2)]
            requests.append({"name": f"r{number}", "firstAvailable": alternatives})
        else:
            requests.append({"name": f"r{number}", "exactly": _exactly(rng)})
    devices: dict[str, Any] = {"requests": requests}
    if rng.random() < 0.35:
        devices["constraints"] = [{"matchAttribute": f"{GPU}/clique"}]
    return {"devices": devices}


def _claim(namespace: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": RESOURCE_API, "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": namespace, "labels": {"probe": "yes"}},
            "spec": spec}


def _pod(namespace: str, name: str, claim: str, node: str, probe: bool) -> dict[str, Any]:
    spec = oracle.pinned({**PLAIN, "resourceClaims": [{"name": "dev",
                                                       "resourceClaimName": claim}]}, node)
    labels = {"probe": "yes"} if probe else {}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {"schedulerName": "default-scheduler", "terminationGracePeriodSeconds": 0,
                     **spec}}


def extended_class(rng: random.Random) -> dict[str, Any]:
    """The run's DeviceClass serving ``example.com/gpu``: every GPU, or one model's."""
    manifest = fakedriver.device_class_manifest()
    selectors = list(manifest["spec"]["selectors"])
    if rng.random() < 0.5:
        selectors.append({"cel": {"expression":
                                  f'device.attributes["{GPU}"].model == '
                                  f'"{rng.choice(MODELS).name}"'}})
    return {**manifest, "metadata": {"name": EXTENDED_CLASS},
            "spec": {"selectors": selectors, "extendedResourceName": EXTENDED}}


def _remove_extended_class(cluster: LocalCluster) -> None:
    found = _kind(cluster, "DeviceClass").objects(cluster.client).get_or_none(
        name=EXTENDED_CLASS)
    if found is not None:
        found.delete()


def make_nodes(cluster: LocalCluster, rng: random.Random, count: int) -> list[str]:
    names = cluster.ensure_nodes(count, NodeShape(cpu="16", memory="64Gi"), prefix=PREFIX)
    fakedriver.publish(cluster.client, [])  # the class; no slice of other tests' nodes
    _remove_extended_class(cluster)  # one a run cut short left behind
    _kind(cluster, "DeviceClass")(cluster.client, extended_class(rng)).create()
    for index, node in enumerate(names):
        manifest = fakedriver.slice_manifest(node, index, per_node=rng.choice((4, 8)),
                                             model=rng.choice(MODELS))
        _kind(cluster, "ResourceSlice")(cluster.client, manifest).create()
        cluster.kubectl("label", "node", node, f"{ZONE}={oracle.ZONES[index % 2]}",
                        "--overwrite")
    return names


def place_existing(cluster: LocalCluster, namespace: str, rng: random.Random,
                   nodes: Sequence[str]) -> list[str]:
    """Pods kube-scheduler gives devices first: what both sides must count as taken.
    Their claims, by name, are the ones probes may share."""
    names = []
    for node in nodes:
        if rng.random() < 0.6:
            name = f"existing-{node}"
            spec = {"devices": {"requests": [{"name": "r", "exactly": {
                "deviceClassName": fakedriver.DEVICE_CLASS, "count": rng.choice((1, 2, 3))}}]}}
            _kind(cluster, "ResourceClaim")(cluster.client, {
                **_claim(namespace, name, spec), "metadata": {"name": name,
                                                              "namespace": namespace}}).create()
            pykube.Pod(cluster.client, _pod(namespace, name, name, node, probe=False)).create()
            names.append(name)
    oracle.wait_resolved(cluster, namespace, names)
    return names


def place_neighbours(cluster: LocalCluster, namespace: str, rng: random.Random,
                     nodes: Sequence[str]) -> None:
    """Plain pods bound by name, as a DaemonSet leaves them, for the probes' rules to
    read: labelled, some holding host ports, some with their own anti-affinity."""
    for node in nodes:
        for i in range(rng.choice((0, 1, 2))):
            containers = [{"name": "main", "image": "busybox",
                           "resources": {"requests": {"cpu": "100m"}}}]
            oracle._with_host_ports(rng, containers)
            spec: dict[str, Any] = {"containers": containers, "nodeName": node,
                                    "tolerations": [{"operator": "Exists"}],
                                    "terminationGracePeriodSeconds": 0}
            if rng.random() < 0.3:
                spec["affinity"] = {"podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [oracle._pod_term(rng)]}}
            pykube.Pod(cluster.client, {
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": f"neighbour-{node}-{i}", "namespace": namespace,
                             "labels": oracle.pod_labels(rng)},
                "spec": spec}).create()


def inventory(cluster: LocalCluster, namespace: str) -> Inventory:
    return inventory_of(cluster, namespace, lambda node: node.startswith(PREFIX))


def inventory_of(cluster: LocalCluster, namespace: str,
                 nodes: Callable[[str], bool] | Sequence[str]) -> Inventory:
    """Slices of the nodes (a list, or a test of their names), every class, the
    namespace's claims: what gangsched's mirror would hold."""
    wanted = nodes if callable(nodes) else set(nodes).__contains__
    devices = {}
    for item in _kind(cluster, "ResourceSlice").objects(cluster.client):
        node, found = slice_from_api(item.obj)
        if node is not None and wanted(node):
            devices[node] = found
    classes = {c.name: c for c in (device_class_from_api(item.obj) for item in
                                   _kind(cluster, "DeviceClass").objects(cluster.client))}
    claims = {c.key: c for c in (resource_claim_from_api(item.obj) for item in
                                 _kind(cluster, "ResourceClaim").objects(
                                     cluster.client, namespace=namespace))}
    return Inventory.build(devices, classes, claims)


def kube_verdict(pod: Mapping[str, Any]) -> bool | None:
    """As the oracle's, and a ``SchedulerError`` is a no: kube-scheduler's allocator
    raises one when a request for all devices cannot meet the claim's constraint."""
    for condition in pod.get("status", {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("reason") == (
                "SchedulerError"):
            return False
    return oracle.kube_verdict(pod)


def kube_judges(cluster: LocalCluster, namespace: str,
                probes: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """Create the probe pods (one per node) and wait until kube-scheduler has bound or
    refused each; its answers, by pod name."""
    for manifest in probes.values():
        pykube.Pod(cluster.client, manifest).create()
    return oracle.wait_resolved(cluster, namespace,
                                [m["metadata"]["name"] for m in probes.values()],
                                verdict=kube_verdict)


def _clear_probes(cluster: LocalCluster, namespace: str) -> None:
    cluster.kubectl("delete", "pods", "-n", namespace, "-l", "probe=yes", "--grace-period=0",
                    "--force", "--wait=false")
    cluster.kubectl("delete", "resourceclaims", "-n", namespace, "-l", "probe=yes",
                    "--wait=false")
    claims = _kind(cluster, "ResourceClaim")
    deadline = time.monotonic() + 60
    while (pykube.Pod.objects(cluster.client, namespace=namespace).filter(
            selector={"probe": "yes"})
           or claims.objects(cluster.client, namespace=namespace).filter(
            selector={"probe": "yes"})
           or any(resource_claim_from_api(c.obj).extended_for
                  for c in claims.objects(cluster.client, namespace=namespace))):
        if time.monotonic() > deadline:
            raise AssertionError("probes or their claims did not go")
        time.sleep(0.2)


def refused_by_rules(manifest: Mapping[str, Any], node: str, seen: oracle.Cluster) -> str | None:
    """Why the pods on the node keep a probe without rules of its own off it (their
    required anti-affinity, as kube-scheduler's InterPodAffinity filter reads it), or None."""
    pod = resolve_pod(pod_from_api(manifest), seen.namespaces)
    refusal = pod_rules_refusal(pod, NodeName(node), seen.nodes, seen.pods)
    return None if refusal is None else (
        f"{KEPT_OFF}{refusal.rule.value} {refusal.topology_key}={refusal.domain}")


def probe_claim(cluster: LocalCluster, namespace: str, index: int, spec: dict[str, Any],
                nodes: Sequence[str]) -> list[oracle.Verdict]:
    """One claim asked of every node at once (a claim and a probe per node)."""
    seen = oracle.Cluster.read(cluster)
    before = inventory(cluster, namespace)
    claims = _kind(cluster, "ResourceClaim")
    for node in nodes:
        claims(cluster.client, _claim(namespace, f"c{index}-{node}", spec)).create()
    probes = {node: _pod(namespace, f"p{index}-{node}", f"c{index}-{node}", node, probe=True)
              for node in nodes}
    resolved = kube_judges(cluster, namespace, probes)
    claim = resource_claim_from_api(_claim(namespace, f"c{index}", spec))
    verdicts = []
    for node, manifest in probes.items():
        kube = kube_verdict(resolved[manifest["metadata"]["name"]])
        answer = allocate_on_node(before, [claim], NodeName(node), before.in_use)
        rules = refused_by_rules(manifest, node, seen)
        ours = isinstance(answer, NodeAllocation) and rules is None
        verdicts.append(oracle.Verdict(index, node, bool(kube), ours,
                                       f"{spec['devices']} -> {rules or answer}"[:300]))
    _clear_probes(cluster, namespace)
    return verdicts


def _preferred(rng: random.Random) -> dict[str, Any]:
    """Preferred pod affinity and anti-affinity and ScheduleAnyway spread, each now and
    then: they rank nodes, so a pinned probe must bind whatever they say."""
    spec: dict[str, Any] = {}
    for kind in ("podAffinity", "podAntiAffinity"):
        if rng.random() < 0.4:
            spec.setdefault("affinity", {})[kind] = {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": rng.choice((1, 50, 100)), "podAffinityTerm": oracle._pod_term(rng)}
                    for _ in range(rng.choice((1, 2)))]}
    if rng.random() < 0.4:
        constraint = oracle._spread(rng, rng.choice(sorted(set(oracle.TOPOLOGY_KEYS))))
        constraint.pop("minDomains", None)  # DoNotSchedule's alone, the API says
        spec["topologySpreadConstraints"] = [{**constraint,
                                              "whenUnsatisfiable": "ScheduleAnyway"}]
    return spec


def ruled_spec(rng: random.Random) -> tuple[dict[str, Any], dict[str, Any]]:
    """A pod claiming devices with rules: (the required part, which the probes of one pod
    see blind to each other, the preferred part); at least one rule of either."""
    while True:
        container: dict[str, Any] = {"name": "main", "image": "busybox", "resources": {
            "requests": {"cpu": "100m"}, "claims": [{"name": "dev"}]}}
        oracle._with_host_ports(rng, [container])
        required = oracle.pod_rules(rng) if rng.random() < 0.7 else {}
        preferred = _preferred(rng)
        if required or preferred or "ports" in container:
            return {"containers": [container], "tolerations": [{"operator": "Exists"}],
                    **required}, preferred


def _with_preferred(spec: dict[str, Any], preferred: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(spec)
    affinity = dict(out.get("affinity", {}))
    for kind, terms in preferred.get("affinity", {}).items():
        affinity[kind] = {**affinity.get(kind, {}), **terms}
    if affinity:
        out["affinity"] = affinity
    spreads = preferred.get("topologySpreadConstraints", [])
    if spreads:
        out["topologySpreadConstraints"] = [*out.get("topologySpreadConstraints", []), *spreads]
    return out


def _ruled_claim(rng: random.Random) -> dict[str, Any]:
    """A probe's own claim under rules: a few devices, sometimes with admin access."""
    exactly: dict[str, Any] = {"deviceClassName": fakedriver.DEVICE_CLASS,
                               "count": rng.choice((1, 1, 2, 4))}
    if rng.random() < 3 * ADMIN_SHARE:
        exactly["adminAccess"] = True
    return {"devices": {"requests": [{"name": "r0", "exactly": exactly}]}}


def our_placement(manifest: Mapping[str, Any], seen: oracle.Cluster,
                  devices: Inventory) -> str | None:
    """gangsched's whole placement of the probe as a gang of one, on the objects read
    before it: None when it goes on its node, else why not."""
    pod = resolve_pod(pod_from_api(manifest), seen.namespaces)
    key = GangKey(pod.key)
    capacity = Capacity(replace(Snapshot.build(seen.nodes.values(), seen.pods), devices=devices))
    decision = capacity.place(Gang(key, 1, (replace(pod, gang=key),)))
    return None if isinstance(decision, Placement) else render(decision.reason)


def probe_ruled(cluster: LocalCluster, namespace: str, index: int, rng: random.Random,
                nodes: Sequence[str], shared: Sequence[str]) -> list[oracle.Verdict]:
    """A pod claiming devices, with rules, on every node at once (one probe per node),
    each probe blind to the others' labels as in the fit oracle."""
    required, preferred = ruled_spec(rng)
    labels = oracle.pod_labels(rng)
    claim_of = {node: f"c{index}-{node}" for node in nodes}
    claim = _ruled_claim(rng)
    if shared and rng.random() < 0.3:
        claim_of = dict.fromkeys(nodes, rng.choice(shared))
    else:
        for name in claim_of.values():
            _kind(cluster, "ResourceClaim")(cluster.client, _claim(namespace, name, claim)
                                            ).create()
    seen = oracle.Cluster.read(cluster)
    before = inventory(cluster, namespace)
    probes: dict[str, dict[str, Any]] = {}
    for node in nodes:
        spec = _with_preferred(oracle.isolated(oracle.pinned(required, node), node, nodes),
                               preferred)
        spec["resourceClaims"] = [{"name": "dev", "resourceClaimName": claim_of[node]}]
        probes[node] = {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"p{index}-{node}", "namespace": namespace,
                         "labels": {**labels, "probe": "yes",
                                    oracle.PROBE_LABEL: f"{oracle.PROBE_LABEL}-{node}"}},
            "spec": {"schedulerName": "default-scheduler", "terminationGracePeriodSeconds": 0,
                     **spec}}
    resolved = kube_judges(cluster, namespace, probes)
    verdicts = []
    for node, manifest in probes.items():
        kube = kube_verdict(resolved[manifest["metadata"]["name"]])
        why = our_placement(manifest, seen, before)
        verdicts.append(oracle.Verdict(index, node, bool(kube), why is None,
                                       f"{RULED}{claim_of[node]} {claim['devices']}: "
                                       f"{why or 'accepted'}"[:300]))
    _clear_probes(cluster, namespace)
    return verdicts


def _extended_pod(namespace: str, name: str, count: int, node: str) -> dict[str, Any]:
    asked = {"cpu": "100m", EXTENDED: str(count)}
    spec = oracle.pinned({"containers": [{"name": "main", "image": "busybox", "resources": {
        "requests": asked, "limits": {EXTENDED: str(count)}}}],
        "tolerations": [{"operator": "Exists"}]}, node)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": {"probe": "yes"}},
            "spec": {"schedulerName": "default-scheduler", "terminationGracePeriodSeconds": 0,
                     **spec}}


def probe_extended(cluster: LocalCluster, namespace: str, index: int, count: int,
                   nodes: Sequence[str]) -> list[oracle.Verdict]:
    """``example.com/gpu: count`` asked of every node at once (no node lists it)."""
    seen = oracle.Cluster.read(cluster)
    before = inventory(cluster, namespace)
    probes = {node: _extended_pod(namespace, f"p{index}-{node}", count, node) for node in nodes}
    resolved = kube_judges(cluster, namespace, probes)
    verdicts = []
    for node, manifest in probes.items():
        kube = kube_verdict(resolved[manifest["metadata"]["name"]])
        pod = pod_from_api(manifest)
        served = served_by_devices(pod, before.extended, Resources.zero())
        answer = allocate_on_node(before, [extended_claim(pod, served, before.extended)[0]],
                                  NodeName(node), before.in_use) if served else None
        rules = refused_by_rules(manifest, node, seen)
        ours = isinstance(answer, NodeAllocation) and rules is None
        verdicts.append(oracle.Verdict(index, node, bool(kube), ours,
                                       f"{EXTENDED}: {count} -> {rules or answer}"[:300]))
    _clear_probes(cluster, namespace)
    return verdicts


def run(cluster: LocalCluster, namespace: str, rng: random.Random, *, nodes: int,
        claims: int, ruled: float = RULED_SHARE) -> list[oracle.Verdict]:
    """Every (claim, node) pair of a generated cluster, with both verdicts; ``ruled`` of
    the probes carry rules beside their claim."""
    names = make_nodes(cluster, rng, nodes)
    cluster.kubectl("label", "namespace", namespace, f"{ADMIN_LABEL}=true",
                    f"{oracle.TEAM_LABEL}=a", "--overwrite")
    try:
        shared = place_existing(cluster, namespace, rng, names)
        place_neighbours(cluster, namespace, rng, names)
        verdicts = []
        for index in range(claims):
            draw = rng.random()
            if draw < ruled:
                verdicts.extend(probe_ruled(cluster, namespace, index, rng, names, shared))
            elif draw < ruled + EXTENDED_SHARE:
                count = rng.choice((1, 2, 3, 4, 5, 8))
                verdicts.extend(probe_extended(cluster, namespace, index, count, names))
            else:
                verdicts.extend(probe_claim(cluster, namespace, index, claim_spec(rng), names))
        return verdicts
    finally:
        fakedriver.remove(cluster.client)
        _remove_extended_class(cluster)
        cluster.ensure_nodes(0, prefix=PREFIX, wait=False)
