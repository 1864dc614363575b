"""Host ports, as kube-scheduler's NodePorts decides them: a port taken on a node keeps
another pod asking for it off that node, the gang's own members included.

Pods are read from API objects, as the scheduler reads them.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from gangsched.core.kubeobjects.fields import ObjectError
from gangsched.core.kubeobjects.pods import pod_from_api
from gangsched.core.model.objects import Gang, GangKey, Node, NodeName, Pod, PodKey
from gangsched.core.model.resources import Resources
from gangsched.core.placement.capacity import Capacity, Placement, Snapshot, Unplaceable
from gangsched.core.reasons import PodRulesUnmet, RuleBlock
from gangsched.feed import Feed
from gangsched.mirror import Mirror
from tests.unit.clusters import pod_read_from_api

HOST = "kubernetes.io/hostname"


def node(name: str, hostname: str | None = "") -> Node:
    """A node labelled with its own name as hostname, another's, or (None) no hostname."""
    labels = () if hostname is None else ((HOST, hostname or name),)
    return Node(NodeName(name), Resources.of({"cpu": 8000, "pods": 110}), labels=labels)


def port(number: int, protocol: str | None = None, ip: str | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"containerPort": number, "hostPort": number}
    if protocol:
        entry["protocol"] = protocol
    if ip:
        entry["hostIP"] = ip
    return entry


def api_pod(name: str, *ports: dict[str, Any], on: str | None = None, namespace: str = "ns",
            init: list[dict[str, Any]] | None = None) -> Pod:
    container = {"name": "main", "resources": {"requests": {"cpu": "1"}}, "ports": list(ports)}
    spec: dict[str, Any] = {"containers": [container]}
    if init is not None:
        spec["initContainers"] = init
    return pod_read_from_api(name, spec, on, namespace)


def gang(job: str, *pods: Pod) -> Gang:
    key = GangKey(f"ns/{job}")
    return Gang(key, min_member=len(pods), pending=tuple(replace(p, gang=key) for p in pods))


def place(nodes: list[Node], placing: Gang, *residents: Pod) -> Placement | Unplaceable:
    return Capacity(Snapshot.build(nodes, residents)).place(placing)


def nodes_of(decision: Placement | Unplaceable) -> list[str]:
    assert isinstance(decision, Placement), decision
    return sorted(node for _, node in decision.assignments)


def test_a_port_taken_on_a_node_keeps_the_next_pod_asking_for_it_off_that_node() -> None:
    taken = api_pod("exporter", port(9100), on="n1", namespace="monitoring")
    decision = place([node("n1"), node("n2")], gang("job", api_pod("w", port(9100))), taken)
    assert nodes_of(decision) == ["n2"]


def test_another_protocol_or_another_address_of_the_same_port_does_not_conflict() -> None:
    tcp = api_pod("tcp", port(53, ip="10.0.0.1"), on="n1")
    for asking in (api_pod("udp", port(53, "UDP")), api_pod("other-ip", port(53, ip="10.0.0.2"))):
        assert nodes_of(place([node("n1")], gang("job", asking), tcp)) == ["n1"]


def test_binding_every_address_conflicts_with_any_address_in_both_directions() -> None:
    specific = api_pod("specific", port(8080, ip="10.0.0.1"), on="n1")
    assert isinstance(place([node("n1")], gang("job", api_pod("w", port(8080))), specific),
                      Unplaceable)
    every = api_pod("every", port(8080), on="n1")
    asking = api_pod("w", port(8080, ip="10.0.0.1"))
    assert isinstance(place([node("n1")], gang("job", asking), every), Unplaceable)


def test_two_members_with_one_port_land_on_two_nodes_or_wait_whole_naming_the_port() -> None:
    members = gang("job", api_pod("w-0", port(8080)), api_pod("w-1", port(8080)))
    assert nodes_of(place([node("n1"), node("n2")], members)) == ["n1", "n2"]
    waiting = place([node("n1")], members)
    assert isinstance(waiting, Unplaceable) and isinstance(waiting.reason, PodRulesUnmet)
    assert waiting.reason.shown == (RuleBlock(NodeName("n1"), "host port", "TCP/8080", "n1",
                                              other=PodKey("ns/w-0"), same_gang=True),)


def test_ports_are_held_per_node_object_whatever_its_hostname_label() -> None:
    """kube-scheduler keeps host ports per node object: a node without a hostname label
    still has its ports taken, and two nodes sharing one hostname value are two."""
    taken = api_pod("exporter", port(9100), on="n1")
    asking = gang("job", api_pod("w", port(9100)))
    assert isinstance(place([node("n1", None)], asking, taken), Unplaceable)
    assert nodes_of(place([node("n1", None), node("n2", None)], asking, taken)) == ["n2"]
    twins = [node("n1", "same"), node("n2", "same")]
    assert nodes_of(place(twins, asking, taken)) == ["n2"]
    members = gang("job", api_pod("w-0", port(8080)), api_pod("w-1", port(8080)))
    assert isinstance(place([node("n1", None)], members), Unplaceable)
    assert nodes_of(place([node("n1", None), node("n2", None)], members)) == ["n1", "n2"]
    assert nodes_of(place(twins, members)) == ["n1", "n2"]


def test_a_terminating_pod_still_holds_its_port() -> None:
    leaving = replace(api_pod("old", port(8080), on="n1"), terminating=True)
    decision = place([node("n1"), node("n2")], gang("job", api_pod("w", port(8080))), leaving)
    assert nodes_of(decision) == ["n2"]


def test_sidecars_ports_count_and_ports_of_init_containers_that_finish_do_not() -> None:
    sidecar = {"name": "proxy", "restartPolicy": "Always", "ports": [port(15001)]}
    setup = {"name": "setup", "ports": [port(8080)]}
    pod = api_pod("w", init=[sidecar, setup])
    holder = api_pod("holder", port(15001), on="n1")
    assert isinstance(place([node("n1")], gang("job", pod), holder), Unplaceable)
    setup_holder = api_pod("setup-holder", port(8080), on="n1")
    assert nodes_of(place([node("n1")], gang("job", pod), setup_holder)) == ["n1"]


def test_a_host_port_that_is_not_a_port_number_is_a_clear_error() -> None:
    with pytest.raises(ObjectError, match="hostPort must be a port number"):
        api_pod("w", {"containerPort": 80, "hostPort": 70000})


def test_through_the_mirror_a_running_pods_anti_affinity_keeps_a_plain_pod_off_its_node(
) -> None:
    """The mirror keeps the distinct anti-affinity terms of the pods on nodes, so a gang
    without rules of its own asks those terms only; one that selects it still counts."""
    mirror = Mirror(scheduler_names=frozenset({"gang"}))
    feed = Feed(mirror)
    for name in ("n1", "n2"):
        feed.upsert("nodes", {"metadata": {"name": name, "labels": {HOST: name}},
                              "status": {"allocatable": {"cpu": "8", "pods": "110"},
                                         "conditions": [{"type": "Ready", "status": "True"}]}})
    feed.upsert("pods", {
        "metadata": {"name": "loner", "namespace": "ns", "uid": "u-loner",
                     "creationTimestamp": "2024-05-01T12:00:00Z"},
        "spec": {"nodeName": "n1", "containers": [{"name": "main"}], "affinity": {
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": HOST}]}}},
        "status": {"phase": "Running"}})
    snapshot = mirror.view().snapshot
    assert snapshot.anti_affinity_terms is not None and len(snapshot.anti_affinity_terms) == 1
    plain = pod_from_api({
        "metadata": {"name": "w", "namespace": "ns", "labels": {"app": "web"},
                     "creationTimestamp": "2024-05-01T12:00:00Z"},
        "spec": {"containers": [{"name": "main", "resources": {"requests": {"cpu": "1"}}}]},
        "status": {"phase": "Pending"}})
    assert not plain.has_pod_rules
    assert nodes_of(Capacity(snapshot).place(gang("job", plain))) == ["n2"]
    other = replace(plain, labels=(("app", "db"),))
    assert nodes_of(Capacity(snapshot).place(gang("job", other))) == ["n1"]
