"""ResourceSlices, DeviceClasses and ResourceClaims (``resource.k8s.io/v1``) as the core
sees them, read once at the edge.

A slice that cannot be read offers no device and says why on its node; a
claim whose requests are of a kind this version does not know keeps the
problem in ``Claim.error``, so its pod waits naming it rather than be
allocated half of what it asked.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from gangsched.core.dra.devices import (
    AllocatedDevice,
    Allocation,
    AttributeValue,
    Claim,
    ClaimKey,
    ClaimRequest,
    Device,
    DeviceClassSpec,
    DeviceConfig,
    DeviceRef,
    MatchAttribute,
    Request,
    SemVer,
)
from gangsched.core.dra.extended import CLAIM_ANNOTATION
from gangsched.core.kubeobjects.fields import ObjectError
from gangsched.core.model.objects import (
    NodeName,
    SelectorRequirement,
    SelectorTerm,
    Taint,
    Toleration,
)
from gangsched.core.model.quantity import QuantityError, parse_quantity

__all__ = [
    "SliceDevices",
    "allocation_to_api",
    "device_class_from_api",
    "resource_claim_from_api",
    "slice_from_api",
]

SliceDevices = tuple[NodeName | None, tuple[Device, ...]]
"""A slice's node (None: every node) and its devices."""


def _map(value: object, where: str) -> Mapping[str, object]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ObjectError(f"{where} must be an object")
    return value


def _items(value: object, where: str) -> list[object]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ObjectError(f"{where} must be a list")
    return value


def _text(value: object, where: str, default: str | None = None) -> str:
    if value is None and default is not None:
        return default
    if not isinstance(value, str):
        raise ObjectError(f"{where} must be a string")
    return value


def _name(obj: object, kind: str) -> tuple[Mapping[str, object], str]:
    meta = _map(_map(obj, kind).get("metadata"), f"{kind} metadata")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise ObjectError(f"{kind}: metadata.name must be a non-empty string")
    return meta, name


def _qualified(name: str, driver: str) -> str:
    return name if "/" in name else f"{driver}/{name}"


def _attribute(raw: object, where: str) -> AttributeValue:
    value = _map(raw, where)
    if len(value) != 1:
        raise ObjectError(f"{where} must have exactly one of bool, int, string, version")
    kind, item = next(iter(value.items()))
    if kind == "bool" and isinstance(item, bool):
        return item
    if kind == "int" and isinstance(item, int) and not isinstance(item, bool):
        return item
    if kind == "string" and isinstance(item, str):
        return item
    if kind == "version" and isinstance(item, str):
        return SemVer(item)
    raise ObjectError(f"{where}: {kind} {item!r} is not a device attribute value")


def _taints(raw: object, where: str) -> tuple[Taint, ...]:
    found = []
    for index, item in enumerate(_items(raw, where)):
        taint = _map(item, f"{where}[{index}]")
        found.append(Taint(_text(taint.get("key"), f"{where}[{index}].key"),
                           _text(taint.get("value"), f"{where}[{index}].value", ""),
                           _text(taint.get("effect"), f"{where}[{index}].effect")))
    return tuple(found)


def _device(raw: object, driver: str, pool: str, node: NodeName | None, where: str) -> Device:
    device = _map(raw, where)
    name = _text(device.get("name"), f"{where}.name")
    attributes = tuple(sorted(
        (_qualified(key, driver), _attribute(value, f"{where}.attributes.{key}"))
        for key, value in _map(device.get("attributes"), f"{where}.attributes").items()
    ))
    capacity = []
    for key, value in _map(device.get("capacity"), f"{where}.capacity").items():
        amount = _map(value, f"{where}.capacity.{key}").get("value")
        try:
            capacity.append((_qualified(key, driver), parse_quantity(str(amount))))
        except QuantityError as error:
            raise ObjectError(f"{where}.capacity.{key}: {error}") from error
    return Device(DeviceRef(driver, pool, name), node, attributes,
                  tuple(sorted(capacity)), _taints(device.get("taints"), f"{where}.taints"))


def slice_from_api(obj: Mapping[str, object]) -> SliceDevices:
    """A ResourceSlice's node and devices; raises ObjectError naming what is wrong.

    Slices for a node selector (not one node, not every node) offer nothing
    here: which nodes they reach is not worked out yet, and offering them
    everywhere could allocate a device a node cannot reach. Nor do partitions
    consuming shared counters, or devices with binding conditions (see
    ``_UNOFFERED``).
    """
    _, name = _name(obj, "ResourceSlice")
    where = f"ResourceSlice {name}"
    spec = _map(obj.get("spec"), f"{where}: spec")
    driver = _text(spec.get("driver"), f"{where}: spec.driver")
    pool = _text(_map(spec.get("pool"), f"{where}: spec.pool").get("name"),
                 f"{where}: spec.pool.name")
    node_name = spec.get("nodeName")
    node = NodeName(_text(node_name, f"{where}: spec.nodeName")) if node_name else None
    if node is None and spec.get("allNodes") is not True:
        return None, ()
    devices = tuple(_device(item, driver, pool, node, f"{where}: spec.devices[{index}]")
                    for index, item in enumerate(_items(spec.get("devices"),
                                                        f"{where}: spec.devices"))
                    if not _unoffered(item))
    return node, devices


_UNOFFERED = ("consumesCounters", "bindingConditions")
"""Device fields whose rules are not applied here: a partition that consumes shared
counters (two partitions of one GPU could overcommit it), and a device that must
report conditions before its pod may be bound. Such devices are not offered, so a
claim that needs them waits, short of devices, instead of being given one wrongly."""


def _unoffered(raw: object) -> bool:
    return isinstance(raw, Mapping) and any(raw.get(field) for field in _UNOFFERED)


def _selectors(raw: object, where: str) -> tuple[str, ...]:
    found = []
    for index, item in enumerate(_items(raw, where)):
        cel = _map(_map(item, f"{where}[{index}]").get("cel"), f"{where}[{index}].cel")
        found.append(_text(cel.get("expression"), f"{where}[{index}].cel.expression"))
    return tuple(found)


def _configs(raw: object, where: str, source: str) -> tuple[DeviceConfig, ...]:
    """Opaque driver configuration entries (a kind of configuration this version does not
    know raises ObjectError: allocating without it could misconfigure the devices)."""
    found = []
    for index, item in enumerate(_items(raw, where)):
        entry = _map(item, f"{where}[{index}]")
        opaque = _map(entry.get("opaque"), f"{where}[{index}].opaque")
        if not opaque:
            raise ObjectError(f"{where}[{index}]: no opaque configuration (a newer kind?)")
        requests = tuple(str(r) for r in _items(entry.get("requests"),
                                                f"{where}[{index}].requests"))
        found.append(DeviceConfig(
            _text(opaque.get("driver"), f"{where}[{index}].opaque.driver"),
            json.dumps(opaque.get("parameters"), sort_keys=True), requests, source))
    return tuple(found)


def device_class_from_api(obj: Mapping[str, object]) -> DeviceClassSpec:
    meta, name = _name(obj, "DeviceClass")
    spec = _map(obj.get("spec"), f"DeviceClass {name}: spec")
    extended = spec.get("extendedResourceName")
    return DeviceClassSpec(name, _selectors(spec.get("selectors"), f"DeviceClass {name}: "
                                            "spec.selectors"),
                           extended if isinstance(extended, str) and extended else None,
                           _configs(spec.get("config"), f"DeviceClass {name}: spec.config",
                                    "FromClass"),
                           str(meta.get("creationTimestamp") or ""))


def _tolerations(raw: object, where: str) -> tuple[Toleration, ...]:
    found = []
    for index, item in enumerate(_items(raw, where)):
        entry = _map(item, f"{where}[{index}]")
        found.append(Toleration(
            _text(entry.get("key"), f"{where}[{index}].key", ""),
            _text(entry.get("operator"), f"{where}[{index}].operator", "") or "Equal",
            _text(entry.get("value"), f"{where}[{index}].value", ""),
            _text(entry.get("effect"), f"{where}[{index}].effect", "")))
    return tuple(found)


def _request(raw: Mapping[str, object], name: str, where: str) -> Request:
    mode = _text(raw.get("allocationMode"), f"{where}.allocationMode", "ExactCount")
    if mode not in ("ExactCount", "All"):
        raise ObjectError(f"{where}: allocationMode {mode!r} is not known")
    count = raw.get("count", 1)
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ObjectError(f"{where}: count must be a positive integer")
    return Request(
        name=name,
        device_class=_text(raw.get("deviceClassName"), f"{where}.deviceClassName"),
        selectors=_selectors(raw.get("selectors"), f"{where}.selectors"),
        all_devices=mode == "All",
        count=count,
        admin_access=raw.get("adminAccess") is True,
        tolerations=_tolerations(raw.get("tolerations"), f"{where}.tolerations"),
    )


def _claim_request(raw: object, where: str) -> ClaimRequest:
    entry = _map(raw, where)
    name = _text(entry.get("name"), f"{where}.name")
    exactly = entry.get("exactly")
    if exactly is not None:
        return ClaimRequest(name, (_request(_map(exactly, where), name, f"{where}.exactly"),))
    alternatives = []
    for index, item in enumerate(_items(entry.get("firstAvailable"), f"{where}.firstAvailable")):
        sub = _map(item, f"{where}.firstAvailable[{index}]")
        sub_name = _text(sub.get("name"), f"{where}.firstAvailable[{index}].name")
        alternatives.append(_request(sub, f"{name}/{sub_name}",
                                     f"{where}.firstAvailable[{index}]"))
    if not alternatives:
        raise ObjectError(f"{where}: neither exactly nor firstAvailable (a newer kind of "
                          f"request?)")
    return ClaimRequest(name, tuple(alternatives))


def _allocation(raw: object, where: str) -> Allocation | None:
    if raw is None:
        return None
    allocation = _map(raw, where)
    devices = []
    results = _items(_map(allocation.get("devices"), f"{where}.devices").get("results"),
                     f"{where}.devices.results")
    for index, item in enumerate(results):
        result = _map(item, f"{where}.devices.results[{index}]")
        devices.append(AllocatedDevice(
            _text(result.get("request"), f"{where}.devices.results[{index}].request", ""),
            DeviceRef(_text(result.get("driver"), f"{where}.results[{index}].driver"),
                      _text(result.get("pool"), f"{where}.results[{index}].pool"),
                      _text(result.get("device"), f"{where}.results[{index}].device")),
            result.get("adminAccess") is True))
    node, terms = _node_selector(allocation.get("nodeSelector"), f"{where}.nodeSelector")
    return Allocation(tuple(devices), node, terms)


def _node_selector(raw: object, where: str) -> tuple[NodeName | None, tuple[SelectorTerm, ...]]:
    """One node when the selector names exactly one by ``metadata.name``, else its terms."""
    terms = []
    for index, item in enumerate(_items(_map(raw, where).get("nodeSelectorTerms"),
                                        f"{where}.nodeSelectorTerms")):
        term = _map(item, f"{where}.nodeSelectorTerms[{index}]")
        parts = []
        for field in ("matchExpressions", "matchFields"):
            requirements = []
            for number, entry in enumerate(_items(term.get(field), f"{where}.{field}")):
                requirement = _map(entry, f"{where}.{field}[{number}]")
                requirements.append(SelectorRequirement(
                    _text(requirement.get("key"), f"{where}.{field}[{number}].key"),
                    _text(requirement.get("operator"), f"{where}.{field}[{number}].operator"),
                    tuple(str(v) for v in _items(requirement.get("values"), where))))
            parts.append(tuple(requirements))
        terms.append(SelectorTerm(parts[0], parts[1]))
    if len(terms) == 1 and not terms[0].match_expressions and len(terms[0].match_fields) == 1:
        only = terms[0].match_fields[0]
        if only.key == "metadata.name" and only.operator == "In" and len(only.values) == 1:
            return NodeName(only.values[0]), ()
    return None, tuple(terms)


def resource_claim_from_api(obj: Mapping[str, object]) -> Claim:
    """A ResourceClaim; a request or constraint of an unknown kind is kept as the claim's
    error (the pod waits naming it), a malformed object raises ObjectError."""
    meta, name = _name(obj, "ResourceClaim")
    namespace = _text(meta.get("namespace"), "ResourceClaim metadata.namespace", "default")
    where = f"ResourceClaim {namespace}/{name}"
    devices = _map(_map(obj.get("spec"), f"{where}: spec").get("devices"),
                   f"{where}: spec.devices")
    status = _map(obj.get("status"), f"{where}: status")
    error = None
    try:
        requests = tuple(_claim_request(item, f"spec.devices.requests[{index}]")
                         for index, item in enumerate(_items(devices.get("requests"),
                                                             "spec.devices.requests")))
    except ObjectError as problem:
        requests, error = (), str(problem)
    constraints = []
    for index, item in enumerate(_items(devices.get("constraints"), "spec.devices.constraints")):
        constraint = _map(item, f"spec.devices.constraints[{index}]")
        attribute = constraint.get("matchAttribute")
        if not isinstance(attribute, str):
            error = error or f"spec.devices.constraints[{index}] is not a matchAttribute"
            continue
        asked = tuple(str(r) for r in _items(constraint.get("requests"), "requests"))
        constraints.append(MatchAttribute(attribute, asked))
    try:
        config = _configs(devices.get("config"), "spec.devices.config", "FromClaim")
    except ObjectError as problem:
        config, error = (), error or str(problem)
    reserved = tuple(
        str(_map(item, f"{where}: status.reservedFor").get("uid", ""))
        for item in _items(status.get("reservedFor"), f"{where}: status.reservedFor"))
    return Claim(
        key=ClaimKey(f"{namespace}/{name}"),
        extended_for=_extended_for(meta),
        uid=str(meta.get("uid") or ""),
        resource_version=str(meta.get("resourceVersion") or ""),
        requests=requests,
        constraints=tuple(constraints),
        allocation=_allocation(status.get("allocation"), f"{where}: status.allocation"),
        reserved_for=reserved,
        error=error,
        deleting=meta.get("deletionTimestamp") is not None,
        config=config,
    )


def _extended_for(meta: Mapping[str, object]) -> str:
    """The UID of the pod a claim was made for as its extended resource claim: marked so,
    and controlled by the pod; else empty."""
    annotations = _map(meta.get("annotations"), "ResourceClaim metadata.annotations")
    if annotations.get(CLAIM_ANNOTATION) != "true":
        return ""
    for item in _items(meta.get("ownerReferences"), "ResourceClaim metadata.ownerReferences"):
        owner = _map(item, "ResourceClaim metadata.ownerReferences[]")
        if owner.get("kind") == "Pod" and owner.get("controller") is True:
            return str(owner.get("uid") or "")
    return ""


def _config_to_api(config: DeviceConfig) -> dict[str, object]:
    body: dict[str, object] = {
        "source": config.source,
        "opaque": {"driver": config.driver, "parameters": json.loads(config.parameters)},
    }
    if config.requests:
        body["requests"] = list(config.requests)
    return body


def allocation_to_api(allocation: Allocation) -> dict[str, object]:
    """``status.allocation`` as the API takes it (the inverse of what is read above)."""
    results = []
    for allocated in allocation.devices:
        result: dict[str, object] = {
            "request": allocated.request, "driver": allocated.device.driver,
            "pool": allocated.device.pool, "device": allocated.device.name,
        }
        if allocated.admin_access:
            result["adminAccess"] = True
        results.append(result)
    devices: dict[str, object] = {"results": results}
    if allocation.config:
        devices["config"] = [_config_to_api(config) for config in allocation.config]
    body: dict[str, object] = {"devices": devices}
    if allocation.node is not None:
        body["nodeSelector"] = {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [allocation.node]}]}]}
    return body
