"""Dynamic Resource Allocation: gangs placed whole with their devices, on fake GPUs
published as ResourceSlices the way a real driver publishes them."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pykube
import pytest

from devcluster import fakedriver
from devcluster.controlplane import LocalCluster, NodeShape
from devcluster.fakedriver import claiming
from gangsched.core.model.runtimes import RUNTIME_ANNOTATION
from tests.e2e import dra_oracle, oracle
from tests.e2e.conftest import start_gangsched, stop_gangsched
from tests.e2e.test_explain_status import gangsched_cli
from tests.e2e.workspace import Workspace, bound, node_of, phase_of, wait_for

DRA_NODES = NodeShape(cpu="16", memory="64Gi")
RESOURCE_API = fakedriver.RESOURCE_API


@pytest.fixture
def gpu_nodes(cluster: LocalCluster) -> Iterator[list[str]]:
    """Two nodes of 8 fake GPUs each, two NVLink cliques of 4 per node."""
    nodes = cluster.ensure_nodes(2, DRA_NODES, prefix="dra")
    fakedriver.publish(cluster.client, nodes)
    # Claims of earlier tests go with their namespaces, a while after them: until then
    # their devices are taken, for kube-scheduler as for us.
    wait_for(lambda: not _allocated_on(cluster, nodes), timeout=60,
             what="devices of earlier tests' claims to be freed")
    yield nodes
    fakedriver.remove(cluster.client)
    cluster.ensure_nodes(0, prefix="dra", wait=False)


def _allocated_on(cluster: LocalCluster, nodes: list[str]) -> list[str]:
    cls = pykube.object_factory(cluster.client, RESOURCE_API, "ResourceClaim")
    return [c.name for c in cls.objects(cluster.client, namespace=pykube.all)
            if any(pool in nodes for pool, _ in devices_of(c.obj))]


def claim_template(ws: Workspace, name: str, count: int, *,
                   one_clique: bool = False, selector: str | None = None) -> dict[str, Any]:
    return fakedriver.claim_template(ws.name, name, count, one_clique=one_clique,
                                     selector=selector)


def claims(ws: Workspace) -> list[dict[str, Any]]:
    cls = pykube.object_factory(ws.api, RESOURCE_API, "ResourceClaim")
    return [c.obj for c in cls.objects(ws.api, namespace=ws.name)]


def devices_of(claim: Mapping[str, Any]) -> list[tuple[str, str]]:
    allocation = (claim.get("status") or {}).get("allocation") or {}
    results = (allocation.get("devices") or {}).get("results") or []
    return [(r["pool"], r["device"]) for r in results]


@pytest.mark.usefixtures("gpu_nodes")
def test_kube_scheduler_allocates_fake_gpus(ws: Workspace) -> None:
    """The harness: claims made from templates, allocated by kube-scheduler from the slices."""
    ws.create(claim_template(ws, "two", 2))
    ws.create(claiming(ws.pod("solo", scheduler="kube"), "two"))
    wait_for(lambda: bound(ws.pods().values()), timeout=30, what="kube-scheduler to bind")
    [claim] = claims(ws)
    devices = devices_of(claim)
    assert len(devices) == 2
    assert {pool for pool, _ in devices} == {node_of(ws.pods()["solo"])}


def gang_of(ws: Workspace, name: str, size: int, template: str) -> None:
    """A PodGroup of ``size`` and its pods, each with a claim from the template."""
    ws.create(ws.podgroup(name, min_member=size))
    ws.create(*(claiming(ws.pod(f"{name}-{i}", group=name), template) for i in range(size)))


def members(ws: Workspace, gang: str) -> list[dict[str, Any]]:
    return [pod for name, pod in ws.pods().items() if name.startswith(f"{gang}-")]


def claims_of(ws: Workspace, gang: str) -> list[dict[str, Any]]:
    return [claim for claim in claims(ws) if claim["metadata"]["name"].startswith(f"{gang}-")]


def clique(device: tuple[str, str]) -> str:
    """The fake driver's clique of a device: gpu-0..3 are ``<node>-a``, gpu-4..7 ``-b``."""
    pool, name = device
    return f"{pool}-{'a' if int(name.split('-')[1]) < 4 else 'b'}"


def condition_message(pod: Mapping[str, Any]) -> str:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled":
            return str(condition.get("message", ""))
    return ""


@pytest.mark.usefixtures("gpu_nodes", "gangsched")
def test_a_gang_of_four_each_claiming_two_gpus_is_allocated_and_bound_whole(
    ws: Workspace,
) -> None:
    ws.create(claim_template(ws, "two", 2))
    gang_of(ws, "train", 4, "two")
    wait_for(lambda: len(bound(members(ws, "train"))) == 4, timeout=30, what="the gang bound")
    pods = {p["metadata"]["uid"]: p for p in members(ws, "train")}
    made = claims_of(ws, "train")
    assert len(made) == 4
    every = [device for claim in made for device in devices_of(claim)]
    assert len(every) == 8 and len(set(every)) == 8, "no device is given twice"
    for claim in made:
        [holder] = [ref["uid"] for ref in claim["status"]["reservedFor"]]
        assert {pool for pool, _ in devices_of(claim)} == {node_of(pods[holder])}
        assert fakedriver_finalizer(claim)


def fakedriver_finalizer(claim: Mapping[str, Any]) -> bool:
    return "resource.kubernetes.io/delete-protection" in claim["metadata"].get("finalizers", [])


@pytest.mark.usefixtures("gpu_nodes", "gangsched")
def test_a_gang_whose_claims_cannot_all_be_met_waits_whole_and_allocates_nothing(
    ws: Workspace, cluster: LocalCluster,
) -> None:
    """Five pods of four GPUs on two nodes of eight: four would fit, the gang needs five."""
    ws.create(claim_template(ws, "four", 4))
    gang_of(ws, "big", 5, "four")
    wait_for(lambda: all("found devices for 4 of the 5 members" in condition_message(p)
                         for p in members(ws, "big")),
             timeout=30, what="every member to say the gang's devices fall short")
    assert bound(members(ws, "big")) == []
    assert len(claims_of(ws, "big")) == 5
    assert all(devices_of(claim) == [] for claim in claims_of(ws, "big"))
    # explain reads the same slices and claims and says the same.
    said = gangsched_cli(cluster, "explain", "podgroup/big", "-n", ws.name, expect=3)
    assert "needs 4 devices of class gpu.example.com" in said, said


@pytest.mark.usefixtures("gpu_nodes", "gangsched")
def test_claims_constrained_to_one_clique_fill_whole_cliques_around_kube_schedulers_pod(
    ws: Workspace,
) -> None:
    """kube-scheduler's pod breaks one clique; three claims of four in one clique still fit
    in the three cliques left whole, each in one."""
    ws.create(claim_template(ws, "two", 2), claim_template(ws, "clique", 4, one_clique=True))
    ws.create(claiming(ws.pod("theirs", scheduler="kube"), "two"))
    wait_for(lambda: bound([ws.pods()["theirs"]]), timeout=30, what="kube-scheduler's pod")
    theirs = set(devices_of(next(c for c in claims(ws) if c["metadata"]["name"].startswith(
        "theirs-"))))
    gang_of(ws, "nv", 3, "clique")
    wait_for(lambda: len(bound(members(ws, "nv"))) == 3, timeout=30, what="the gang bound")
    used = [devices_of(claim) for claim in claims_of(ws, "nv")]
    assert all(len({clique(d) for d in devices}) == 1 for devices in used)
    assert not theirs & {d for devices in used for d in devices}


@pytest.mark.usefixtures("gpu_nodes", "gangsched")
def test_a_claim_kube_scheduler_allocated_is_never_reused(ws: Workspace) -> None:
    ws.create(claim_template(ws, "six", 6), claim_template(ws, "four", 4),
              claim_template(ws, "three", 3))
    ws.create(claiming(ws.pod("theirs", scheduler="kube"), "six"))
    wait_for(lambda: bound([ws.pods()["theirs"]]), timeout=30, what="kube-scheduler's pod")
    theirs = set(devices_of(next(c for c in claims(ws) if c["metadata"]["name"].startswith(
        "theirs-"))))
    gang_of(ws, "pair", 2, "four")
    wait_for(lambda: len(bound(members(ws, "pair"))) == 2, timeout=30, what="the pair bound")
    ours = {d for claim in claims_of(ws, "pair") for d in devices_of(claim)}
    assert len(ours) == 8 and not ours & theirs
    gang_of(ws, "late", 1, "three")  # two GPUs are left, on kube-scheduler's node
    wait_for(lambda: "ResourceClaim" in condition_message(members(ws, "late")[0]), timeout=30,
             what="the late pod to say why it waits")
    assert bound(members(ws, "late")) == []


@pytest.mark.usefixtures("gpu_nodes", "gangsched")
def test_deleting_a_gang_frees_its_devices_for_the_next(ws: Workspace) -> None:
    ws.create(claim_template(ws, "eight", 8))
    gang_of(ws, "first", 2, "eight")
    wait_for(lambda: len(bound(members(ws, "first"))) == 2, timeout=30, what="the first gang")
    gang_of(ws, "next", 1, "eight")
    wait_for(lambda: "ResourceClaim" in condition_message(members(ws, "next")[0]), timeout=30,
             what="the next gang to wait")
    for pod in members(ws, "first"):
        ws.delete_pod(pod["metadata"]["name"])
    wait_for(lambda: len(bound(members(ws, "next"))) == 1, timeout=60,
             what="the next gang to get the freed devices")
    [claim] = claims_of(ws, "next")
    assert len(devices_of(claim)) == 8


@pytest.mark.usefixtures("gpu_nodes", "gangsched")
def test_a_gang_sharing_one_podgroup_claim_gets_it_allocated_once_for_the_podgroup(
    ws: Workspace,
) -> None:
    """A native PodGroup's ``spec.resourceClaims`` (DRAWorkloadResourceClaims): one claim
    made for the group, shared by both members, reserved for the PodGroup."""
    ws.create(claim_template(ws, "pair", 2))
    group = ws.native_podgroup("duo", min_count=2)
    group["spec"]["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": "pair"}]
    ws.create(group)
    ws.create(*(claiming(ws.pod(f"duo-{i}", group="duo", marker="native"), "pair")
                for i in range(2)))
    wait_for(lambda: len(bound(members(ws, "duo"))) == 2, timeout=30, what="the gang bound")
    [claim] = claims(ws)
    assert len(devices_of(claim)) == 2
    [holder] = claim["status"]["reservedFor"]
    assert (holder["resource"], holder["name"]) == ("podgroups", "duo")
    assert {node_of(p) for p in members(ws, "duo")} == {pool for pool, _ in devices_of(claim)}
    # The group gone, the claim made for it goes and its devices are free again.
    for pod in members(ws, "duo"):
        ws.delete_pod(pod["metadata"]["name"])
    ws.delete_podgroup("duo", "native")
    def group_state() -> str:
        cls = pykube.object_factory(ws.api, "scheduling.k8s.io/v1beta1", "PodGroup")
        found = cls.objects(ws.api, namespace=ws.name).get_or_none(name="duo")
        return "gone" if found is None else str(found.obj["metadata"])
    wait_for(lambda: not claims(ws), timeout=30,
             what=f"the PodGroup's claim to go: group {group_state()} claim "
                  f"{[c['metadata'].get('deletionTimestamp') for c in claims(ws)]}")


ORACLE_CLAIMS = 12
"""Claims asked of every node in the suite (three nodes: 36 pairs)."""


def test_claims_fit_where_kube_scheduler_says_they_fit(
    ws: Workspace, cluster: LocalCluster,
) -> None:
    """The differential test: random claims over random fake GPUs, each (claim, node) pair
    decided by kube-scheduler and by gangsched's allocator; the seed replays a run
    (``GANGSCHED_ORACLE_SEED``)."""
    seed = oracle.seed()
    print(f"{oracle.SEED_VARIABLE}={seed}")
    verdicts = dra_oracle.run(cluster, ws.name, random.Random(seed), nodes=3,
                              claims=ORACLE_CLAIMS)
    assert len(verdicts) == 3 * ORACLE_CLAIMS
    extended = sum(1 for v in verdicts if v.why.startswith(dra_oracle.EXTENDED))
    kept_off = sum(1 for v in verdicts if dra_oracle.KEPT_OFF in v.why)
    print(f"{len(verdicts)} pairs, {extended} asking {dra_oracle.EXTENDED}, "
          f"{sum(v.kube for v in verdicts)} accepted by kube-scheduler, "
          f"{kept_off} kept off their node by the anti-affinity of a pod there")
    disagreements = [v for v in verdicts if v.kube != v.ours]
    assert not disagreements, (
        f"{len(disagreements)} of {len(verdicts)} pairs disagree "
        f"({oracle.SEED_VARIABLE}={seed}):\n{oracle.table(disagreements)}")


RULED_CLAIMS = 8
"""Pods with rules beside their claim asked of every node in the suite (24 pairs)."""


def test_claims_under_inter_pod_rules_fit_where_kube_scheduler_says_they_fit(
    ws: Workspace, cluster: LocalCluster,
) -> None:
    """The differential test of pods claiming devices with host ports, required and
    preferred pod affinity and anti-affinity and both kinds of spread, their claims their
    own (admin access now and then) or shared with a running pod: gangsched's whole
    placement of each probe against kube-scheduler's."""
    seed = oracle.seed()
    print(f"{oracle.SEED_VARIABLE}={seed}")
    verdicts = dra_oracle.run(cluster, ws.name, random.Random(seed), nodes=3,
                              claims=RULED_CLAIMS, ruled=1.0)
    accepted = sum(v.kube for v in verdicts)
    print(f"{len(verdicts)} pairs, {accepted} accepted by kube-scheduler")
    assert accepted, "kube-scheduler bound no probe: the run judged nothing"
    disagreements = [v for v in verdicts if v.kube != v.ours]
    assert not disagreements, (
        f"{len(disagreements)} of {len(verdicts)} pairs disagree "
        f"({oracle.SEED_VARIABLE}={seed}):\n{oracle.table(disagreements)}")


@pytest.mark.usefixtures("gangsched")
def test_a_gpu_gang_with_one_worker_per_node_is_bound_on_four_nodes(
    ws: Workspace, cluster: LocalCluster,
) -> None:
    """Required anti-affinity of each worker against the gang's label, on hostname."""
    nodes = cluster.ensure_nodes(4, DRA_NODES, prefix="dra")
    fakedriver.publish(cluster.client, nodes)
    try:
        wait_for(lambda: not _allocated_on(cluster, nodes), timeout=60,
                 what="devices of earlier tests' claims to be freed")
        ws.create(claim_template(ws, "two", 2))
        ws.create(ws.podgroup("train", min_member=4))
        apart = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"job": "train"}},
             "topologyKey": "kubernetes.io/hostname"}]}}
        for i in range(4):
            pod = claiming(ws.pod(f"train-{i}", group="train", labels={"job": "train"}), "two")
            pod["spec"]["affinity"] = apart
            ws.create(pod)
        wait_for(lambda: len(bound(members(ws, "train"))) == 4, timeout=60,
                 what="the gang bound")
        assert sorted(str(node_of(pod)) for pod in members(ws, "train")) == sorted(nodes)
    finally:
        fakedriver.remove(cluster.client)
        cluster.ensure_nodes(0, prefix="dra", wait=False)


@pytest.mark.usefixtures("gpu_nodes", "gangsched")
def test_a_claim_whose_selector_fails_waits_naming_it_and_other_gangs_bind(
    ws: Workspace,
) -> None:
    """Bad input stops its own gang only: a selector reading an attribute no device has
    fails at run time (the API server accepts it), and the pod says which claim."""
    ws.create(claim_template(ws, "broken", 1,
                             selector=f'device.attributes["{fakedriver.DRIVER}"].rack == "r1"'),
              claim_template(ws, "one", 1))
    gang_of(ws, "bad", 2, "broken")
    gang_of(ws, "good", 2, "one")
    wait_for(lambda: len(bound(members(ws, "good"))) == 2, timeout=30, what="the good gang")
    wait_for(lambda: "cannot be allocated" in condition_message(members(ws, "bad")[0]),
             timeout=30, what="the bad gang to name its claim")
    said = condition_message(members(ws, "bad")[0])
    assert "request gpus" in said and "rack" in said, said
    assert bound(members(ws, "bad")) == []
    assert all(devices_of(claim) == [] for claim in claims_of(ws, "bad"))


def _fill_then_cliques(ws: Workspace, scheduler: str, tag: str) -> tuple[int, set[str]]:
    """Four one-GPU pods, then four pods each wanting four GPUs of one clique: how many
    of those four bind, and the cliques the one-GPU pods broke."""
    for i in range(4):
        ws.create(claiming(ws.pod(f"{tag}-one-{i}", scheduler=scheduler), "one"))
    wait_for(lambda: len(bound(members(ws, f"{tag}-one"))) == 4, timeout=30,
             what=f"{scheduler}'s one-GPU pods")
    broken = {clique(d) for c in claims_of(ws, f"{tag}-one") for d in devices_of(c)}
    for i in range(4):
        ws.create(claiming(ws.pod(f"{tag}-four-{i}", scheduler=scheduler), "clique"))

    def decided(pod: dict[str, Any]) -> bool:
        """Bound, or refused for want of devices: not waiting for the resource-claim
        controller to make the pod's claim from its template (both schedulers say the
        claim is "not created yet" while it does, and the pod may bind a moment later)."""
        said = condition_message(pod)
        return bool(node_of(pod)) or (
            ("Unschedulable" in str(pod.get("status")) or "ResourceClaim" in said)
            and "not created yet" not in said)

    def settled() -> bool:
        return all(decided(pod) for pod in members(ws, f"{tag}-four"))
    wait_for(settled, timeout=30, what=f"{scheduler} to decide the four-GPU pods")
    return len(bound(members(ws, f"{tag}-four"))), broken


@pytest.mark.usefixtures("gpu_nodes", "gangsched")
def test_one_gpu_pods_fill_one_clique_where_kube_scheduler_breaks_several(
    ws: Workspace,
) -> None:
    """Fragmentation: after four one-GPU pods, pods needing a whole clique of four find
    three whole cliques left under gangsched; kube-scheduler spreads the one-GPU pods and
    leaves fewer (on this cluster: two of four cliques broken, two pods placed)."""
    ws.create(claim_template(ws, "one", 1), claim_template(ws, "clique", 4, one_clique=True))
    kube_placed, kube_broken = _fill_then_cliques(ws, "kube", "k")
    for pod in list(ws.pods()):
        ws.delete_pod(pod)
    wait_for(lambda: not ws.pods() and not claims(ws), timeout=60, what="devices freed")
    ours_placed, ours_broken = _fill_then_cliques(ws, "gang", "g")
    print(f"kube-scheduler: {kube_placed} of 4 placed, cliques broken {sorted(kube_broken)}; "
          f"gangsched: {ours_placed} of 4, cliques broken {sorted(ours_broken)}")
    assert len(ours_broken) == 1 and ours_placed == 3
    assert kube_placed <= ours_placed


@pytest.mark.usefixtures("gpu_nodes", "gangsched")
def test_a_gang_waiting_for_gpus_held_through_claims_is_estimated_to_start_when_they_end(
    ws: Workspace,
) -> None:
    """Every fake GPU is allocated to a running gang's claims; the waiting gang's estimate
    is that gang's end (its claims let go then), and it binds once they are."""
    runtime_s = 40
    ws.create(claim_template(ws, "eight", 8))

    def timed_gang(name: str, runtime: str) -> None:
        ws.create(ws.podgroup(name, min_member=2))
        ws.create(*(claiming(ws.pod(f"{name}-{i}", group=name, run_for=runtime,
                                    annotations={RUNTIME_ANNOTATION: runtime}), "eight")
                    for i in range(2)))

    timed_gang("run", f"{runtime_s}s")
    wait_for(lambda: len(bound(members(ws, "run"))) == 2, timeout=30, what="the first gang bound")
    started = time.time()
    timed_gang("next", "20s")

    def estimate() -> str | None:
        """The estimate once it names a time: a cycle that saw the second gang before the
        first one's claims were read may publish ``Unknown`` for a moment."""
        text = (ws.podgroup_obj("next").get("status") or {}).get("estimatedStart")
        return str(text) if text and text != "Unknown" else None

    published = wait_for(estimate, timeout=30,
                         what="the waiting gang's estimated start: the first gang's end")
    assert abs(_timestamp(published) - (started + runtime_s)) <= 6, (published, started)
    wait_for(lambda: len(bound(members(ws, "next"))) == 2, timeout=runtime_s + 40,
             what="the waiting gang to bind once the first gang's claims are let go")


def _timestamp(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()


@pytest.fixture
def priority_1000(cluster: LocalCluster) -> Iterator[str]:
    name = "gangsched-test-dra-1000"
    pykube.object_factory(cluster.client, "scheduling.k8s.io/v1", "PriorityClass")(
        cluster.client, {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                         "metadata": {"name": name}, "value": 1000}).create()
    yield name
    cluster.kubectl("delete", "priorityclass", name, "--ignore-not-found")


@pytest.mark.usefixtures("gpu_nodes", "gangsched")
def test_a_priority_1000_pod_claiming_gpus_evicts_one_priority_0_gang_holding_them_and_binds(
    ws: Workspace, priority_1000: str,
) -> None:
    """Two priority-0 gangs each hold one node's eight GPUs through a claim; a gang of
    priority 1000 claiming eight evicts one of them, whole, and binds on its devices once
    the resource-claim controller has let go of its claim."""
    ws.create(claim_template(ws, "eight", 8))
    gang_of(ws, "low-0", 1, "eight")
    gang_of(ws, "low-1", 1, "eight")
    wait_for(lambda: len(bound([*members(ws, "low-0"), *members(ws, "low-1")])) == 2,
             timeout=30, what="both priority-0 gangs bound on all sixteen GPUs")
    held = {pod["metadata"]["name"]: node_of(pod)
            for pod in [*members(ws, "low-0"), *members(ws, "low-1")]}
    group = ws.podgroup("urgent", min_member=1)
    group["spec"]["priorityClassName"] = priority_1000
    pod = claiming(ws.pod("urgent-0", group="urgent"), "eight")
    pod["spec"]["priorityClassName"] = priority_1000
    ws.create(group, pod)
    wait_for(lambda: bound(members(ws, "urgent")), timeout=60,
             what="the priority-1000 gang to evict a priority-0 one and bind")
    survivors = [name for name in held if name in ws.pods()
                 and not ws.pods()[name]["metadata"].get("deletionTimestamp")]
    assert len(survivors) == 1, f"exactly one priority-0 gang goes: {survivors}"
    [gone] = [name for name in held if name not in survivors]
    [claim] = claims_of(ws, "urgent")
    devices = devices_of(claim)
    assert len(devices) == 8 and {pool for pool, _ in devices} == {held[gone]}
    assert node_of(ws.pods()["urgent-0"]) == held[gone]


@pytest.mark.usefixtures("gpu_nodes", "gangsched")
def test_a_lost_workers_gpus_wait_for_its_replacement_not_for_another_gang(
    ws: Workspace,
) -> None:
    """A job of two workers holds both nodes' eight GPUs through claims; one worker is
    deleted and the resource-claim controller lets its claim go. A gang claiming eight
    GPUs, waiting already, must not take them: the replacement the operator creates
    under the same name a moment later binds on the departed worker's node and GPUs."""
    ws.create(claim_template(ws, "eight", 8))
    gang_of(ws, "train", 2, "eight")
    wait_for(lambda: len(bound(members(ws, "train"))) == 2, timeout=30, what="the job bound")
    lost = node_of(ws.pods()["train-1"])
    gang_of(ws, "waiter", 1, "eight")
    wait_for(lambda: "ResourceClaim" in condition_message(members(ws, "waiter")[0]),
             timeout=30, what="the waiting gang to say why it waits")

    ws.delete_pod("train-1")
    wait_for(lambda: "train-1" not in ws.pods()
             and not any(c["metadata"]["name"].startswith("train-1-") and devices_of(c)
                         for c in claims(ws)),
             timeout=30, what="the worker gone and its claim let go")
    time.sleep(2.0)  # cycles in which the freed GPUs look free
    assert bound(members(ws, "waiter")) == [], "the waiting gang took the lost worker's GPUs"
    ws.create(claiming(ws.pod("train-1", group="train"), "eight"))
    wait_for(lambda: node_of(ws.pods()["train-1"]), timeout=30,
             what="the replacement to bind on the held GPUs")
    assert node_of(ws.pods()["train-1"]) == lost
    replacement = ws.pods()["train-1"]["metadata"]["uid"]
    [claim] = [c for c in claims_of(ws, "train-1")
               if any(r["uid"] == replacement
                      for r in (c.get("status") or {}).get("reservedFor") or [])]
    assert {pool for pool, _ in devices_of(claim)} == {lost} and len(devices_of(claim)) == 8
    assert bound(members(ws, "waiter")) == []


@pytest.mark.usefixtures("gpu_nodes")
def test_a_starving_eight_gpu_gang_binds_while_one_gpu_jobs_keep_coming(
    ws: Workspace, cluster: LocalCluster, tmp_path: Path,
) -> None:
    """Both nodes' GPUs run one-GPU jobs of a few seconds, and more keep coming; a gang
    of two pods claiming eight GPUs each starves after 3 s. The GPUs that free on the
    nodes it chose are kept for it, not given to the next one-GPU job, so it binds."""
    name = "gang-device-pins"
    own = start_gangsched(cluster, tmp_path / "gangsched.log", f"--scheduler-name={name}",
                          f"--namespace={ws.name}", "--starvation-seconds=3")
    try:
        ws.create(claim_template(ws, "one", 1), claim_template(ws, "eight", 8))
        made = 0

        def one_gpu_job() -> None:
            nonlocal made
            job = f"small-{made}"
            made += 1
            ws.create(ws.podgroup(job, min_member=1))
            ws.create(claiming(ws.pod(job, group=job, scheduler=name, run_for="3s"), "one"))

        def top_up(waiting: int) -> None:
            """Finished jobs go, and new ones come until ``waiting`` of them are unbound."""
            pods = ws.pods()
            for job, pod in pods.items():
                if job.startswith("small-") and phase_of(pod) in ("Succeeded", "Failed"):
                    ws.delete_pod(job)
            unbound = [p for job, p in pods.items()
                       if job.startswith("small-") and not node_of(p)]
            for _ in range(waiting - len(unbound)):
                one_gpu_job()

        for _ in range(16):
            one_gpu_job()
        wait_for(lambda: len(bound(members(ws, "small"))) == 16, timeout=30,
                 what="one-GPU jobs on all sixteen GPUs")
        ws.create(ws.podgroup("big", min_member=2))
        ws.create(*(claiming(ws.pod(f"big-{i}", group="big", scheduler=name), "eight")
                    for i in range(2)))
        started, before = time.monotonic(), made
        while len(bound(members(ws, "big"))) < 2:
            assert time.monotonic() < started + 60, (
                f"the eight-GPU gang never bound; {made - before} one-GPU jobs came meanwhile")
            top_up(4)
            time.sleep(0.5)
        print(f"\n[device pins] 2 x 8-GPU gang bound {time.monotonic() - started:.1f}s after "
              f"creation, {made - before} one-GPU jobs created meanwhile")
        assert {pool for claim in claims_of(ws, "big") for pool, _ in devices_of(claim)} == {
            node_of(pod) for pod in members(ws, "big")}
    finally:
        assert stop_gangsched(own) == 0, own.logs()[-3000:]
