"""The schedulers the demo runs the same workloads under.

A contender says how a workload's pods reach it (``schedulerName``) and how
they declare their gang (a PodGroup of some API, a marker on each pod). A
scenario asks it for those manifests and never knows which scheduler it
runs under, so one more contender is one more entry in ``CONTENDERS``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

Manifest = dict[str, Any]
GANGSCHED_GROUP_LABEL = "scheduling.gangsched.io/pod-group"


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
    """How gangs are declared: none, gangsched (PodGroup + label), native (PodGroup + field)."""

    def podgroup(
        self, namespace: str, name: str, min_member: int, min_resources: Mapping[str, str],
        one_domain: tuple[str, str] | None = None,
    ) -> Manifest | None:
        """The object that declares the gang, or None when this contender knows no gangs.

        The native PodGroup has no ``minResources``: a Spark job whose executors
        come later can only declare its driver (``minCount: 1``). ``one_domain`` (a
        Topology's name, a node label) keeps the whole gang in one domain of the label, as
        each API says it: gangsched's ``spec.topology.required``, the native
        ``schedulingConstraints.topology``.
        """
        if self.groups == "gangsched":
            spec: dict[str, Any] = {"minMember": min_member}
            if min_resources:
                spec["minResources"] = dict(min_resources)
            if one_domain is not None:
                spec["topology"] = {"name": one_domain[0], "required": one_domain[1]}
            return {"apiVersion": "scheduling.gangsched.io/v1alpha1", "kind": "PodGroup",
                    "metadata": {"name": name, "namespace": namespace}, "spec": spec}
        if self.groups == "native":
            native: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": min_member}}}
            if one_domain is not None:
                native["schedulingConstraints"] = {"topology": [{"key": one_domain[1]}]}
            return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                    "metadata": {"name": name, "namespace": namespace}, "spec": native}
        return None

    def member(self, pod: Manifest, group: str) -> Manifest:
        """The pod, sent to this scheduler and made a member of ``group``."""
        pod["spec"]["schedulerName"] = self.scheduler_name
        if self.groups == "gangsched":
            pod["metadata"].setdefault("labels", {})[GANGSCHED_GROUP_LABEL] = group
        elif self.groups == "native":
            pod["spec"]["schedulingGroup"] = {"podGroupName": group}
        return pod


KUBE_SCHEDULER = Contender("kube-scheduler", "kube-scheduler", "default-scheduler")
GANGSCHED = Contender("gangsched", "gangsched", "gang", runs_gangsched=True, groups="gangsched")
NATIVE_GANG = Contender("native-gang", "native gang (1.37)", "default-scheduler",
                        native_gang=True, groups="native")
CONTENDERS = (KUBE_SCHEDULER, GANGSCHED, NATIVE_GANG)
