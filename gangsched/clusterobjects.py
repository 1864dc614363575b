"""The objects a scheduling decision reads, from the API server or from YAML files.

The CLI (``status``, ``explain``, ``simulate``) answers from the same mirror
and the same cycle the scheduler runs; this module fills that mirror without
the scheduler's watches: one list of each kind through a synchronous client
(kubeconfig read as kubectl reads it), or the documents of YAML files as a
user would ``kubectl apply`` them.
"""

from __future__ import annotations

import copy
import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pykube
import requests
import yaml

from gangsched.core.kubeobjects.composites import COMPOSITE_API
from gangsched.core.kubeobjects.fields import object_ref
from gangsched.core.kubeobjects.queues import KUEUE_API
from gangsched.core.model.objects import Flavor
from gangsched.feed import Feed
from gangsched.mirror import Mirror

QUEUE_API = "scheduling.gangsched.io/v1alpha1"
WORKLOAD_API = "scheduling.k8s.io/v1beta1"
RESOURCE_API = "resource.k8s.io/v1"
NODEPOOL_API = "karpenter.sh/v1"
DEVICE_KINDS = {"ResourceSlice": "resourceslices", "DeviceClass": "deviceclasses",
                "ResourceClaim": "resourceclaims"}
"""Dynamic resource allocation: the kinds whose devices and claims a decision reads."""
Document = dict[str, Any]
"""An object as a file or a list holds it; ``simulate`` changes its copies as pods bind
and finish, so these stay plain dicts (the mirror reads them as
:data:`gangsched.core.kubeobjects.fields.RawObject`)."""
NAME_LABEL = "kubernetes.io/metadata.name"
"""The label the API server gives every Namespace: its name."""


class ObjectsError(Exception):
    """A file or the API server could not give the objects asked for."""


class Forbidden(ObjectsError):
    """The account may not list a kind: a tenant's role often covers its namespace alone."""


STORAGE_KINDS = {"PersistentVolumeClaim": "persistentvolumeclaims",
                 "PersistentVolume": "persistentvolumes", "StorageClass": "storageclasses",
                 "CSINode": "csinodes", "VolumeAttachment": "volumeattachments",
                 "CSIDriver": "csidrivers", "CSIStorageCapacity": "csistoragecapacities"}
"""Kinds of objects the storage part of a decision reads, to the feed's kind."""


@dataclass
class ClusterObjects:
    nodes: list[Document] = field(default_factory=list)
    pods: list[Document] = field(default_factory=list)
    namespaces: list[Document] = field(default_factory=list)
    """Namespaces: the labels an inter-pod term's ``namespaceSelector`` selects by."""
    groups: list[tuple[Flavor, Document]] = field(default_factory=list)
    queues: list[Document] = field(default_factory=list)
    topologies: list[Document] = field(default_factory=list)
    workloads: list[Document] = field(default_factory=list)
    """Native Workloads: their queue annotation is their PodGroups' queue."""
    kueue_workloads: list[Document] = field(default_factory=list)
    """Kueue's Workloads: a PodGroup of a job Kueue has not admitted waits for it."""
    composites: list[Document] = field(default_factory=list)
    """Native CompositePodGroups: their child PodGroups are one gang."""
    priority_classes: list[Document] = field(default_factory=list)
    budgets: list[Document] = field(default_factory=list)
    """PodDisruptionBudgets: the gangs preemption may not evict."""
    nodepools: list[Document] = field(default_factory=list)
    """Karpenter's NodePools: which waiting gangs ask for nodes."""
    storage: dict[str, list[Document]] = field(default_factory=dict)
    """PersistentVolumeClaims, PersistentVolumes and StorageClasses, by the feed's kind."""
    devices: dict[str, list[Document]] = field(default_factory=dict)
    """ResourceSlices, DeviceClasses and ResourceClaims, by the plural the feed names."""
    ignored: list[str] = field(default_factory=list)
    """Kinds of objects found in files that no decision reads."""
    unreadable: list[str] = field(default_factory=list)
    """Optional kinds the account may not list (``queues.scheduling.gangsched.io``):
    read as absent, and said so."""

    def add(self, obj: Document) -> None:
        kind, api_version = obj.get("kind"), obj.get("apiVersion", "")
        if kind == "List":
            for item in obj.get("items") or []:
                self.add(item)
        elif kind == "Node":
            self.nodes.append(obj)
        elif kind == "Pod":
            self.pods.append(obj)
        elif kind == "Namespace":
            self.namespaces.append(obj)
        elif kind == "PodGroup" and api_version in {f.value for f in Flavor}:
            self.groups.append((Flavor(api_version), obj))
        elif kind == "Queue" and api_version == QUEUE_API:
            self.queues.append(obj)
        elif kind == "Topology" and api_version == QUEUE_API:
            self.topologies.append(obj)
        elif kind == "Workload" and api_version == WORKLOAD_API:
            self.workloads.append(obj)
        elif kind == "Workload" and api_version == KUEUE_API:
            self.kueue_workloads.append(obj)
        elif kind == "CompositePodGroup" and api_version == COMPOSITE_API:
            self.composites.append(obj)
        elif kind == "PriorityClass":
            self.priority_classes.append(obj)
        elif kind == "PodDisruptionBudget":
            self.budgets.append(obj)
        elif kind == "NodePool" and api_version == NODEPOOL_API:
            self.nodepools.append(obj)
        elif kind in STORAGE_KINDS:
            self.storage.setdefault(STORAGE_KINDS[kind], []).append(obj)
        elif kind in DEVICE_KINDS and api_version == RESOURCE_API:
            self.devices.setdefault(DEVICE_KINDS[kind], []).append(obj)
        else:
            self.ignored.append(f"{kind} {object_ref(obj).name or '?'}")

    def extend(self, other: ClusterObjects) -> None:
        self.nodes += other.nodes
        self.pods += other.pods
        self.namespaces += other.namespaces
        self.groups += other.groups
        self.queues += other.queues
        self.topologies += other.topologies
        self.workloads += other.workloads
        self.kueue_workloads += other.kueue_workloads
        self.composites += other.composites
        self.priority_classes += other.priority_classes
        self.budgets += other.budgets
        self.nodepools += other.nodepools
        for kind, documents in other.storage.items():
            self.storage.setdefault(kind, []).extend(documents)
        for plural, found in other.devices.items():
            self.devices.setdefault(plural, []).extend(found)
        self.ignored += other.ignored

    def mirror(self, scheduler_names: frozenset[str]) -> Mirror:
        mirror = Mirror(scheduler_names=scheduler_names)
        feed = Feed(mirror)
        feed.replace("nodes", list(self.nodes))
        feed.replace("priorityclasses", list(self.priority_classes))
        feed.replace("namespaces", list(self.namespaces))
        feed.replace("pods", list(self.pods))
        feed.replace("poddisruptionbudgets", list(self.budgets))
        feed.replace("nodepools", list(self.nodepools))
        for kind, documents in self.storage.items():
            feed.replace(kind, documents)
        for plural in DEVICE_KINDS.values():
            feed.replace(plural, list(self.devices.get(plural, ())))
        for flavor, body in self.groups:
            feed.upsert_group(flavor, body)
        for body in self.queues:
            feed.upsert_queue(body)
        feed.replace("topologies", list(self.topologies))
        for body in self.workloads:
            feed.upsert_workload(body)
        feed.replace("kueueworkloads", list(self.kueue_workloads))
        feed.replace("compositepodgroups", list(self.composites))
        return mirror


# ---- from files -------------------------------------------------------------------


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _complete(obj: Document, index: int, created: float) -> Document:
    """Fill in what the API server would: namespace, uid, creation time, a Ready node.

    Creation times follow the order of the files, a second apart, so the
    gangs of a file are ordered as they would be had they been applied in
    that order.
    """
    done = copy.deepcopy(obj)
    meta = done.setdefault("metadata", {})
    if done.get("kind") not in ("Node", "Queue", "PriorityClass", "PersistentVolume",
                                "StorageClass", "Namespace"):
        meta.setdefault("namespace", "default")
    meta.setdefault("uid", f"file-{index}")
    meta.setdefault("creationTimestamp", _iso(created + index))
    if done.get("kind") == "Node":
        status = done.setdefault("status", {})
        status.setdefault("allocatable", status.get("capacity") or {})
        status.setdefault("conditions", [{"type": "Ready", "status": "True"}])
        done.setdefault("spec", {})
    if done.get("kind") == "Pod":
        done.setdefault("status", {}).setdefault("phase", "Pending")
    if done.get("kind") == "Namespace":
        labels = meta.get("labels") or {}
        meta["labels"] = {**labels, NAME_LABEL: meta.get("name")}
    return done


def _implied_namespaces(objects: ClusterObjects) -> None:
    """A Namespace for every namespace the pods of the files live in that no file
    declares: on a cluster it exists, labelled with its name, and a ``namespaceSelector``
    on that label selects it."""
    declared = {object_ref(ns).name for ns in objects.namespaces}
    for name in dict.fromkeys(object_ref(pod).namespace for pod in objects.pods):
        if name not in declared:
            objects.namespaces.append({"apiVersion": "v1", "kind": "Namespace",
                                       "metadata": {"name": name,
                                                    "labels": {NAME_LABEL: name}}})


def from_files(paths: Sequence[Path], created: float | None = None) -> ClusterObjects:
    objects = ClusterObjects()
    base = float(int(time.time() if created is None else created))
    index = 0
    for path in paths:
        try:
            documents = list(yaml.safe_load_all(path.read_text()))
        except (OSError, yaml.YAMLError) as error:
            raise ObjectsError(f"{path}: {error}") from error
        for document in documents:
            if document is None:
                continue
            if not isinstance(document, dict):
                raise ObjectsError(f"{path}: a document is not an object")
            objects.add(_complete(document, index, base))
            index += 1
    _admit_priorities(objects)
    _implied_namespaces(objects)
    return objects


def _admit_priorities(objects: ClusterObjects) -> None:
    """Give pods without ``spec.priority`` the one the API server's Priority admission would:
    their ``priorityClassName``'s value, else the global default class's, else 0.

    Pods read from files were never admitted; left at 0, a gang that names a high
    class would be ordered below the ones the scheduler puts it above.
    """
    values: dict[str, int] = {}
    default = 0
    for priority_class in objects.priority_classes:
        name = (priority_class.get("metadata") or {}).get("name")
        value = priority_class.get("value")
        if isinstance(name, str) and isinstance(value, int) and not isinstance(value, bool):
            values[name] = value
            if priority_class.get("globalDefault") is True:
                default = value
    for pod in objects.pods:
        spec = pod.get("spec")
        if not isinstance(spec, dict) or spec.get("priority") is not None:
            continue
        name = spec.get("priorityClassName")
        spec["priority"] = values.get(name, default) if isinstance(name, str) else default


# ---- from the API server ------------------------------------------------------------


def current_namespace(api: pykube.HTTPClient) -> str:
    return str(api.config.namespace or "default")


def _list(api: pykube.HTTPClient, version: str, plural: str, optional: bool,
          namespace: str | None = None) -> list[Document]:
    """Every object of a kind (of one namespace), in pages; an optional kind the server
    does not serve is empty."""
    items: list[Document] = []
    params: dict[str, str | int] = {"limit": 500}
    url = plural if namespace is None else f"namespaces/{namespace}/{plural}"
    while True:
        try:
            response = api.get(version=version, url=url, params=params)
        except requests.RequestException as error:
            raise ObjectsError(f"cannot reach the API server at {api.url}: {error}") from error
        if response.status_code == 404 and optional:
            return []
        if response.status_code == 403:
            where = f" in namespace {namespace}" if namespace else " in the cluster"
            raise Forbidden(f"may not list {plural} ({version}){where}: "
                            f"{response.json().get('message', response.text[:200])}")
        if response.status_code >= 400:
            raise ObjectsError(
                f"listing {plural} ({version}) failed: {response.status_code} {response.text[:200]}"
            )
        body = response.json()
        kind = str(body.get("kind", "")).removesuffix("List")
        for item in body.get("items") or []:
            item.setdefault("kind", kind)
            item.setdefault("apiVersion", version)
            items.append(item)
        token = (body.get("metadata") or {}).get("continue")
        if not token:
            return items
        params = {"limit": 500, "continue": token}


def _readable(objects: ClusterObjects, api: pykube.HTTPClient, version: str, plural: str,
              namespace: str | None = None) -> list[Document]:
    """An optional kind; one the account may not list is noted and read as empty."""
    try:
        return _list(api, version, plural, optional=True, namespace=namespace)
    except Forbidden:
        objects.unreadable.append(f"{plural}.{version.split('/')[0]}")
        return []


DEPLOYMENT_LABEL = "app.kubernetes.io/name=gangsched"
"""The label the chart gives gangsched's Deployment."""
NAME_FLAG = "--scheduler-name"
NAME_ENV = "GANGSCHED_SCHEDULER_NAME"


def deployed_scheduler_names(api: pykube.HTTPClient) -> frozenset[str]:
    """The schedulerNames the installed gangsched Deployments serve, from their containers'
    arguments and environment; empty when there is none or the account may not list them."""
    try:
        response = api.get(version="apps/v1", url="deployments",
                           params={"labelSelector": DEPLOYMENT_LABEL})
    except requests.RequestException:
        return frozenset()
    if response.status_code >= 400:
        return frozenset()
    names: set[str] = set()
    for deployment in response.json().get("items") or []:
        template = ((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}
        for container in template.get("containers") or []:
            names.update(_named(container))
    return frozenset(names)


def _named(container: Document) -> list[str]:
    """The ``--scheduler-name`` values a container's arguments (or environment) give."""
    args = [str(a) for a in (*(container.get("command") or ()), *(container.get("args") or ()))]
    names = [arg.split("=", 1)[1] for arg in args if arg.startswith(f"{NAME_FLAG}=")]
    names += [after for before, after in itertools.pairwise(args) if before == NAME_FLAG]
    for env in container.get("env") or []:
        if env.get("name") == NAME_ENV and env.get("value"):
            names += str(env["value"]).split()
    return names


def from_cluster(api: pykube.HTTPClient, namespace: str | None = None) -> ClusterObjects:
    """The whole cluster, or with ``namespace`` that namespace's pods, PodGroups and
    Workloads alone: nothing cluster-scoped and nothing of another namespace, which is
    all a tenant's namespaced Role lets it read."""
    objects = ClusterObjects()
    if namespace is None:
        objects.nodes = _list(api, "v1", "nodes", optional=False)
        objects.priority_classes = _readable(objects, api, "scheduling.k8s.io/v1",
                                             "priorityclasses")
        objects.queues = _readable(objects, api, QUEUE_API, "queues")
        objects.topologies = _readable(objects, api, QUEUE_API, "topologies")
        objects.namespaces = _readable(objects, api, "v1", "namespaces")
        objects.budgets = _readable(objects, api, "policy/v1", "poddisruptionbudgets")
        objects.nodepools = _readable(objects, api, NODEPOOL_API, "nodepools")
        objects.storage["persistentvolumes"] = _readable(objects, api, "v1", "persistentvolumes")
        for plural in ("storageclasses", "csinodes", "volumeattachments", "csidrivers",
                       "csistoragecapacities"):
            objects.storage[plural] = _readable(objects, api, "storage.k8s.io/v1", plural)
        for plural in ("resourceslices", "deviceclasses"):
            objects.devices[plural] = _readable(objects, api, RESOURCE_API, plural)
    objects.devices["resourceclaims"] = _readable(objects, api, RESOURCE_API, "resourceclaims",
                                                  namespace)
    objects.pods = _list(api, "v1", "pods", optional=False, namespace=namespace)
    objects.storage["persistentvolumeclaims"] = _readable(
        objects, api, "v1", "persistentvolumeclaims", namespace)
    for flavor in Flavor:
        objects.groups += [(flavor, o) for o in _readable(objects, api, flavor.value,
                                                         "podgroups", namespace)]
    objects.workloads = _readable(objects, api, WORKLOAD_API, "workloads", namespace)
    objects.kueue_workloads = _readable(objects, api, KUEUE_API, "workloads", namespace)
    objects.composites = _readable(objects, api, COMPOSITE_API, "compositepodgroups", namespace)
    return objects

