"""``gangsched status``, ``explain`` and ``simulate --from-cluster`` on real objects.

Run as users run them: the installed command (and ``kubectl gangsched``), a
kubeconfig (the cluster's admin, a namespace-only ServiceAccount's token, an
exec credential plugin), the scheduler running beside them and writing its
own status.
"""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pykube
import pytest
import yaml

from devcluster.controlplane import REPO, LocalCluster, NodeShape
from gangsched.cli import EXIT_ERROR
from tests.e2e.conftest import SchedulerProcess, start_gangsched, stop_gangsched
from tests.e2e.scenario import only_nodes
from tests.e2e.workspace import Workspace, bound, phase_of, scheduled_condition, wait_for

GPU_NODES = NodeShape(cpu="8", memory="32Gi", gpus=1)
EXEC_V1 = "client.authentication.k8s.io/v1"
EXEC_V1BETA1 = "client.authentication.k8s.io/v1beta1"
BIN = Path(sys.executable).parent
"""Where the package's console scripts are, ``kubectl-gangsched`` among them."""


def run_cli(*args: str, kubeconfig: Path, expect: int = 0,
            command: tuple[str, ...] = (sys.executable, "-m", "gangsched"),
            ) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [*command, *args, f"--kubeconfig={kubeconfig}"],
        capture_output=True, text=True, timeout=60, check=False,
        env={"COLUMNS": "200", "PATH": f"{BIN}:/usr/bin:/bin"},
    )
    assert result.returncode == expect, (result.stdout, result.stderr)
    return result


def gangsched_cli(cluster: LocalCluster, *args: str, expect: int = 0) -> str:
    return run_cli(*args, kubeconfig=cluster.kubeconfig, expect=expect).stdout


def as_json(cluster: LocalCluster, *args: str, expect: int = 0) -> Any:
    return json.loads(gangsched_cli(cluster, *args, "--output=json", expect=expect))


@pytest.fixture
def blocked_gang(cluster: LocalCluster, ws: Workspace, gangsched: SchedulerProcess) -> None:
    """A blocker holds one of two GPUs; a 2-GPU gang waits whole."""
    only_nodes(cluster, 2, GPU_NODES)
    ws.create(ws.pod("blocker", gpus=1, scheduler="kube"))
    wait_for(lambda: phase_of(ws.pods()["blocker"]) == "Running", timeout=30, what="blocker")
    ws.create(ws.podgroup("train", min_member=2))
    ws.create(*(ws.pod(f"worker-{i}", gpus=1, group="train") for i in range(2)))
    wait_for(lambda: all((c := scheduled_condition(p)) and c["reason"] == "Unschedulable"
                         for n, p in ws.pods().items() if n.startswith("worker")),
             timeout=30, what="both workers Unschedulable")


@pytest.mark.usefixtures("blocked_gang")
def test_explain_names_the_node_that_lacks_a_gpu_and_what_would_let_it_run(
    cluster: LocalCluster, ws: Workspace
) -> None:
    answer = as_json(cluster, "explain", "podgroup/train", "-n", ws.name, expect=3)
    assert answer["gang"] == f"{ws.name}/train"
    assert answer["verdict"] == "waiting"
    assert "nvidia.com/gpu" in answer["reason"]
    [pods] = answer["pods"]
    assert (pods["pending"], pods["room"]) == (2, 1)
    blocked = [n for n in pods["closestNodes"] if n["fits"] == 0]
    assert blocked and blocked[0]["lacks"] == {"nvidia.com/gpu": "1"}
    blocker_node = ws.pods()["blocker"]["spec"]["nodeName"]
    assert blocked[0]["node"] == blocker_node
    assert answer["wouldLetItRun"][0].startswith("room for 1 more pod(s) of")

    text = gangsched_cli(cluster, "explain", "worker-0", "-n", ws.name, expect=3)
    assert f"Pod {ws.name}/worker-0" in text
    assert f"{blocker_node}: lacks" in text
    assert "what would let it run:" in text

    ws.create(ws.pod("orphan", cpu="1", group="ghost"))
    orphan = gangsched_cli(cluster, "explain", "orphan", "-n", ws.name, expect=3)
    assert orphan.strip() == f"Pod {ws.name}/orphan waits for PodGroup {ws.name}/ghost to exist"

    foreign = run_cli("explain", "blocker", "-n", ws.name, kubeconfig=cluster.kubeconfig,
                      expect=EXIT_ERROR)
    carried = ws.pods()["blocker"]["spec"]["schedulerName"]
    assert f"its schedulerName is {carried!r}" in foreign.stderr, foreign.stderr


def test_the_cli_takes_the_scheduler_names_the_installed_deployment_serves(
    cluster: LocalCluster, ws: Workspace
) -> None:
    """No --scheduler-name given: a pod of a name the gangsched Deployment serves is
    gangsched's to explain, not refused as another scheduler's."""
    served = f"gang-{ws.name}"
    ws.create({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "gangsched", "namespace": ws.name,
                     "labels": {"app.kubernetes.io/name": "gangsched"}},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "gangsched-cli-test"}},
                 "template": {"metadata": {"labels": {"app": "gangsched-cli-test"}},
                              "spec": {"containers": [{
                                  "name": "gangsched", "image": "gangsched:test",
                                  "args": ["run", "--scheduler-name=gang",
                                           f"--scheduler-name={served}"]}]}}},
    })
    ws.create(ws.pod("waiting", cpu="1", scheduler=served, group="nowhere"))
    answer = gangsched_cli(cluster, "explain", "waiting", "-n", ws.name, expect=3)
    assert answer.strip() == f"Pod {ws.name}/waiting waits for PodGroup {ws.name}/nowhere to exist"


@pytest.mark.usefixtures("blocked_gang")
def test_status_lists_the_waiting_group_with_its_reason_and_queue(
    cluster: LocalCluster, ws: Workspace
) -> None:
    answer = as_json(cluster, "status", "-A")
    [row] = [g for g in answer["podGroups"] if g["group"] == f"{ws.name}/train"]
    assert row["flavor"] == "gangsched"
    assert row["phase"] in ("Pending", "Inqueue")
    assert (row["bound"], row["minMember"], row["pending"]) == (0, 2, 2)
    assert "nvidia.com/gpu" in row["reason"]
    assert row["waitingSeconds"] is not None and row["waitingSeconds"] >= 0
    assert any(q["queue"] == "default" and q["pending"] >= 1 for q in answer["queues"])

    text = gangsched_cli(cluster, "status", "--all-namespaces")
    assert "PodGroups" in text and f"{ws.name}/train" in text and "0/2" in text

    wide = gangsched_cli(cluster, "status", "-n", ws.name, "-o", "wide")
    assert "REASON" in wide and "nvidia.com/gpu" in wide
    from_yaml = yaml.safe_load(gangsched_cli(cluster, "status", "-n", ws.name, "-o", "yaml"))
    from_json = json.loads(gangsched_cli(cluster, "status", "-n", ws.name, "-o", "json"))
    for shown in (from_yaml, from_json):
        for group in shown["podGroups"]:
            group.pop("waitingSeconds")  # the clock moved between the two calls
    assert from_yaml == from_json


@pytest.mark.usefixtures("blocked_gang")
def test_simulate_from_the_cluster_and_explain_after_the_blocker_goes(
    cluster: LocalCluster, ws: Workspace
) -> None:
    answer = as_json(cluster, "simulate", "--from-cluster")
    assert f"{ws.name}/train" in [n["gang"] for n in answer["never"]], \
        "a blocker that never ends keeps the gang out for good"

    ws.delete_pod("blocker")
    wait_for(lambda: len(bound(p for n, p in ws.pods().items() if n.startswith("worker"))) == 2,
             timeout=30, what="both workers to bind")
    node = ws.pods()["worker-0"]["spec"]["nodeName"]
    assert gangsched_cli(cluster, "explain", "pod/worker-0", "-n", ws.name).strip() == \
        f"Pod {ws.name}/worker-0 is bound to node {node}"
    answer = as_json(cluster, "explain", "podgroup/train", "-n", ws.name)
    assert (answer["verdict"], answer["bound"]) == ("nothing to place", 2)
    missing = run_cli("explain", "pod/nobody", "-n", ws.name, kubeconfig=cluster.kubeconfig,
                      expect=1)
    assert f"error: no pod nobody in namespace {ws.name}" in missing.stderr



# ---- other kubeconfigs: a namespace-only account, exec credential plugins -----------------


def service_account_token(cluster: LocalCluster, namespace: str, name: str,
                          rules: list[dict[str, Any]] | None = None) -> str:
    """A ServiceAccount allowed ``rules`` in its namespace alone, and a token for it from the
    TokenRequest API, as a platform team hands one to a tenant."""
    api = cluster.client
    objects: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": name, "namespace": namespace}},
    ]
    if rules is not None:
        rbac = "rbac.authorization.k8s.io/v1"
        objects += [
            {"apiVersion": rbac, "kind": "Role",
             "metadata": {"name": name, "namespace": namespace}, "rules": rules},
            {"apiVersion": rbac, "kind": "RoleBinding",
             "metadata": {"name": name, "namespace": namespace},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
             "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]},
        ]
    for manifest in objects:
        pykube.object_factory(api, manifest["apiVersion"], manifest["kind"])(
            api, manifest).create()
    response = api.post(
        version="v1", url=f"namespaces/{namespace}/serviceaccounts/{name}/token",
        data=json.dumps({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                         "spec": {"expirationSeconds": 3600}}))
    response.raise_for_status()
    return str(response.json()["status"]["token"])


def kubeconfig_for(cluster: LocalCluster, path: Path, user: dict[str, Any], namespace: str,
                   context: str = "tenant") -> Path:
    """A kubeconfig of the local cluster whose current context is ``context``, as ``user``."""
    admin = json.loads(cluster.kubeconfig.read_text())
    document = {
        "apiVersion": "v1", "kind": "Config", "current-context": context,
        "clusters": admin["clusters"],
        "users": [{"name": "tenant", "user": user}],
        "contexts": [{"name": context, "context": {"cluster": admin["clusters"][0]["name"],
                                                   "user": "tenant", "namespace": namespace}}],
    }
    path.write_text(yaml.safe_dump(document))
    return path


def exec_user(directory: Path, api: str, token: str) -> dict[str, Any]:
    """A user whose token comes from an exec credential plugin (as EKS's, GKE's and AKS's
    kubeconfigs do); the plugin notes each call in ``calls``."""
    plugin = directory / "credential-plugin"
    credential = json.dumps({"apiVersion": api, "kind": "ExecCredential",
                             "status": {"token": token}})
    plugin.write_text(f"#!/bin/sh\necho \"$KUBERNETES_EXEC_INFO\" >> {directory}/calls\n"
                      f"cat <<'EOF'\n{credential}\nEOF\n")
    plugin.chmod(plugin.stat().st_mode | stat.S_IXUSR)
    return {"exec": {"apiVersion": api, "command": "./credential-plugin"}}


def documented_role(page: Path) -> list[dict[str, Any]]:
    """The rules of the tenant Role docs/cli.md gives, as written there."""
    text = page.read_text()
    block = text[text.index("```yaml\napiVersion: rbac.authorization.k8s.io/v1\nkind: Role"):]
    role = yaml.safe_load(block[len("```yaml\n"):block.index("```", 8)])
    rules: list[dict[str, Any]] = role["rules"]
    return rules


TENANT_RULES = documented_role(REPO / "docs" / "cli.md")


@pytest.fixture
def tenant_token(cluster: LocalCluster, ws: Workspace) -> str:
    return service_account_token(cluster, ws.name, "tenant", TENANT_RULES)


@pytest.mark.usefixtures("blocked_gang")
def test_a_namespace_only_account_gets_its_namespace_and_a_plain_refusal_for_the_rest(
    cluster: LocalCluster, ws: Workspace, tenant_token: str, tmp_path: Path
) -> None:
    config = kubeconfig_for(cluster, tmp_path / "tenant", {"token": tenant_token}, "default")

    shown = run_cli("status", "-n", ws.name, "-o", "json", kubeconfig=config)
    answer = json.loads(shown.stdout)
    [row] = answer["podGroups"]
    assert row["group"] == f"{ws.name}/train" and row["phase"] in ("Pending", "Inqueue")
    assert "nvidia.com/gpu" in row["reason"], "the reason the scheduler wrote on the PodGroup"
    assert answer["queues"] == [], "Queues are cluster-scoped: a tenant is not shown them"
    assert "may not list" not in shown.stderr, "the documented Role reads every flavour"

    refused = run_cli("status", "-A", kubeconfig=config, expect=1)
    assert "may not list nodes (v1) in the cluster" in refused.stderr
    assert "gangsched status -n NAMESPACE reads one namespace alone" in refused.stderr

    why = run_cli("explain", "worker-1", "-n", ws.name, "-o", "yaml", kubeconfig=config,
                  expect=3)
    said = yaml.safe_load(why.stdout)
    assert (said["verdict"], said["node"]) == ("waiting", None)
    assert "nvidia.com/gpu" in said["reason"]
    assert "showing what the scheduler last wrote" in why.stderr


@pytest.mark.parametrize("api", [EXEC_V1, EXEC_V1BETA1])
@pytest.mark.usefixtures("blocked_gang")
def test_kubectl_gangsched_logs_in_through_an_exec_plugin(
    cluster: LocalCluster, ws: Workspace, tenant_token: str, tmp_path: Path, api: str
) -> None:
    config = kubeconfig_for(cluster, tmp_path / "config", exec_user(tmp_path, api, tenant_token),
                            namespace=ws.name)
    kubectl = (str(cluster.bin_dir / "kubectl"), "gangsched")

    answer = yaml.safe_load(run_cli("status", "-o", "yaml", kubeconfig=config,
                                    command=kubectl).stdout)
    assert answer["namespace"] == ws.name, "the context's namespace when -n is not given"
    assert [g["group"] for g in answer["podGroups"]] == [f"{ws.name}/train"]
    [call] = (tmp_path / "calls").read_text().splitlines()
    assert json.loads(call)["apiVersion"] == api


@pytest.fixture
def scheduler_account(cluster: LocalCluster, ws: Workspace) -> Iterator[str]:
    """A ServiceAccount bound to cluster-admin, as the chart binds the scheduler's."""
    token = service_account_token(cluster, ws.name, "scheduler")
    binding = pykube.ClusterRoleBinding(cluster.client, {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": f"{ws.name}-scheduler"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": "scheduler", "namespace": ws.name}],
    })
    binding.create()
    yield token
    binding.delete()


def test_run_schedules_with_an_exec_plugin_kubeconfig_chosen_by_context(
    cluster: LocalCluster, ws: Workspace, scheduler_account: str, tmp_path: Path
) -> None:
    only_nodes(cluster, 2, NodeShape(cpu="4", memory="16Gi"))
    config = kubeconfig_for(cluster, tmp_path / "config",
                            exec_user(tmp_path, EXEC_V1, scheduler_account), ws.name,
                            context="scheduler")
    document = yaml.safe_load(config.read_text())
    document["current-context"] = "elsewhere"
    document["contexts"].append({"name": "elsewhere", "context": {"cluster": "nowhere"}})
    config.write_text(yaml.safe_dump(document))

    running = start_gangsched(cluster, tmp_path / "gangsched.log", "--context=scheduler",
                              "--scheduler-name=gang-exec", kubeconfig=config)
    try:
        # Pods of no PodGroup: a scheduler of the session may be running beside this
        # one, and every scheduler writes the status of every PodGroup it sees.
        ws.create(*(ws.pod(f"p-{i}", cpu="3", scheduler="gang-exec") for i in range(2)))
        wait_for(lambda: len(bound(ws.pods().values())) == 2, timeout=30, what="both bound")
        assert running.proc.poll() is None, running.logs()[-3000:]
    finally:
        assert stop_gangsched(running) == 0, running.logs()[-3000:]
    calls = (tmp_path / "calls").read_text().splitlines()
    assert len(calls) >= 2, "the scheduler's client and kopf's login each ran the plugin"
    assert "LoginError" not in running.logs()
