"""The Helm chart, installed, upgraded, tested and uninstalled on the real API server.

The release this module works on is installed the way an existing user's is:
from the previous chart version (packaged at test time from git, with the
CRDs of that version), with a PodGroup and a Queue in use, then upgraded to
the chart in this tree as docs/upgrade.md says. Every test after that reads
the upgraded release, until it is uninstalled; then docs/install.md's install
and uninstall blocks run as written, by bash.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import tarfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pykube
import pytest
import yaml

from devcluster.controlplane import REPO, LocalCluster
from tests.e2e import deployed
from tests.e2e.conftest import SchedulerProcess
from tests.e2e.workspace import wait_for

CHART = REPO / "helm" / "gangsched"
RELEASE, NAMESPACE = "gangsched", "gangsched-system"
SA = f"system:serviceaccount:{NAMESPACE}:{RELEASE}"
GROUP = "scheduling.gangsched.io"
CRDS = (f"crd/podgroups.{GROUP}", f"crd/queues.{GROUP}", f"crd/topologies.{GROUP}")

PREVIOUS_CHART_COMMIT = "1a996fc"
"""The last commit of chart 0.1.0, the version users upgrade from (CRDs in the chart's crds/)."""


def helm(
    cluster: LocalCluster, *args: str, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(cluster.bin_dir / "helm"), f"--kubeconfig={cluster.kubeconfig}", *args],
        capture_output=True, text=True, timeout=timeout, check=False,
    )


def previous_chart(workdir: Path) -> tuple[Path, Path]:
    """The chart and CRDs of the previous version, from git: (chart directory, crds directory)."""
    archive = workdir / "previous.tar"
    made = subprocess.run(
        ["git", "-C", str(REPO), "archive", "--format=tar", f"--output={archive}",
         PREVIOUS_CHART_COMMIT, "helm", "crds"],
        capture_output=True, text=True, check=False,
    )
    if made.returncode != 0:
        pytest.fail(f"the previous chart is not in this clone (fetch full history): {made.stderr}")
    with tarfile.open(archive) as tar:
        tar.extractall(workdir, filter="tar")
    return workdir / "helm" / "gangsched", workdir / "crds"


@dataclass(frozen=True, slots=True)
class InUse:
    """Objects a user had before the upgrade, which must all survive it."""

    namespace: str
    podgroup: str
    queue: str


def install_previous_and_upgrade(cluster: LocalCluster, workdir: Path) -> InUse:
    chart, crds = previous_chart(workdir)
    # A 0.1.x cluster: its CRDs as that chart's crds/ folder left them (no Helm
    # ownership), the old short names included.
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(crds))
    packaged = helm(cluster, "package", str(chart), "--destination", str(workdir))
    assert packaged.returncode == 0, packaged.stderr
    installed = helm(cluster, "install", RELEASE, str(workdir / "gangsched-0.1.0.tgz"),
                     "--namespace", NAMESPACE, "--create-namespace", "--wait=false")
    assert installed.returncode == 0, installed.stderr
    assert "pg" in cluster.kubectl("get", CRDS[0], "-o",
                                   "jsonpath={.spec.names.shortNames}").stdout

    run = uuid.uuid4().hex[:6]
    in_use = InUse(namespace=f"helm-{run}", podgroup="train", queue=f"team-{run}")
    cluster.kubectl("create", "namespace", in_use.namespace)
    cluster.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": f"{GROUP}/v1alpha1", "kind": "Queue",
             "metadata": {"name": in_use.queue}, "spec": {"weight": 3}},
            {"apiVersion": f"{GROUP}/v1alpha1", "kind": "PodGroup",
             "metadata": {"name": in_use.podgroup, "namespace": in_use.namespace},
             "spec": {"minMember": 2, "queue": in_use.queue}},
        ]}))

    # docs/upgrade.md, as written there: from 0.1.x, --take-ownership adopts the
    # CRDs that the crds/ folder installed, so that Helm upgrades them from now on.
    upgrade = documented_helm(REPO / "docs" / "upgrade.md", "## From 0.1.x")
    upgraded = helm(
        cluster, *upgrade, "--wait=false",
        "--set-json", 'test.podAnnotations={"kwok.gangsched.io/run-for":"1s"}',
        "--set", "dashboard.enabled=true",
    )
    assert upgraded.returncode == 0, upgraded.stderr
    return in_use


def documented_block(page: Path, heading: str, after: str = "") -> str:
    """The first shell block under ``heading`` of a docs page (after the text ``after``)."""
    text = page.read_text()
    section = text[text.index(heading):]
    section = section[section.index(after):]
    block = section[section.index("```sh\n") + 6:]
    return block[:block.index("```")]


def documented_helm(page: Path, heading: str) -> list[str]:
    """The first ``helm`` command in a shell block under ``heading`` of a docs page, as
    arguments for this tree's chart: the published chart's reference is this
    directory and its ``--version`` is dropped (this tree is that version)."""
    words = shlex.split(documented_block(page, heading).replace("\\\n", " "))
    start = words.index("helm")
    command = words[start + 1:words.index("helm", start + 1)] if words.count("helm") > 1 \
        else words[start + 1:]
    assert command[1:3] == [RELEASE, "oci://ghcr.io/gangsched/charts/gangsched"], command
    args = [command[0], RELEASE, str(CHART)]
    rest = iter(command[3:])
    for word in rest:
        if word == "--version":
            next(rest)
        else:
            args.append(word)
    assert args[args.index("--namespace") + 1] == NAMESPACE, args
    return args


@pytest.fixture(scope="module")
def release(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[InUse]:
    in_use: InUse | None = None
    try:
        in_use = install_previous_and_upgrade(cluster, tmp_path_factory.mktemp("helm"))
        yield in_use
    finally:
        helm(cluster, "uninstall", RELEASE, "--namespace", NAMESPACE)
        cluster.apply_crds()  # whatever happened above, the session goes on with this tree's CRDs
        if in_use is not None:
            cluster.kubectl("delete", "namespace", in_use.namespace, "--wait=false")
            cluster.kubectl("delete", "queue", in_use.queue, "--wait=false")


def test_upgrade_keeps_podgroups_and_queues_and_upgrades_the_crds(
    cluster: LocalCluster, release: InUse
) -> None:
    group = cluster.kubectl("get", "gpg", release.podgroup, "-n", release.namespace,
                            "-o", "json").stdout
    assert json.loads(group)["spec"] == {"minMember": 2, "queue": release.queue}
    queue = cluster.kubectl("get", "gq", release.queue, "-o", "json").stdout
    assert json.loads(queue)["spec"]["weight"] == 3
    columns = cluster.kubectl("get", CRDS[0], "-o", "jsonpath={.spec.versions[0]"
                              ".additionalPrinterColumns[*].name}").stdout.split()
    assert "Reason" in columns
    status = helm(cluster, "status", RELEASE, "--namespace", NAMESPACE, "-o", "json")
    assert json.loads(status.stdout)["version"] == 2


def test_chart_creates_a_hardened_deployment(cluster: LocalCluster, release: InUse) -> None:
    deployment = pykube.Deployment.objects(cluster.client, namespace=NAMESPACE).get(name=RELEASE)
    pod = deployment.obj["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert "--leader-elect" in container["args"]
    assert "--scheduler-name=gang" in container["args"]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    # Admitted in any namespace: system-cluster-critical is not, on some platforms.
    assert "priorityClassName" not in pod


def test_two_replicas_are_spread_and_never_drained_together(
    cluster: LocalCluster, release: InUse
) -> None:
    deployment = pykube.Deployment.objects(cluster.client, namespace=NAMESPACE).get(name=RELEASE)
    anti = deployment.obj["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
    term = anti["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    budget = json.loads(cluster.kubectl("get", "pdb", RELEASE, "-n", NAMESPACE,
                                        "-o", "json").stdout)
    assert budget["spec"]["maxUnavailable"] == 1
    assert budget["spec"]["selector"]["matchLabels"] == term["labelSelector"]["matchLabels"]
    service = json.loads(cluster.kubectl("get", "service", RELEASE, "-n", NAMESPACE,
                                         "-o", "json").stdout)
    assert service["spec"]["selector"] == term["labelSelector"]["matchLabels"]


def test_dashboard_is_a_configmap_for_grafanas_sidecar(
    cluster: LocalCluster, release: InUse
) -> None:
    found = json.loads(cluster.kubectl("get", "configmap", f"{RELEASE}-dashboard", "-n",
                                       NAMESPACE, "-o", "json").stdout)
    assert found["metadata"]["labels"]["grafana_dashboard"] == "1"
    dashboard = json.loads(found["data"]["gangsched.json"])
    titles = {panel["title"] for panel in dashboard["panels"]}
    assert {"Pending PodGroups per queue", "Gang wait time", "Pods bound / s"} <= titles


def test_monitoring_objects_render_for_prometheus_operator(cluster: LocalCluster) -> None:
    """prometheus-operator's CRDs are not installed here: the chart is rendered, not applied."""
    rendered = helm(cluster, "template", RELEASE, str(CHART), "--namespace", NAMESPACE,
                    "--set", "metrics.serviceMonitor.enabled=true",
                    "--set", "metrics.prometheusRule.enabled=true",
                    "--set", "metrics.prometheusRule.gangWaitSeconds=900")
    assert rendered.returncode == 0, rendered.stderr
    objects = {doc["kind"]: doc for doc in yaml.safe_load_all(rendered.stdout) if doc}
    endpoint = objects["ServiceMonitor"]["spec"]["endpoints"][0]
    assert (endpoint["port"], endpoint["path"]) == ("metrics", "/metrics")
    group = objects["PrometheusRule"]["spec"]["groups"][0]
    rules = {rule["alert"]: rule for rule in group["rules"]}
    assert {"GangschedGangsWaitingLong", "GangschedNoCycles", "GangschedBindFailures"} <= set(rules)
    assert "> 900" in rules["GangschedGangsWaitingLong"]["expr"]


def test_helm_test_pod_is_bound_by_the_scheduler_name_and_runs(
    cluster: LocalCluster, release: InUse, gangsched: SchedulerProcess
) -> None:
    """`helm test` passes only when a scheduler serving the chart's name binds its pod.

    Here the pod runs on a KWOK node, so what it proves is the chain up to and
    including the bind: the session's `gangsched run` (serving `gang`, as the
    release's Deployment would on a real cluster) placed it, and the pod
    reached Succeeded. That the image starts is proved by test_image.py.
    """
    cluster.ensure_nodes(1, prefix="helm-node")
    try:
        result = helm(cluster, "test", RELEASE, "--namespace", NAMESPACE, "--timeout=90s",
                      "--logs=false", timeout=120)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "Phase:          Succeeded" in result.stdout, result.stdout
    finally:
        cluster.ensure_nodes(0, prefix="helm-node")


def test_the_suites_scheduler_leads_on_the_charts_lease(
    cluster: LocalCluster, gangsched: SchedulerProcess
) -> None:
    """The session's scheduler runs with the arguments the chart's Deployment renders:
    leader election on the release's Lease, in the release's namespace, is theirs."""
    holder = cluster.kubectl("get", "lease", deployed.RELEASE, "-n", deployed.NAMESPACE, "-o",
                             "jsonpath={.spec.holderIdentity}").stdout
    assert holder and f"identity={holder}" in gangsched.logs()


def can(cluster: LocalCluster, verb: str, resource: str, *extra: str) -> bool:
    result = cluster.kubectl("auth", "can-i", verb, resource, f"--as={SA}", *extra, check=False)
    return result.stdout.strip() == "yes"


@pytest.mark.usefixtures("release")
@pytest.mark.parametrize(
    ("verb", "resource", "extra"),
    [
        ("watch", "pods", ("--all-namespaces",)),
        ("watch", "nodes", ()),
        ("watch", "namespaces", ()),
        ("watch", "priorityclasses.scheduling.k8s.io", ()),
        ("watch", "poddisruptionbudgets.policy", ("--all-namespaces",)),
        ("watch", "persistentvolumeclaims", ("--all-namespaces",)),
        ("patch", "persistentvolumeclaims", ("-n", "team-a")),
        ("watch", "persistentvolumes", ()),
        ("watch", "storageclasses.storage.k8s.io", ()),
        ("watch", "csinodes.storage.k8s.io", ()),
        ("watch", "volumeattachments.storage.k8s.io", ()),
        ("watch", "csidrivers.storage.k8s.io", ()),
        ("watch", "csistoragecapacities.storage.k8s.io", ("--all-namespaces",)),
        ("create", "pods", ("--subresource=binding", "-n", "team-a")),
        ("create", "pods", ("--subresource=eviction", "-n", "team-a")),
        ("patch", "pods", ("--subresource=status", "-n", "team-a")),
        ("create", "events", ("-n", "team-a")),
        ("patch", "podgroups.scheduling.gangsched.io", ("--subresource=status", "-n", "team-a")),
        ("patch", "podgroups.scheduling.volcano.sh", ("-n", "team-a")),
        ("patch", "podgroups.scheduling.x-k8s.io", ("--subresource=status", "-n", "team-a")),
        ("create", "queues.scheduling.gangsched.io", ()),
        ("watch", "topologies.scheduling.gangsched.io", ()),
        ("update", "leases.coordination.k8s.io", ("-n", NAMESPACE)),
        ("watch", "podgroups.scheduling.k8s.io", ("--all-namespaces",)),
        ("patch", "podgroups.scheduling.k8s.io", ("--subresource=status", "-n", "team-a")),
        ("watch", "workloads.scheduling.k8s.io", ("--all-namespaces",)),
        ("patch", "resourceclaims.resource.k8s.io", ("--subresource=binding", "-n", "team-a")),
        # A running gang's own budget, made when it is bound whole and deleted before
        # preemption evicts it whole.
        ("create", "poddisruptionbudgets.policy", ("-n", "team-a")),
        ("delete", "poddisruptionbudgets.policy", ("-n", "team-a")),
    ],
)
def test_service_account_may_do_what_scheduling_needs(
    cluster: LocalCluster, verb: str, resource: str, extra: tuple[str, ...]
) -> None:
    assert can(cluster, verb, resource, *extra)


@pytest.mark.usefixtures("release")
@pytest.mark.parametrize(
    ("verb", "resource", "extra"),
    [
        ("delete", "pods", ("-n", "team-a")),
        ("update", "pods", ("-n", "team-a")),
        ("patch", "nodes", ()),
        ("get", "secrets", ("-n", "team-a")),
        ("delete", "podgroups.scheduling.gangsched.io", ("-n", "team-a")),
        ("update", "leases.coordination.k8s.io", ("-n", "kube-system")),
        ("patch", "podgroups.scheduling.volcano.sh", ("--subresource=status", "-n", "team-a")),
        ("patch", "podgroups.scheduling.k8s.io", ("-n", "team-a")),
        ("patch", "workloads.scheduling.k8s.io", ("-n", "team-a")),
        ("delete", "customresourcedefinitions.apiextensions.k8s.io", ()),
        ("update", "poddisruptionbudgets.policy", ("-n", "team-a")),
        ("delete", "persistentvolumeclaims", ("-n", "team-a")),
        ("create", "persistentvolumes", ()),
        ("delete", "volumeattachments.storage.k8s.io", ()),
        ("patch", "csinodes.storage.k8s.io", ()),
        ("patch", "podgroups.scheduling.gangsched.io", ("-n", "team-a")),
        ("patch", "podgroups.scheduling.x-k8s.io", ("-n", "team-a")),
        ("patch", "events", ("-n", "team-a")),
        ("create", "events.events.k8s.io", ("-n", "team-a")),
        ("create", "csistoragecapacities.storage.k8s.io", ("-n", "team-a")),
    ],
)
def test_service_account_may_do_nothing_more(
    cluster: LocalCluster, verb: str, resource: str, extra: tuple[str, ...]
) -> None:
    assert not can(cluster, verb, resource, *extra)


BAD_VALUES = {
    "policy-typo": (("--set", "policy=binpak"), ("policy", "binpack", "spread")),
    "unknown-key": (("--set", "replica=3"), ("replica", "not allowed")),
    "concurrency-0": (("--set", "bindConcurrency=0"), ("bindConcurrency", "minimum")),
    "no-scheduler-name": (("--set-json", "schedulerNames=[]"), ("schedulerNames",)),
    "log-level": (("--set", "logLevel=verbose"), ("logLevel",)),
}


@pytest.mark.parametrize(("args", "expected"), BAD_VALUES.values(), ids=BAD_VALUES.keys())
def test_schema_rejects_a_bad_value_before_anything_is_created(
    cluster: LocalCluster, args: tuple[str, ...], expected: tuple[str, ...]
) -> None:
    name = f"bad-{uuid.uuid4().hex[:6]}"
    result = helm(cluster, "install", name, str(CHART), "--namespace", name,
                  "--create-namespace", "--set", "crds.install=false", *args)
    assert result.returncode != 0, result.stdout
    assert "values don't meet the specifications of the schema" in result.stderr
    for text in expected:
        assert text in result.stderr
    assert helm(cluster, "status", name, "--namespace", name).returncode != 0
    cluster.kubectl("delete", "namespace", name, "--ignore-not-found", "--wait=false")


def test_uninstall_keeps_the_crds_and_every_podgroup(cluster: LocalCluster, release: InUse) -> None:
    """Runs last in this module: it removes the release the tests above read."""
    removed = helm(cluster, "uninstall", RELEASE, "--namespace", NAMESPACE, "--wait")
    assert removed.returncode == 0, removed.stderr
    assert "kept due to the resource policy" in removed.stdout + removed.stderr
    wait_for(lambda: pykube.Deployment.objects(cluster.client, namespace=NAMESPACE)
             .get_or_none(name=RELEASE) is None, timeout=30, what="the Deployment deleted")
    cluster.kubectl("get", *CRDS)
    cluster.kubectl("get", "gpg", release.podgroup, "-n", release.namespace)
    cluster.kubectl("get", "gq", release.queue)


PUBLISHED_CHART = re.compile(r"oci://ghcr\.io/gangsched/charts/gangsched\s+--version\s+(\S+)")
"""The published chart's reference in the docs' commands, with the version they install."""
RELEASE_KINDS = ("all,serviceaccounts,roles,rolebindings,configmaps,poddisruptionbudgets,"
                 "leases,secrets")
CLUSTER_KINDS = "clusterroles,clusterrolebindings,customresourcedefinitions"


def shell(cluster: LocalCluster, script: str) -> subprocess.Popen[str]:
    """``script`` run by bash as a user runs it from a clone of the repository, with the
    session's kubectl and helm on ``PATH`` and its cluster in ``KUBECONFIG``."""
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig),
           "PATH": f"{cluster.bin_dir}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.Popen(["bash", "-euo", "pipefail", "-c", script], cwd=REPO, env=env,
                            text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def of_this_tree(script: str) -> str:
    """``script`` with the published chart's reference replaced by this tree's chart,
    which is the version the docs install."""
    script = script.replace("\\\n", " ")
    versions = PUBLISHED_CHART.findall(script)
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())["version"]
    assert versions and set(versions) == {chart}, (versions, chart)
    return PUBLISHED_CHART.sub(shlex.quote(str(CHART)), script)


def release_objects(cluster: LocalCluster) -> set[str]:
    """Every object the release labels as its own, in its namespace and cluster-wide, and
    Helm's record of it."""
    mine = f"app.kubernetes.io/instance={RELEASE}"
    found = [cluster.kubectl("get", RELEASE_KINDS, "-n", NAMESPACE, "-l", mine, "-o", "name"),
             cluster.kubectl("get", CLUSTER_KINDS, "-l", mine, "-o", "name"),
             cluster.kubectl("get", "secrets", "-n", NAMESPACE, "-l", f"owner=helm,name={RELEASE}",
                             "-o", "name")]
    return {line for result in found for line in result.stdout.split()}


def finished(running: subprocess.Popen[str], timeout: float = 180) -> str:
    """The output of a shell that ran a documented block, once it exited 0."""
    output, _ = running.communicate(timeout=timeout)
    assert running.returncode == 0, output
    return output


def assert_crds_established(cluster: LocalCluster) -> None:
    for crd in CRDS:
        established = cluster.kubectl("get", crd, "-o", "jsonpath={.status.conditions["
                                      "?(@.type=='Established')].status}").stdout
        assert established == "True", crd


KEPT = {f"customresourcedefinition.apiextensions.k8s.io/{crd.removeprefix('crd/')}"
        for crd in CRDS}
"""What an uninstall leaves of the release, as install.md says: its CRDs."""


def test_the_documented_install_and_uninstall_run_as_written(
    cluster: LocalCluster, gangsched: SchedulerProcess
) -> None:
    """docs/install.md's Helm install and its uninstall, each block run by bash as
    written but for the chart's reference: this tree's chart, of the version the
    docs name."""
    # A cluster without the release: the module's upgraded one is gone already unless
    # test_uninstall_keeps_the_crds_and_every_podgroup was deselected.
    gone = helm(cluster, "uninstall", RELEASE, "-n", NAMESPACE, "--ignore-not-found", "--wait")
    assert gone.returncode == 0, gone.stderr
    page = REPO / "docs" / "install.md"
    install = of_this_tree(documented_block(page, "## With Helm"))
    uninstall = documented_block(page, "## Uninstalling")
    # The session's CRDs stand in for those a previous install of the release kept (a
    # fresh cluster has none; deleting them would delete every PodGroup of the session).
    for crd in CRDS:
        cluster.kubectl("label", crd, "--overwrite", "app.kubernetes.io/managed-by=Helm")
        cluster.kubectl("annotate", crd, "--overwrite", f"meta.helm.sh/release-name={RELEASE}",
                        f"meta.helm.sh/release-namespace={NAMESPACE}")
    cluster.ensure_nodes(2, prefix="install-node")
    try:
        installing = shell(cluster, install)
        # KWOK runs no container: it is told that the `helm test` pod's one
        # (`gangsched --version`) exits at once.
        wait_for(lambda: installing.poll() is not None or cluster.kubectl(
                     "annotate", "pod", f"{RELEASE}-test", "-n", NAMESPACE,
                     "kwok.gangsched.io/run-for=0s", check=False).returncode == 0,
                 timeout=240, interval=1, what="the `helm test` pod")
        assert "Phase:          Succeeded" in finished(installing, 240)
        status = json.loads(helm(cluster, "status", RELEASE, "-n", NAMESPACE, "-o", "json").stdout)
        assert status["info"]["status"] == "deployed"
        assert_crds_established(cluster)
        assert f"deployment.apps/{RELEASE}" in release_objects(cluster)

        finished(shell(cluster, uninstall))
        wait_for(lambda: release_objects(cluster) == KEPT, timeout=60,
                 what="nothing of the release left but its CRDs")
    finally:
        cluster.ensure_nodes(0, prefix="install-node")


def test_the_documented_install_without_helm_and_its_uninstall_run_as_written(
    cluster: LocalCluster,
) -> None:
    """docs/install.md's install without Helm and its uninstall, each block run by bash
    as written, from the repository's root as a clone's reader would."""
    page = REPO / "docs" / "install.md"
    install = documented_block(page, "## Without Helm")
    uninstall = documented_block(page, "## Uninstalling", after="Installed without Helm")
    # The block creates the namespace: a cluster without it (the Helm tests' is left).
    cluster.kubectl("delete", "namespace", NAMESPACE, "--ignore-not-found", "--timeout=120s",
                    timeout=150)
    cluster.ensure_nodes(2, prefix="install-node")
    try:
        finished(shell(cluster, install), 240)
        assert_crds_established(cluster)
        assert f"deployment.apps/{RELEASE}" in release_objects(cluster)

        finished(shell(cluster, uninstall), 240)
        assert cluster.kubectl("get", "namespace", NAMESPACE, check=False).returncode != 0
        assert not release_objects(cluster) - KEPT
    finally:
        cluster.ensure_nodes(0, prefix="install-node")


def test_helm_test_pod_is_not_counted_as_a_scheduler_replica(cluster: LocalCluster) -> None:
    """The PodDisruptionBudget and the Service select the scheduler's pods by the
    Deployment's selector; the `helm test` pod matching it would let the budget
    allow one disruption more than the replicas can bear."""
    rendered = helm(cluster, "template", RELEASE, str(CHART), "--namespace", NAMESPACE)
    assert rendered.returncode == 0, rendered.stderr
    docs = [doc for doc in yaml.safe_load_all(rendered.stdout) if doc]
    selector = next(doc for doc in docs if doc["kind"] == "Deployment")["spec"]["selector"]
    test_pod = next(doc for doc in docs if doc["kind"] == "Pod")
    labels = test_pod["metadata"]["labels"]
    assert not all(labels.get(k) == v for k, v in selector["matchLabels"].items()), labels
    assert labels["app.kubernetes.io/instance"] == RELEASE


@pytest.mark.parametrize(("values", "refusal"), [
    (("replicas=2", "leaderElection=false"), "at '/leaderElection': value must be true"),
    (("resources.requests.cpu=lots",), "at '/resources/requests/cpu'"),
    (("resources.limits.memory=1Gb",), "at '/resources/limits/memory'"),
    (("replicas=1", "leaderElection=false"), None),
    (("resources.requests.cpu=250m", "resources.limits.memory=1Gi"), None),
])
def test_values_that_would_misbehave_are_refused_before_anything_is_applied(
    cluster: LocalCluster, values: tuple[str, ...], refusal: str | None
) -> None:
    """Two leaders bind the same room twice; a quantity the API server rejects would fail
    the Deployment only once applied."""
    sets = [arg for value in values for arg in ("--set", value)]
    rendered = helm(cluster, "template", RELEASE, str(CHART), "--namespace", NAMESPACE, *sets)
    if refusal is None:
        assert rendered.returncode == 0, rendered.stderr
    else:
        assert rendered.returncode != 0 and refusal in rendered.stderr, rendered.stderr
