"""``gangsched simulate`` on files: the scheduler's own decisions, replayed offline."""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path
from typing import Any, cast

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gangsched.binder import Binder
from gangsched.cli import main
from gangsched.clusterobjects import ClusterObjects, from_files
from gangsched.core.actions import Bind, Evict
from gangsched.core.model.objects import GangKey, NodeName, PodKey
from gangsched.core.model.runtimes import parse_duration
from gangsched.core.step import StepConfig, step
from gangsched.decisions import published_state, step_view
from gangsched.evictor import EvictionOutcome, Evictor
from gangsched.feed import Feed
from gangsched.reporting import Reporter
from gangsched.scheduler import Scheduler, SchedulerConfig
from gangsched.simulation import RUN_FOR
from gangsched.simulation import simulate as run_simulation
from tests.unit.test_scheduler_reuse import Clock, PendingBinder, SilentReporter


def nodes(count: int, cpu: str, gpus: int = 0) -> list[dict[str, Any]]:
    allocatable = {"cpu": cpu, "memory": "16Gi", "pods": "110"}
    if gpus:
        allocatable["nvidia.com/gpu"] = str(gpus)
    return [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"node-{i}"},
             "status": {"allocatable": allocatable}} for i in range(count)]


def podgroup(name: str, min_member: int, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "scheduling.gangsched.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name}, "spec": {"minMember": min_member, **spec}}


def pod(name: str, group: str | None, *, cpu: str = "1", gpus: int = 0,
        run_for: str | None = "3s",
        scheduler: str = "gang", node: str | None = None) -> dict[str, Any]:
    requests = {"cpu": cpu, **({"nvidia.com/gpu": str(gpus)} if gpus else {})}
    spec: dict[str, Any] = {"schedulerName": scheduler, "containers": [
        {"name": "main", "image": "busybox",
         "resources": {"requests": requests, "limits": requests}}]}
    if node:
        spec["nodeName"] = node
    labels = {"scheduling.gangsched.io/pod-group": group} if group else {}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": labels,
                         "annotations": {"kwok.gangsched.io/run-for": run_for} if run_for else {}},
            "spec": spec}


def simulate(tmp_path: Path, node_docs: list[dict[str, Any]], job_docs: list[dict[str, Any]],
             *args: str) -> dict[str, Any]:
    (tmp_path / "nodes.yaml").write_text(yaml.safe_dump_all(node_docs))
    (tmp_path / "jobs.yaml").write_text(yaml.safe_dump_all(job_docs))
    result = CliRunner().invoke(main, ["simulate", "-f", str(tmp_path / "nodes.yaml"),
                                       "-f", str(tmp_path / "jobs.yaml"), "-o", "json", *args])
    assert result.exit_code == 0, result.output
    return dict(json.loads(result.output))


def test_six_three_cpu_jobs_on_six_cpus_run_two_at_a_time(tmp_path: Path) -> None:
    jobs: list[dict[str, Any]] = []
    for j in range(6):
        jobs.append(podgroup(f"job-{j}", 3))
        jobs += [pod(f"job-{j}-{i}", f"job-{j}") for i in range(3)]
    out = simulate(tmp_path, nodes(3, "2"), jobs)

    starts = [(run["gang"], run["startSeconds"], run["endSeconds"]) for run in out["runs"]]
    assert starts == [
        ("default/job-0", 0.0, 3.0), ("default/job-1", 0.0, 3.0),
        ("default/job-2", 3.0, 6.0), ("default/job-3", 3.0, 6.0),
        ("default/job-4", 6.0, 9.0), ("default/job-5", 6.0, 9.0),
    ]
    assert out["never"] == []
    for run in out["runs"]:
        assert len(run["pods"]) == 3, "a gang is placed whole"


def test_a_gang_requiring_a_rack_of_a_topology_runs_inside_one_rack(tmp_path: Path) -> None:
    racks = nodes(4, "8", gpus=2)
    for index, node in enumerate(racks):  # node-0 in rack r0, node-1 to node-3 in rack r1
        node["metadata"]["labels"] = {"example.com/rack": "r0" if index == 0 else "r1"}
    topology = {"apiVersion": "scheduling.gangsched.io/v1alpha1", "kind": "Topology",
                "metadata": {"name": "fabric"},
                "spec": {"levels": [{"nodeLabel": "example.com/rack"}]}}
    jobs = [topology,
            podgroup("train", 3, topology={"name": "fabric", "required": "example.com/rack"}),
            *(pod(f"worker-{i}", "train", gpus=2) for i in range(3))]
    out = simulate(tmp_path, racks, jobs)
    [run] = out["runs"]
    assert sorted(p["node"] for p in run["pods"]) == ["node-1", "node-2", "node-3"]
    assert run["level"] == {"nodeLabel": "example.com/rack", "value": "r1", "preferred": "",
                            "subGroups": []}


def test_a_gang_of_sub_groups_shows_the_domain_each_lands_in(tmp_path: Path) -> None:
    racks = nodes(4, "8", gpus=2)
    for index, node in enumerate(racks):  # node-0 in rack r0, node-1 to node-3 in rack r1
        node["metadata"]["labels"] = {"example.com/block": "b0",
                                      "example.com/rack": "r0" if index == 0 else "r1"}
    topology = {"apiVersion": "scheduling.gangsched.io/v1alpha1", "kind": "Topology",
                "metadata": {"name": "fabric"},
                "spec": {"levels": [{"nodeLabel": "example.com/block"},
                                    {"nodeLabel": "example.com/rack"}]}}
    group = podgroup("train", 3, topology={
        "name": "fabric", "required": "example.com/block",
        "subGroups": [{"name": "big", "minMember": 2, "required": "example.com/rack"},
                      {"name": "small", "minMember": 1, "required": "example.com/rack"}]})
    workers = [pod(f"worker-{i}", "train", gpus=2) for i in range(3)]
    for index, worker in enumerate(workers):
        worker["metadata"]["labels"]["scheduling.gangsched.io/sub-group"] = (
            "big" if index < 2 else "small")
    out = simulate(tmp_path, racks, [topology, group, *workers])
    [run] = out["runs"]
    assert run["level"]["subGroups"] == [
        {"name": "big", "nodeLabel": "example.com/rack", "value": "r1"},
        {"name": "small", "nodeLabel": "example.com/rack", "value": "r0"}]
    on = {p["pod"]: p["node"] for p in run["pods"]}
    assert on["default/worker-2"] == "node-0"
    assert {on["default/worker-0"], on["default/worker-1"]} <= {"node-1", "node-2", "node-3"}


def test_a_gang_blocked_by_another_schedulers_pod_never_runs_and_says_why(
    tmp_path: Path
) -> None:
    jobs = [
        pod("blocker", None, cpu="1", gpus=1, scheduler="default-scheduler", node="node-0",
            run_for=None),
        podgroup("train", 2),
        pod("worker-0", "train", gpus=1), pod("worker-1", "train", gpus=1),
    ]
    out = simulate(tmp_path, nodes(2, "8", gpus=1), jobs)
    assert out["runs"] == []
    [never] = out["never"]
    assert (never["gang"], never["code"]) == ("default/train", "DoesNotFit")
    assert never["reason"].startswith(
        "gang default/train needs 2 pods \u00d7 (1 nvidia.com/gpu "), never


def test_the_blocker_finishing_lets_the_gang_run_whole(tmp_path: Path) -> None:
    jobs = [
        pod("blocker", None, cpu="1", gpus=1, run_for="10s", node="node-0"),
        podgroup("train", 2),
        pod("worker-0", "train", gpus=1), pod("worker-1", "train", gpus=1),
    ]
    out = simulate(tmp_path, nodes(2, "8", gpus=1), jobs)
    [run] = out["runs"]
    assert (run["gang"], run["startSeconds"]) == ("default/train", 10.0)
    assert sorted(p["node"] for p in run["pods"]) == ["node-0", "node-1"]


def test_reserved_minresources_hold_room_for_a_jobs_later_pods(tmp_path: Path) -> None:
    """Spark: the driver's PodGroup reserves the whole job, so a second job waits."""
    jobs = [
        podgroup("spark-0", 1, minResources={"cpu": "3"}),
        pod("spark-0-driver", "spark-0", run_for="20s"),
        podgroup("spark-1", 1, minResources={"cpu": "3"}),
        pod("spark-1-driver", "spark-1", run_for="20s"),
    ]
    out = simulate(tmp_path, nodes(2, "2"), jobs)
    assert [(r["gang"], r["startSeconds"]) for r in out["runs"]] == [
        ("default/spark-0", 0.0), ("default/spark-1", 20.0),
    ]


def test_text_output_names_the_order_and_the_nodes(tmp_path: Path) -> None:
    (tmp_path / "all.yaml").write_text(yaml.safe_dump_all(
        [*nodes(1, "2"), podgroup("a", 2), pod("a-0", "a"), pod("a-1", "a"),
         pod("other", None, scheduler="default-scheduler")]))
    result = CliRunner().invoke(main, ["simulate", "-f", str(tmp_path / "all.yaml")])
    assert result.exit_code == 0, result.output
    assert "default/a" in result.output and "node-0 (2 pods)" in result.output
    assert "now" in result.output and "+3s" in result.output
    assert "another scheduler's pods): default/other" in result.output


def test_simulate_without_input_is_a_usage_error() -> None:
    result = CliRunner().invoke(main, ["simulate"])
    assert result.exit_code == 2
    assert "give -f FILE" in result.output


def test_durations_read_as_go_writes_them() -> None:
    assert parse_duration("90s") == 90
    assert parse_duration("1m30s") == 90
    assert parse_duration("500ms") == 0.5
    assert parse_duration("soon") is None


def test_native_podgroups_are_simulated_like_every_other_flavour(tmp_path: Path) -> None:
    jobs: list[dict[str, Any]] = []
    for j in range(2):
        jobs.append({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                     "metadata": {"name": f"train-{j}"},
                     "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}})
        for i in range(2):
            member = pod(f"train-{j}-{i}", None, gpus=1)
            member["spec"]["schedulingGroup"] = {"podGroupName": f"train-{j}"}
            jobs.append(member)
    out = simulate(tmp_path, nodes(1, "8", gpus=2), jobs)
    assert [(r["gang"], r["startSeconds"], len(r["pods"])) for r in out["runs"]] == [
        ("default/train-0", 0.0, 2), ("default/train-1", 3.0, 2),
    ]



def test_simulate_says_which_member_one_per_node_anti_affinity_runs_into(
    tmp_path: Path,
) -> None:
    node_docs = nodes(3, "4")
    for doc in node_docs:
        doc["metadata"]["labels"] = {"kubernetes.io/hostname": doc["metadata"]["name"]}
    jobs: list[dict[str, Any]] = [podgroup("train", 4)]
    for i in range(4):
        worker = pod(f"w-{i}", "train")
        worker["metadata"]["labels"]["job"] = "train"
        worker["spec"]["affinity"] = {"podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [{
                "labelSelector": {"matchLabels": {"job": "train"}},
                "topologyKey": "kubernetes.io/hostname"}]}}
        jobs.append(worker)
    out = simulate(tmp_path, node_docs, jobs)
    assert out["runs"] == []
    [never] = out["never"]
    assert never["code"] == "PodRulesUnmet"
    assert "node-0: anti-affinity with pod w-0 of this gang" in never["reason"], never


def test_a_namespace_selector_keeps_workers_off_pods_of_the_namespaces_it_picks(
    tmp_path: Path,
) -> None:
    """One selector picks a namespace a file declares by its label, the other one no file
    declares by the name label the API server would give it."""
    guarded = [{"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": "data", "labels": {"team": "data"}}}]
    for i, namespace in enumerate(("data", "cache")):
        keeper = pod(f"db-{i}", None, scheduler="default-scheduler", node=f"node-{i}",
                     run_for=None)
        keeper["metadata"].update(namespace=namespace, labels={"role": "db"})
        guarded.append(keeper)
    jobs: list[dict[str, Any]] = [podgroup("train", 2)]
    for i, selector in enumerate(({"team": "data"},
                                  {"kubernetes.io/metadata.name": "cache"})):
        worker = pod(f"w-{i}", "train")
        worker["spec"]["affinity"] = {"podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [{
                "labelSelector": {"matchLabels": {"role": "db"}},
                "namespaceSelector": {"matchLabels": selector},
                "topologyKey": "kubernetes.io/hostname"}]}}
        jobs.append(worker)
    node_docs = nodes(3, "4")
    for doc in node_docs:
        doc["metadata"]["labels"] = {"kubernetes.io/hostname": doc["metadata"]["name"]}
    [run] = simulate(tmp_path, node_docs + guarded, jobs)["runs"]
    placed = {p["pod"]: p["node"] for p in run["pods"]}
    assert placed["default/w-0"] != "node-0" and placed["default/w-1"] != "node-1", placed


def test_pods_with_claims_go_where_their_volumes_are_and_a_missing_claim_is_named(
    tmp_path: Path
) -> None:
    zoned = nodes(2, "4")
    for i, node in enumerate(zoned):
        node["metadata"]["labels"] = {"topology.kubernetes.io/zone": "ab"[i]}
    volume = {"apiVersion": "v1", "kind": "PersistentVolume",
              "metadata": {"name": "pv-b", "labels": {"topology.kubernetes.io/zone": "b"}},
              "spec": {"capacity": {"storage": "1Gi"}}}
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
             "metadata": {"name": "data", "namespace": "default",
                          "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
             "spec": {"volumeName": "pv-b", "storageClassName": ""}}
    user = pod("user", None)
    user["spec"]["volumes"] = [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]
    lost = pod("lost", None)
    lost["spec"]["volumes"] = [{"name": "d", "persistentVolumeClaim": {"claimName": "gone"}}]
    out = simulate(tmp_path, zoned, [volume, claim, user, lost])
    [run] = out["runs"]
    assert [p["node"] for p in run["pods"]] == ["node-1"], "the volume's zone"
    [never] = out["never"]
    assert (never["gang"], never["code"]) == ("default/pod:lost", "VolumeBlocked")


def test_an_urgent_gang_evicts_a_running_one_and_the_victim_runs_again_after(
    tmp_path: Path,
) -> None:
    """The scheduler preempts: simulate does too, and the evicted gang, created again by
    its controller, runs once the urgent one is done."""
    high = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": "high"}, "value": 100}
    jobs: list[dict[str, Any]] = [high, podgroup("batch", 2),
                                  podgroup("urgent", 2, priorityClassName="high")]
    for i in range(2):
        running = pod(f"batch-{i}", "batch", cpu="2", run_for="100s", node="node-0")
        running["status"] = {"phase": "Running"}
        urgent = pod(f"urgent-{i}", "urgent", cpu="2", run_for="10s")
        urgent["spec"]["priorityClassName"] = "high"
        jobs += [running, urgent]
    out = simulate(tmp_path, nodes(1, "4"), jobs)
    assert out["evictions"] == [
        {"atSeconds": 0.0, "preemptor": "default/urgent", "victims": ["default/batch"]}]
    assert [(r["gang"], r["startSeconds"], r["endSeconds"]) for r in out["runs"]] == [
        ("default/urgent", 0.0, 10.0), ("default/batch", 10.0, 110.0)]

    kept = simulate(tmp_path, nodes(1, "4"), jobs, "--no-preemption")
    assert kept["evictions"] == []
    assert [(r["gang"], r["startSeconds"]) for r in kept["runs"]] == [("default/urgent", 100.0)]


HIGH = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": "high"}, "value": 100}


@st.composite
def workloads(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A few nodes; gangs of both priorities, some running already, each pod running for
    its own few seconds."""
    node_count = draw(st.integers(1, 3))
    documents = [*nodes(node_count, draw(st.sampled_from(["2", "4"]))), HIGH]
    for g in range(draw(st.integers(1, 5))):
        size = draw(st.integers(1, 3))
        spec = {"priorityClassName": "high"} if draw(st.booleans()) else {}
        documents.append(podgroup(f"g{g}", draw(st.integers(1, size)), **spec))
        running = draw(st.booleans())
        for i in range(size):
            body = pod(f"g{g}-{i}", f"g{g}", cpu=draw(st.sampled_from(["500m", "1", "2"])),
                       run_for=f"{draw(st.integers(1, 20))}s")
            body["spec"].update(spec)
            if running:
                body["spec"]["nodeName"] = f"node-{draw(st.integers(0, node_count - 1))}"
                body["status"] = {"phase": "Running"}
            documents.append(body)
    return documents


Placed = tuple[float, GangKey, tuple[tuple[PodKey, NodeName], ...]]
Evicted = tuple[float, GangKey, tuple[GangKey, ...]]


def driven(objects: ClusterObjects, config: StepConfig,
           now: float) -> tuple[list[Placed], list[Evicted]]:
    """The scheduler's step driven directly, its actions carried out as the shell carries
    them: a Bind binds, an Evict sends the victims' pods back to pending (their
    controller creates them again), and with nothing to do the clock jumps to the next
    pod's end."""
    objects = copy.deepcopy(objects)
    bodies = {PodKey(f"{p['metadata']['namespace']}/{p['metadata']['name']}"): p
              for p in objects.pods}
    run_for = {key: parse_duration(p["metadata"]["annotations"][RUN_FOR]) or 0.0
               for key, p in bodies.items()}
    mirror = objects.mirror(frozenset({"gang"}))
    feed = Feed(mirror)
    ends = {key: run_for[key] for key, p in bodies.items() if p["spec"].get("nodeName")}
    state = published_state(step_view(mirror, mirror.view()), now)
    placed: list[Placed] = []
    evicted: list[Evicted] = []
    at = 0.0
    for _ in range(1000):
        stepped = step(state, step_view(mirror, mirror.view()), now + at, config)
        state = stepped.state
        for action in stepped.actions:
            if isinstance(action, Evict):
                evicted.append((at, action.preemption.preemptor, action.preemption.victims))
                for keys in action.victim_pods.values():
                    for key in keys:
                        body = bodies[key]
                        del body["spec"]["nodeName"]
                        body["status"] = {"phase": "Pending"}
                        body["metadata"]["uid"] += f"-{len(evicted)}"
                        feed.upsert("pods", body)
                        ends.pop(key, None)
            elif isinstance(action, Bind):
                placed.append((at, action.placement.gang, action.placement.assignments))
                for key, node in action.placement.assignments:
                    bodies[key]["spec"]["nodeName"] = node
                    bodies[key]["status"] = {"phase": "Running"}
                    feed.upsert("pods", bodies[key])
                    ends[key] = at + run_for[key]
        if any(isinstance(action, Bind | Evict) for action in stepped.actions):
            continue
        if not ends:
            break
        at = min(ends.values())
        for key in [k for k, end in ends.items() if end <= at]:
            del ends[key]
            bodies[key]["status"] = {"phase": "Succeeded"}
            feed.upsert("pods", bodies[key])
    return placed, evicted


def test_a_gang_whose_claims_wait_for_their_first_consumer_runs_once_they_are_provisioned(
    tmp_path: Path,
) -> None:
    """The scheduler gives each WaitForFirstConsumer claim its pod's node before any
    Binding; simulate provisions them there, then binds the gang whole."""
    node_docs = nodes(2, "4")
    for doc in node_docs:
        doc["metadata"]["labels"] = {"kubernetes.io/hostname": doc["metadata"]["name"]}
    local = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
             "metadata": {"name": "local"}, "provisioner": "rancher.io/local-path",
             "volumeBindingMode": "WaitForFirstConsumer"}
    jobs: list[dict[str, Any]] = [local, podgroup("train", 2)]
    for i in range(2):
        jobs.append({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                     "metadata": {"name": f"data-{i}", "namespace": "default"},
                     "spec": {"storageClassName": "local", "accessModes": ["ReadWriteOnce"],
                              "resources": {"requests": {"storage": "1Gi"}}}})
        worker = pod(f"w-{i}", "train", cpu="3")
        worker["spec"]["volumes"] = [{"name": "d",
                                      "persistentVolumeClaim": {"claimName": f"data-{i}"}}]
        jobs.append(worker)
    out = simulate(tmp_path, node_docs, jobs)
    assert out["never"] == []
    [run] = out["runs"]
    assert (run["gang"], run["startSeconds"]) == ("default/train", 0.0)
    assert sorted(p["node"] for p in run["pods"]) == ["node-0", "node-1"]


class InstantEvictor:
    """Every eviction is taken at once; the pods are kept for the watch to report gone."""

    def __init__(self) -> None:
        self.evicted: list[PodKey] = []

    async def evict_all(self, pods: tuple[PodKey, ...], uids: object = None,
                        ) -> tuple[list[EvictionOutcome], list[EvictionOutcome]]:
        self.evicted.extend(pods)
        return [], [EvictionOutcome(pod, 200) for pod in pods]


class QuietReporter(SilentReporter):
    events = SilentReporter()


def scheduled(objects: ClusterObjects, config: StepConfig,
              now: float) -> tuple[list[Placed], list[Evicted]]:
    """What the running scheduler (its loop, actuator and mirror) places and evicts on the
    same objects, the watch reporting each bind and eviction it hands out (an evicted pod
    created again, pending, by its controller) and each pod's end at its time."""
    async def run() -> tuple[list[Placed], list[Evicted]]:
        copied = copy.deepcopy(objects)
        bodies = {PodKey(f"{p['metadata']['namespace']}/{p['metadata']['name']}"): p
                  for p in copied.pods}
        run_for = {key: parse_duration(p["metadata"]["annotations"][RUN_FOR]) or 0.0
                   for key, p in bodies.items()}
        mirror = copied.mirror(frozenset({"gang"}))
        clock, evictor = Clock(now), InstantEvictor()
        scheduler = Scheduler(
            mirror=mirror, binder=cast(Binder, PendingBinder()),
            reporter=cast(Reporter, QuietReporter()), clock=clock,
            evictor=cast(Evictor, evictor),
            config=SchedulerConfig(step=config, reuse_unchanged=False, assume_ttl_s=1e9))
        ends = {key: run_for[key] for key, p in bodies.items() if p["spec"].get("nodeName")}
        placed: list[Placed] = []
        evicted: list[Evicted] = []
        at = 0.0
        for _ in range(1000):
            result = scheduler.cycle()
            for _ in range(3):
                await asyncio.sleep(0)  # the eviction tasks the cycle handed out run
            evicted += [(at, p.preemptor, p.victims) for p in result.preemptions]
            for key in evictor.evicted:
                body = bodies[key]
                del body["spec"]["nodeName"]
                body["status"] = {"phase": "Pending"}
                body["metadata"]["uid"] += f"-{len(evicted)}"
                Feed(mirror).upsert("pods", body)
                ends.pop(key, None)
            evictor.evicted.clear()
            for placement in result.placements:
                placed.append((at, placement.gang, placement.assignments))
                for key, node in placement.assignments:
                    bodies[key]["spec"]["nodeName"] = node
                    bodies[key]["status"] = {"phase": "Running"}
                    Feed(mirror).upsert("pods", bodies[key])
                    ends[key] = at + run_for[key]
            if result.placements or result.preemptions:
                continue
            if not ends:
                break
            at = min(ends.values())
            clock.now = now + at
            for key in [k for k, end in ends.items() if end <= at]:
                del ends[key]
                bodies[key]["status"] = {"phase": "Succeeded"}
                Feed(mirror).upsert("pods", bodies[key])
        for task in list(scheduler.actuator.tasks):
            task.cancel()
        return placed, evicted

    return asyncio.run(run())


REFERENCES = {"step": driven, "scheduler": scheduled}
"""What simulate is held to: the step driven directly, or the scheduler's loop, actuator
and mirror."""


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(workloads(), st.booleans())
@pytest.mark.parametrize("reference", sorted(REFERENCES))
def test_simulate_places_and_evicts_at_each_moment_what_the_scheduler_does(
    tmp_path: Path, reference: str, documents: list[dict[str, Any]], preemption: bool,
) -> None:
    (tmp_path / "all.yaml").write_text(yaml.safe_dump_all(documents))
    now = 2_000_000_000.0
    objects = from_files([tmp_path / "all.yaml"], created=now)
    config = StepConfig(starvation_s=5.0, preemption=preemption)
    simulation = run_simulation(objects, scheduler_names=frozenset({"gang"}),
                                step_config=config, default_run_s=60.0, now=now)
    placed, evicted = REFERENCES[reference](objects, config, now)
    assert [(r.start_s, r.gang, r.nodes) for r in simulation.runs] == placed
    assert [(e.at_s, e.preemptor, e.victims) for e in simulation.evictions] == evicted
