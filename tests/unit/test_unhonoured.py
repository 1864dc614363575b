"""Rules gangsched does not evaluate yet: the pod's gang waits, naming the rule, never
bound where kube-scheduler would refuse it."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from gangsched.core.kubeobjects import ObjectError, pod_from_api
from gangsched.core.model import Gang, PodKey, UnhonouredRule
from gangsched.core.reasons import Unhonoured, render
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


@pytest.mark.parametrize(("spec", "rules"), [
    ({"affinity": {"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [ONE_PER_NODE]}}}, (ANTI,)),
    ({"affinity": {"podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [ONE_PER_NODE]}}},
     (UnhonouredRule.POD_AFFINITY,)),
    ({"topologySpreadConstraints": [spread("ScheduleAnyway"), spread("DoNotSchedule")]},
     (UnhonouredRule.TOPOLOGY_SPREAD,)),
    ({"topologySpreadConstraints": [spread(None)]}, (UnhonouredRule.TOPOLOGY_SPREAD,)),
    ({"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]},
     (UnhonouredRule.PERSISTENT_VOLUME_CLAIM,)),
    ({"volumes": [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]},
     (UnhonouredRule.EPHEMERAL_VOLUME,)),
    ({"resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu-0"}]},
     (UnhonouredRule.RESOURCE_CLAIM,)),
    ({"affinity": {"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [ONE_PER_NODE]}},
      "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]},
     (ANTI, UnhonouredRule.PERSISTENT_VOLUME_CLAIM)),
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
    {"volumes": [{"name": "a", "emptyDir": {}}, {"name": "b", "configMap": {"name": "c"}},
                 {"name": "c", "secret": {"secretName": "s"}}, {"name": "d", "projected": {}},
                 {"name": "e", "downwardAPI": {}}, {"name": "f", "hostPath": {"path": "/x"}}]},
    {"resourceClaims": []},
])
def test_preferences_and_plain_volumes_need_nothing(spec: dict[str, Any]) -> None:
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
    text = render(Unhonoured(PodKey("ns/w-0"), (ANTI, UnhonouredRule.RESOURCE_CLAIM), 2))
    assert "pod ns/w-0" in text
    assert "required pod anti-affinity" in text and "resource claim" in text
    assert "2 more pods" in text
