"""Pods with PersistentVolumeClaims, placed as kube-scheduler would and bound whole.

The session's control plane runs the persistent-volume controllers and a real
dynamic provisioner (rancher's local-path-provisioner, StorageClass
``local-path``, WaitForFirstConsumer), which makes a PersistentVolume on the
node a claim's ``volume.kubernetes.io/selected-node`` names.
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pykube
import pytest

from devcluster.controlplane import LocalCluster, NodeShape
from tests.e2e import oracle, volume_oracle
from tests.e2e.conftest import SchedulerProcess, start_gangsched, stop_gangsched
from tests.e2e.scenario import only_nodes
from tests.e2e.test_explain_status import run_cli
from tests.e2e.workspace import Workspace, bound, node_of, scheduled_condition, wait_for

SELECTED_NODE = "volume.kubernetes.io/selected-node"


@pytest.fixture
def three_nodes(cluster: LocalCluster) -> list[str]:
    return only_nodes(cluster, 3, NodeShape(cpu="2", memory="8Gi"))


def claim(ws: Workspace, name: str, *, storage_class: str = "local-path",
          volume: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "storageClassName": storage_class,
                            "resources": {"requests": {"storage": "1Gi"}}}
    if volume:
        spec["volumeName"] = volume
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": ws.name}, "spec": spec}


def with_claim(pod: dict[str, Any], claim_name: str) -> dict[str, Any]:
    pod["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim_name}}]
    return pod


def with_ephemeral(pod: dict[str, Any]) -> dict[str, Any]:
    pod["spec"]["volumes"] = [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {
        "accessModes": ["ReadWriteOnce"], "storageClassName": "local-path",
        "resources": {"requests": {"storage": "1Gi"}}}}}}]
    return pod


def claims(ws: Workspace) -> dict[str, dict[str, Any]]:
    return {c.name: c.obj for c in pykube.PersistentVolumeClaim.objects(ws.api,
                                                                      namespace=ws.name)}


def volume_node(cluster: LocalCluster, name: str) -> str:
    """The one node a PersistentVolume's node affinity names."""
    volume = pykube.PersistentVolume.objects(cluster.client).get(name=name).obj
    terms = volume["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
    assert len(terms) == 1 and len(terms[0]["matchExpressions"]) == 1, terms
    values = terms[0]["matchExpressions"][0]["values"]
    assert len(values) == 1, values
    return str(values[0])


def members(ws: Workspace, prefix: str) -> list[dict[str, Any]]:
    return [p for name, p in ws.pods().items() if name.startswith(prefix)]


def saying(ws: Workspace, pod: str, words: str) -> dict[str, Any] | None:
    condition = dict(scheduled_condition(ws.pods().get(pod, {})) or {})
    if condition.get("status") == "False" and words in str(condition.get("message", "")):
        return condition
    return None


@pytest.fixture
def bound_early(ws: Workspace) -> Iterator[list[str]]:
    """Members of gang ``job`` seen bound, every 50 ms while the test runs, while a claim
    of the namespace was not bound yet."""
    early: list[str] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.05):
            on_nodes = [p["metadata"]["name"] for p in bound(members(ws, "job-"))]
            phases = [c.get("status", {}).get("phase") for c in claims(ws).values()]
            if on_nodes and any(phase != "Bound" for phase in phases):
                early.extend(on_nodes)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    yield early
    stop.set()
    thread.join()


@pytest.mark.usefixtures("three_nodes")
def test_a_gang_whose_claims_wait_for_their_first_consumer_is_provisioned_and_bound_whole(
    ws: Workspace, gangsched: SchedulerProcess, cluster: LocalCluster,
    bound_early: list[str],
) -> None:
    ws.create(ws.podgroup("job", min_member=3))
    ws.create(claim(ws, "data-0"), claim(ws, "data-1"))
    ws.create(with_claim(ws.pod("job-0", cpu="2", group="job"), "data-0"),
              with_claim(ws.pod("job-1", cpu="2", group="job"), "data-1"),
              with_ephemeral(ws.pod("job-2", cpu="2", group="job")))

    wait_for(lambda: len(bound(members(ws, "job-"))) == 3, timeout=60,
             what="the gang to be bound once its claims are provisioned")
    pods = ws.pods()
    found = claims(ws)
    for pod, claim_name in (("job-0", "data-0"), ("job-1", "data-1"), ("job-2", "job-2-scratch")):
        node = node_of(pods[pod])
        assert found[claim_name]["metadata"]["annotations"][SELECTED_NODE] == node
        assert found[claim_name]["status"]["phase"] == "Bound"
        assert volume_node(cluster, found[claim_name]["spec"]["volumeName"]) == node
    assert len({node_of(p) for p in pods.values()}) == 3  # 2 CPUs each: one per node
    assert bound_early == [], "members were bound before every claim of the gang was"


@pytest.mark.usefixtures("three_nodes")
def test_a_pod_whose_claim_is_missing_waits_naming_it_and_binds_once_it_exists(
    ws: Workspace, gangsched: SchedulerProcess, cluster: LocalCluster
) -> None:
    ws.create(with_claim(ws.pod("lonely", cpu="1"), "absent"), ws.pod("plain", cpu="1"))
    wait_for(lambda: len(bound(members(ws, "plain"))) == 1, timeout=20,
             what="a pod without claims to bind")
    words = f"persistentvolumeclaim {ws.name}/absent does not exist"
    condition = wait_for(lambda: saying(ws, "lonely", words), timeout=20,
                         what="the pod's condition to name the missing claim")
    assert condition["reason"] == "Unschedulable", condition
    wait_for(lambda: any(words in str(e.get("message")) for e in ws.events("lonely")),
             timeout=20, what="an Event naming the missing claim")
    assert bound(members(ws, "lonely")) == []
    why = run_cli("explain", "lonely", "-n", ws.name, kubeconfig=cluster.kubeconfig, expect=3)
    assert words in why.stdout, why.stdout

    ws.create(claim(ws, "absent"))
    wait_for(lambda: len(bound(members(ws, "lonely"))) == 1, timeout=60,
             what="the pod to bind once its claim exists and is provisioned")


def test_a_bound_volume_with_node_affinity_keeps_the_pod_on_its_node(
    ws: Workspace, gangsched: SchedulerProcess, cluster: LocalCluster, three_nodes: list[str]
) -> None:
    target = three_nodes[2]
    name = f"{ws.name}-local"
    volume = pykube.PersistentVolume(cluster.client, {
        "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "",
            "hostPath": {"path": f"/data/{name}"},
            "claimRef": {"namespace": ws.name, "name": "pinned"},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": [target]}]}]}},
        },
    })
    volume.create()
    try:
        ws.create(claim(ws, "pinned", storage_class="", volume=name))
        wait_for(lambda: claims(ws)["pinned"].get("status", {}).get("phase") == "Bound",
                 timeout=30, what="the PV controller to bind the claim to the volume")
        # Binpacking alone would put it on the first node.
        ws.create(with_claim(ws.pod("pinned-user", cpu="1"), "pinned"))
        wait_for(lambda: len(bound(members(ws, "pinned-user"))) == 1, timeout=30,
                 what="the pod to bind")
        assert node_of(ws.pods()["pinned-user"]) == target
    finally:
        ws.delete_pod("pinned-user")
        volume.delete()


@pytest.mark.usefixtures("three_nodes")
def test_a_claim_name_that_is_no_dns_name_makes_the_pod_wait_and_other_gangs_bind(
    ws: Workspace, gangsched: SchedulerProcess
) -> None:
    # The API server checks only that a claim name is given, not that a claim could have it.
    ws.create(with_claim(ws.pod("bad-claim", cpu="1"), "Not_A_Name"))
    condition = wait_for(lambda: saying(ws, "bad-claim", "is not a valid claim name"),
                         timeout=20, what="the pod's condition to name the bad claim")
    assert f"{ws.name}/Not_A_Name" in condition["message"], condition
    ws.create(ws.podgroup("fine", min_member=2))
    ws.create(ws.pod("fine-0", cpu="1", group="fine"), ws.pod("fine-1", cpu="1", group="fine"))
    wait_for(lambda: len(bound(members(ws, "fine-"))) == 2, timeout=20,
             what="another gang to bind")
    assert bound(members(ws, "bad-claim")) == []


def group_message(ws: Workspace, group: str, words: str) -> str | None:
    conditions = ws.podgroup_obj(group).get("status", {}).get("conditions") or []
    return next((str(c["message"]) for c in conditions if words in str(c.get("message"))), None)


def test_claims_nobody_provisions_are_taken_back_in_time_and_the_gang_says_so(
    ws: Workspace, cluster: LocalCluster, tmp_path: Path, three_nodes: list[str]
) -> None:
    # A scheduler name and namespace of its own, with a short provisioning timeout.
    name = "gang-volumes"
    storage_class = pykube.object_factory(cluster.client, "storage.k8s.io/v1", "StorageClass")
    nobody = storage_class(cluster.client, {
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": f"{ws.name}-nobody"}, "provisioner": "example.com/nobody",
        "volumeBindingMode": "WaitForFirstConsumer"})
    nobody.create()
    own = start_gangsched(cluster, tmp_path / "gangsched.log", f"--scheduler-name={name}",
                          f"--namespace={ws.name}", "--provisioning-timeout-seconds=3")
    try:
        ws.create(ws.podgroup("job", min_member=2))
        ws.create(*(claim(ws, f"data-{i}", storage_class=nobody.name) for i in range(2)))
        ws.create(*(with_claim(ws.pod(f"job-{i}", cpu="1", group="job", scheduler=name),
                               f"data-{i}") for i in range(2)))
        wait_for(lambda: all(SELECTED_NODE in (c["metadata"].get("annotations") or {})
                             for c in claims(ws).values()), timeout=20,
                 what="the claims to be given their nodes")
        words = "were not provisioned within 3s"
        message = wait_for(lambda: group_message(ws, "job", words), timeout=30,
                           what="the PodGroup to say its claims timed out")
        assert f"{ws.name}/data-0" in message, message
        wait_for(lambda: saying(ws, "job-0", words), timeout=20,
                 what="the pods to say so too")
        wait_for(lambda: not any(SELECTED_NODE in (c["metadata"].get("annotations") or {})
                                 for c in claims(ws).values()), timeout=20,
                 what="the nodes given to the claims to be taken back")
        assert bound(members(ws, "job-")) == []
    finally:
        for i in range(2):
            ws.delete_pod(f"job-{i}")
        stop_gangsched(own)
        nobody.delete()


def test_our_volume_filter_agrees_with_kube_scheduler_on_every_pair(
    cluster: LocalCluster, ws: Workspace
) -> None:
    seed = oracle.seed()
    print(f"{oracle.SEED_VARIABLE}={seed}")
    verdicts = volume_oracle.run(cluster, ws.name, random.Random(seed), nodes=6, pods=20)
    disagreements = [v for v in verdicts if v.kube != v.ours]
    print(f"{len(verdicts)} pairs, {sum(v.kube for v in verdicts)} accepted by kube-scheduler")
    print(Counter(v.why for v in verdicts).most_common())
    assert len(verdicts) == 6 * 20
    assert {v.kube for v in verdicts} == {True, False}, "every pair had the same verdict"
    assert not disagreements, (
        f"{len(disagreements)} of {len(verdicts)} pairs disagree "
        f"({oracle.SEED_VARIABLE}={seed}):\n{oracle.table(disagreements)}")


def test_a_claim_under_a_driver_publishing_its_capacity_is_given_a_node_with_room(
    ws: Workspace, gangsched: SchedulerProcess, cluster: LocalCluster,
    three_nodes: list[str],
) -> None:
    """The running scheduler reads the CSIStorageCapacity objects a driver publishes:
    a gang whose claims are too large for every pool but one node's gets that node
    (nothing provisions here: the claim is given the node and the gang waits for it);
    one too large for every pool waits, saying there is not enough free storage."""
    api = cluster.client
    driver, klass = f"{ws.name}.csi.example.com", f"{ws.name}-capacity"
    made = [
        pykube.object_factory(api, "storage.k8s.io/v1", "CSIDriver")(api, {
            "metadata": {"name": driver},
            "spec": {"attachRequired": False, "storageCapacity": True}}),
        pykube.object_factory(api, "storage.k8s.io/v1", "StorageClass")(api, {
            "metadata": {"name": klass}, "provisioner": driver,
            "volumeBindingMode": "WaitForFirstConsumer"}),
        *(pykube.object_factory(api, "storage.k8s.io/v1", "CSIStorageCapacity")(api, {
            "metadata": {"name": f"pool-{node}", "namespace": ws.name},
            "storageClassName": klass, "capacity": "10Gi" if node == three_nodes[1] else "1Gi",
            "nodeTopology": {"matchLabels": {"kubernetes.io/hostname": node}}})
          for node in three_nodes)]
    for item in made:
        item.create()
    try:
        big = claim(ws, "big", storage_class=klass)
        big["spec"]["resources"]["requests"]["storage"] = "5Gi"
        huge = claim(ws, "huge", storage_class=klass)
        huge["spec"]["resources"]["requests"]["storage"] = "50Gi"
        ws.create(big, huge, ws.podgroup("job", min_member=1), ws.podgroup("other", min_member=1))
        ws.create(with_claim(ws.pod("job-0", cpu="1", group="job"), "big"),
                  with_claim(ws.pod("other-0", cpu="1", group="other"), "huge"))
        wait_for(lambda: (claims(ws)["big"]["metadata"].get("annotations") or {}).get(
            SELECTED_NODE), timeout=30, what="the claim to be given a node")
        assert claims(ws)["big"]["metadata"]["annotations"][SELECTED_NODE] == three_nodes[1]
        wait_for(lambda: saying(ws, "other-0", "not enough free storage"), timeout=30,
                 what="the pod whose claim fits no pool to say so")
        assert SELECTED_NODE not in (claims(ws)["huge"]["metadata"].get("annotations") or {})
    finally:
        ws.delete_pod("job-0")
        ws.delete_pod("other-0")
        for item in made:
            item.delete()
