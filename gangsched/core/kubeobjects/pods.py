"""Pods read the way kube-scheduler reads them: effective requests, claims, inter-pod
terms, spread, host ports, tolerations and node affinity.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gangsched.core.fit.disks import disk_labels, disk_terms, inline_disks
from gangsched.core.fit.intree import from_source
from gangsched.core.fit.ports import ANY_ADDRESS, HostPort, port_labels, port_terms
from gangsched.core.kubeobjects.fields import (
    TERMINAL_PHASES,
    fail,
    kind_of,
    list_at,
    mapping_at,
    metadata_of,
    requirements_at,
    resources_at,
    selector_terms_at,
    str_at,
    str_map_at,
    timestamp,
)
from gangsched.core.kubeobjects.podgroups import QUEUE_ANNOTATION, SUB_GROUP_LABEL, annotations_of
from gangsched.core.model.objects import (
    AttachedVolume,
    ClaimKey,
    ClaimRef,
    ExtendedRequest,
    NamespaceSelector,
    NodeName,
    Pod,
    PodAffinityTerm,
    PodClaim,
    PodKey,
    PodPlacementRules,
    PreferredTerm,
    QueueName,
    SelectorRequirement,
    SelectorTerm,
    SpreadConstraint,
    Toleration,
)
from gangsched.core.model.resources import (
    CPU,
    MEMORY,
    PODS,
    Resources,
    device_backable,
)
from gangsched.core.model.runtimes import read_runtime

__all__ = [
    "pod_from_api",
]


_POD_LEVEL_RESOURCES = (CPU, MEMORY)
"""With every ``hugepages-*``, what pod-level requests may set (IsSupportedPodLevelResource)."""
_ONE_POD = Resources.of({PODS: 1})


def pod_from_api(obj: Mapping[str, Any]) -> Pod:
    """A pod as the core sees it.

    ``gang`` is left unset: membership depends on PodGroups the shell
    mirrors, not on the pod alone.
    """
    meta, namespace, name = metadata_of(obj, "pod")
    where = f"pod {namespace}/{name}"
    spec = mapping_at(obj.get("spec"), where, "spec")
    status = mapping_at(obj.get("status"), where, "status")

    priority = spec.get("priority")
    if priority is None:
        priority = 0
    if isinstance(priority, bool) or not isinstance(priority, int):
        fail(where, f"spec.priority must be an integer, not {kind_of(priority)}")

    node_name = spec.get("nodeName")
    if node_name is not None:
        node_name = str_at(node_name, where, "spec.nodeName") or None

    phase = status.get("phase")
    if phase is not None:
        phase = str_at(phase, where, "status.phase")

    labels = str_map_at(meta.get("labels"), where, "metadata.labels")
    affinity = _pod_terms(spec, "podAffinity", labels, namespace, where)
    anti_affinity = _pod_terms(spec, "podAntiAffinity", labels, namespace, where)
    ports = _host_ports(spec, where)
    disks = inline_disks(
        mapping_at(item, where, f"spec.volumes[{index}]")
        for index, item in enumerate(list_at(spec.get("volumes"), where, "spec.volumes")))
    annotations = annotations_of(meta)
    runtime, runtime_problem = read_runtime(annotations)
    deadline = spec.get("activeDeadlineSeconds")
    started = status.get("startTime")
    queue = annotations.get(QUEUE_ANNOTATION)
    return Pod(
        key=PodKey(f"{namespace}/{name}"),
        requests=_effective_requests(spec, status, where),
        rules=PodPlacementRules(
            node_selector=str_map_at(spec.get("nodeSelector"), where, "spec.nodeSelector"),
            required_affinity=_required_affinity(spec, where),
            tolerations=_tolerations(spec, where),
            features=_required_features(spec),
        ),
        node_name=NodeName(node_name) if node_name else None,
        priority=priority,
        created=timestamp(meta.get("creationTimestamp"), where, "metadata.creationTimestamp"),
        terminal=phase in TERMINAL_PHASES,
        terminating=meta.get("deletionTimestamp") is not None,
        gates=_gates(spec, where),
        queue=QueueName(queue) if queue else None,
        preempts=spec.get("preemptionPolicy") != "Never",
        labels=labels + port_labels(ports) + disk_labels(disks),
        sub_group=dict(labels).get(SUB_GROUP_LABEL),
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
            resources = mapping_at(container.get("resources"), where, f"{path} resources")
            merged = {**mapping_at(resources.get("limits"), where, f"{path} limits"),
                      **mapping_at(resources.get("requests"), where, f"{path} requests")}
            names = sorted(merged)
            for slot, name in enumerate(names):
                if not device_backable(name):
                    continue
                amount = resources_at({name: merged[name]}, where, f"{path} requests").get(name)
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
    for index, item in enumerate(list_at(spec.get("volumes"), where, "spec.volumes")):
        path = f"spec.volumes[{index}]"
        volume = mapping_at(item, where, path)
        claim = volume.get("persistentVolumeClaim")
        if claim is not None:
            name = mapping_at(claim, where, f"{path}.persistentVolumeClaim").get("claimName")
            found.append(ClaimRef(str_at(name, where, f"{path}.persistentVolumeClaim.claimName")))
        elif volume.get("ephemeral") is not None:
            found.append(ClaimRef(str_at(volume.get("name"), where, f"{path}.name"),
                                  ephemeral=True))
    return tuple(found)


def _inline_volumes(spec: Mapping[str, object], where: str) -> tuple[AttachedVolume, ...]:
    """The pod's inline in-tree volumes that count as a CSI driver's (core.fit.intree)."""
    found = []
    for index, item in enumerate(list_at(spec.get("volumes"), where, "spec.volumes")):
        volume = from_source(mapping_at(item, where, f"spec.volumes[{index}]"))
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
    for index, item in enumerate(list_at(status.get("resourceClaimStatuses"), where, path)):
        entry = mapping_at(item, where, f"{path}[{index}]")
        claim = entry.get("resourceClaimName")
        if isinstance(claim, str) and claim:
            made[str_at(entry.get("name"), where, f"{path}[{index}].name")] = claim
    found = []
    for index, item in enumerate(list_at(spec.get("resourceClaims"), where, "spec.resourceClaims")):
        path = f"spec.resourceClaims[{index}]"
        entry = mapping_at(item, where, path)
        name = str_at(entry.get("name"), where, f"{path}.name")
        direct = entry.get("resourceClaimName")
        template = entry.get("resourceClaimTemplateName")
        if isinstance(direct, str) and direct:
            found.append(PodClaim(name, ClaimKey(f"{namespace}/{direct}")))
        elif isinstance(template, str) and template:
            claim = made.get(name)
            found.append(PodClaim(name, ClaimKey(f"{namespace}/{claim}") if claim else None,
                                  template))
        else:
            fail(where, f"{path} names neither a claim nor a template")
    return tuple(found)


def _pod_terms(
    spec: Mapping[str, object], kind: str, labels: tuple[tuple[str, str], ...], namespace: str,
    where: str,
) -> tuple[PodAffinityTerm, ...]:
    """The pod's required ``podAffinity`` or ``podAntiAffinity`` terms, as the pods they select."""
    path = f"spec.affinity.{kind}.requiredDuringSchedulingIgnoredDuringExecution"
    affinity = mapping_at(spec.get("affinity"), where, "spec.affinity")
    terms_of = mapping_at(affinity.get(kind), where, f"spec.affinity.{kind}")
    required = terms_of.get("requiredDuringSchedulingIgnoredDuringExecution")
    return tuple(_pod_term(item, f"{path}[{index}]", labels, namespace, where)
                 for index, item in enumerate(list_at(required, where, path)))


def _preferred_terms(
    spec: Mapping[str, object], labels: tuple[tuple[str, str], ...], namespace: str, where: str
) -> tuple[PreferredTerm, ...]:
    """The pod's preferred pod affinity and anti-affinity terms, with their weights."""
    affinity = mapping_at(spec.get("affinity"), where, "spec.affinity")
    found = []
    for kind in ("podAffinity", "podAntiAffinity"):
        path = f"spec.affinity.{kind}.preferredDuringSchedulingIgnoredDuringExecution"
        terms_of = mapping_at(affinity.get(kind), where, f"spec.affinity.{kind}")
        preferred = terms_of.get("preferredDuringSchedulingIgnoredDuringExecution")
        for index, item in enumerate(list_at(preferred, where, path)):
            entry = mapping_at(item, where, f"{path}[{index}]")
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
    term = mapping_at(item, where, term_path)
    raw_selector = term.get("labelSelector")
    selector = mapping_at(raw_selector, where, f"{term_path}.labelSelector")
    expressions = list(requirements_at(selector.get("matchExpressions"), where,
                                     f"{term_path}.labelSelector.matchExpressions"))
    for field, operator in (("matchLabelKeys", "In"), ("mismatchLabelKeys", "NotIn")):
        for key_index, key in enumerate(list_at(term.get(field), where, f"{term_path}.{field}")):
            key = str_at(key, where, f"{term_path}.{field}[{key_index}]")
            if key in own and raw_selector is not None:
                expressions.append(SelectorRequirement(key, operator, (own[key],)))
    namespaces = list_at(term.get("namespaces"), where, f"{term_path}.namespaces")
    names = tuple(str_at(n, where, f"{term_path}.namespaces") for n in namespaces)
    raw_ns_selector = term.get("namespaceSelector")
    ns_path = f"{term_path}.namespaceSelector"
    ns_selector = mapping_at(raw_ns_selector, where, ns_path)
    by_labels = NamespaceSelector(
        str_map_at(ns_selector.get("matchLabels"), where, f"{ns_path}.matchLabels"),
        requirements_at(ns_selector.get("matchExpressions"), where, f"{ns_path}.matchExpressions"))
    ns_selected = bool(by_labels.match_labels or by_labels.match_expressions)
    return PodAffinityTerm(
        topology_key=str_at(term.get("topologyKey"), where, f"{term_path}.topologyKey", ""),
        match_labels=str_map_at(selector.get("matchLabels"), where,
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
    spreads = list_at(spec.get("topologySpreadConstraints"), where,
                      "spec.topologySpreadConstraints")
    for index, item in enumerate(spreads):
        path = f"spec.topologySpreadConstraints[{index}]"
        entry = mapping_at(item, where, path)
        if (entry.get("whenUnsatisfiable") == "ScheduleAnyway") != soft:
            continue
        max_skew = _positive(entry.get("maxSkew"), where, f"{path}.maxSkew", None)
        min_domains = _positive(entry.get("minDomains"), where, f"{path}.minDomains", 1)
        key = str_at(entry.get("topologyKey"), where, f"{path}.topologyKey")
        if not key:
            fail(where, f"{path}.topologyKey must not be empty")
        policies = []
        for field in ("nodeAffinityPolicy", "nodeTaintsPolicy"):
            raw = entry.get(field)
            if raw not in _INCLUSION_POLICIES:
                fail(where, f"{path}.{field} {raw!r} is neither Honor nor Ignore")
            policies.append(_INCLUSION_POLICIES[raw])
        raw_selector = entry.get("labelSelector")
        selector = mapping_at(raw_selector, where, f"{path}.labelSelector")
        expressions = list(requirements_at(selector.get("matchExpressions"), where,
                                         f"{path}.labelSelector.matchExpressions"))
        for key_index, label in enumerate(list_at(entry.get("matchLabelKeys"), where,
                                                f"{path}.matchLabelKeys")):
            label = str_at(label, where, f"{path}.matchLabelKeys[{key_index}]")
            if label in own and raw_selector is not None:
                expressions.append(SelectorRequirement(label, "In", (own[label],)))
        found.append(SpreadConstraint(
            max_skew=max_skew,
            topology_key=key,
            match_labels=str_map_at(selector.get("matchLabels"), where,
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
        fail(where, f"{path} must be an integer of at least 1, not {value!r}")
    return value


def _gates(spec: Mapping[str, object], where: str) -> tuple[str, ...]:
    """The names of the pod's scheduling gates (Kueue and others hold pods back by them)."""
    names = []
    for i, gate in enumerate(list_at(spec.get("schedulingGates"), where, "spec.schedulingGates")):
        entry = mapping_at(gate, where, f"spec.schedulingGates[{i}]")
        names.append(str_at(entry.get("name"), where, f"spec.schedulingGates[{i}].name"))
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
            policy = str_at(policy, where, f"init container '{cname}' restartPolicy")
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

    pod_resources = mapping_at(spec.get("resources"), where, "spec.resources")
    pod_requests = mapping_at(pod_resources.get("requests"), where, "spec.resources.requests")
    pod_level = resources_at(pod_requests, where, "pod requests")
    named = [name for name in pod_requests if _pod_level_resource(name)]
    if named:
        amounts = dict(total.amounts)
        for name in named:
            amounts[name] = pod_level.get(name)
        total = Resources.of(amounts)

    return total + resources_at(spec.get("overhead"), where, "spec.overhead") + _ONE_POD


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
            for index, item in enumerate(list_at(container.get("ports"), where, path)):
                entry = mapping_at(item, where, f"{path}[{index}]")
                port = entry.get("hostPort")
                if port is None or port == 0:
                    continue
                if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
                    fail(where, f"{path}[{index}].hostPort must be a port number, not {port!r}")
                found.append(HostPort(
                    port,
                    str_at(entry.get("protocol"), where, f"{path}[{index}].protocol", "") or "TCP",
                    str_at(entry.get("hostIP"), where, f"{path}[{index}].hostIP", "")
                    or ANY_ADDRESS,
                ))
    return tuple(found)


def _containers(
    spec: Mapping[str, object], field: str, where: str
) -> list[tuple[str, Mapping[str, object]]]:
    found = []
    for index, item in enumerate(list_at(spec.get(field), where, f"spec.{field}")):
        container = mapping_at(item, where, f"spec.{field}[{index}]")
        cname = str_at(container.get("name"), where, f"spec.{field}[{index}].name", f"#{index}")
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
    resources = mapping_at(container.get("resources"), where, f"container '{cname}' resources")
    limits = mapping_at(resources.get("limits"), where, f"container '{cname}' limits")
    requests = mapping_at(resources.get("requests"), where, f"container '{cname}' requests")
    merged = {**limits, **requests}
    asked = resources_at(merged, where, f"container '{cname}' requests")
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
        for index, item in enumerate(list_at(status.get(field), where, f"status.{field}")):
            entry = mapping_at(item, where, f"status.{field}[{index}]")
            if entry.get("resources") is None and entry.get("allocatedResources") is None:
                continue
            cname = str_at(entry.get("name"), where, f"status.{field}[{index}].name")
            applied = mapping_at(entry.get("resources"), where, f"status of '{cname}' resources")
            found[cname] = (
                resources_at(applied.get("requests"), where, f"status of '{cname}' requests"),
                resources_at(
                    entry.get("allocatedResources"), where, f"status of '{cname}' allocated"
                ),
            )
    return found


def _resize_infeasible(status: Mapping[str, object], where: str) -> bool:
    if status.get("resize") == "Infeasible":
        return True
    for index, item in enumerate(list_at(status.get("conditions"), where, "status.conditions")):
        condition = mapping_at(item, where, f"status.conditions[{index}]")
        if condition.get("type") == "PodResizePending" and condition.get("reason") == "Infeasible":
            return True
    return False


def _required_affinity(spec: Mapping[str, object], where: str) -> tuple[SelectorTerm, ...]:
    affinity = mapping_at(spec.get("affinity"), where, "spec.affinity")
    node_affinity = mapping_at(affinity.get("nodeAffinity"), where, "spec.affinity.nodeAffinity")
    path = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is None:
        return ()
    selector = mapping_at(required, where, path)
    items = list_at(selector.get("nodeSelectorTerms"), where, f"{path}.nodeSelectorTerms")
    if not items:
        # The API server rejects this; reading it as "no restriction" would
        # place the pod anywhere, the opposite of what its author meant.
        fail(where, f"{path}.nodeSelectorTerms must not be empty")
    return selector_terms_at(items, where, f"{path}.nodeSelectorTerms")


def _tolerations(spec: Mapping[str, object], where: str) -> tuple[Toleration, ...]:
    found = []
    for index, item in enumerate(list_at(spec.get("tolerations"), where, "spec.tolerations")):
        path = f"spec.tolerations[{index}]"
        entry = mapping_at(item, where, path)
        found.append(
            Toleration(
                key=str_at(entry.get("key"), where, f"{path}.key", ""),
                # An empty operator means Equal in the API.
                operator=str_at(entry.get("operator"), where, f"{path}.operator", "") or "Equal",
                value=str_at(entry.get("value"), where, f"{path}.value", ""),
                effect=str_at(entry.get("effect"), where, f"{path}.effect", ""),
            )
        )
    return tuple(found)
