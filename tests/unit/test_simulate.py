"""``gangsched simulate`` on files: the scheduler's own decisions, replayed offline."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from gangsched.cli import main
from gangsched.core.runtimes import parse_duration


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
