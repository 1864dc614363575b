"""Creating workloads on the local cluster the way users and operators do, and watching them."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

import pykube

from devcluster.controlplane import LocalCluster

T = TypeVar("T")

GROUP_MARKERS = {
    "gangsched": ("label", "scheduling.gangsched.io/pod-group"),
    "coscheduling": ("label", "scheduling.x-k8s.io/pod-group"),
    "volcano": ("annotation", "scheduling.k8s.io/group-name"),
}
PODGROUP_API = {
    "gangsched": "scheduling.gangsched.io/v1alpha1",
    "coscheduling": "scheduling.x-k8s.io/v1alpha1",
    "volcano": "scheduling.volcano.sh/v1beta1",
    "native": "scheduling.k8s.io/v1beta1",
}


def wait_for(
    check: Callable[[], T | None], *, timeout: float, what: str, interval: float = 0.2
) -> T:
    """Poll until ``check`` returns something truthy; fail with ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


@dataclass
class Workspace:
    """One namespace of one test; ``close`` deletes its pods at once and the namespace."""

    cluster: LocalCluster
    name: str = field(default_factory=lambda: f"t-{uuid.uuid4().hex[:8]}")

    def __post_init__(self) -> None:
        pykube.Namespace(self.cluster.client, {
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.name},
        }).create()

    @property
    def api(self) -> pykube.HTTPClient:
        return self.cluster.client

    # ---- manifests ------------------------------------------------------------
    def pod(
        self,
        name: str,
        *,
        cpu: str | None = None,
        memory: str | None = None,
        gpus: int = 0,
        scheduler: str = "gang",
        group: str | None = None,
        marker: str = "gangsched",
        run_for: str | None = None,
        labels: Mapping[str, str] | None = None,
        node_selector: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """A pod; ``marker="native"`` puts it in the group by ``spec.schedulingGroup``."""
        requests: dict[str, str] = {}
        if cpu:
            requests["cpu"] = cpu
        if memory:
            requests["memory"] = memory
        if gpus:
            requests["nvidia.com/gpu"] = str(gpus)
        limits = {"nvidia.com/gpu": str(gpus)} if gpus else {}
        meta: dict[str, Any] = {"name": name, "namespace": self.name,
                                "labels": dict(labels or {}),
                                "annotations": dict(annotations or {})}
        if group and marker != "native":
            where, key = GROUP_MARKERS[marker]
            meta["labels" if where == "label" else "annotations"][key] = group
        if run_for:
            meta["annotations"]["kwok.gangsched.io/run-for"] = run_for
        spec: dict[str, Any] = {
            "schedulerName": scheduler if scheduler != "kube" else "default-scheduler",
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "main", "image": "busybox",
                            "resources": {"requests": requests, "limits": limits}}],
        }
        if node_selector:
            spec["nodeSelector"] = dict(node_selector)
        if group and marker == "native":
            spec["schedulingGroup"] = {"podGroupName": group}
        return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}

    def native_podgroup(
        self,
        name: str,
        *,
        min_count: int | None = None,
        topology: tuple[str, ...] = (),
        annotations: Mapping[str, str] | None = None,
        priority_class: str | None = None,
    ) -> dict[str, Any]:
        """A Kubernetes 1.37 PodGroup: gang policy with ``min_count``, else basic."""
        policy: dict[str, Any] = (
            {"gang": {"minCount": min_count}} if min_count is not None else {"basic": {}}
        )
        spec: dict[str, Any] = {"schedulingPolicy": policy}
        if topology:
            spec["schedulingConstraints"] = {"topology": [{"key": key} for key in topology]}
        if priority_class:
            spec["priorityClassName"] = priority_class
        return {
            "apiVersion": PODGROUP_API["native"],
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": self.name,
                         "annotations": dict(annotations or {})},
            "spec": spec,
        }

    def podgroup(
        self,
        name: str,
        *,
        min_member: int | None = None,
        min_resources: Mapping[str, str] | None = None,
        flavor: str = "gangsched",
        queue: str | None = None,
        timeout_seconds: int | None = None,
    ) -> dict[str, Any]:
        spec: dict[str, Any] = {}
        if min_member is not None:
            spec["minMember"] = min_member
        if min_resources:
            spec["minResources"] = dict(min_resources)
        if queue:
            spec["queue"] = queue
        if timeout_seconds is not None:
            spec["scheduleTimeoutSeconds"] = timeout_seconds
        return {
            "apiVersion": PODGROUP_API[flavor],
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": self.name},
            "spec": spec,
        }

    # ---- acting -------------------------------------------------------------------
    def create(self, *manifests: Mapping[str, Any]) -> None:
        for manifest in manifests:
            self._object(manifest).create()

    def _object(self, manifest: Mapping[str, Any]) -> pykube.objects.APIObject:
        if manifest["kind"] == "Pod":
            return pykube.Pod(self.api, dict(manifest))
        cls = pykube.object_factory(self.api, manifest["apiVersion"], manifest["kind"])
        return cls(self.api, dict(manifest))

    def delete_pod(self, name: str) -> None:
        pod = pykube.Pod.objects(self.api, namespace=self.name).get_or_none(name=name)
        if pod is not None:
            pod.delete(propagation_policy=None)

    def delete_podgroup(self, name: str, flavor: str = "gangsched") -> None:
        cls = pykube.object_factory(self.api, PODGROUP_API[flavor], "PodGroup")
        found = cls.objects(self.api, namespace=self.name).get_or_none(name=name)
        if found is not None:
            found.delete()

    def delete_all(self, api_version: str, kind: str) -> None:
        """Every object of ``kind`` in the workspace's namespace, asked to go (a client's
        jobs, before the nodes under them: their controllers would make pods again)."""
        cls = pykube.object_factory(self.api, api_version, kind)
        for found in cls.objects(self.api, namespace=self.name):
            found.delete()

    def finish_pod(self, name: str, phase: str = "Succeeded") -> None:
        """Play the kubelet of a finished container: mark the pod Succeeded or Failed."""
        self.api.raise_for_status(self.api.patch(
            url=f"pods/{name}/status", namespace=self.name, version="v1",
            json={"status": {"phase": phase}},
            headers={"Content-Type": "application/merge-patch+json"},
        ))

    # ---- observing ------------------------------------------------------------
    def pods(self) -> dict[str, dict[str, Any]]:
        return {p.name: p.obj for p in pykube.Pod.objects(self.api, namespace=self.name)}

    def podgroup_obj(self, name: str, flavor: str = "gangsched") -> dict[str, Any]:
        cls = pykube.object_factory(self.api, PODGROUP_API[flavor], "PodGroup")
        return dict(cls.objects(self.api, namespace=self.name).get(name=name).obj)

    def events(self, involved: str) -> list[dict[str, Any]]:
        events = pykube.Event.objects(self.api, namespace=self.name)
        return [e.obj for e in events if e.obj["involvedObject"].get("name") == involved]

    def close(self) -> None:
        for pod in pykube.Pod.objects(self.api, namespace=self.name):
            pod.delete()
        wait_for(lambda: not self.pods(), timeout=30, what=f"pods of {self.name} to go")
        pykube.Namespace.objects(self.api).get(name=self.name).delete()


def node_of(pod: Mapping[str, Any]) -> str | None:
    name = pod.get("spec", {}).get("nodeName")
    return str(name) if name else None


def phase_of(pod: Mapping[str, Any]) -> str:
    return str(pod.get("status", {}).get("phase", ""))


def bound(pods: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [p for p in pods if node_of(p)]


def scheduled_condition(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for condition in pod.get("status", {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled":
            return dict(condition)
    return None


def bound_at(pod: Mapping[str, Any]) -> float:
    """When the pod was bound, from its ``PodScheduled=True`` condition."""
    for condition in pod["status"]["conditions"]:
        if condition["type"] == "PodScheduled" and condition["status"] == "True":
            return datetime.fromisoformat(condition["lastTransitionTime"]).timestamp()
    raise AssertionError(f"pod {pod['metadata']['name']} has no PodScheduled=True condition")
