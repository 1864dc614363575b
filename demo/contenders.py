"""The schedulers the demo runs the same workloads under.

A contender says how a workload's pods reach it (``schedulerName``) and how
they declare their gang (a PodGroup of some API, a marker on each pod). A
scenario asks it for those manifests and never knows which scheduler it
runs under, so one more contender is one more entry in ``CONTENDERS`` (or,
for the peer schedulers ``make demo-peers`` builds and starts, ``PEERS``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from devcluster import fakedriver
from devcluster.controlplane import NodeShape
from gangsched.core.model.quantity import canonical_amount

Manifest = dict[str, Any]
GANGSCHED_GROUP_LABEL = "scheduling.gangsched.io/pod-group"
VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
YUNIKORN_APP_LABEL = "applicationId"
YUNIKORN_TASK_GROUP = "yunikorn.apache.org/task-group-name"
YUNIKORN_TASK_GROUPS = "yunikorn.apache.org/task-groups"
KUEUE_QUEUE = "jobs"
"""The LocalQueue of every scenario's namespace under Kueue
(:func:`tests.e2e.kueue.flavor_and_queues` names it so)."""
KUEUE_GATE = "kueue.x-k8s.io/admission"


@dataclass(frozen=True)
class Gang:
    """A job's gang as its operator knows it: the pods that must run together.

    ``min_resources`` is the whole job when its members come later (a Spark
    driver creates its executors once it runs), so the gang can be declared
    before they exist.
    """

    name: str
    min_member: int
    min_resources: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Contender:
    key: str
    """Short name, used in file names and JSON."""
    title: str
    scheduler_name: str
    runs_gangsched: bool = False
    """Start ``gangsched run`` beside the control plane."""
    native_gang: bool = False
    """kube-scheduler with 1.37's gang scheduling on (feature gates)."""
    groups: str = "none"
    """How gangs are declared: none, gangsched (PodGroup + label), native (PodGroup + field),
    volcano (Volcano PodGroup + annotation), yunikorn (task-group annotations), kueue
    (Kueue's plain-pod groups: labels, a total-count annotation, its admission gate)."""
    peer: str = ""
    """The peer scheduler started beside the control plane (:mod:`devcluster.peers`)."""
    ready_timeout_s: float | None = None
    """Kueue's ``waitForPodsReady`` timeout: admit the next workload only once the admitted
    one's pods are all Ready (None: admit by quota alone)."""

    def podgroup(self, namespace: str, gang: Gang,
                 one_domain: tuple[str, str] | None = None) -> Manifest | None:
        """The object that declares the gang, or None when this contender knows no gangs
        or declares them on the pods alone.

        The native PodGroup has no ``minResources``: a Spark job whose executors
        come later can only declare its driver (``minCount: 1``). ``one_domain`` (a
        Topology's name, a node label) keeps the whole gang in one domain of the label, as
        each API says it: gangsched's ``spec.topology.required``, the native
        ``schedulingConstraints.topology``.
        """
        meta = {"name": gang.name, "namespace": namespace}
        if self.groups in ("gangsched", "volcano"):
            spec: dict[str, Any] = {"minMember": gang.min_member}
            if gang.min_resources:
                spec["minResources"] = dict(gang.min_resources)
            if one_domain is not None and self.groups == "gangsched":
                spec["topology"] = {"name": one_domain[0], "required": one_domain[1]}
            api = ("scheduling.gangsched.io/v1alpha1" if self.groups == "gangsched"
                   else "scheduling.volcano.sh/v1beta1")
            return {"apiVersion": api, "kind": "PodGroup", "metadata": meta, "spec": spec}
        if self.groups == "native":
            native: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": gang.min_member}}}
            if one_domain is not None:
                native["schedulingConstraints"] = {"topology": [{"key": one_domain[1]}]}
            return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                    "metadata": meta, "spec": native}
        return None

    def member(self, pod: Manifest, gang: Gang) -> Manifest:
        """The pod, sent to this scheduler and made a member of ``gang``."""
        pod["spec"]["schedulerName"] = self.scheduler_name
        labels = pod["metadata"].setdefault("labels", {})
        annotations = pod["metadata"].setdefault("annotations", {})
        if self.groups == "gangsched":
            labels[GANGSCHED_GROUP_LABEL] = gang.name
        elif self.groups == "native":
            pod["spec"]["schedulingGroup"] = {"podGroupName": gang.name}
        elif self.groups == "volcano":
            annotations[VOLCANO_GROUP_ANNOTATION] = gang.name
        elif self.groups == "yunikorn":
            labels[YUNIKORN_APP_LABEL] = gang.name
            annotations[YUNIKORN_TASK_GROUP] = gang.name
            annotations[YUNIKORN_TASK_GROUPS] = json.dumps([task_group(pod, gang)])
        elif self.groups == "kueue":
            kueue_member(pod, gang)
        return pod


def kueue_member(pod: Manifest, gang: Gang) -> None:
    """The pod as Kueue's webhook leaves it: managed, in its queue, gated until Kueue admits
    its workload; a member of the gang's pod group when the gang's members all exist up
    front. A gang declared by its whole job's resources (members yet to come) cannot be a
    Kueue pod group, which Kueue admits only once every member exists: each of its pods is
    then a workload of its own, as Kueue admits a Spark job's pods."""
    pod["spec"]["restartPolicy"] = "Never"
    pod["spec"]["schedulingGates"] = [{"name": KUEUE_GATE}]
    pod["metadata"]["labels"].update({"kueue.x-k8s.io/managed": "true",
                                      "kueue.x-k8s.io/queue-name": KUEUE_QUEUE})
    if not gang.min_resources:
        pod["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"] = gang.name
        pod["metadata"]["annotations"]["kueue.x-k8s.io/pod-group-total-count"] = str(
            gang.min_member)


def task_group(pod: Manifest, gang: Gang) -> dict[str, Any]:
    """YuniKorn's task group for a gang of pods shaped like ``pod``.

    YuniKorn reserves a gang by placeholder pods of one shape, ``minMember``
    of them, so a gang declared by its whole job's resources (members yet to
    come) is as many of this pod as those resources hold.
    """
    requests: dict[str, str] = pod["spec"]["containers"][0]["resources"].get("requests", {})
    members = gang.min_member
    for resource, total in gang.min_resources.items():
        each = canonical_amount(resource, requests.get(resource, "0"))
        if each:
            members = max(members, math.ceil(canonical_amount(resource, total) / each))
    return {"name": gang.name, "minMember": members, "minResource": dict(requests)}


KUBE_SCHEDULER = Contender("kube-scheduler", "kube-scheduler", "default-scheduler")
GANGSCHED = Contender("gangsched", "gangsched", "gang", runs_gangsched=True, groups="gangsched")
NATIVE_GANG = Contender("native-gang", "native gang (1.37)", "default-scheduler",
                        native_gang=True, groups="native")
CONTENDERS = (KUBE_SCHEDULER, GANGSCHED, NATIVE_GANG)
VOLCANO = Contender("volcano", "Volcano", "volcano", groups="volcano", peer="volcano")
YUNIKORN = Contender("yunikorn", "YuniKorn", "yunikorn", groups="yunikorn", peer="yunikorn")
def kueue_quota(nodes: int, shape: NodeShape) -> dict[str, str]:
    """A ClusterQueue's quota that is the whole of ``nodes`` nodes of ``shape``, and of the
    fake driver's devices their slices publish in a scenario claiming devices: Kueue then
    admits what the cluster could hold if its room were in one piece."""
    quota = {"cpu": f"{nodes * canonical_amount('cpu', shape.cpu)}m",
             "memory": str(nodes * canonical_amount("memory", shape.memory)),
             fakedriver.DEVICE_CLASS: str(nodes * fakedriver.PER_NODE)}
    if shape.gpus:
        quota["nvidia.com/gpu"] = str(nodes * shape.gpus)
    return quota


KUEUE = Contender("kueue", "Kueue + kube-scheduler", "default-scheduler", groups="kueue",
                  peer="kueue")
KUEUE_READY = Contender("kueue-ready", "Kueue + waitForPodsReady", "default-scheduler",
                        groups="kueue", peer="kueue", ready_timeout_s=60.0)
PEERS = (VOLCANO, YUNIKORN, KUEUE, KUEUE_READY)
"""Peer schedulers built from the module proxy (``cluster/build.sh peers``); only
``make demo-peers`` runs them, so ``make demo`` needs no peer built. Kueue admits by
quota, a ClusterQueue sized to each scenario's nodes, and kube-scheduler places; with
``waitForPodsReady`` it admits one workload at a time, each once the last one's pods are
Ready (Kueue's own cure for the deadlock, by trickling)."""
