"""Rules gangsched does not evaluate yet: the pod's gang waits, naming the rule, never
bound where kube-scheduler would refuse it."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from gangsched.core.kubeobjects import ObjectError, pod_from_api
from gangsched.core.model import Gang, GangKey, Pod, PodKey, UnhonouredRule
from gangsched.core.reasons import Unhonoured, render
from gangsched.core.unhonoured import against_existing_anti_affinity
from tests.unit.test_cycle import SIX_CPU, cycle, gang, placed, reasons

ANTI = UnhonouredRule.POD_ANTI_AFFINITY
ONE_PER_NODE = {"labelSelector": {"matchLabels": {"job": "train"}},
                "topologyKey": "kubernetes.io/hostname"}


def api_pod(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "x", "namespace": "ns",
                     "creationTimestamp": "2024-05-01T12:00:00Z"},
        "spec": {"containers": [{"name": "main"}], **spec},
        "status": {"phase": "Pending"},
    }


def spread(when: str | None) -> dict[str, Any]:
    constraint: dict[str, Any] = {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                  "labelSelector": {"matchLabels": {"job": "train"}}}
    if when is not None:
        constraint["whenUnsatisfiable"] = when
    return constraint


BY_NAMESPACE_LABELS = {**ONE_PER_NODE, "namespaceSelector": {"matchLabels": {"team": "a"}}}


@pytest.mark.parametrize(("spec", "rules"), [
    ({"affinity": {"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [BY_NAMESPACE_LABELS]}}}, (ANTI,)),
    ({"affinity": {"podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [ONE_PER_NODE, BY_NAMESPACE_LABELS]}}},
     (UnhonouredRule.POD_AFFINITY,)),
    ({"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}, ()),
    ({"volumes": [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]},
     ()),
    ({"affinity": {"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [BY_NAMESPACE_LABELS]}},
      "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]},
     (ANTI,)),
])
def test_required_rules_are_read_as_unhonoured(
    spec: dict[str, Any], rules: tuple[UnhonouredRule, ...]
) -> None:
    assert pod_from_api(api_pod(**spec)).unhonoured == rules


@pytest.mark.parametrize("spec", [
    {},
    {"affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 10, "podAffinityTerm": ONE_PER_NODE}]}}},
    {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": []}}},
    {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "zone", "operator": "In", "values": ["a"]}]}]}}}},
    {"topologySpreadConstraints": [spread("ScheduleAnyway")]},
    {"topologySpreadConstraints": [spread("ScheduleAnyway"), spread("DoNotSchedule")]},
    {"affinity": {"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [ONE_PER_NODE]}}},
    {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {**ONE_PER_NODE, "namespaceSelector": {}}]}}},
    {"volumes": [{"name": "a", "emptyDir": {}}, {"name": "b", "configMap": {"name": "c"}},
                 {"name": "c", "secret": {"secretName": "s"}}, {"name": "d", "projected": {}},
                 {"name": "e", "downwardAPI": {}}, {"name": "f", "hostPath": {"path": "/x"}}]},
    {"resourceClaims": []},
])
def test_honoured_rules_preferences_and_plain_volumes_are_not_unhonoured(
    spec: dict[str, Any],
) -> None:
    assert pod_from_api(api_pod(**spec)).unhonoured == ()


@pytest.mark.parametrize("spec", [
    {"volumes": {"name": "data"}},
    {"topologySpreadConstraints": ["zone"]},
    {"affinity": {"podAntiAffinity": ["x"]}},
])
def test_malformed_rules_are_an_object_error(spec: dict[str, Any]) -> None:
    with pytest.raises(ObjectError, match=r"spec\.(volumes|topologySpread|affinity)"):
        pod_from_api(api_pod(**spec))


def carrying(g: Gang, *which: int, rules: tuple[UnhonouredRule, ...] = (ANTI,)) -> Gang:
    pods = tuple(replace(p, unhonoured=rules) if i in which else p
                 for i, p in enumerate(g.pending))
    return replace(g, pending=pods)


def test_one_member_with_an_unhonoured_rule_keeps_its_whole_gang_waiting() -> None:
    result = cycle(SIX_CPU, [carrying(gang("ns/a", 3), 1, 2), gang("ns/b", 2, created=1)])
    assert placed(result) == ["ns/b"]
    assert reasons(result)["ns/a"] == Unhonoured(PodKey("ns/a-1"), (ANTI,), 1)


def test_a_waiting_gang_holds_no_room_however_long_it_waited() -> None:
    giant = carrying(gang("ns/giant", 6), 0)
    result = cycle(SIX_CPU, [giant, gang("ns/small", 2, created=5)],
                   waiting_since={"ns/giant": 0.0}, now=10_000.0)
    assert placed(result) == ["ns/small"]
    assert isinstance(reasons(result)["ns/giant"], Unhonoured)


def test_the_reason_names_the_pod_and_the_rule() -> None:
    text = render(Unhonoured(PodKey("ns/w-0"), (ANTI, UnhonouredRule.POD_AFFINITY), 2))
    assert "pod ns/w-0" in text
    assert "required pod anti-affinity" in text and "required pod affinity" in text
    assert "2 more pods" in text


def holder(term: dict[str, Any], *, node: str | None = "n1", phase: str = "Running",
           namespace: str = "ns") -> Pod:
    obj = api_pod(affinity={"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [term]}}, nodeName=node)
    obj["metadata"].update(name="db", namespace=namespace, labels={"app": "db", "tier": "a"})
    obj["status"]["phase"] = phase
    return pod_from_api(obj)


def newcomer(name: str = "w-0", namespace: str = "ns", **labels: str) -> Gang:
    obj = api_pod()
    obj["metadata"].update(name=name, namespace=namespace, labels=labels)
    pod = pod_from_api(obj)
    return Gang(key=GangKey(f"{namespace}/g"), min_member=1, pending=(pod,))


EXISTING = UnhonouredRule.EXISTING_ANTI_AFFINITY
AWAY_FROM_WORKERS = {"labelSelector": {"matchLabels": {"role": "worker"}},
                     "topologyKey": "kubernetes.io/hostname",
                     "namespaceSelector": {"matchLabels": {"team": "a"}}}
"""Selects namespaces by their labels, which the core does not see: still unhonoured."""


def marked(gang_: Gang, *holders: Pod) -> tuple[UnhonouredRule, ...]:
    return against_existing_anti_affinity([gang_], holders)[0].pending[0].unhonoured


def test_a_bound_pod_whose_anti_affinity_selects_the_newcomer_makes_it_wait() -> None:
    assert marked(newcomer(role="worker"), holder(AWAY_FROM_WORKERS)) == (EXISTING,)
    result = cycle(SIX_CPU, against_existing_anti_affinity(
        [newcomer(role="worker")], [holder(AWAY_FROM_WORKERS)]))
    assert placed(result) == []
    reason = reasons(result)["ns/g"]
    assert isinstance(reason, Unhonoured) and reason.rules == (EXISTING,)


@pytest.mark.parametrize(("term", "labels", "namespace", "selected"), [
    (AWAY_FROM_WORKERS, {"role": "ps"}, "ns", False),
    (AWAY_FROM_WORKERS, {"role": "worker"}, "other", True),
    ({**AWAY_FROM_WORKERS, "namespaceSelector": {}}, {"role": "worker"}, "other", False),
    ({**AWAY_FROM_WORKERS, "labelSelector": None}, {"role": "worker"}, "ns", False),
    ({**AWAY_FROM_WORKERS, "labelSelector": {}, "topologyKey": "zone"}, {}, "ns", True),
    ({**AWAY_FROM_WORKERS, "labelSelector": {"matchExpressions": [
        {"key": "role", "operator": "In", "values": ["worker", "ps"]}]},
      "topologyKey": "zone"}, {"role": "ps"}, "ns", True),
    ({**AWAY_FROM_WORKERS, "labelSelector": {}, "matchLabelKeys": ["tier"],
      "topologyKey": "zone"}, {"tier": "b"}, "ns", False),
    ({**AWAY_FROM_WORKERS, "labelSelector": {}, "matchLabelKeys": ["tier"],
      "topologyKey": "zone"}, {"tier": "a"}, "ns", True),
    ({**AWAY_FROM_WORKERS, "labelSelector": {}, "mismatchLabelKeys": ["tier"],
      "topologyKey": "zone"}, {"tier": "a"}, "ns", False),
])
def test_a_term_selecting_namespaces_by_labels_marks_the_pods_it_may_select(
    term: dict[str, Any], labels: dict[str, str], namespace: str, selected: bool
) -> None:
    assert marked(newcomer(namespace=namespace, **labels), holder(term)) == (
        (EXISTING,) if selected else ())


@pytest.mark.parametrize(("node", "phase"), [(None, "Pending"), ("n1", "Succeeded")])
def test_pods_not_on_a_node_or_finished_keep_nobody_away(node: str | None, phase: str) -> None:
    assert marked(newcomer(role="worker"), holder(AWAY_FROM_WORKERS, node=node,
                                                  phase=phase)) == ()
