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
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, NoReturn

from gangsched.core.disks import disk_labels, disk_terms, inline_disks
from gangsched.core.intree import from_source
from gangsched.core.model import (
    DEFAULT_QUEUE,
    AttachedVolume,
    Claim,
    ClaimKey,
    ClaimRef,
    CsiDriver,
    CsiNode,
    DisruptionBudget,
    ExtendedRequest,
    Flavor,
    GangKey,
    GroupClaim,
    GroupSpec,
    Namespace,
    NamespaceSelector,
    Node,
    NodeName,
    Pod,
    PodAffinityTerm,
    PodClaim,
    PodKey,
    PodPlacementRules,
    Policy,
    PreferredTerm,
    QueueName,
    QueueSpec,
    SelectorRequirement,
    SelectorTerm,
    SpreadConstraint,
    StorageCapacity,
    StorageClassSpec,
    Taint,
    Toleration,
    Volume,
    VolumeAttachmentSpec,
    gang_key,
    solo_gang_key,
)
from gangsched.core.ports import ANY_ADDRESS, HostPort, port_labels, port_terms
from gangsched.core.quantity import QuantityError, canonical_amount
from gangsched.core.resources import (
    CPU,
    MEMORY,
    PODS,
    Capability,
    Resources,
    device_backable,
)
from gangsched.core.runtimes import read_runtime

__all__ = [
    "COSCHEDULING_LABEL", "GROUP_LABEL", "POLICY_ANNOTATION", "PREEMPTIBLE_ANNOTATIONS",
    "QUEUE_ANNOTATION", "VOLCANO_ANNOTATION", "VOLCANO_QUEUE_ANNOTATION",
    "FieldProblem", "GroupRecord", "ObjectError", "ObjectRef", "PodHeader", "PodRecord",
    "PriorityClass", "QueueObject", "RawObject", "WorkloadQueue",
    "claim_from_api", "csi_driver_from_api", "csi_node_from_api", "disruption_budget_from_api",
    "group_from_api", "group_key_of",
    "group_name_of", "group_record_from_api", "namespace_from_api",
    "native_group_name", "node_from_api", "object_name", "object_ref", "pod_from_api", "pod_header",
    "pod_record_from_api", "priority_class_from_api", "queue_from_api",
    "storage_capacity_from_api", "storage_class_from_api",
    "timestamp", "volume_attachment_from_api", "volume_from_api", "workload_queue_from_api",
]

RawObject = Mapping[str, Any]
"""An API object as JSON decodes it: what watches, lists and files hand in, read only here."""

GROUP_LABEL = "scheduling.gangsched.io/pod-group"
COSCHEDULING_LABEL = "scheduling.x-k8s.io/pod-group"
VOLCANO_ANNOTATION = "scheduling.k8s.io/group-name"
QUEUE_ANNOTATION = "scheduling.gangsched.io/queue"
"""Picks the Queue of a native PodGroup (or of its Workload): the native API has no queue."""
VOLCANO_QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
"""Volcano's queue annotation, honoured where a PodGroup's own field names no queue."""
PREEMPTIBLE_ANNOTATIONS = ("scheduling.gangsched.io/preemptible", "volcano.sh/preemptable")
"""``"false"`` on a PodGroup keeps its gang from ever being evicted for another."""
POLICY_ANNOTATION = "scheduling.gangsched.io/policy"
"""On a PodGroup: ``binpack`` or ``spread`` instead of the scheduler's policy."""

_TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
_SELECTOR_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"})
_POD_LEVEL_RESOURCES = (CPU, MEMORY)
"""With every ``hugepages-*``, what pod-level requests may set (IsSupportedPodLevelResource)."""
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

    labels = _str_map(meta.get("labels"), where, "metadata.labels")
    affinity = _pod_terms(spec, "podAffinity", labels, namespace, where)
    anti_affinity = _pod_terms(spec, "podAntiAffinity", labels, namespace, where)
    ports = _host_ports(spec, where)
    disks = inline_disks(
        _mapping(item, where, f"spec.volumes[{index}]")
        for index, item in enumerate(_list(spec.get("volumes"), where, "spec.volumes")))
    annotations = _annotations(meta)
    runtime, runtime_problem = read_runtime(annotations)
    deadline = spec.get("activeDeadlineSeconds")
    started = status.get("startTime")
    queue = annotations.get(QUEUE_ANNOTATION)
    return Pod(
        key=PodKey(f"{namespace}/{name}"),
        requests=_effective_requests(spec, status, where),
        rules=PodPlacementRules(
            node_selector=_str_map(spec.get("nodeSelector"), where, "spec.nodeSelector"),
            required_affinity=_required_affinity(spec, where),
            tolerations=_tolerations(spec, where),
            features=_required_features(spec),
        ),
        node_name=NodeName(node_name) if node_name else None,
        priority=priority,
        created=timestamp(meta.get("creationTimestamp"), where, "metadata.creationTimestamp"),
        terminal=phase in _TERMINAL_PHASES,
        terminating=meta.get("deletionTimestamp") is not None,
        gates=_gates(spec, where),
        queue=QueueName(queue) if queue else None,
        preempts=spec.get("preemptionPolicy") != "Never",
        labels=labels + port_labels(ports) + disk_labels(disks),
        anti_affinity=anti_affinity + port_terms(ports) + disk_terms(disks),
        affinity=affinity,
        spread=_spread(spec, labels, where),
        preferred=_preferred_terms(spec, labels, namespace, where),
        soft_spread=_spread(spec, labels, where, soft=True),
        claims=_claims(spec, where),
        resource_claims=_pod_claims(spec, status, namespace, where),
        uid=str(meta.get("uid") or ""),
        extended_requests=_extended_requests(spec, where),
        inline_volumes=_inline_volumes(spec, where),
        expected_runtime=runtime,
        active_deadline=(float(_positive(deadline, where, "spec.activeDeadlineSeconds", None))
                         if deadline is not None else None),
        started=timestamp(started, where, "status.startTime") if started else None,
        runtime_problem=runtime_problem,
    )


def _extended_requests(spec: Mapping[str, object], where: str) -> tuple[ExtendedRequest, ...]:
    """Each container's requests of resources a DeviceClass could serve, with the places
    that name the requests of the claim made for them (see core.dra.extended)."""
    found = []
    index = 0
    for field in ("initContainers", "containers"):
        for cname, container in _containers(spec, field, where):
            path = f"container '{cname}'"
            resources = _mapping(container.get("resources"), where, f"{path} resources")
            merged = {**_mapping(resources.get("limits"), where, f"{path} limits"),
                      **_mapping(resources.get("requests"), where, f"{path} requests")}
            names = sorted(merged)
            for slot, name in enumerate(names):
                if not device_backable(name):
                    continue
                amount = _resources({name: merged[name]}, where, f"{path} requests").get(name)
                if amount:
                    found.append(ExtendedRequest(
                        cname, index, name, slot, amount,
                        init=field == "initContainers"
                        and container.get("restartPolicy") != "Always"))
            index += 1
    return tuple(found)


def _claims(spec: Mapping[str, object], where: str) -> tuple[ClaimRef, ...]:
    """The volumes a PersistentVolumeClaim backs: ``persistentVolumeClaim`` names its
    claim; a generic ``ephemeral`` volume's claim is ``<pod>-<volume>``."""
    found = []
    for index, item in enumerate(_list(spec.get("volumes"), where, "spec.volumes")):
        path = f"spec.volumes[{index}]"
        volume = _mapping(item, where, path)
        claim = volume.get("persistentVolumeClaim")
        if claim is not None:
            name = _mapping(claim, where, f"{path}.persistentVolumeClaim").get("claimName")
            found.append(ClaimRef(_str(name, where, f"{path}.persistentVolumeClaim.claimName")))
        elif volume.get("ephemeral") is not None:
            found.append(ClaimRef(_str(volume.get("name"), where, f"{path}.name"), ephemeral=True))
    return tuple(found)


def _inline_volumes(spec: Mapping[str, object], where: str) -> tuple[AttachedVolume, ...]:
    """The pod's inline in-tree volumes that count as a CSI driver's (core.intree)."""
    found = []
    for index, item in enumerate(_list(spec.get("volumes"), where, "spec.volumes")):
        volume = from_source(_mapping(item, where, f"spec.volumes[{index}]"))
        if volume is not None:
            found.append(volume)
    return tuple(found)


def _pod_claims(
    spec: Mapping[str, object], status: Mapping[str, object], namespace: str, where: str
) -> tuple[PodClaim, ...]:
    """``spec.resourceClaims``, each with the claim it names; a claim from a template is
    named in ``status.resourceClaimStatuses`` once the resource-claim controller made it."""
    made: dict[str, str] = {}
    path = "status.resourceClaimStatuses"
    for index, item in enumerate(_list(status.get("resourceClaimStatuses"), where, path)):
        entry = _mapping(item, where, f"{path}[{index}]")
        claim = entry.get("resourceClaimName")
        if isinstance(claim, str) and claim:
            made[_str(entry.get("name"), where, f"{path}[{index}].name")] = claim
    found = []
    for index, item in enumerate(_list(spec.get("resourceClaims"), where, "spec.resourceClaims")):
        path = f"spec.resourceClaims[{index}]"
        entry = _mapping(item, where, path)
        name = _str(entry.get("name"), where, f"{path}.name")
        direct = entry.get("resourceClaimName")
        template = entry.get("resourceClaimTemplateName")
        if isinstance(direct, str) and direct:
            found.append(PodClaim(name, ClaimKey(f"{namespace}/{direct}")))
        elif isinstance(template, str) and template:
            claim = made.get(name)
            found.append(PodClaim(name, ClaimKey(f"{namespace}/{claim}") if claim else None,
                                  template))
        else:
            _fail(where, f"{path} names neither a claim nor a template")
    return tuple(found)


def _pod_terms(
    spec: Mapping[str, object], kind: str, labels: tuple[tuple[str, str], ...], namespace: str,
    where: str,
) -> tuple[PodAffinityTerm, ...]:
    """The pod's required ``podAffinity`` or ``podAntiAffinity`` terms, as the pods they select."""
    path = f"spec.affinity.{kind}.requiredDuringSchedulingIgnoredDuringExecution"
    affinity = _mapping(spec.get("affinity"), where, "spec.affinity")
    terms_of = _mapping(affinity.get(kind), where, f"spec.affinity.{kind}")
    required = terms_of.get("requiredDuringSchedulingIgnoredDuringExecution")
    return tuple(_pod_term(item, f"{path}[{index}]", labels, namespace, where)
                 for index, item in enumerate(_list(required, where, path)))


def _preferred_terms(
    spec: Mapping[str, object], labels: tuple[tuple[str, str], ...], namespace: str, where: str
) -> tuple[PreferredTerm, ...]:
    """The pod's preferred pod affinity and anti-affinity terms, with their weights."""
    affinity = _mapping(spec.get("affinity"), where, "spec.affinity")
    found = []
    for kind in ("podAffinity", "podAntiAffinity"):
        path = f"spec.affinity.{kind}.preferredDuringSchedulingIgnoredDuringExecution"
        terms_of = _mapping(affinity.get(kind), where, f"spec.affinity.{kind}")
        preferred = terms_of.get("preferredDuringSchedulingIgnoredDuringExecution")
        for index, item in enumerate(_list(preferred, where, path)):
            entry = _mapping(item, where, f"{path}[{index}]")
            weight = _positive(entry.get("weight"), where, f"{path}[{index}].weight", None)
            term = _pod_term(entry.get("podAffinityTerm"), f"{path}[{index}].podAffinityTerm",
                             labels, namespace, where)
            found.append(PreferredTerm(weight, term, anti=kind == "podAntiAffinity"))
    return tuple(found)


def _pod_term(
    item: object, term_path: str, labels: tuple[tuple[str, str], ...], namespace: str,
    where: str,
) -> PodAffinityTerm:
    """One pod affinity term, as the pods it selects.

    ``matchLabelKeys`` / ``mismatchLabelKeys`` become ``In`` / ``NotIn`` requirements on
    the pod's own values, as the API server merges them into the selector.
    """
    own = dict(labels)
    term = _mapping(item, where, term_path)
    raw_selector = term.get("labelSelector")
    selector = _mapping(raw_selector, where, f"{term_path}.labelSelector")
    expressions = list(_requirements(selector.get("matchExpressions"), where,
                                     f"{term_path}.labelSelector.matchExpressions"))
    for field, operator in (("matchLabelKeys", "In"), ("mismatchLabelKeys", "NotIn")):
        for key_index, key in enumerate(_list(term.get(field), where, f"{term_path}.{field}")):
            key = _str(key, where, f"{term_path}.{field}[{key_index}]")
            if key in own and raw_selector is not None:
                expressions.append(SelectorRequirement(key, operator, (own[key],)))
    namespaces = _list(term.get("namespaces"), where, f"{term_path}.namespaces")
    names = tuple(_str(n, where, f"{term_path}.namespaces") for n in namespaces)
    raw_ns_selector = term.get("namespaceSelector")
    ns_path = f"{term_path}.namespaceSelector"
    ns_selector = _mapping(raw_ns_selector, where, ns_path)
    by_labels = NamespaceSelector(
        _str_map(ns_selector.get("matchLabels"), where, f"{ns_path}.matchLabels"),
        _requirements(ns_selector.get("matchExpressions"), where, f"{ns_path}.matchExpressions"))
    ns_selected = bool(by_labels.match_labels or by_labels.match_expressions)
    return PodAffinityTerm(
        topology_key=_str(term.get("topologyKey"), where, f"{term_path}.topologyKey", ""),
        match_labels=_str_map(selector.get("matchLabels"), where,
                              f"{term_path}.labelSelector.matchLabels"),
        match_expressions=tuple(expressions),
        selects_pods=raw_selector is not None,
        namespaces=names or ((namespace,) if raw_ns_selector is None else ()),
        any_namespace=raw_ns_selector is not None and not ns_selected,
        namespace_selector=by_labels if ns_selected else None,
        listed=names,
    )


_INCLUSION_POLICIES = {None: None, "Honor": True, "Ignore": False}


def _spread(
    spec: Mapping[str, object], labels: tuple[tuple[str, str], ...], where: str,
    *, soft: bool = False,
) -> tuple[SpreadConstraint, ...]:
    """The pod's ``DoNotSchedule`` spread constraints, or with ``soft`` its
    ``ScheduleAnyway`` ones, which only rank nodes.

    A constraint the API server would reject (``maxSkew`` below 1, no topology key,
    an unknown policy) fails the pod here, so it waits naming the field rather than
    being placed under a rule read some other way.
    """
    own = dict(labels)
    found = []
    spreads = _list(spec.get("topologySpreadConstraints"), where, "spec.topologySpreadConstraints")
    for index, item in enumerate(spreads):
        path = f"spec.topologySpreadConstraints[{index}]"
        entry = _mapping(item, where, path)
        if (entry.get("whenUnsatisfiable") == "ScheduleAnyway") != soft:
            continue
        max_skew = _positive(entry.get("maxSkew"), where, f"{path}.maxSkew", None)
        min_domains = _positive(entry.get("minDomains"), where, f"{path}.minDomains", 1)
        key = _str(entry.get("topologyKey"), where, f"{path}.topologyKey")
        if not key:
            _fail(where, f"{path}.topologyKey must not be empty")
        policies = []
        for field in ("nodeAffinityPolicy", "nodeTaintsPolicy"):
            raw = entry.get(field)
            if raw not in _INCLUSION_POLICIES:
                _fail(where, f"{path}.{field} {raw!r} is neither Honor nor Ignore")
            policies.append(_INCLUSION_POLICIES[raw])
        raw_selector = entry.get("labelSelector")
        selector = _mapping(raw_selector, where, f"{path}.labelSelector")
        expressions = list(_requirements(selector.get("matchExpressions"), where,
                                         f"{path}.labelSelector.matchExpressions"))
        for key_index, label in enumerate(_list(entry.get("matchLabelKeys"), where,
                                                f"{path}.matchLabelKeys")):
            label = _str(label, where, f"{path}.matchLabelKeys[{key_index}]")
            if label in own and raw_selector is not None:
                expressions.append(SelectorRequirement(label, "In", (own[label],)))
        found.append(SpreadConstraint(
            max_skew=max_skew,
            topology_key=key,
            match_labels=_str_map(selector.get("matchLabels"), where,
                                  f"{path}.labelSelector.matchLabels"),
            match_expressions=tuple(expressions),
            selects_pods=raw_selector is not None,
            min_domains=min_domains,
            honour_node_affinity=policies[0] is not False,
            honour_taints=policies[1] is True,
        ))
    return tuple(found)


def _positive(value: object, where: str, path: str, default: int | None) -> int:
    if value is None and default is not None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        _fail(where, f"{path} must be an integer of at least 1, not {value!r}")
    return value


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
    requests (cpu, memory, hugepages-*) replace the container sum of each
    one they name; overhead and one pod slot come on top. If we counted
    less than kube-scheduler does, we would bind pods the kubelet then
    rejects.
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
    pod_requests = _mapping(pod_resources.get("requests"), where, "spec.resources.requests")
    pod_level = _resources(pod_requests, where, "pod requests")
    named = [name for name in pod_requests if _pod_level_resource(name)]
    if named:
        amounts = dict(total.amounts)
        for name in named:
            amounts[name] = pod_level.get(name)
        total = Resources.of(amounts)

    return total + _resources(spec.get("overhead"), where, "spec.overhead") + _ONE_POD


def _required_features(spec: Mapping[str, object]) -> frozenset[str]:
    """The node features the spec needs, as NodeDeclaredFeatures infers them for
    scheduling (k8s.io/component-helpers/nodedeclaredfeatures): a container's restart
    rule that restarts every container, a host-network pod in a user namespace, a volume
    mount with bind mount options. The API has checked the fields' shapes."""
    containers = [entry for field in ("containers", "initContainers")
                  for entry in _entries(spec.get(field))]
    needed = set()
    if any(isinstance(rule, Mapping) and rule.get("action") == "RestartAllContainers"
           for container in containers for rule in _entries(container.get("restartPolicyRules"))):
        needed.add("RestartAllContainersOnContainerExits")
    if spec.get("hostNetwork") is True and spec.get("hostUsers") is False:
        needed.add("UserNamespacesHostNetworkSupport")
    mounting = [*containers, *_entries(spec.get("ephemeralContainers"))]
    if any(isinstance(mount, Mapping) and mount.get("bindMountOptions")
           for container in mounting for mount in _entries(container.get("volumeMounts"))):
        needed.add("VolumeBindMountOptions")
    return frozenset(needed)


def _entries(value: object) -> list[Mapping[str, object]]:
    """The objects of a list field, skipping what is not one (the API has validated it)."""
    return [item for item in value if isinstance(item, Mapping)] if isinstance(value, list) \
        else []


def _pod_level_resource(name: str) -> bool:
    return name in _POD_LEVEL_RESOURCES or name.startswith("hugepages-")


def _host_ports(spec: Mapping[str, object], where: str) -> tuple[HostPort, ...]:
    """The host ports of the containers and of the init containers that run as long as
    the pod (``restartPolicy: Always``), as kube-scheduler's NodePorts counts them."""
    found = []
    for field in ("initContainers", "containers"):
        for cname, container in _containers(spec, field, where):
            if field == "initContainers" and container.get("restartPolicy") != "Always":
                continue
            path = f"container '{cname}' ports"
            for index, item in enumerate(_list(container.get("ports"), where, path)):
                entry = _mapping(item, where, f"{path}[{index}]")
                port = entry.get("hostPort")
                if port is None or port == 0:
                    continue
                if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
                    _fail(where, f"{path}[{index}].hostPort must be a port number, not {port!r}")
                found.append(HostPort(
                    port,
                    _str(entry.get("protocol"), where, f"{path}[{index}].protocol", "") or "TCP",
                    _str(entry.get("hostIP"), where, f"{path}[{index}].hostIP", "") or ANY_ADDRESS,
                ))
    return tuple(found)


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
    return _selector_terms(items, where, f"{path}.nodeSelectorTerms")


def _selector_terms(
    items: list[object] | tuple[object, ...], where: str, path: str
) -> tuple[SelectorTerm, ...]:
    terms = []
    for index, item in enumerate(items):
        term_path = f"{path}[{index}]"
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
    such condition has never been seen healthy and is treated as not ready
    (by queue shares; fit reads only taints, as kube-scheduler does).
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

    features = frozenset(_str(item, where, f"status.declaredFeatures[{index}]")
                         for index, item in enumerate(
                             _list(status.get("declaredFeatures"), where,
                                   "status.declaredFeatures")))
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
        features=features,
    )


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """Who an object is, read without failing: a deletion or a list names even a broken one."""

    namespace: str
    """Empty for a cluster-scoped object."""
    name: str
    uid: str

    @property
    def key(self) -> str:
        """``namespace/name``, or ``name`` for a cluster-scoped object."""
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


def object_ref(obj: RawObject) -> ObjectRef:
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    return ObjectRef(str(meta.get("namespace") or ""), str(meta.get("name") or ""),
                     str(meta.get("uid") or ""))


def object_name(obj: RawObject) -> str:
    return object_ref(obj).name


# ---------------------------------------------------------------- pods as the mirror holds them


@dataclass(frozen=True, slots=True)
class PodHeader:
    """Who a pod is and whose it is, read even from a pod too broken to parse, so a
    broken pod of ours is reported on and one of another scheduler is ignored."""

    key: PodKey
    namespace: str
    scheduler_name: str
    bound: bool
    """It names a node: a broken pod already bound is no longer ours to report on."""


@dataclass(frozen=True, slots=True)
class PodRecord:
    """A pod as the mirror holds it: the core's view of it and what reports need."""

    pod: Pod
    uid: str
    ours: bool
    group: GangKey | None
    phase: str
    scheduled_message: str | None
    """Message of a ``PodScheduled=False`` condition already on the pod, to skip rewriting it."""
    resource_version: str = ""


def pod_header(obj: RawObject) -> PodHeader:
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    spec = obj.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    namespace = meta.get("namespace")
    namespace = namespace if isinstance(namespace, str) and namespace else "default"
    return PodHeader(
        key=PodKey(f"{namespace}/{meta.get('name')}"),
        namespace=namespace,
        scheduler_name=str(spec.get("schedulerName") or ""),
        bound=bool(spec.get("nodeName")),
    )


def pod_record_from_api(obj: RawObject, *, ours: bool) -> PodRecord:
    """The pod, the gang it will be gathered into (set once here, not every cycle),
    its phase and the ``PodScheduled=False`` message already on it."""
    pod = pod_from_api(obj)
    where = f"pod {pod.key}"
    meta = _mapping(obj.get("metadata"), where, "metadata")
    namespace = pod.key.split("/", 1)[0]
    group_name = group_name_of(
        dict(_str_map(meta.get("labels"), where, "metadata.labels")),
        dict(_str_map(meta.get("annotations"), where, "metadata.annotations")),
    ) or native_group_name(_mapping(obj.get("spec"), where, "spec"))
    group = gang_key(namespace, group_name) if group_name else None
    status = _mapping(obj.get("status"), where, "status")
    scheduled_message = None
    for index, item in enumerate(_list(status.get("conditions"), where, "status.conditions")):
        condition = _mapping(item, where, f"status.conditions[{index}]")
        if condition.get("type") == "PodScheduled":
            if condition.get("status") == "False":
                scheduled_message = str(condition.get("message") or "") or None
            break
    return PodRecord(
        pod=replace(pod, gang=group or solo_gang_key(pod.key)),
        uid=str(meta.get("uid") or ""),
        ours=ours,
        group=group,
        phase=str(status.get("phase") or "Pending"),
        scheduled_message=scheduled_message,
        resource_version=str(meta.get("resourceVersion") or ""),
    )


# ---------------------------------------------------------------- pod groups


def group_name_of(labels: Mapping[str, str], annotations: Mapping[str, str]) -> str | None:
    """The PodGroup a pod belongs to, by gangsched label, scheduler-plugins label or
    Volcano annotation, in that order; None for a pod that is a gang of its own."""
    for value in (
        labels.get(GROUP_LABEL),
        labels.get(COSCHEDULING_LABEL),
        annotations.get(VOLCANO_ANNOTATION),
    ):
        if value:
            return value
    return None


def native_group_name(spec: Mapping[str, Any]) -> str | None:
    """The native PodGroup a pod names in ``spec.schedulingGroup.podGroupName``, if any."""
    group = spec.get("schedulingGroup")
    if not isinstance(group, Mapping):
        return None
    name = group.get("podGroupName")
    return name if isinstance(name, str) and name else None


def group_key_of(obj: RawObject) -> GangKey:
    """The key of a PodGroup object, of any flavour, from its metadata."""
    meta = obj.get("metadata") or {}
    return gang_key(str(meta.get("namespace", "")), str(meta.get("name", "")))


def _annotations(meta: Mapping[str, Any]) -> Mapping[str, Any]:
    annotations = meta.get("annotations") or {}
    return annotations if isinstance(annotations, Mapping) else {}


def _preemptible(meta: Mapping[str, Any]) -> bool:
    annotations = _annotations(meta)
    return not any(
        str(annotations.get(name, "")).strip().lower() == "false"
        for name in PREEMPTIBLE_ANNOTATIONS
    )


def group_from_api(obj: RawObject, flavor: Flavor) -> GroupSpec:
    """Read a PodGroup of any flavour; an empty spec (Spark's default) means minMember 1.

    Raises ObjectError naming the group and field, so one bad group is reported
    on its own status and never stops the scheduler.
    """
    meta = obj.get("metadata") or {}
    key = group_key_of(obj)
    created = timestamp(meta.get("creationTimestamp"), f"podgroup {key}",
                        "metadata.creationTimestamp")
    spec = obj.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise ObjectError(f"podgroup {key}: spec is not an object")
    if flavor is Flavor.NATIVE:
        return _native_group(key, meta, spec, created)
    min_member = spec.get("minMember", 1)
    if min_member is None:
        min_member = 1
    if not isinstance(min_member, int) or isinstance(min_member, bool) or min_member < 0:
        raise ObjectError(f"podgroup {key}: minMember {min_member!r} is not a whole number ≥ 0")
    raw_resources = spec.get("minResources") or {}
    if not isinstance(raw_resources, Mapping):
        raise ObjectError(f"podgroup {key}: minResources is not a map")
    try:
        min_resources = Resources.parse(raw_resources)
    except QuantityError as error:
        raise ObjectError(f"podgroup {key}: minResources: {error}") from error
    queue = (spec.get("queue") or _annotations(meta).get(VOLCANO_QUEUE_ANNOTATION)
             or DEFAULT_QUEUE)
    timeout = spec.get("scheduleTimeoutSeconds")
    if timeout is not None and (not isinstance(timeout, int) or timeout < 0):
        raise ObjectError(f"podgroup {key}: scheduleTimeoutSeconds {timeout!r} is not ≥ 0")
    priority_class = spec.get("priorityClassName") or None
    runtime, runtime_problem = read_runtime(_annotations(meta))
    return GroupSpec(
        key=key,
        flavor=flavor,
        min_member=max(1, min_member),
        min_resources=min_resources,
        queue=QueueName(str(queue)),
        created=created,
        generation=int(meta.get("generation") or 0),
        timeout_seconds=timeout,
        priority_class=str(priority_class) if priority_class else None,
        preemptible=_preemptible(meta),
        expected_runtime=runtime,
        runtime_problem=runtime_problem,
    )


def _native_group(
    key: GangKey, meta: Mapping[str, Any], spec: Mapping[str, Any], created: float
) -> GroupSpec:
    """A ``scheduling.k8s.io/v1beta1`` PodGroup, read as kube-scheduler reads it.

    ``gang.minCount`` is the minMember; ``basic`` places each pod alone; a
    missing policy is what the API server rejects, read here as basic so a
    group written around the schema still schedules its pods.
    """
    where = f"podgroup {key}"
    policy = spec.get("schedulingPolicy") or {}
    if not isinstance(policy, Mapping):
        raise ObjectError(f"{where}: schedulingPolicy is not an object")
    gang = policy.get("gang")
    min_member = 1
    if gang is not None:
        count = gang.get("minCount") if isinstance(gang, Mapping) else None
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise ObjectError(f"{where}: schedulingPolicy.gang.minCount {count!r} "
                              "is not a whole number ≥ 1")
        min_member = count
    constraints = spec.get("schedulingConstraints") or {}
    topology = constraints.get("topology") if isinstance(constraints, Mapping) else None
    keys: list[str] = []
    for index, entry in enumerate(topology or ()):
        label = entry.get("key") if isinstance(entry, Mapping) else None
        if not isinstance(label, str) or not label:
            raise ObjectError(f"{where}: schedulingConstraints.topology[{index}].key "
                              "must be a node label name")
        keys.append(label)
    priority = spec.get("priority")
    if priority is not None and (not isinstance(priority, int) or isinstance(priority, bool)):
        raise ObjectError(f"{where}: priority {priority!r} is not an integer")
    annotations = _annotations(meta)
    queue = annotations.get(QUEUE_ANNOTATION) or annotations.get(VOLCANO_QUEUE_ANNOTATION)
    workload_ref = spec.get("workloadRef")
    workload = None
    if not queue and isinstance(workload_ref, Mapping) and workload_ref.get("workloadName"):
        workload = f"{key.split('/', 1)[0]}/{workload_ref['workloadName']}"
    priority_class = spec.get("priorityClassName") or None
    runtime, runtime_problem = read_runtime(annotations)
    return GroupSpec(
        key=key,
        flavor=Flavor.NATIVE,
        min_member=min_member,
        min_resources=Resources.zero(),
        queue=QueueName(str(queue or DEFAULT_QUEUE)),
        created=created,
        generation=int(meta.get("generation") or 0),
        priority_class=str(priority_class) if priority_class else None,
        priority=priority,
        basic=gang is None,
        topology_keys=tuple(keys),
        workload=workload,
        preempts=spec.get("preemptionPolicy") != "Never",
        preemptible=_preemptible(meta),
        resource_claims=_group_claims(spec, where),
        uid=str(meta.get("uid") or ""),
        expected_runtime=runtime,
        runtime_problem=runtime_problem,
    )


def _group_claims(spec: Mapping[str, Any], where: str) -> tuple[GroupClaim, ...]:
    """Native ``spec.resourceClaims`` (DRAWorkloadResourceClaims)."""
    found = []
    for index, item in enumerate(_list(spec.get("resourceClaims"), where,
                                       "spec.resourceClaims")):
        entry = _mapping(item, where, f"spec.resourceClaims[{index}]")
        claim, template = entry.get("resourceClaimName"), entry.get("resourceClaimTemplateName")
        found.append(GroupClaim(
            _str(entry.get("name"), where, f"spec.resourceClaims[{index}].name"),
            claim if isinstance(claim, str) and claim else None,
            template if isinstance(template, str) and template else None))
    return tuple(found)


@dataclass(frozen=True, slots=True)
class GroupRecord:
    """A PodGroup as the mirror holds it: its spec, or why it has none, and the status
    it carries (whose conditions a status write keeps)."""

    key: GangKey
    flavor: Flavor
    uid: str
    spec: GroupSpec | None
    error: str | None
    status: Mapping[str, Any]
    policy: Policy | None


def group_record_from_api(body: RawObject, flavor: Flavor) -> GroupRecord:
    """Never raises: a group that cannot be read is held with its error, so its status
    and an Event say why it waits rather than the scheduler stopping.

    An unknown placement policy is not ignored either: the group waits, saying
    so, rather than running with a placement its author did not ask for.
    """
    meta = body.get("metadata") or {}
    key = group_key_of(body)
    spec: GroupSpec | None = None
    error: str | None = None
    try:
        spec = group_from_api(body, flavor)
    except ObjectError as exc:
        error = str(exc)
    policy_text = _annotations(meta).get(POLICY_ANNOTATION)
    policy = None
    if policy_text:
        try:
            policy = Policy(policy_text)
        except ValueError:
            spec = None
            error = error or (
                f"podgroup {key}: annotation {POLICY_ANNOTATION}={policy_text!r} "
                f"is not one of {', '.join(p.value for p in Policy)}"
            )
    status = body.get("status")
    return GroupRecord(
        key=key, flavor=flavor, uid=str(meta.get("uid", "")), spec=spec, error=error,
        status=dict(status) if isinstance(status, Mapping) else {}, policy=policy,
    )


# ---------------------------------------------------------------- queues, classes, workloads


@dataclass(frozen=True, slots=True)
class FieldProblem:
    """A part of an object the schema should have rejected, left out rather than fatal."""

    field: str
    error: str


@dataclass(frozen=True, slots=True)
class QueueObject:
    """A Queue as read: the spec a cycle uses, and the parts of it left out."""

    spec: QueueSpec
    problems: tuple[FieldProblem, ...] = ()
    conditions: tuple[Mapping[str, Any], ...] = ()
    """The status conditions last written: their transition times are kept while they hold."""


def queue_from_api(body: RawObject) -> QueueObject:
    """A Queue; a part the schema should have rejected is left out, and said so.

    The CRD schema rejects bad weights and quantities, so this only meets
    objects written around it; an unreadable cap then caps nothing rather
    than stopping the scheduler.
    """
    spec = body.get("spec") or {}
    problems: list[FieldProblem] = []
    capability: Capability | None = None
    try:
        if spec.get("capability") is not None:
            capability = Capability.parse(spec["capability"])
    except (QuantityError, AttributeError) as error:
        problems.append(FieldProblem("capability", str(error)))
    weight = spec.get("weight", 1)
    if isinstance(weight, bool) or not isinstance(weight, int):
        problems.append(FieldProblem("weight", repr(weight)))
        weight = 1
    elif weight < 1:
        # Kept as given: a queue with no weight has no share, and the hierarchy says so
        # on it (core.hierarchy) rather than scheduling it as if it had weight 1.
        problems.append(FieldProblem("weight", repr(weight)))
    parent = spec.get("parent")
    if parent is not None and not isinstance(parent, str):
        problems.append(FieldProblem("parent", repr(parent)))
        parent = None
    reclaimable = spec.get("reclaimable", True)
    if not isinstance(reclaimable, bool):
        problems.append(FieldProblem("reclaimable", repr(reclaimable)))
        reclaimable = True
    left_out = "; ".join(f"{p.field}: {p.error}" for p in problems) or None
    return QueueObject(
        QueueSpec(name=QueueName(object_name(body)), weight=weight, capability=capability,
                  open=spec.get("state", "Open") != "Closed", error=left_out,
                  parent=QueueName(parent) if parent else None, reclaimable=reclaimable),
        tuple(problems),
        tuple((body.get("status") or {}).get("conditions") or ()),
    )


@dataclass(frozen=True, slots=True)
class PriorityClass:
    name: str
    value: int
    never_preempts: bool
    """``preemptionPolicy: Never``: gangs of this class wait, never evict."""


def namespace_from_api(obj: RawObject) -> Namespace:
    """A Namespace's name and labels: what inter-pod terms select namespaces by."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    name = object_name(obj)
    return Namespace(name, _str_map(meta.get("labels"), f"namespace {name}", "metadata.labels"))


def priority_class_from_api(obj: RawObject) -> PriorityClass | None:
    """None for a class without an integer value, which the API server never serves."""
    value = obj.get("value")
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return PriorityClass(object_name(obj), value, obj.get("preemptionPolicy") == "Never")


def disruption_budget_from_api(obj: RawObject) -> DisruptionBudget:
    """A ``policy/v1`` PodDisruptionBudget; raises ObjectError for a selector the API
    server would not serve. A budget the disruption controller has not counted since
    its last change allows nothing, as the Eviction API then refuses every pod."""
    ref = object_ref(obj)
    where = f"PodDisruptionBudget {ref.key}"
    spec = _mapping(obj.get("spec"), where, "spec")
    status = _mapping(obj.get("status"), where, "status")
    raw_selector = spec.get("selector")
    selector = _mapping(raw_selector, where, "spec.selector")
    allowed = status.get("disruptionsAllowed")
    observed = status.get("observedGeneration")
    generation = _mapping(obj.get("metadata"), where, "metadata").get("generation")
    current = not isinstance(generation, int) or (
        isinstance(observed, int) and observed >= generation)
    return DisruptionBudget(
        key=ref.key,
        namespace=ref.namespace,
        match_labels=_str_map(selector.get("matchLabels"), where, "spec.selector.matchLabels"),
        match_expressions=_requirements(selector.get("matchExpressions"), where,
                                        "spec.selector.matchExpressions"),
        selects_pods=raw_selector is not None,
        disruptions_allowed=(allowed if isinstance(allowed, int) and not isinstance(allowed, bool)
                             and current else 0),
    )


@dataclass(frozen=True, slots=True)
class WorkloadQueue:
    """A native Workload's queue annotation, which its PodGroups inherit."""

    key: str
    """``namespace/name``."""
    queue: QueueName | None


def workload_queue_from_api(body: RawObject) -> WorkloadQueue:
    queue = _annotations(body.get("metadata") or {}).get(QUEUE_ANNOTATION)
    return WorkloadQueue(object_ref(body).key, QueueName(str(queue)) if queue else None)


# ---------------------------------------------------------------- storage


BIND_COMPLETED_ANNOTATION = "pv.kubernetes.io/bind-completed"
SELECTED_NODE_ANNOTATION = "volume.kubernetes.io/selected-node"
_BETA_CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class"
_ZONE_LABELS = frozenset({
    "failure-domain.beta.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region",
    "topology.kubernetes.io/zone", "topology.kubernetes.io/region",
})
_ZONE_DELIMITER = "__"


def claim_from_api(obj: RawObject) -> Claim:
    """A PersistentVolumeClaim; its class as kube-scheduler reads it (the beta annotation
    first), bound only once the PV controller completed the bind."""
    meta, namespace, name = _metadata(obj, "PersistentVolumeClaim")
    where = f"PersistentVolumeClaim {namespace}/{name}"
    spec = _mapping(obj.get("spec"), where, "spec")
    status = _mapping(obj.get("status"), where, "status")
    annotations = _str_map(meta.get("annotations"), where, "metadata.annotations")
    notes = dict(annotations)
    storage_class = notes.get(_BETA_CLASS_ANNOTATION)
    if storage_class is None:
        storage_class = _str(spec.get("storageClassName"), where, "spec.storageClassName", "")
    volume_name = _str(spec.get("volumeName"), where, "spec.volumeName", "")
    owners = _list(meta.get("ownerReferences"), where, "metadata.ownerReferences")
    selected = notes.get(SELECTED_NODE_ANNOTATION)
    return Claim(
        key=f"{namespace}/{name}",
        storage_class=storage_class,
        volume_name=volume_name,
        bound=bool(volume_name) and BIND_COMPLETED_ANNOTATION in notes,
        selected_node=NodeName(selected) if selected else None,
        access_modes=tuple(_str(m, where, "spec.accessModes[]")
                           for m in _list(spec.get("accessModes"), where, "spec.accessModes")),
        lost=status.get("phase") == "Lost",
        deleting=meta.get("deletionTimestamp") is not None,
        owners=tuple(str(_mapping(o, where, "metadata.ownerReferences[]").get("uid") or "")
                     for o in owners
                     if _mapping(o, where, "metadata.ownerReferences[]").get("controller")),
        storage=_storage_request(spec, where),
    )


def _storage_request(spec: Mapping[str, object], where: str) -> int | None:
    requests = _mapping(_mapping(spec.get("resources"), where, "spec.resources").get(
        "requests"), where, "spec.resources.requests")
    if "storage" not in requests:
        return None
    return _resources({"storage": requests["storage"]}, where, "spec.resources.requests").get(
        "storage")


def _cluster_object(obj: RawObject, kind: str) -> tuple[Mapping[str, object], str, str,
                                                        Mapping[str, object]]:
    """A cluster-scoped object's metadata, name, how messages name it, and spec."""
    meta = _mapping(obj.get("metadata"), kind, "metadata")
    name = _str(meta.get("name"), kind, "metadata.name")
    where = f"{kind} {name}"
    return meta, name, where, _mapping(obj.get("spec"), where, "spec")


def volume_from_api(obj: RawObject) -> Volume:
    """A PersistentVolume: its required node affinity and its zone labels."""
    meta, name, where, spec = _cluster_object(obj, "PersistentVolume")
    affinity = _mapping(spec.get("nodeAffinity"), where, "spec.nodeAffinity")
    required = affinity.get("required")
    terms = None
    if required is not None:
        items = _list(_mapping(required, where, "spec.nodeAffinity.required").get(
            "nodeSelectorTerms"), where, "spec.nodeAffinity.required.nodeSelectorTerms")
        terms = _selector_terms(items, where, "spec.nodeAffinity.required.nodeSelectorTerms")
    labels = _str_map(meta.get("labels"), where, "metadata.labels")
    zones = tuple((key, tuple(value.split(_ZONE_DELIMITER)))
                  for key, value in labels if key in _ZONE_LABELS)
    return Volume(name=name, node_affinity=terms, zones=zones,
                  attached=_attached(spec, dict(labels), where), csi="csi" in spec)


def _attached(spec: Mapping[str, object], labels: Mapping[str, str], where: str
              ) -> AttachedVolume | None:
    """The CSI driver and handle a volume is counted under against node limits."""
    csi = spec.get("csi")
    if csi is not None:
        source = _mapping(csi, where, "spec.csi")
        driver = _str(source.get("driver"), where, "spec.csi.driver", "")
        handle = _str(source.get("volumeHandle"), where, "spec.csi.volumeHandle", "")
        return AttachedVolume(driver, handle) if driver and handle else None
    zone = labels.get("failure-domain.beta.kubernetes.io/zone") or labels.get(
        "topology.kubernetes.io/zone", "")
    return from_source(spec, zone.split(_ZONE_DELIMITER))


def csi_node_from_api(obj: RawObject) -> CsiNode:
    """A CSINode (named after its node): its drivers, with their volume limits."""
    _, name, where, spec = _cluster_object(obj, "CSINode")
    drivers: list[str] = []
    limits: list[tuple[str, int]] = []
    for index, item in enumerate(_list(spec.get("drivers"), where, "spec.drivers")):
        path = f"spec.drivers[{index}]"
        driver = _mapping(item, where, path)
        driver_name = _str(driver.get("name"), where, f"{path}.name")
        drivers.append(driver_name)
        count = _mapping(driver.get("allocatable"), where, f"{path}.allocatable").get("count")
        if count is not None:
            if isinstance(count, bool) or not isinstance(count, int):
                _fail(where, f"{path}.allocatable.count must be an integer, not {_kind(count)}")
            limits.append((driver_name, count))
    return CsiNode(NodeName(name), tuple(drivers), tuple(limits))


def volume_attachment_from_api(obj: RawObject) -> VolumeAttachmentSpec:
    """A VolumeAttachment: the attacher, node and PersistentVolume it names."""
    _, name, where, spec = _cluster_object(obj, "VolumeAttachment")
    source = _mapping(spec.get("source"), where, "spec.source")
    return VolumeAttachmentSpec(
        name=name,
        node=NodeName(_str(spec.get("nodeName"), where, "spec.nodeName", "")),
        attacher=_str(spec.get("attacher"), where, "spec.attacher", ""),
        volume=_str(source.get("persistentVolumeName"), where,
                    "spec.source.persistentVolumeName", ""),
    )


def csi_driver_from_api(obj: RawObject) -> CsiDriver:
    """A CSIDriver: whether pods using it need it registered on their node."""
    _, name, _, spec = _cluster_object(obj, "CSIDriver")
    return CsiDriver(name, required_on_node=spec.get("preventPodSchedulingIfMissing") is True,
                     storage_capacity=spec.get("storageCapacity") is True)


def storage_capacity_from_api(obj: RawObject) -> StorageCapacity:
    """A CSIStorageCapacity: its fields sit at the top level, not under a spec."""
    _, namespace, name = _metadata(obj, "CSIStorageCapacity")
    where = f"CSIStorageCapacity {namespace}/{name}"
    topology = None
    if obj.get("nodeTopology") is not None:
        selector = _mapping(obj.get("nodeTopology"), where, "nodeTopology")
        labels = _str_map(selector.get("matchLabels"), where, "nodeTopology.matchLabels")
        topology = SelectorTerm(match_expressions=(
            *(SelectorRequirement(key, "In", (value,)) for key, value in labels),
            *_requirements(selector.get("matchExpressions"), where,
                           "nodeTopology.matchExpressions")))
    field = next((f for f in ("maximumVolumeSize", "capacity") if obj.get(f) is not None), None)
    size = None if field is None else _resources({"storage": obj[field]}, where, field).get(
        "storage")
    return StorageCapacity(f"{namespace}/{name}",
                           _str(obj.get("storageClassName"), where, "storageClassName"),
                           topology, size)


def storage_class_from_api(obj: RawObject) -> StorageClassSpec:
    meta = _mapping(obj.get("metadata"), "StorageClass", "metadata")
    name = _str(meta.get("name"), "StorageClass", "metadata.name")
    where = f"StorageClass {name}"
    topologies = []
    for index, item in enumerate(_list(obj.get("allowedTopologies"), where, "allowedTopologies")):
        path = f"allowedTopologies[{index}].matchLabelExpressions"
        expressions = _list(_mapping(item, where, f"allowedTopologies[{index}]").get(
            "matchLabelExpressions"), where, path)
        topologies.append(SelectorTerm(match_expressions=tuple(
            SelectorRequirement(
                _str(_mapping(e, where, path).get("key"), where, f"{path}.key"), "In",
                tuple(_str(v, where, f"{path}.values[]")
                      for v in _list(_mapping(e, where, path).get("values"), where, path)))
            for e in expressions)))
    return StorageClassSpec(
        name=name,
        provisioner=_str(obj.get("provisioner"), where, "provisioner", ""),
        wait_for_first_consumer=obj.get("volumeBindingMode") == "WaitForFirstConsumer",
        allowed_topologies=tuple(topologies),
    )
