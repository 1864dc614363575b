"""API objects (plain JSON dicts) turned into core model objects, once, at the edge.

Everything the core reasons about is decided here: a pod's effective request
is computed the way kube-scheduler computes it, quantities become integers,
selectors and tolerations become frozen tuples. After this nothing downstream
re-reads a dict, so a malformed object fails here, with a message naming the
object and the field, and never as a ``KeyError`` deep inside a cycle.

Only :class:`ObjectError` escapes for bad input, whatever its shape: the
shell can then skip (and report) one broken object without a catch-all.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, NoReturn

from gangsched.core.model import (
    Node,
    NodeName,
    Pod,
    PodKey,
    PodPlacementRules,
    SelectorRequirement,
    SelectorTerm,
    Taint,
    Toleration,
)
from gangsched.core.quantity import QuantityError, canonical_amount
from gangsched.core.resources import CPU, MEMORY, PODS, Resources

__all__ = ["ObjectError", "node_from_api", "pod_from_api", "timestamp"]

_TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
_SELECTOR_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"})
_POD_LEVEL_RESOURCES = (CPU, MEMORY)
_ONE_POD = Resources.of({PODS: 1})


class ObjectError(ValueError):
    """An API object the core cannot use; the message names the object and the field."""


def _fail(where: str, message: str) -> NoReturn:
    raise ObjectError(f"{where}: {message}")


def _kind(value: object) -> str:
    return "null" if value is None else type(value).__name__


def _mapping(value: object, where: str, path: str) -> Mapping[str, object]:
    """A JSON object; absent (None) reads as empty, as the API server omits empty maps."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        _fail(where, f"{path} must be an object, not {_kind(value)}")
    for key in value:
        if not isinstance(key, str):
            _fail(where, f"{path} has a non-string key {key!r}")
    return value


def _list(value: object, where: str, path: str) -> list[object] | tuple[object, ...]:
    if value is None:
        return ()
    if not isinstance(value, list | tuple):
        _fail(where, f"{path} must be a list, not {_kind(value)}")
    return value


def _str(value: object, where: str, path: str, default: str | None = None) -> str:
    if value is None and default is not None:
        return default
    if not isinstance(value, str):
        _fail(where, f"{path} must be a string, not {_kind(value)}")
    return value


def _str_map(value: object, where: str, path: str) -> tuple[tuple[str, str], ...]:
    mapping = _mapping(value, where, path)
    pairs = []
    for key, item in mapping.items():
        pairs.append((key, _str(item, where, f"{path}.{key}")))
    return tuple(sorted(pairs))


def _resources(value: object, where: str, what: str) -> Resources:
    """A resource map; ``what`` says whose it is, e.g. "container 'main' requests"."""
    mapping = _mapping(value, where, what)
    amounts: dict[str, int] = {}
    for name, raw in mapping.items():
        if not name:
            _fail(where, f"{what} has an empty resource name")
        if isinstance(raw, bool) or not isinstance(raw, str | int | float):
            _fail(where, f"{what} {name} {raw!r}: not a quantity")
        try:
            amounts[name] = canonical_amount(name, raw)
        except QuantityError as err:
            _fail(where, f"{what} {err}")
    return Resources.of(amounts)


def _metadata(obj: object, kind: str) -> tuple[Mapping[str, object], str, str]:
    """The metadata, namespace and name, checked before anything else so every later
    message can name the object."""
    if not isinstance(obj, Mapping):
        raise ObjectError(f"{kind}: must be an object, not {_kind(obj)}")
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        raise ObjectError(f"{kind}: metadata must be an object, not {_kind(meta)}")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise ObjectError(f"{kind}: metadata.name must be a non-empty string, not {name!r}")
    namespace = meta.get("namespace")
    if namespace is None:
        namespace = "default"
    if not isinstance(namespace, str) or not namespace:
        raise ObjectError(f"{kind} {name}: metadata.namespace must be a non-empty string")
    return meta, namespace, name


# ---------------------------------------------------------------- pods


def pod_from_api(obj: Mapping[str, Any]) -> Pod:
    """A pod as the core sees it.

    ``gang`` is left unset: membership depends on PodGroups the shell
    mirrors, not on the pod alone.
    """
    meta, namespace, name = _metadata(obj, "pod")
    where = f"pod {namespace}/{name}"
    spec = _mapping(obj.get("spec"), where, "spec")
    status = _mapping(obj.get("status"), where, "status")

    priority = spec.get("priority")
    if priority is None:
        priority = 0
    if isinstance(priority, bool) or not isinstance(priority, int):
        _fail(where, f"spec.priority must be an integer, not {_kind(priority)}")

    node_name = spec.get("nodeName")
    if node_name is not None:
        node_name = _str(node_name, where, "spec.nodeName") or None

    phase = status.get("phase")
    if phase is not None:
        phase = _str(phase, where, "status.phase")

    return Pod(
        key=PodKey(f"{namespace}/{name}"),
        requests=_effective_requests(spec, status, where),
        rules=PodPlacementRules(
            node_selector=_str_map(spec.get("nodeSelector"), where, "spec.nodeSelector"),
            required_affinity=_required_affinity(spec, where),
            tolerations=_tolerations(spec, where),
        ),
        node_name=NodeName(node_name) if node_name else None,
        priority=priority,
        created=timestamp(meta.get("creationTimestamp"), where, "metadata.creationTimestamp"),
        terminal=phase in _TERMINAL_PHASES,
        terminating=meta.get("deletionTimestamp") is not None,
        gates=_gates(spec, where),
        preempts=spec.get("preemptionPolicy") != "Never",
    )


def _gates(spec: Mapping[str, object], where: str) -> tuple[str, ...]:
    """The names of the pod's scheduling gates (Kueue and others hold pods back by them)."""
    names = []
    for i, gate in enumerate(_list(spec.get("schedulingGates"), where, "spec.schedulingGates")):
        entry = _mapping(gate, where, f"spec.schedulingGates[{i}]")
        names.append(_str(entry.get("name"), where, f"spec.schedulingGates[{i}].name"))
    return tuple(names)


def _effective_requests(
    spec: Mapping[str, object], status: Mapping[str, object], where: str
) -> Resources:
    """What the pod takes from a node, computed as kube-scheduler's NodeResourcesFit does.

    Regular containers run together, so they add up. Init containers run one
    at a time before them, so the pod needs the largest of them, except that
    restartable (sidecar) init containers keep running: each adds to the
    total and to every init container that starts after it. Pod-level
    requests (cpu, memory) replace the container sum when set; overhead and
    one pod slot come on top. If we counted less than kube-scheduler does, we
    would bind pods the kubelet then rejects.
    """
    actual = _status_requests(status, where)
    resizing_infeasible = _resize_infeasible(status, where)

    total = Resources.zero()
    for cname, container in _containers(spec, "containers", where):
        total += _container_requests(container, cname, actual, resizing_infeasible, where)

    sidecars = Resources.zero()
    largest_init = Resources.zero()
    for cname, container in _containers(spec, "initContainers", where):
        policy = container.get("restartPolicy")
        if policy is not None:
            policy = _str(policy, where, f"init container '{cname}' restartPolicy")
        if policy == "Always":
            requests = _container_requests(container, cname, actual, resizing_infeasible, where)
            total += requests
            sidecars += requests
            during_init = sidecars
        else:
            requests = _container_requests(container, cname, {}, False, where)
            during_init = requests + sidecars
        largest_init = largest_init.max_each(during_init)
    total = total.max_each(largest_init)

    pod_resources = _mapping(spec.get("resources"), where, "spec.resources")
    pod_level = _resources(pod_resources.get("requests"), where, "pod requests")
    if any(pod_level.get(name) for name in _POD_LEVEL_RESOURCES):
        amounts = dict(total.amounts)
        for name in _POD_LEVEL_RESOURCES:
            if name in pod_level.amounts:
                amounts[name] = pod_level.get(name)
        total = Resources.of(amounts)

    return total + _resources(spec.get("overhead"), where, "spec.overhead") + _ONE_POD


def _containers(
    spec: Mapping[str, object], field: str, where: str
) -> list[tuple[str, Mapping[str, object]]]:
    found = []
    for index, item in enumerate(_list(spec.get(field), where, f"spec.{field}")):
        container = _mapping(item, where, f"spec.{field}[{index}]")
        cname = _str(container.get("name"), where, f"spec.{field}[{index}].name", f"#{index}")
        found.append((cname, container))
    return found


def _container_requests(
    container: Mapping[str, object],
    cname: str,
    actual: Mapping[str, tuple[Resources, Resources]],
    resizing_infeasible: bool,
    where: str,
) -> Resources:
    """A container's requests; a resource with only a limit requests the limit, as
    API defaulting makes it. A container resized in place counts at the larger of
    what it asks and what it was given, as kube-scheduler does."""
    resources = _mapping(container.get("resources"), where, f"container '{cname}' resources")
    limits = _mapping(resources.get("limits"), where, f"container '{cname}' limits")
    requests = _mapping(resources.get("requests"), where, f"container '{cname}' requests")
    merged = {**limits, **requests}
    asked = _resources(merged, where, f"container '{cname}' requests")
    if cname not in actual:
        return asked
    running, allocated = actual[cname]
    given = running.max_each(allocated)
    return given if resizing_infeasible else asked.max_each(given)


def _status_requests(
    status: Mapping[str, object], where: str
) -> dict[str, tuple[Resources, Resources]]:
    """Per container: the requests the runtime applied and the ones the kubelet allocated."""
    found: dict[str, tuple[Resources, Resources]] = {}
    for field in ("containerStatuses", "initContainerStatuses"):
        for index, item in enumerate(_list(status.get(field), where, f"status.{field}")):
            entry = _mapping(item, where, f"status.{field}[{index}]")
            if entry.get("resources") is None and entry.get("allocatedResources") is None:
                continue
            cname = _str(entry.get("name"), where, f"status.{field}[{index}].name")
            applied = _mapping(entry.get("resources"), where, f"status of '{cname}' resources")
            found[cname] = (
                _resources(applied.get("requests"), where, f"status of '{cname}' requests"),
                _resources(
                    entry.get("allocatedResources"), where, f"status of '{cname}' allocated"
                ),
            )
    return found


def _resize_infeasible(status: Mapping[str, object], where: str) -> bool:
    if status.get("resize") == "Infeasible":
        return True
    for index, item in enumerate(_list(status.get("conditions"), where, "status.conditions")):
        condition = _mapping(item, where, f"status.conditions[{index}]")
        if condition.get("type") == "PodResizePending" and condition.get("reason") == "Infeasible":
            return True
    return False


def _required_affinity(spec: Mapping[str, object], where: str) -> tuple[SelectorTerm, ...]:
    affinity = _mapping(spec.get("affinity"), where, "spec.affinity")
    node_affinity = _mapping(affinity.get("nodeAffinity"), where, "spec.affinity.nodeAffinity")
    path = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is None:
        return ()
    selector = _mapping(required, where, path)
    items = _list(selector.get("nodeSelectorTerms"), where, f"{path}.nodeSelectorTerms")
    if not items:
        # The API server rejects this; reading it as "no restriction" would
        # place the pod anywhere, the opposite of what its author meant.
        _fail(where, f"{path}.nodeSelectorTerms must not be empty")
    terms = []
    for index, item in enumerate(items):
        term_path = f"{path}.nodeSelectorTerms[{index}]"
        term = _mapping(item, where, term_path)
        terms.append(
            SelectorTerm(
                match_expressions=_requirements(
                    term.get("matchExpressions"), where, f"{term_path}.matchExpressions"
                ),
                match_fields=_requirements(
                    term.get("matchFields"), where, f"{term_path}.matchFields"
                ),
            )
        )
    return tuple(terms)


def _requirements(value: object, where: str, path: str) -> tuple[SelectorRequirement, ...]:
    found = []
    for index, item in enumerate(_list(value, where, path)):
        entry = _mapping(item, where, f"{path}[{index}]")
        operator = _str(entry.get("operator"), where, f"{path}[{index}].operator")
        if operator not in _SELECTOR_OPERATORS:
            _fail(where, f"{path}[{index}].operator {operator!r} is not a selector operator")
        values = tuple(
            _str(v, where, f"{path}[{index}].values[{i}]")
            for i, v in enumerate(_list(entry.get("values"), where, f"{path}[{index}].values"))
        )
        found.append(
            SelectorRequirement(
                key=_str(entry.get("key"), where, f"{path}[{index}].key"),
                operator=operator,
                values=values,
            )
        )
    return tuple(found)


def _tolerations(spec: Mapping[str, object], where: str) -> tuple[Toleration, ...]:
    found = []
    for index, item in enumerate(_list(spec.get("tolerations"), where, "spec.tolerations")):
        path = f"spec.tolerations[{index}]"
        entry = _mapping(item, where, path)
        found.append(
            Toleration(
                key=_str(entry.get("key"), where, f"{path}.key", ""),
                # An empty operator means Equal in the API.
                operator=_str(entry.get("operator"), where, f"{path}.operator", "") or "Equal",
                value=_str(entry.get("value"), where, f"{path}.value", ""),
                effect=_str(entry.get("effect"), where, f"{path}.effect", ""),
            )
        )
    return tuple(found)


def timestamp(value: object, where: str, path: str) -> float:
    """RFC 3339 time as seconds since the epoch; absent reads as 0 (oldest)."""
    if value is None:
        return 0.0
    text = _str(value, where, path)
    try:
        moment = datetime.fromisoformat(text)
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return moment.timestamp()
    except (ValueError, OverflowError):
        _fail(where, f"{path} {text!r} is not an RFC 3339 time")


# ---------------------------------------------------------------- nodes


def node_from_api(obj: Mapping[str, Any]) -> Node:
    """A node as the core sees it: what it offers and who may land on it.

    A node reports Ready only through its Ready condition; a node with no
    such condition has never been seen healthy and is treated as not ready.
    """
    _, _, name = _metadata(obj, "node")
    where = f"node {name}"
    meta = _mapping(obj.get("metadata"), where, "metadata")
    spec = _mapping(obj.get("spec"), where, "spec")
    status = _mapping(obj.get("status"), where, "status")

    unschedulable = spec.get("unschedulable")
    if unschedulable is None:
        unschedulable = False
    if not isinstance(unschedulable, bool):
        _fail(where, f"spec.unschedulable must be a boolean, not {_kind(unschedulable)}")

    taints = []
    for index, item in enumerate(_list(spec.get("taints"), where, "spec.taints")):
        path = f"spec.taints[{index}]"
        entry = _mapping(item, where, path)
        taints.append(
            Taint(
                key=_str(entry.get("key"), where, f"{path}.key"),
                value=_str(entry.get("value"), where, f"{path}.value", ""),
                effect=_str(entry.get("effect"), where, f"{path}.effect"),
            )
        )

    ready = False
    for index, item in enumerate(_list(status.get("conditions"), where, "status.conditions")):
        condition = _mapping(item, where, f"status.conditions[{index}]")
        if condition.get("type") == "Ready":
            ready = condition.get("status") == "True"

    return Node(
        name=NodeName(name),
        allocatable=_resources(status.get("allocatable"), where, "status.allocatable"),
        labels=_str_map(meta.get("labels"), where, "metadata.labels"),
        taints=tuple(taints),
        unschedulable=unschedulable,
        ready=ready,
    )
