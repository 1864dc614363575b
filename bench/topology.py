"""Topology in levels on a cluster of blocks and racks: gangsched vs kube-scheduler's own.

``python -m bench.topology`` writes bench/results/topology.json. One local
control plane (etcd, kube-apiserver, KWOK, kube-scheduler) with ``--nodes``
fake nodes of 8 nvidia.com/gpu, ``--rack-nodes`` (16) to a rack and
``--block-racks`` (4) racks to a block, labelled as a ``Topology`` of block,
rack and host names them. A seeded trace of mixed gangs arrives over
``--seconds`` (Poisson arrivals) and each pod succeeds ``run-for`` seconds
after it starts (KWOK's stage), so gangs end and free their nodes while
others still wait:

- ``rack_preferred``: 2 to 16 pods of 8 GPUs, preferring a rack, required in a block;
- ``rack_required``: 2 to 8 pods of 4 GPUs, required in a rack;
- ``block_preferred``: 16 to 32 pods of 8 GPUs, preferring a block;
- ``sub_groups``: 2 to 4 sub-groups of 4 pods of 8 GPUs, each required in a rack,
  the gang required in a block.

The same trace runs for each contender in turn on the same control plane
(each batch deleted, and gone, before the next):

1. ``gangsched``: ``gangsched run`` with its defaults, the trace's PodGroups
   naming the Topology with their ``required`` and ``preferred`` levels and
   sub-groups.
2. ``native_gang``: kube-scheduler 1.37 with ``GenericWorkload`` and
   ``TopologyAwareWorkloadScheduling`` on, native ``scheduling.k8s.io/v1beta1``
   PodGroups of ``minCount`` the gang's size. Its ``schedulingConstraints.topology``
   takes one key, always required (its TopologyPlacement plugin reads the first
   key only) and it has no sub-groups: each gang asks its tightest level (the
   preferred one, else the required one) as that key.
3. ``volcano``: Volcano 1.15.1's vc-scheduler and vc-controller-manager
   (``cluster/build.sh peers``), the ``network-topology-aware`` plugin on, the racks
   and blocks as ``HyperNode`` objects of tiers 1 and 2, the gangs as Volcano
   PodGroups whose ``networkTopology`` says what the gang asks
   (:func:`volcano_topology`) and whose ``subGroupPolicy`` keeps each sub-group in
   a rack.
4. ``kueue``: Kueue 0.19.2's topology-aware scheduling (``cluster/build.sh peers kueue``)
   with kube-scheduler placing the pods it ungates: a Kueue ``Topology`` of the same
   levels, a ResourceFlavor naming it, a ClusterQueue as large as the cluster, the gangs
   as Kueue pod groups asking their level by annotation (:func:`kueue_manifests`).

Figures per contender: the share of gangs placed whole in their tightest asked
domain (and, for sub-group gangs, every sub-group in its own); gangs placed and
pods bound per second from the first arrival to the last bind; each gang's wait
from arrival to its last member bound; the fragmentation, sampled every
``--sample-seconds``: how many whole free nodes the emptiest rack and block
hold, that is the largest gang of 8-GPU pods that one rack or block could still
take; for gangsched, the time of every scheduling cycle (its ``cycle_done``
lines).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pykube

from bench.harness import (
    NATIVE_VERSION,
    PODGROUP_VERSION,
    Clients,
    Gangsched,
    PodWatch,
    create,
    create_namespace,
    delete_all,
    distribution,
    list_items,
    machine,
    pod_manifest,
    say,
    wait_ready,
    work_directory,
    write_report,
)
from demo.contenders import VOLCANO_GROUP_ANNOTATION
from devcluster.controlplane import (
    COMPOSITE_API,
    KWOK_LABEL,
    ClusterOptions,
    LocalCluster,
    NodeShape,
    running_cluster,
)
from devcluster.peers import ensure_peer_binaries, install_volcano_crds, peer
from gangsched.core.kubeobjects.podgroups import SUB_GROUP_LABEL
from tests.e2e.kueue import KUEUE_API, kueue

RESULTS = Path(__file__).parent / "results" / "topology.json"
BLOCK, RACK, HOST = ("topology.example.com/block", "topology.example.com/rack",
                     "kubernetes.io/hostname")
TOPOLOGY = "bench-fabric"
NODE_GPUS = 8
NODE = NodeShape(cpu="64", memory="512Gi", gpus=NODE_GPUS, pods=110)
RUN_FOR = "kwok.gangsched.io/run-for"
KINDS = {"rack_preferred": 0.35, "rack_required": 0.3, "block_preferred": 0.1,
         "sub_groups": 0.25}
"""Each kind's share of the trace."""


# ---- the trace (plain data, seeded) ---------------------------------------------------------
@dataclass(frozen=True, slots=True)
class SubGroup:
    name: str
    pods: int
    required: str


@dataclass(frozen=True, slots=True)
class TraceGang:
    """One gang of the trace: when it arrives, how long its pods run, what it asks."""

    name: str
    kind: str
    arrival_s: float
    runtime_s: int
    pods: int
    gpus: int
    required: str | None
    preferred: str | None
    sub_groups: tuple[SubGroup, ...] = ()

    @property
    def target(self) -> str:
        """The tightest level asked: where the gang counts as well placed."""
        return self.preferred or self.required or HOST

    def sub_group_of(self, index: int) -> str | None:
        """The sub-group of the gang's ``index``-th pod: sub-groups take pods in turn."""
        for sub in self.sub_groups:
            if index < sub.pods:
                return sub.name
            index -= sub.pods
        return None


def trace(seed: int, gangs: int, seconds: float, runtime_s: tuple[int, int]) -> list[TraceGang]:
    """``gangs`` gangs of the mixed kinds, arriving as a Poisson stream over ``seconds``."""
    rng = random.Random(seed)
    rate = gangs / seconds
    found: list[TraceGang] = []
    arrival = 0.0
    for number in range(gangs):
        kind = rng.choices(list(KINDS), weights=list(KINDS.values()))[0]
        runtime = rng.randint(*runtime_s)
        name = f"g{number}-{kind.replace('_', '-')}"
        if kind == "rack_preferred":
            gang = TraceGang(name, kind, arrival, runtime, rng.randint(2, 16), 8, BLOCK, RACK)
        elif kind == "rack_required":
            gang = TraceGang(name, kind, arrival, runtime, rng.randint(2, 8), 4, RACK, None)
        elif kind == "block_preferred":
            gang = TraceGang(name, kind, arrival, runtime, rng.randint(16, 32), 8, None, BLOCK)
        else:
            subs = tuple(SubGroup(f"s{i}", 4, RACK) for i in range(rng.randint(2, 4)))
            gang = TraceGang(name, kind, arrival, runtime, 4 * len(subs), 8, BLOCK, None, subs)
        found.append(gang)
        arrival += rng.expovariate(rate)
    return found


def gangsched_manifests(namespace: str, gang: TraceGang, preferred_wait_s: int = 0,
                        tightest: bool = False) -> list[dict[str, Any]]:
    """The gang as a gangsched PodGroup: its levels as the trace asks them, its preferring
    gangs waiting ``preferred_wait_s`` for their preferred level, or (``tightest``) its
    tightest level required, as :func:`native_manifests` must ask it."""
    topology: dict[str, Any] = {"name": TOPOLOGY}
    if tightest:
        topology["required"] = gang.target
    elif gang.required:
        topology["required"] = gang.required
    if gang.preferred and not tightest:
        topology["preferred"] = gang.preferred
        if preferred_wait_s:
            topology["preferredWaitSeconds"] = preferred_wait_s
    if gang.sub_groups:
        topology["subGroups"] = [{"name": s.name, "minMember": s.pods, "required": s.required}
                                 for s in gang.sub_groups]
    group = {"apiVersion": PODGROUP_VERSION, "kind": "PodGroup",
             "metadata": {"name": gang.name, "namespace": namespace},
             "spec": {"minMember": gang.pods, "topology": topology}}
    return [group, *pods_of(namespace, gang, "gang", native=False)]


def native_manifests(namespace: str, gang: TraceGang) -> list[dict[str, Any]]:
    """The gang as Kubernetes 1.37 says it: one required key, the tightest asked level; a
    gang of sub-groups as a CompositePodGroup requiring its level, each sub-group a
    child PodGroup requiring its own (:func:`native_composite`)."""
    if gang.sub_groups:
        return native_composite(namespace, gang)
    group = {"apiVersion": NATIVE_VERSION, "kind": "PodGroup",
             "metadata": {"name": gang.name, "namespace": namespace},
             "spec": {"schedulingPolicy": {"gang": {"minCount": gang.pods}},
                      "schedulingConstraints": {"topology": [{"key": gang.target}]}}}
    return [group, *pods_of(namespace, gang, "default-scheduler", native=True)]


def native_composite(namespace: str, gang: TraceGang) -> list[dict[str, Any]]:
    """A sub-group gang as a ``CompositePodGroup`` (alpha in 1.37) requiring the gang's
    level, all its children at once (``minGroupCount``), and a child PodGroup per
    sub-group requiring the sub-group's level; each pod names its sub-group's child."""
    ref = {"workloadName": gang.name, "templateName": gang.name}
    composite = {"apiVersion": COMPOSITE_API, "kind": "CompositePodGroup",
                 "metadata": {"name": gang.name, "namespace": namespace},
                 "spec": {"workloadRef": ref,
                          "schedulingPolicy": {"gang": {"minGroupCount": len(gang.sub_groups)}},
                          "schedulingConstraints": {"topology": [{"key": gang.target}]}}}
    children = [{"apiVersion": NATIVE_VERSION, "kind": "PodGroup",
                 "metadata": {"name": f"{gang.name}-{sub.name}", "namespace": namespace},
                 "spec": {"parentCompositePodGroupName": gang.name, "workloadRef": ref,
                          "schedulingPolicy": {"gang": {"minCount": sub.pods}},
                          "schedulingConstraints": {"topology": [{"key": sub.required}]}}}
                for sub in gang.sub_groups]
    pods = pods_of(namespace, gang, "default-scheduler", native=True)
    for index, pod in enumerate(pods):
        pod["spec"]["schedulingGroup"]["podGroupName"] = f"{gang.name}-{gang.sub_group_of(index)}"
    return [composite, *children, *pods]


VOLCANO_PODGROUP_VERSION = "scheduling.volcano.sh/v1beta1"
VOLCANO_TIERS = {RACK: 1, BLOCK: 2}
"""The HyperNode tier of each level (:func:`hypernodes`)."""


def volcano_topology(required: str | None) -> dict[str, Any]:
    """A gang's levels as Volcano's ``networkTopology``: ``hard`` with
    ``highestTierAllowed`` the required level's tier (vc-scheduler tries the tightest
    tier first, a rack before the block, so a rack preferred inside a required block is
    said by the block alone); with nothing required, ``soft`` (Volcano's preference:
    members kept near the first one, no tier searched)."""
    if required is not None:
        return {"mode": "hard", "highestTierAllowed": VOLCANO_TIERS[required]}
    return {"mode": "soft"}


def volcano_manifests(namespace: str, gang: TraceGang) -> list[dict[str, Any]]:
    """The gang as Volcano 1.15.1 says it: a PodGroup with a ``networkTopology``, and a
    ``subGroupPolicy`` grouping the members by their sub-group label, each group of its
    size in one domain of its own level."""
    spec: dict[str, Any] = {"minMember": gang.pods,
                            "networkTopology": volcano_topology(gang.required)}
    if gang.sub_groups:
        sub = gang.sub_groups[0]  # the trace's sub-groups are alike: one policy says them
        spec["subGroupPolicy"] = [{
            "name": "sub-group", "subGroupSize": sub.pods, "matchLabelKeys": [SUB_GROUP_LABEL],
            "networkTopology": volcano_topology(sub.required)}]
    group = {"apiVersion": VOLCANO_PODGROUP_VERSION, "kind": "PodGroup",
             "metadata": {"name": gang.name, "namespace": namespace}, "spec": spec}
    pods = pods_of(namespace, gang, "volcano", native=False)
    for pod in pods:
        pod["metadata"]["annotations"][VOLCANO_GROUP_ANNOTATION] = gang.name
    return [group, *pods]


KUEUE_TOPOLOGY = {"required": "kueue.x-k8s.io/podset-required-topology",
                  "preferred": "kueue.x-k8s.io/podset-preferred-topology"}
KUEUE_INDEX = "kueue.x-k8s.io/pod-group-pod-index"


def kueue_manifests(namespace: str, gang: TraceGang) -> list[dict[str, Any]]:
    """The gang as a Kueue pod group its webhook would have left: managed, in the
    namespace's LocalQueue, gated for admission and for its topology, each pod's index a
    label and their one role named (the webhook's hash of the spec, which Kueue would
    otherwise take again from a spec its admission has changed). A pod set asks one level,
    required or preferred (the tightest asked); sub-groups are slices of their size
    required in their level."""
    pods = pods_of(namespace, gang, "default-scheduler", native=False)
    level = ("preferred", gang.preferred) if gang.preferred else ("required", gang.required)
    for index, pod in enumerate(pods):
        pod["spec"]["restartPolicy"] = "Never"
        pod["spec"]["schedulingGates"] = [{"name": "kueue.x-k8s.io/admission"},
                                          {"name": "kueue.x-k8s.io/topology"}]
        pod["metadata"]["labels"].update({
            "kueue.x-k8s.io/managed": "true", "kueue.x-k8s.io/queue-name": "jobs",
            "kueue.x-k8s.io/pod-group-name": gang.name, KUEUE_INDEX: str(index)})
        annotations = pod["metadata"]["annotations"]
        annotations.update({"kueue.x-k8s.io/pod-group-total-count": str(gang.pods),
                            "kueue.x-k8s.io/pod-group-pod-index-label": KUEUE_INDEX,
                            "kueue.x-k8s.io/role-hash": "workers"})
        if level[1] is not None:
            annotations[KUEUE_TOPOLOGY[level[0]]] = level[1]
        if gang.sub_groups:
            annotations["kueue.x-k8s.io/podset-slice-required-topology"] = (
                gang.sub_groups[0].required)
            annotations["kueue.x-k8s.io/podset-slice-size"] = str(gang.sub_groups[0].pods)
    return pods


def pods_of(namespace: str, gang: TraceGang, scheduler: str,
            native: bool) -> list[dict[str, Any]]:
    pods = []
    for index in range(gang.pods):
        pod = pod_manifest(namespace, f"{gang.name}-{index}", scheduler, gang.name, native)
        pod["metadata"]["annotations"] = {RUN_FOR: f"{gang.runtime_s}s"}
        sub = gang.sub_group_of(index)
        if sub is not None:
            pod["metadata"]["labels"][SUB_GROUP_LABEL] = sub
        gpus = str(gang.gpus)
        pod["spec"]["containers"][0]["resources"] = {
            "requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": gpus},
            "limits": {"nvidia.com/gpu": gpus}}
        pods.append(pod)
    return pods


# ---- the fabric ------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Fabric:
    racks: int
    rack_nodes: int
    block_racks: int

    def rack_names(self) -> list[str]:
        return [f"r{r}" for r in range(self.racks)]

    def block_of(self, rack: str) -> str:
        return f"b{int(rack[1:]) // self.block_racks}"

    def domains(self, node: str) -> dict[str, str]:
        """A node's domain at each level, from its name (``topo-r12-3``)."""
        rack = node.split("-")[1]
        return {BLOCK: self.block_of(rack), RACK: rack, HOST: node}

    def nodes(self) -> list[str]:
        return [f"topo-{rack}-{i}" for rack in self.rack_names() for i in range(self.rack_nodes)]


def hypernodes(fabric: Fabric) -> list[dict[str, Any]]:
    """The fabric as Volcano's HyperNodes: each rack of tier 1 holding its nodes (by their
    rack label), each block of tier 2 holding its racks."""
    def hypernode(name: str, tier: int, members: list[dict[str, Any]]) -> dict[str, Any]:
        return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
                "metadata": {"name": name}, "spec": {"tier": tier, "members": members}}

    racks = fabric.rack_names()
    blocks = {fabric.block_of(rack): None for rack in racks}
    return [*(hypernode(rack, VOLCANO_TIERS[RACK], [
                  {"type": "Node", "selector": {"labelMatch": {"matchLabels": {RACK: rack}}}}])
              for rack in racks),
            *(hypernode(block, VOLCANO_TIERS[BLOCK], [
                  {"type": "HyperNode", "selector": {"exactMatch": {"name": rack}}}
                  for rack in racks if fabric.block_of(rack) == block])
              for block in blocks)]


VOLCANO_CONFIGURATION = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: network-topology-aware
    arguments:
      weight: 10
      hypernode.binpack.resources: nvidia.com/gpu
      hypernode.binpack.resources.nvidia.com/gpu: 2
"""
"""vc-scheduler's default configuration with the ``network-topology-aware`` plugin
added as Volcano's guide to network-topology-aware scheduling does, its HyperNode bin
packing counting GPUs."""


def in_target(gang: TraceGang, nodes: Sequence[str], fabric: Fabric) -> bool:
    """Whether the gang's pods (``nodes`` in pod order) lie in one domain of its tightest
    asked level, and each sub-group in one domain of its own."""
    def one_domain(of: Sequence[str], level: str) -> bool:
        return len({fabric.domains(n)[level] for n in of}) == 1

    if not one_domain(nodes, gang.target):
        return False
    return all(one_domain([n for i, n in enumerate(nodes) if gang.sub_group_of(i) == s.name],
                          s.required) for s in gang.sub_groups)


def largest_free(free_nodes: Mapping[str, int], fabric: Fabric, level: str) -> int:
    """The most wholly free nodes in one domain of ``level``: the largest gang of
    whole-node pods that one such domain can still take."""
    per_domain: dict[str, int] = {}
    for node in fabric.nodes():
        domain = fabric.domains(node)[level]
        per_domain[domain] = per_domain.get(domain, 0) + (
            1 if free_nodes.get(node, NODE_GPUS) == NODE_GPUS else 0)
    return max(per_domain.values(), default=0)


class FragmentationSampler:
    """Lists the batch's pods every ``interval`` seconds on a thread: the free GPUs of
    each node, and from them the largest gang one rack and one block could take."""

    def __init__(self, clients: Clients, namespace: str, fabric: Fabric,
                 interval: float) -> None:
        self.clients, self.namespace, self.fabric = clients, namespace, fabric
        self.interval = interval
        self.samples: list[dict[str, float]] = []
        self._stop = threading.Event()
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="fragmentation", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            pods, _ = list_items(self.clients.get(), "pods", self.namespace)
            free: dict[str, int] = {}
            for pod in pods:
                node = (pod.get("spec") or {}).get("nodeName")
                if not node or (pod.get("status") or {}).get("phase") in ("Succeeded",
                                                                          "Failed"):
                    continue
                gpus = pod["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"]
                free[node] = free.get(node, NODE_GPUS) - int(gpus)
            self.samples.append({
                "t_s": round(time.monotonic() - self._started, 1),
                "busy_gpus": sum(NODE_GPUS - f for f in free.values()),
                "rack_whole_free_nodes_max": largest_free(free, self.fabric, RACK),
                "block_whole_free_nodes_max": largest_free(free, self.fabric, BLOCK),
            })

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


# ---- one run of the trace --------------------------------------------------------------------
Manifests = Callable[[str, TraceGang], list[dict[str, Any]]]
"""How a contender's API says a gang: its group object, then its pods."""


def replay(clients: Clients, namespace: str, gangs: Sequence[TraceGang], make: Manifests,
           workers: int) -> float:
    """Create each gang (its PodGroup, then its pods) at its arrival time; the start."""
    started = time.monotonic()

    def arrive(gang: TraceGang) -> None:
        time.sleep(max(0.0, started + gang.arrival_s - time.monotonic()))
        for manifest in make(namespace, gang):
            create(clients, manifest)

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="arrive") as pool:
        for future in [pool.submit(arrive, gang) for gang in gangs]:
            future.result()
    return started


def run_trace(cluster: LocalCluster, clients: Clients, gangs: Sequence[TraceGang],
              fabric: Fabric, args: argparse.Namespace, name: str,
              gangsched: Gangsched | None, make: Manifests,
              prepare: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The trace for one contender, already running (``prepare`` makes what it needs in
    the trace's namespace); its figures."""
    namespace = f"topo-{name.replace('_', '-')}"
    create_namespace(clients.get(), namespace)
    if prepare is not None:
        prepare(namespace)
    watch = PodWatch(clients, namespace)
    watch.start()
    sampler = FragmentationSampler(clients, namespace, fabric, args.sample_seconds)
    pods = sum(g.pods for g in gangs)
    try:
        started = replay(clients, namespace, gangs, make, args.workers)
        all_bound = watch.wait_bound(pods, args.timeout)
    finally:
        sampler.stop()
        watch.stop()
    report = trace_figures(gangs, watch.bound_at, watch.nodes, started, fabric)
    report["all_bound"] = all_bound
    report["fragmentation"] = fragmentation(sampler.samples, args.seconds)
    if gangsched is not None:
        cycles = gangsched.log_lines("cycle_done")
        report["core_cycle_ms"] = distribution([float(c["cycle_ms"]) for c in cycles])
        report["core_cycle_ms_placing"] = distribution(
            [float(c["cycle_ms"]) for c in cycles if int(c.get("placed") or 0) > 0])
    delete_all(clients.get(), namespace)
    return report


def trace_figures(gangs: Sequence[TraceGang], bound_at: Mapping[str, float],
                  nodes: Mapping[str, str], started: float, fabric: Fabric) -> dict[str, Any]:
    """Placement and throughput figures of one run from when and where each pod bound."""
    placed, in_domain, waits = 0, 0, []
    per_kind: dict[str, list[int]] = {kind: [0, 0, 0] for kind in KINDS}
    for gang in gangs:
        names = [f"{gang.name}-{i}" for i in range(gang.pods)]
        per_kind[gang.kind][0] += 1
        if not all(n in bound_at for n in names):
            continue
        placed += 1
        per_kind[gang.kind][1] += 1
        waits.append(max(bound_at[n] for n in names) - started - gang.arrival_s)
        if in_target(gang, [nodes[n] for n in names], fabric):
            in_domain += 1
            per_kind[gang.kind][2] += 1
    times = sorted(bound_at.values())
    wall = (times[-1] - started) if times else 0.0
    return {
        "gangs": len(gangs), "gangs_placed": placed,
        "gangs_in_target_domain": in_domain,
        "share_in_target_domain": round(in_domain / len(gangs), 3) if gangs else None,
        "by_kind": {kind: {"gangs": c[0], "placed": c[1], "in_target_domain": c[2]}
                    for kind, c in per_kind.items()},
        "pods_bound": len(times),
        "wall_s": round(wall, 1),
        "pods_per_s": round(len(times) / wall, 1) if wall > 0 else None,
        "gang_wait_s": distribution(waits),
    }


def fragmentation(samples: Sequence[Mapping[str, float]], window_s: float) -> dict[str, Any]:
    """The largest gang one rack and one block could take, averaged over the samples of
    the arrivals' window (the same span for every contender; later ones see a draining
    cluster) and listed for the whole run."""
    within = [s for s in samples if s["t_s"] <= window_s]
    if not within:
        return {"samples": 0, "series": list(samples)}
    rack = [s["rack_whole_free_nodes_max"] for s in within]
    block = [s["block_whole_free_nodes_max"] for s in within]
    return {"samples": len(within),
            "rack_whole_free_nodes_mean": round(statistics.fmean(rack), 2),
            "block_whole_free_nodes_mean": round(statistics.fmean(block), 2),
            "series": list(samples)}


# ---- main ---------------------------------------------------------------------------------
CONTENDERS = ("gangsched", "gangsched_patient", "gangsched_tightest", "native_gang", "volcano",
              "kueue")
OURS = 3
"""The first contenders are gangsched, asked the trace three ways (:func:`gangsched_variants`)."""
PATIENT_WAIT_S = 30
"""``gangsched_patient``'s ``preferredWaitSeconds``: how long its preferring gangs wait for
their preferred level before they take a wider one."""


def gangsched_variants() -> dict[str, Manifests]:
    """gangsched's runs: the trace as asked; with its preferring gangs waiting
    ``PATIENT_WAIT_S`` for their preferred level; and each gang requiring its tightest
    level, as the native API must ask it."""
    return {"gangsched": gangsched_manifests,
            "gangsched_patient": partial(gangsched_manifests, preferred_wait_s=PATIENT_WAIT_S),
            "gangsched_tightest": partial(gangsched_manifests, tightest=True)}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.topology", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1024,
                        help="rounded down to whole racks")
    parser.add_argument("--rack-nodes", type=int, default=16)
    parser.add_argument("--block-racks", type=int, default=4)
    parser.add_argument("--gangs", type=int, default=None,
                        help="gangs in the trace (default: one per four nodes)")
    parser.add_argument("--seconds", type=float, default=60, help="the arrivals' span")
    parser.add_argument("--runtime", type=int, nargs=2, default=(20, 60), metavar=("MIN", "MAX"),
                        help="seconds a gang's pods run once started")
    parser.add_argument("--seed", type=int, default=30)
    parser.add_argument("--workers", type=int, default=16, help="threads creating gangs")
    parser.add_argument("--sample-seconds", type=float, default=5)
    parser.add_argument("--timeout", type=float, default=240,
                        help="seconds after the last arrival to wait for the last bind")
    parser.add_argument("--kube-qps", type=int, default=5000)
    parser.add_argument("--contenders", default=",".join(CONTENDERS))
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    args.contenders = [c for c in args.contenders.split(",") if c]
    if set(args.contenders) - set(CONTENDERS):
        parser.error(f"contenders are some of: {', '.join(CONTENDERS)}")
    return args


def make_fabric(cluster: LocalCluster, fabric: Fabric) -> float:
    """The nodes, labelled by rack and block, and the Topology naming those levels."""
    started = time.monotonic()
    for rack in fabric.rack_names():
        cluster.ensure_nodes(fabric.rack_nodes, NODE, prefix=f"topo-{rack}", wait=False,
                             labels={BLOCK: fabric.block_of(rack), RACK: rack})
    wait_ready(cluster, "topo", fabric.racks * fabric.rack_nodes)
    pykube.object_factory(cluster.client, PODGROUP_VERSION, "Topology")(cluster.client, {
        "apiVersion": PODGROUP_VERSION, "kind": "Topology", "metadata": {"name": TOPOLOGY},
        "spec": {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}, {"nodeLabel": HOST}]},
    }).create()
    return time.monotonic() - started


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    fabric = Fabric(args.nodes // args.rack_nodes, args.rack_nodes, args.block_racks)
    nodes = fabric.racks * fabric.rack_nodes
    gangs = trace(args.seed, args.gangs or nodes // 4, args.seconds, tuple(args.runtime))
    args.timeout += args.seconds
    report: dict[str, Any] = {
        "benchmark": "topology in levels: a trace of gangs on blocks and racks",
        "machine": machine(),
        "sizes": {"nodes": nodes, "racks": fabric.racks, "rack_nodes": fabric.rack_nodes,
                  "blocks": -(-fabric.racks // fabric.block_racks),
                  "node_gpus": NODE_GPUS, "gangs": len(gangs),
                  "pods": sum(g.pods for g in gangs),
                  "gpus_asked": sum(g.pods * g.gpus for g in gangs),
                  "kinds": {kind: sum(g.kind == kind for g in gangs) for kind in KINDS},
                  "arrivals_s": args.seconds, "runtime_s": list(args.runtime),
                  "seed": args.seed},
    }
    started = time.monotonic()
    with work_directory(args.workdir, "gangsched-topology-") as workdir, \
            running_cluster(workdir / "cluster",
                            ClusterOptions(nodes=0, with_kube_scheduler=True)) as cluster:
        cluster.apply_crds()
        report["setup_s"] = round(make_fabric(cluster, fabric), 1)
        say(f"{nodes} nodes in {fabric.racks} racks ready in {report['setup_s']}s; "
            f"{len(gangs)} gangs, {report['sizes']['pods']} pods")
        clients = Clients(cluster.kubeconfig)
        for name, manifests in gangsched_variants().items():
            if name not in args.contenders:
                continue
            cluster.stop_kube_scheduler()
            log = workdir / f"{name.replace('_', '-')}.log"
            scheduler = Gangsched(cluster, log, log_level="debug")
            scheduler.start()
            try:
                report[name] = run_trace(cluster, clients, gangs, fabric, args, name,
                                         scheduler, manifests)
            finally:
                scheduler.stop()
            say(f"{name}: {summary(report[name])}")
        if "native_gang" in args.contenders:
            cluster.restart_kube_scheduler(native_gang=True, qps=args.kube_qps)
            try:
                report["native_gang"] = run_trace(cluster, clients, gangs, fabric, args,
                                                  "native_gang", None, native_manifests)
            finally:
                cluster.stop_kube_scheduler()
            say(f"native_gang: {summary(report['native_gang'])}")
        if "volcano" in args.contenders:
            cluster.stop_kube_scheduler()
            report["volcano"] = run_volcano(cluster, clients, gangs, fabric, args, workdir)
            say(f"volcano: {summary(report['volcano'])}")
        if "kueue" in args.contenders:
            cluster.restart_kube_scheduler(native_gang=False, qps=args.kube_qps)
            try:
                report["kueue"] = run_kueue(cluster, clients, gangs, fabric, args, workdir)
            finally:
                cluster.stop_kube_scheduler()
            say(f"kueue: {summary(report['kueue'])}")
    report["ratios"] = ratios(report)
    report["total_run_s"] = round(time.monotonic() - started, 1)
    write_report(args.output, report)


def run_volcano(cluster: LocalCluster, clients: Clients, gangs: Sequence[TraceGang],
                fabric: Fabric, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """The trace under vc-scheduler and vc-controller-manager, the fabric's HyperNodes made
    before they start; vc-scheduler's client limits those kube-scheduler runs with."""
    bin_dir = ensure_peer_binaries()
    install_volcano_crds(cluster, bin_dir)
    cluster.kubectl("apply", "-f", "-", input=json.dumps(
        {"apiVersion": "v1", "kind": "List", "items": hypernodes(fabric)}))
    configuration = workdir / "volcano-scheduler.conf"
    configuration.write_text(VOLCANO_CONFIGURATION)
    with peer("volcano", cluster, workdir, bin_dir, scheduler_args=[
            f"--scheduler-conf={configuration}", f"--kube-api-qps={args.kube_qps}",
            f"--kube-api-burst={args.kube_qps}"]):
        return run_trace(cluster, clients, gangs, fabric, args, "volcano", None,
                         volcano_manifests)


def run_kueue(cluster: LocalCluster, clients: Clients, gangs: Sequence[TraceGang],
               fabric: Fabric, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """The trace under Kueue's topology-aware scheduling, kube-scheduler placing the pods
    it ungates: a Topology of the fabric's levels, a ResourceFlavor naming it, a
    ClusterQueue as large as the cluster."""
    nodes = fabric.racks * fabric.rack_nodes
    quota = {"cpu": str(nodes * 64), "memory": f"{nodes * 512}Gi",
             "nvidia.com/gpu": str(nodes * NODE_GPUS)}

    def queues(namespace: str) -> None:
        cluster.kubectl("apply", "--server-side", "-f", "-", input=json.dumps(
            {"apiVersion": "v1", "kind": "List", "items": [
                {"apiVersion": KUEUE_API, "kind": "Topology", "metadata": {"name": TOPOLOGY},
                 "spec": {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK},
                                     {"nodeLabel": HOST}]}},
                {"apiVersion": KUEUE_API, "kind": "ResourceFlavor",
                 "metadata": {"name": "fabric"},
                 "spec": {"topologyName": TOPOLOGY, "nodeLabels": dict([KWOK_LABEL])}},
                {"apiVersion": KUEUE_API, "kind": "ClusterQueue", "metadata": {"name": "fabric"},
                 "spec": {"namespaceSelector": {}, "resourceGroups": [{
                     "coveredResources": sorted(quota), "flavors": [{
                         "name": "fabric", "resources": [
                             {"name": r, "nominalQuota": q}
                             for r, q in sorted(quota.items())]}]}]}},
                {"apiVersion": KUEUE_API, "kind": "LocalQueue",
                 "metadata": {"name": "jobs", "namespace": namespace},
                 "spec": {"clusterQueue": "fabric"}}]}))

    with kueue(cluster, workdir):
        return run_trace(cluster, clients, gangs, fabric, args, "kueue", None,
                         kueue_manifests, queues)


def summary(run: Mapping[str, Any]) -> str:
    return (f"{run['gangs_placed']}/{run['gangs']} gangs placed, "
            f"{run['share_in_target_domain']} in their domain, {run['pods_per_s']} pods/s, "
            f"gang wait p50 {run['gang_wait_s'].get('p50')}s")


def ratios(report: Mapping[str, Any]) -> dict[str, float | None]:
    """gangsched's figures over each other contender's, same trace and run."""
    found: dict[str, float | None] = {}
    for name in CONTENDERS[:OURS]:
        ours = report.get(name)
        for contender in CONTENDERS[OURS:]:
            theirs = report.get(contender)
            if ours is None or theirs is None:
                continue
            for figure in ("share_in_target_domain", "pods_per_s"):
                mine, other = ours.get(figure), theirs.get(figure)
                found[f"{figure}_{name}_over_{contender}"] = (
                    round(mine / other, 2) if mine and other else None)
    return found


if __name__ == "__main__":
    main()
