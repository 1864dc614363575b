"""Inter-pod terms that select namespaces by their labels (``namespaceSelector``),
honoured as kube-scheduler's InterPodAffinity reads them: a term selects pods of
the namespaces it lists or whose labels its selector matches."""

from __future__ import annotations

from typing import Any

import pytest

from gangsched.core.fit.interpod import PodRule, pod_rules_refusal
from gangsched.core.fit.namespaces import resolve_pod
from gangsched.core.kubeobjects.fields import ObjectError
from gangsched.core.model.objects import NodeName, Pod, PodKey
from gangsched.feed import Feed
from gangsched.mirror import Mirror
from tests.unit.test_interpod import HOST, anti, api_pod, node, term

TEAM_A = {"team": "a"}
LABELS = {"blue": {"team": "a"}, "green": {"team": "a", "tier": "gold"}, "red": {"team": "b"}}
NODES = {n.name: n for n in (node("n0"), node("n1"))}


def by_labels(*, namespaces: tuple[str, ...] = (), **selector: Any) -> dict[str, Any]:
    found = {**term(HOST, role="db"), "namespaceSelector": selector}
    if namespaces:
        found["namespaces"] = list(namespaces)
    return found


def db(namespace: str, on: str = "n0") -> Pod:
    return api_pod("db", namespace=namespace, labels={"role": "db"}, on=on)


def refusal_on(pod: Pod, where: str, *residents: Pod) -> PodRule | None:
    refused = pod_rules_refusal(resolve_pod(pod, LABELS), NodeName(where), NODES,
                                [resolve_pod(p, LABELS) for p in residents])
    return None if refused is None else refused.rule


@pytest.mark.parametrize(("selector", "namespaces", "selected"), [
    ({"matchLabels": TEAM_A}, (), ("blue", "green")),
    ({"matchLabels": TEAM_A}, ("red",), ("blue", "green", "red")),
    ({"matchLabels": {"team": "c"}}, (), ()),
    ({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, (), ("green",)),
    ({"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["a"]}]}, (),
     ("red",)),
    ({"matchLabels": TEAM_A,
      "matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}, (), ("blue",)),
])
def test_a_selector_selects_the_namespaces_its_labels_match_and_those_listed(
    selector: dict[str, Any], namespaces: tuple[str, ...], selected: tuple[str, ...]
) -> None:
    pod = resolve_pod(api_pod("w", affinity=anti(by_labels(namespaces=namespaces, **selector))),
                      LABELS)
    assert pod.anti_affinity[0].namespaces == selected


def test_an_empty_selector_selects_every_namespace_and_none_the_own_namespace() -> None:
    every = api_pod("w", affinity=anti(by_labels()))
    assert refusal_on(every, "n0", db("anywhere")) is PodRule.ANTI_AFFINITY
    own = api_pod("w", affinity=anti(term(HOST, role="db")))
    assert refusal_on(own, "n0", db("ns")) is PodRule.ANTI_AFFINITY
    assert refusal_on(own, "n0", db("blue")) is None


@pytest.mark.parametrize(("namespace", "rule"), [
    ("blue", PodRule.ANTI_AFFINITY), ("green", PodRule.ANTI_AFFINITY), ("red", None),
    ("unknown", None)])
def test_anti_affinity_keeps_off_pods_of_the_namespaces_selected_only(
    namespace: str, rule: PodRule | None
) -> None:
    pod = api_pod("w", affinity=anti(by_labels(matchLabels=TEAM_A)))
    assert refusal_on(pod, "n0", db(namespace)) is rule
    assert refusal_on(pod, "n1", db(namespace)) is None


@pytest.mark.parametrize(("namespace", "refused"), [("blue", False), ("red", True)])
def test_affinity_needs_a_pod_of_a_namespace_selected(namespace: str, refused: bool) -> None:
    affinity = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        by_labels(matchLabels=TEAM_A)]}}
    pod = api_pod("w", affinity=affinity)
    assert (refusal_on(pod, "n0", db(namespace)) is PodRule.AFFINITY) is refused


@pytest.mark.parametrize(("namespace", "rule"), [
    ("blue", PodRule.EXISTING_ANTI_AFFINITY), ("red", None)])
def test_a_running_pods_anti_affinity_keeps_away_pods_of_the_namespaces_it_selects(
    namespace: str, rule: PodRule | None
) -> None:
    holder = api_pod("guard", namespace="ops", on="n0",
                     affinity=anti({**by_labels(matchLabels=TEAM_A),
                                    "labelSelector": {"matchLabels": {"role": "worker"}}}))
    worker = api_pod("w", namespace=namespace, labels={"role": "worker"})
    assert refusal_on(worker, "n0", holder) is rule
    assert refusal_on(worker, "n1", holder) is None


@pytest.mark.parametrize("selector", [
    {"matchLabels": ["team"]},
    {"matchExpressions": [{"key": "team", "operator": "Near", "values": ["a"]}]},
    "team=a",
])
def test_a_malformed_namespace_selector_is_an_object_error(selector: object) -> None:
    with pytest.raises(ObjectError, match=r"namespaceSelector"):
        api_pod("w", affinity=anti({**term(HOST, role="db"), "namespaceSelector": selector}))


def namespace(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}}


def test_the_mirror_resolves_terms_again_when_a_namespaces_labels_change() -> None:
    """A namespace labelled after the pod arrived selects it from then on, and the
    change wakes the scheduler; a change no term reads does not."""
    mirror = Mirror(scheduler_names=frozenset({"gang"}))
    feed = Feed(mirror)
    feed.replace("namespaces", [namespace("blue"), namespace("red", team="b")])
    worker = {"metadata": {"name": "w", "namespace": "ns", "uid": "u",
                           "creationTimestamp": "2026-01-01T00:00:00Z"},
              "spec": {"schedulerName": "gang", "containers": [{"name": "c"}],
                       "affinity": anti(by_labels(matchLabels=TEAM_A))},
              "status": {"phase": "Pending"}}
    keeper = {"metadata": {"name": "k", "namespace": "ops", "uid": "k",
                           "creationTimestamp": "2026-01-01T00:00:00Z"},
              "spec": {"schedulerName": "kube", "nodeName": "n1", "containers": [{"name": "c"}],
                       "affinity": anti(by_labels(matchLabels=TEAM_A))},
              "status": {"phase": "Running"}}
    feed.replace("pods", [worker, keeper])
    key = PodKey("ns/w")

    def held() -> list[tuple[str, ...]]:
        """The namespaces of the terms the pods on nodes hold, as a cycle reads them."""
        terms = mirror.view().snapshot.anti_affinity_terms or ()
        return [term.namespaces for term in terms]

    def selected() -> tuple[str, ...]:
        return mirror.view().pods[key].pod.anti_affinity[0].namespaces

    assert selected() == ()
    assert feed.upsert("namespaces", namespace("blue", team="a"))
    assert selected() == ("blue",)
    assert held() == [("blue",)]
    assert [m.pod.anti_affinity[0].namespaces for m in mirror.view().members] == [("blue",)]
    assert not feed.upsert("namespaces", namespace("red", team="b", owner="x"))
    assert feed.delete("namespaces", namespace("blue", team="a"))
    assert selected() == ()
    assert held() == [()]
    feed.upsert("namespaces", namespace("blue", team="a"))
    feed.replace("namespaces", [namespace("red", team="b")])
    assert selected() == ()
