"""Node filters: taints and tolerations, selectors and affinity, cordoned and not ready."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from gangsched.core.fit.nodefit import (
    node_excluded_reason,
    requirement_matches,
    selector_ok,
    taints_ok,
    tolerates,
)
from gangsched.core.kubeobjects.nodes import node_from_api
from gangsched.core.model.objects import (
    Node,
    PodPlacementRules,
    SelectorRequirement,
    SelectorTerm,
    Taint,
    Toleration,
)
from gangsched.core.placement.capacity import Placement, Snapshot, place_gang
from tests.unit.clusters import gang, node, nodes_used, pod, pod_read_from_api

BUSY = Taint("gpu", "busy", "NoSchedule")
NOT_READY = Taint("node.kubernetes.io/not-ready", "", "NoSchedule")


@pytest.mark.parametrize(
    ("toleration", "taint", "expected"),
    [
        (Toleration("gpu", "Equal", "busy", "NoSchedule"), BUSY, True),
        (Toleration("gpu", "Equal", "idle", "NoSchedule"), BUSY, False),
        (Toleration("gpu", "Equal", "busy", ""), BUSY, True),  # empty effect: any effect
        (Toleration("gpu", "Equal", "busy", "NoExecute"), BUSY, False),
        (Toleration("gpu", "Exists", "", "NoSchedule"), BUSY, True),
        (Toleration("gpu", "Exists", "", ""), BUSY, True),
        (Toleration("other", "Exists", "", ""), BUSY, False),
        (Toleration("", "Exists", "", ""), BUSY, True),  # empty key + Exists: everything
        (Toleration("", "Exists", "", "NoExecute"), BUSY, False),
        (Toleration("gpu", "", "busy", ""), BUSY, True),  # empty operator means Equal
        (Toleration("gpu", "Gt", "busy", ""), BUSY, False),  # unknown operator: nothing
        (Toleration("k", "Equal", "", "NoSchedule"), Taint("k", "", "NoSchedule"), True),
    ],
)
def test_toleration_matching(toleration: Toleration, taint: Taint, expected: bool) -> None:
    assert tolerates([toleration], taint) is expected


def test_only_no_schedule_and_no_execute_exclude() -> None:
    rules = PodPlacementRules()
    assert not taints_ok(rules, node("n", taints=[BUSY]))
    assert not taints_ok(rules, node("n", taints=[Taint("k", "v", "NoExecute")]))
    assert taints_ok(rules, node("n", taints=[Taint("k", "v", "PreferNoSchedule")]))
    tolerant = PodPlacementRules(tolerations=(Toleration("gpu", "Exists", "", ""),))
    assert taints_ok(tolerant, node("n", taints=[BUSY]))
    assert not taints_ok(tolerant, node("n", taints=[BUSY, Taint("x", "", "NoExecute")]))


LABELS = {"zone": "a", "gpu-count": "8", "tier": "gold"}


@pytest.mark.parametrize(
    ("requirement", "expected"),
    [
        (SelectorRequirement("zone", "In", ("a", "b")), True),
        (SelectorRequirement("zone", "In", ("b",)), False),
        (SelectorRequirement("missing", "In", ("a",)), False),
        (SelectorRequirement("zone", "NotIn", ("b",)), True),
        (SelectorRequirement("zone", "NotIn", ("a",)), False),
        (SelectorRequirement("missing", "NotIn", ("a",)), True),
        (SelectorRequirement("zone", "Exists", ()), True),
        (SelectorRequirement("missing", "Exists", ()), False),
        (SelectorRequirement("missing", "DoesNotExist", ()), True),
        (SelectorRequirement("zone", "DoesNotExist", ()), False),
        (SelectorRequirement("gpu-count", "Gt", ("4",)), True),
        (SelectorRequirement("gpu-count", "Gt", ("8",)), False),
        (SelectorRequirement("gpu-count", "Lt", ("9",)), True),
        (SelectorRequirement("gpu-count", "Lt", ("8",)), False),
        (SelectorRequirement("tier", "Gt", ("1",)), False),  # non-numeric label
        (SelectorRequirement("missing", "Lt", ("1",)), False),
        # invalid requirements match nothing, as apimachinery rejects them
        (SelectorRequirement("gpu-count", "Gt", ("four",)), False),
        (SelectorRequirement("gpu-count", "Gt", ("1", "2")), False),
        (SelectorRequirement("zone", "In", ()), False),
        (SelectorRequirement("zone", "Exists", ("a",)), False),
    ],
)
def test_selector_operators(requirement: SelectorRequirement, expected: bool) -> None:
    assert requirement_matches(requirement, LABELS) is expected


def affinity(*terms: SelectorTerm) -> PodPlacementRules:
    return PodPlacementRules(required_affinity=terms)


def test_node_selector_needs_every_label_exactly() -> None:
    n = node("n1", labels=LABELS)
    assert selector_ok(PodPlacementRules(node_selector=(("zone", "a"),)), n)
    assert selector_ok(PodPlacementRules(node_selector=(("tier", "gold"), ("zone", "a"))), n)
    assert not selector_ok(PodPlacementRules(node_selector=(("zone", "b"),)), n)
    assert not selector_ok(PodPlacementRules(node_selector=(("absent", ""),)), n)


def test_affinity_terms_are_ored_and_requirements_anded() -> None:
    n = node("n1", labels=LABELS)
    in_a = SelectorRequirement("zone", "In", ("a",))
    in_b = SelectorRequirement("zone", "In", ("b",))
    gold = SelectorRequirement("tier", "In", ("gold",))
    assert selector_ok(affinity(SelectorTerm((in_a, gold))), n)
    assert not selector_ok(affinity(SelectorTerm((in_b, gold))), n)
    assert selector_ok(affinity(SelectorTerm((in_b,)), SelectorTerm((gold,))), n)
    assert not selector_ok(affinity(SelectorTerm()), n)  # an empty term matches nothing


def test_match_fields_on_node_name() -> None:
    named = SelectorRequirement("metadata.name", "In", ("n1",))
    not_named = SelectorRequirement("metadata.name", "NotIn", ("n1",))
    assert selector_ok(affinity(SelectorTerm(match_fields=(named,))), node("n1"))
    assert not selector_ok(affinity(SelectorTerm(match_fields=(named,))), node("n2"))
    assert selector_ok(affinity(SelectorTerm(match_fields=(not_named,))), node("n2"))
    assert not selector_ok(affinity(SelectorTerm(match_fields=(not_named,))), node("n1"))
    two_values = SelectorRequirement("metadata.name", "In", ("n1", "n2"))
    assert not selector_ok(affinity(SelectorTerm(match_fields=(two_values,))), node("n1"))
    zone = SelectorRequirement("zone", "In", ("a",))
    both = SelectorTerm(match_expressions=(zone,), match_fields=(named,))
    assert selector_ok(affinity(both), node("n1", labels={"zone": "a"}))
    assert not selector_ok(affinity(both), node("n1", labels={"zone": "b"}))


def test_excluded_reasons() -> None:
    plain = PodPlacementRules()
    assert node_excluded_reason(plain, node("n")) is None
    assert node_excluded_reason(plain, node("n", taints=[BUSY])) == "taint gpu=busy:NoSchedule"
    no_value = Taint("dedicated", "", "NoExecute")
    assert node_excluded_reason(plain, node("n", taints=[no_value])) == "taint dedicated:NoExecute"
    assert node_excluded_reason(plain, node("n", unschedulable=True)) == "cordoned"
    not_ready = node("n", ready=False, taints=[NOT_READY])
    assert node_excluded_reason(plain, not_ready) == "not ready"
    zone_b = PodPlacementRules(node_selector=(("zone", "b"),))
    assert node_excluded_reason(zone_b, node("n", labels={"zone": "a"})) == "node selector"
    in_b = affinity(SelectorTerm((SelectorRequirement("zone", "In", ("b",)),)))
    assert node_excluded_reason(in_b, node("n", labels={"zone": "a"})) == "node affinity"


def test_cordoned_and_not_ready_can_be_tolerated_like_their_taints() -> None:
    daemon = PodPlacementRules(tolerations=(
        Toleration("node.kubernetes.io/unschedulable", "Exists", "", "NoSchedule"),
        Toleration("node.kubernetes.io/not-ready", "Exists", "", ""),
    ))
    not_ready = node("n", unschedulable=True, ready=False, taints=[NOT_READY])
    assert node_excluded_reason(daemon, not_ready) is None
    # the default NoExecute toleration for not-ready does not let a pod schedule there
    default = PodPlacementRules(tolerations=(
        Toleration("node.kubernetes.io/not-ready", "Exists", "", "NoExecute"),
    ))
    assert node_excluded_reason(default, node("n", ready=False, taints=[NOT_READY])) == \
        "not ready"


def test_a_node_marked_unreachable_takes_the_pods_that_tolerate_the_mark() -> None:
    """A node whose Ready condition is Unknown is tainted unreachable, not not-ready,
    by the node lifecycle controller; kube-scheduler then lets on the pods that
    tolerate that taint, and so must we."""
    lost = node("n", ready=False, taints=[
        Taint("node.kubernetes.io/unreachable", "", "NoSchedule"),
        Taint("node.kubernetes.io/unreachable", "", "NoExecute"),
    ])
    tolerant = PodPlacementRules(tolerations=(
        Toleration("node.kubernetes.io/unreachable", "Exists", "", ""),
    ))
    assert node_excluded_reason(tolerant, lost) is None
    # the NoExecute tolerations every pod gets by default do not let it on
    default = PodPlacementRules(tolerations=(
        Toleration("node.kubernetes.io/not-ready", "Exists", "", "NoExecute"),
        Toleration("node.kubernetes.io/unreachable", "Exists", "", "NoExecute"),
    ))
    assert node_excluded_reason(default, lost) == "not ready"


def test_a_node_not_ready_that_nothing_has_tainted_yet_takes_pods() -> None:
    """kube-scheduler reads readiness from the node lifecycle controller's taints
    alone, never from the Ready condition: until the taint comes, it binds there."""
    assert node_excluded_reason(PodPlacementRules(), node("n", ready=False)) is None
    cordoned = node("n", ready=False, unschedulable=True)
    assert node_excluded_reason(PodPlacementRules(), cordoned) == "cordoned"


def api_node(name: str, *features: str) -> Node:
    return node_from_api({
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                   "declaredFeatures": list(features),
                   "conditions": [{"type": "Ready", "status": "True"}]}})


RESTART_ALL = {"action": "RestartAllContainers",
               "exitCodes": {"operator": "In", "values": [42]}}


@pytest.mark.parametrize(
    ("spec", "feature"),
    [
        ({"containers": [{"name": "main", "restartPolicyRules": [RESTART_ALL]}]},
         "RestartAllContainersOnContainerExits"),
        ({"initContainers": [{"name": "init", "restartPolicy": "Always",
                              "restartPolicyRules": [RESTART_ALL]}]},
         "RestartAllContainersOnContainerExits"),
        ({"hostNetwork": True, "hostUsers": False}, "UserNamespacesHostNetworkSupport"),
        ({"containers": [{"name": "main", "volumeMounts": [
            {"name": "data", "mountPath": "/d", "bindMountOptions": ["nosuid"]}]}]},
         "VolumeBindMountOptions"),
    ],
)
def test_a_pod_needing_a_node_feature_goes_only_where_a_node_declares_it(
    spec: dict[str, Any], feature: str
) -> None:
    """NodeDeclaredFeatures: the spec's fields say which features a node must declare in
    ``status.declaredFeatures``; one that does not is refused, even beside one that does
    and is otherwise the same node."""
    rules = pod_read_from_api("p", spec).rules
    assert node_excluded_reason(rules, api_node("n1", feature, "Other")) is None
    assert node_excluded_reason(rules, api_node("n2", "Other")) == \
        f"missing node feature {feature}"
    plain = Snapshot.build([api_node("n1"), api_node("n2", feature)], ())
    placing = gang("ns/a", [replace(pod("ns/p-0", cpu="1"), rules=rules)])
    decision = place_gang(plain, placing)
    assert isinstance(decision, Placement)
    assert nodes_used(decision) == {"n2"}


@pytest.mark.parametrize(
    "spec",
    [
        {"containers": [{"name": "main", "restartPolicyRules": [
            {"action": "Restart", "exitCodes": {"operator": "In", "values": [1]}}]}]},
        {"hostNetwork": True},
        {"hostUsers": False},
        {"containers": [{"name": "main", "volumeMounts": [{"name": "d", "mountPath": "/d"}]}]},
    ],
)
def test_a_pod_needing_no_node_feature_goes_anywhere(spec: dict[str, Any]) -> None:
    assert node_excluded_reason(pod_read_from_api("p", spec).rules, api_node("n1")) is None
