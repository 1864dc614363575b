"""A fake DRA driver: GPUs published as ResourceSlices for KWOK nodes, through the API.

A real driver's kubelet plugin publishes one ResourceSlice per node listing
the node's devices with their attributes; the scheduler reads only those
slices and a DeviceClass. This module does the same for fake nodes, so tests,
the demo and benchmarks allocate devices exactly as they would on a cluster
with a real driver, and nothing runs on the nodes.

Each node gets ``per_node`` GPUs (``gpu-0`` ...) with a model, a memory
capacity, a PCIe root and an NVLink clique: ``clique_nodes`` 0 gives each
node two cliques of half its GPUs (``<node>-a``, ``<node>-b``), N > 0 makes
every N consecutive nodes share one clique (a multi-node NVLink domain).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pykube

DRIVER = "gpu.example.com"
DEVICE_CLASS = "gpu.example.com"
"""The DeviceClass that selects every device of the driver."""
API_VERSION = "resource.k8s.io/v1"
PER_NODE = 8
"""GPUs a node's slice lists unless told otherwise."""


@dataclass(frozen=True)
class GpuModel:
    """What every GPU of a node reports."""

    name: str = "H100"
    memory: str = "80Gi"
    driver_version: str = "1.2.0"


def clique_of(node_index: int, node: str, gpu: int, per_node: int, clique_nodes: int) -> str:
    """The NVLink clique a GPU belongs to (see the module docstring)."""
    if clique_nodes > 0:
        return f"clique-{node_index // clique_nodes}"
    return f"{node}-{'a' if gpu < per_node // 2 else 'b'}"


def slice_manifest(
    node: str, node_index: int, *, per_node: int = PER_NODE, clique_nodes: int = 0,
    model: GpuModel | None = None, generation: int = 1,
) -> dict[str, Any]:
    """The ResourceSlice a driver would publish for one node: one pool named after it."""
    model = model or GpuModel()
    devices = []
    for gpu in range(per_node):
        devices.append({
            "name": f"gpu-{gpu}",
            "attributes": {
                "model": {"string": model.name},
                "uuid": {"string": f"GPU-{node}-{gpu}"},
                "index": {"int": gpu},
                "clique": {"string": clique_of(node_index, node, gpu, per_node, clique_nodes)},
                "pcieRoot": {"string": f"pci0000:{gpu // 2:02x}"},
                "driverVersion": {"version": model.driver_version},
            },
            "capacity": {"memory": {"value": model.memory}},
        })
    return {
        "apiVersion": API_VERSION,
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{DRIVER}", "labels": {"gangsched.io/fake-driver": "true"}},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": generation, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def device_class_manifest() -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "DeviceClass",
        "metadata": {"name": DEVICE_CLASS},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
    }


RESOURCE_API = "resource.k8s.io/v1"


def claim_template(namespace: str, name: str, count: int, *, one_clique: bool = False,
                   selector: str | None = None) -> dict[str, Any]:
    """A ResourceClaimTemplate asking ``count`` of the fake GPUs: all of one NVLink clique
    if asked, and only those a CEL ``selector`` accepts if one is given."""
    request: dict[str, Any] = {"deviceClassName": DEVICE_CLASS, "count": count}
    if selector:
        request["selectors"] = [{"cel": {"expression": selector}}]
    devices: dict[str, Any] = {"requests": [{"name": "gpus", "exactly": request}]}
    if one_clique:
        devices["constraints"] = [{"matchAttribute": f"{DRIVER}/clique"}]
    return {"apiVersion": RESOURCE_API, "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"spec": {"devices": devices}}}


def claiming(pod: dict[str, Any], template: str) -> dict[str, Any]:
    """The pod with one claim, made from the template by the resource-claim controller."""
    pod["spec"]["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": template}]
    pod["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpus"}]
    return pod


def _kind(client: pykube.HTTPClient, kind: str) -> type[pykube.objects.APIObject]:
    return pykube.object_factory(client, API_VERSION, kind)  # type: ignore[no-any-return]


def _apply(client: pykube.HTTPClient, kind: str, manifest: dict[str, Any]) -> None:
    """Create the object, or replace its spec when it exists."""
    cls = _kind(client, kind)
    existing = cls.objects(client).get_or_none(name=manifest["metadata"]["name"])
    if existing is None:
        cls(client, manifest).create()
    elif existing.obj.get("spec") != manifest["spec"]:
        existing.obj["spec"] = manifest["spec"]
        existing.update()


def publish(
    client: pykube.HTTPClient, nodes: Sequence[str], *, per_node: int = PER_NODE,
    clique_nodes: int = 0, model: GpuModel | None = None,
) -> None:
    """The DeviceClass, and every node's slice; slices of other nodes of this driver go."""
    _apply(client, "DeviceClass", device_class_manifest())
    wanted = {f"{node}-{DRIVER}" for node in nodes}
    for index, node in enumerate(nodes):
        _apply(client, "ResourceSlice", slice_manifest(
            node, index, per_node=per_node, clique_nodes=clique_nodes, model=model))
    remove(client, keep=wanted)


def remove(client: pykube.HTTPClient, keep: Iterable[str] = ()) -> None:
    """Delete the driver's slices but those named in ``keep``."""
    kept = set(keep)
    slices = _kind(client, "ResourceSlice").objects(client).filter(
        selector={"gangsched.io/fake-driver": "true"})
    for item in slices:
        if item.name not in kept:
            item.delete()
