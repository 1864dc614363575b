"""Which nodes a pod may go to, regardless of how full they are.

Each check is a narrow function named after the kube-scheduler filter it
mirrors (NodeUnschedulable, TaintToleration, NodeAffinity), with the same
semantics, so a pod we place is one kube-scheduler would also accept there.
Resources are checked elsewhere (placement), because this part depends only
on the pod's rules and the node's labels, taints and flags, and so can be
cached per (rules, kind of node) while free resources change every bind.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from gangsched.core.fit.nodelocal import NODE_NAME_LABEL
from gangsched.core.model.objects import (
    Node,
    PodPlacementRules,
    SelectorRequirement,
    SelectorTerm,
    Taint,
    Toleration,
)

__all__ = [
    "CAPACITY_KEY",
    "CSI_DRIVER_LABEL_PREFIX",
    "CSI_NODE_LABEL",
    "PER_NODE_LABELS",
    "UNSCHEDULABLE_TAINT",
    "affinity_ok",
    "format_taint",
    "node_excluded_reason",
    "node_selector_ok",
    "requirement_matches",
    "selector_ok",
    "taints_ok",
    "term_matches",
    "tolerates",
    "untolerated_taint",
    "uses_node_name",
    "volume_refusal",
    "volumes_ok",
]

CSI_DRIVER_LABEL_PREFIX = "csi-driver.gangsched.io/"
"""A label of a node, in the cycle's model only, for each CSI driver its CSINode lists
(see :mod:`gangsched.core.placement.volumelimits`)."""
CSI_NODE_LABEL = "csi-node.gangsched.io"
"""A label of a node, in the cycle's model only, when it has a CSINode at all."""
CAPACITY_KEY = "storage-capacity.gangsched.io"
"""A key no node carries, leading every node term a claim's storage capacity gives it
(core.fit.volumes), so a node those terms refuse is told "not enough free storage"."""

UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")
"""Tolerating this lets a pod onto a cordoned node, as NodeUnschedulable allows."""
_NOT_READY_KEYS = frozenset({"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"})
"""Taints that mark a node not Ready (False) or unreachable (Unknown)."""

_EXCLUDING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
_INT64 = re.compile(r"[+-]?[0-9]+")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def format_taint(taint: Taint) -> str:
    """``key=value:Effect`` as kubectl prints it (``key:Effect`` without a value)."""
    if taint.value:
        return f"{taint.key}={taint.value}:{taint.effect}"
    return f"{taint.key}:{taint.effect}"


def _tolerates_one(toleration: Toleration, taint: Taint) -> bool:
    # An empty effect or key is a wildcard; Exists ignores the value. Unknown
    # operators tolerate nothing, so a newer API cannot widen access here.
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator == "Exists":
        return True
    if toleration.operator in ("", "Equal"):
        return toleration.value == taint.value
    return False


def tolerates(tolerations: Iterable[Toleration], taint: Taint) -> bool:
    """Whether any of the tolerations matches the taint."""
    return any(_tolerates_one(toleration, taint) for toleration in tolerations)


def untolerated_taint(rules: PodPlacementRules, node: Node) -> Taint | None:
    """The first NoSchedule/NoExecute taint the pod does not tolerate.

    PreferNoSchedule is only a preference; it never excludes a node.
    """
    for taint in node.taints:
        if taint.effect in _EXCLUDING_EFFECTS and not tolerates(rules.tolerations, taint):
            return taint
    return None


def taints_ok(rules: PodPlacementRules, node: Node) -> bool:
    return untolerated_taint(rules, node) is None


def _int64(text: str) -> int | None:
    """``strconv.ParseInt(text, 10, 64)``: strict, no spaces or underscores."""
    if not _INT64.fullmatch(text):
        return None
    value = int(text)
    return value if _INT64_MIN <= value <= _INT64_MAX else None


def _requirement_valid(requirement: SelectorRequirement) -> bool:
    """Whether apimachinery would accept the requirement at all.

    An invalid requirement makes its whole term match nothing, which is what
    kube-scheduler does with a term it cannot parse.
    """
    operator, values = requirement.operator, requirement.values
    if operator in ("In", "NotIn"):
        return len(values) > 0
    if operator in ("Exists", "DoesNotExist"):
        return len(values) == 0
    if operator in ("Gt", "Lt"):
        return len(values) == 1 and _int64(values[0]) is not None
    return False


def requirement_matches(requirement: SelectorRequirement, labels: Mapping[str, str]) -> bool:
    """One matchExpressions requirement against node labels (labels.Requirement.Matches)."""
    if not _requirement_valid(requirement):
        return False
    operator, key = requirement.operator, requirement.key
    present = key in labels
    if operator == "In":
        return present and labels[key] in requirement.values
    if operator == "NotIn":
        return not present or labels[key] not in requirement.values
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    # Gt / Lt: both sides must be integers; a non-numeric label never matches.
    if not present:
        return False
    have = _int64(labels[key])
    want = _int64(requirement.values[0])
    if have is None or want is None:
        return False
    return have > want if operator == "Gt" else have < want


def _field_matches(requirement: SelectorRequirement, node_name: str) -> bool:
    """One matchFields requirement; ``metadata.name`` is the only field a node has.

    Only In and NotIn with exactly one value are valid, as in
    ``NodeSelectorRequirementsAsFieldSelector``; any other field reads as "".
    """
    if requirement.operator not in ("In", "NotIn") or len(requirement.values) != 1:
        return False
    have = node_name if requirement.key == "metadata.name" else ""
    equal = have == requirement.values[0]
    return equal if requirement.operator == "In" else not equal


def term_matches(term: SelectorTerm, labels: Mapping[str, str], node_name: str) -> bool:
    """A node selector term: all its requirements hold. An empty term matches nothing."""
    if not term.match_expressions and not term.match_fields:
        return False
    for requirement in term.match_expressions:
        if not requirement_matches(requirement, labels):
            return False
    return all(_field_matches(requirement, node_name) for requirement in term.match_fields)


def node_selector_ok(rules: PodPlacementRules, node: Node) -> bool:
    """``spec.nodeSelector``: every pair must be a label of the node, exactly."""
    if not rules.node_selector:
        return True
    labels = dict(node.labels)
    for key, value in rules.node_selector:
        if key not in labels or labels[key] != value:
            return False
    return True


def affinity_ok(rules: PodPlacementRules, node: Node) -> bool:
    """Required node affinity: at least one term matches (terms are ORed)."""
    if not rules.required_affinity:
        return True
    labels = dict(node.labels)
    return any(term_matches(term, labels, node.name) for term in rules.required_affinity)


def volumes_ok(rules: PodPlacementRules, node: Node) -> bool:
    """The node restrictions of the pod's volumes: every one has a term that matches."""
    return volume_refusal(rules, node) is None


def volume_refusal(rules: PodPlacementRules, node: Node) -> str | None:
    """Why the pod's volumes keep it off the node: a volume's node affinity, or a CSI
    driver it needs that the node's CSINode does not list; None when they let it on."""
    if not rules.volume_affinity:
        return None
    labels = dict(node.labels)
    for terms in rules.volume_affinity:
        if not any(term_matches(term, labels, node.name) for term in terms):
            key = terms[0].match_expressions[0].key if terms and terms[0].match_expressions \
                else ""
            if key.startswith(CSI_DRIVER_LABEL_PREFIX):
                return f"missing CSI driver {key[len(CSI_DRIVER_LABEL_PREFIX):]}"
            if key == CAPACITY_KEY:
                return "not enough free storage"
            return "volume node affinity"
    return None


def selector_ok(rules: PodPlacementRules, node: Node) -> bool:
    """nodeSelector and required node affinity together, as NodeAffinity checks them."""
    return node_selector_ok(rules, node) and affinity_ok(rules, node)


PER_NODE_LABELS = frozenset({"kubernetes.io/hostname", NODE_NAME_LABEL})
"""Labels that name one node: every node carries its own value, so grouping nodes
by them would make every node a kind of its own."""


def uses_node_name(rules: PodPlacementRules) -> bool:
    """Whether the rules look at the node's name: matchFields, or a label that
    names one node (``kubernetes.io/hostname``).

    Such rules cannot share a fit result between nodes that differ only in
    name, so callers that cache per kind of node must check them node by node.
    """
    if any(key in PER_NODE_LABELS for key, _ in rules.node_selector):
        return True
    terms = (*rules.required_affinity, *(t for ts in rules.volume_affinity for t in ts))
    return any(
        term.match_fields or any(r.key in PER_NODE_LABELS for r in term.match_expressions)
        for term in terms
    )


def node_excluded_reason(rules: PodPlacementRules, node: Node) -> str | None:
    """None if the pod may go to the node; otherwise why not, in a few words.

    As kube-scheduler, readiness is read from the taints the node lifecycle
    controller puts on a node that is not Ready (not-ready, or unreachable
    when the condition is Unknown), never from the condition itself: a node
    not Ready that carries neither yet takes pods, as it does for
    kube-scheduler. The marks that explain most (not ready, cordoned) come
    before other taints, so a cordoned node reads "cordoned", not
    "taint node.kubernetes.io/unschedulable:NoSchedule".
    """
    if any(taint.key in _NOT_READY_KEYS and taint.effect in _EXCLUDING_EFFECTS
           and not tolerates(rules.tolerations, taint) for taint in node.taints):
        return "not ready"
    if node.unschedulable and not tolerates(rules.tolerations, UNSCHEDULABLE_TAINT):
        return "cordoned"
    taint = untolerated_taint(rules, node)
    if taint is not None:
        return f"taint {format_taint(taint)}"
    if not rules.features <= node.features:
        return f"missing node feature {min(rules.features - node.features)}"
    if not node_selector_ok(rules, node):
        return "node selector"
    if not affinity_ok(rules, node):
        return "node affinity"
    return volume_refusal(rules, node)
