"""A real Kubernetes control plane on 127.0.0.1, for tests, the demo and benchmarks.

It runs etcd, kube-apiserver (client-certificate auth, RBAC on) and the KWOK
controller, which plays kubelet for fake nodes; kube-scheduler and
kube-controller-manager on request. Binaries come from ``cluster/build.sh``
(built through the Go module proxy at pinned versions, cached outside the
repository).

ServiceAccounts: the ``ServiceAccount`` admission plugin is turned off, as
envtest does, so pods can be created in any namespace without a ``default``
ServiceAccount and without a token controller. When kube-controller-manager
runs, its serviceaccount controller still creates ``default`` accounts.
``TaintNodesByCondition`` is off too: it taints every new node not-ready until
the node-lifecycle controller lifts it, and KWOK nodes are Ready at once.

Kubernetes 1.37's native gang scheduling API is served wherever the release has it:
the API server runs with ``GenericWorkload`` (``scheduling.k8s.io/v1beta1`` Workloads and
PodGroups, the pod's ``spec.schedulingGroup``), ``TopologyAwareWorkloadScheduling``
(a PodGroup's ``schedulingConstraints.topology``) and ``WorkloadWithJob`` (a
Job's ``spec.scheduling``), so native objects keep every field in every test.
Whether kube-scheduler gang-schedules them and the Job controller creates
them is a choice of :class:`ClusterOptions` (``native_gang``).

Dynamic Resource Allocation (``resource.k8s.io/v1``) is served as the release
has it, with ``DRAWorkloadResourceClaims`` on everywhere (a native PodGroup's
``spec.resourceClaims``); kube-controller-manager runs the resource-claim
controller, which makes pods' claims from their templates and frees a claim's
devices once no pod holds it. Devices come from :mod:`devcluster.fakedriver`.

Other releases (``make test-versions``) run on the same flags: a feature gate or a
controller a release does not know would stop its component at start, so only those
its ``--help`` lists are passed (:func:`known_to`). The native gang gates go only to
releases serving the API at ``v1beta1`` (:data:`NATIVE_SINCE`): on 1.35 and 1.36 they
would turn on an alpha API the server then waits for, never ready, unless asked for.

Every process is started in its own session and recorded in ``state.json``;
``stop()`` (also from another process, through :func:`stop_from_state`)
terminates them all and waits until none is left.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pykube

from devcluster import provisioner
from devcluster.build import built
from devcluster.certs import CertFiles, make_certs

REPO = Path(__file__).resolve().parent.parent
STAGES = Path(__file__).resolve().parent / "kwok-stages.yaml"
KWOK_LABEL = ("type", "kwok")
READY_TIMEOUT_S = 60.0
STOP_GRACE_S = 5.0
"""How long a component may take to exit on SIGTERM before it is killed."""
NATIVE_API_GATES = ("GenericWorkload=true,TopologyAwareWorkloadScheduling=true,"
                    "WorkloadWithJob=true,DRAWorkloadResourceClaims=true,CompositePodGroup=true")
"""Feature gates the API server always runs with: the 1.37 native gang API, whole,
PodGroups' ``spec.resourceClaims`` (beta, off by default) and CompositePodGroups (alpha,
served at :data:`COMPOSITE_API` on 1.37). ``resource.k8s.io/v1`` is GA and served without
asking."""
NATIVE_SCHEDULER_GATES = ("GenericWorkload=true,TopologyAwareWorkloadScheduling=true,"
                          "DRAWorkloadResourceClaims=true,CompositePodGroup=true")
"""kube-scheduler's native gang scheduling: the GangScheduling and topology plugins,
claims a PodGroup owns (DynamicResources itself is on by default) and CompositePodGroups."""
COMPOSITE_API = "scheduling.k8s.io/v1alpha3"
COMPOSITE_RELEASE = (1, 37)
"""The release serving CompositePodGroups at :data:`COMPOSITE_API`: asked for there alone,
as a version a release does not serve would stop its API server at start."""
NATIVE_CONTROLLER_GATES = "GenericWorkload=true,WorkloadWithJob=true,DRAWorkloadResourceClaims=true"
"""The Job controller creates a Workload and a PodGroup for every Job; the resource-claim
controller makes a PodGroup's claims from its templates."""

KCM_CONTROLLERS = (
    "job-controller", "namespace-controller", "garbage-collector-controller",
    "serviceaccount-controller", "replicaset-controller", "deployment-controller",
    "pod-garbage-collector-controller", "disruption-controller",
    # LeaderWorkerSet's groups are StatefulSets.
    "statefulset-controller",
    # Claims: binding to volumes, generic ephemeral volumes, deletion protection.
    "persistentvolume-binder-controller", "ephemeral-volume-controller",
    "persistentvolumeclaim-protection-controller", "persistentvolume-protection-controller",
    # Devices: claims made from templates, freed when their pods are gone; a native
    # PodGroup deleted goes once its pods are gone, and its claims with it.
    "resourceclaim-controller", "podgroup-protection-controller",
)
"""kube-controller-manager's controllers the harness runs, those a release has of them."""


class ClusterError(RuntimeError):
    """The control plane could not start; the message carries the failing log's tail."""


def ensure_binaries() -> Path:
    """Build or reuse the pinned control-plane binaries; returns their directory.

    Progress of a cold build goes to stderr so a user sees minutes of work
    explained rather than a silent hang.
    """
    return built(override="GANGSCHED_BIN_DIR")


NATIVE_SINCE = (1, 37)
"""The first release serving the native gang API at ``scheduling.k8s.io/v1beta1``."""
RELEASE = re.compile(r"v1\.(\d+)\.")
GATE = re.compile(r"(?:kube:)?([A-Z][A-Za-z0-9]+)=true\|false")
"""A feature gate as ``--help`` lists it (``kube:Name=true|false`` since 1.34, bare before)."""
CONTROLLERS = re.compile(r"All controllers: ([a-z0-9, -]+)")


@functools.cache
def known_to(binary: Path) -> frozenset[str]:
    """The feature gates and controllers a component accepts, as its ``--help`` lists them."""
    shown = subprocess.run([str(binary), "--help"], capture_output=True, text=True,
                           timeout=30, check=False)
    text = shown.stdout + shown.stderr
    controllers = CONTROLLERS.search(text)
    return frozenset(GATE.findall(text)) | frozenset(
        controllers.group(1).replace(" ", "").split(",") if controllers else ())


@functools.cache
def release_of(binary: Path) -> tuple[int, int]:
    """The Kubernetes release a component binary is of, as (major, minor)."""
    shown = subprocess.run([str(binary), "--version"], capture_output=True, text=True,
                           timeout=30, check=False).stdout
    found = RELEASE.search(shown)
    return (1, int(found.group(1))) if found else NATIVE_SINCE


def gates_flag(binary: Path, gates: str) -> list[str]:
    """``--feature-gates`` with the native gang gates of ``gates`` the binary knows, on a
    release serving that API; none elsewhere."""
    if release_of(binary) < NATIVE_SINCE:
        return []
    known = known_to(binary)
    kept = [gate for gate in gates.split(",") if gate.split("=")[0] in known]
    return [f"--feature-gates={','.join(kept)}"] if kept else []


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class NodeShape:
    """The allocatable every fake node of a shape reports."""

    cpu: str = "4"
    memory: str = "16Gi"
    gpus: int = 0
    pods: int = 110


@dataclass
class ClusterOptions:
    nodes: int = 4
    shape: NodeShape = field(default_factory=NodeShape)
    with_kube_scheduler: bool = False
    with_controller_manager: bool = False
    native_gang: bool = False
    """kube-scheduler gang-schedules native PodGroups; the Job controller makes them."""
    scheduler_qps: int | None = None
    """kube-scheduler's client rate limit (QPS and burst); None keeps its defaults (50/100)."""
    controller_manager_qps: int | None = None
    """kube-controller-manager's client rate limit (QPS and burst); None keeps its defaults
    (20/30), under which making thousands of claims from templates takes minutes."""
    with_provisioner: bool = False
    """rancher's local-path-provisioner runs, with a ``local-path`` StorageClass
    (WaitForFirstConsumer); see :mod:`devcluster.provisioner`."""
    without_apis: tuple[str, ...] = ()
    """Group versions the API server does not serve (``resource.k8s.io/v1``): a cluster
    whose administrator turned an API off, as older releases lack it."""
    audited_users: tuple[str, ...] = ()
    """The API server writes an audit log (:attr:`LocalCluster.audit_log`) of these users'
    requests, at the Metadata level: what each asked and what it was answered."""


@dataclass
class LocalCluster:
    """One local control plane living in ``workdir``."""

    workdir: Path
    bin_dir: Path
    options: ClusterOptions = field(default_factory=ClusterOptions)
    ports: dict[str, int] = field(default_factory=dict)
    pids: dict[str, int] = field(default_factory=dict)
    _procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    _client: pykube.HTTPClient | None = None
    _certs: CertFiles | None = None

    # ---- paths -----------------------------------------------------------
    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "kubeconfig"

    @property
    def logs(self) -> Path:
        return self.workdir / "logs"

    @property
    def audit_log(self) -> Path:
        return self.workdir / "audit.log"

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.ports['apiserver']}"

    @property
    def certs(self) -> CertFiles:
        """The cluster's certificates: the CA every component trusts, and a serving pair
        for 127.0.0.1 that a client's webhook server run beside it may present too."""
        assert self._certs is not None, "the cluster was not started"
        return self._certs

    # ---- lifecycle -------------------------------------------------------
    def start(self, *, die_with_parent: bool = True) -> None:
        """Start every component and wait until the API answers and nodes are Ready.

        With ``die_with_parent`` the kernel terminates the components if this
        Python process dies, so an interrupted test run leaves nothing behind.
        """
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(exist_ok=True)
        certs = self._certs = make_certs(self.workdir / "pki")
        for name in ("etcd", "etcd_peer", "apiserver", "kwok", "scheduler", "kcm"):
            self.ports[name] = free_port()
        self._write_kubeconfig(certs)
        try:
            self._spawn("etcd", self._etcd_args(), die_with_parent)
            self._wait_http(f"http://127.0.0.1:{self.ports['etcd']}/health", "etcd")
            self._spawn("kube-apiserver", self._apiserver_args(certs), die_with_parent)
            self._wait_http(f"{self.server}/readyz", "kube-apiserver", certs)
            self._spawn("kwok", self._kwok_args(), die_with_parent)
            if self.options.with_kube_scheduler:
                self._spawn("kube-scheduler", self._scheduler_args(), die_with_parent)
            if self.options.with_controller_manager:
                self._spawn("kube-controller-manager", self._kcm_args(certs), die_with_parent)
            if self.options.with_provisioner:
                self._start_provisioner(die_with_parent)
            self._save_state()
            self.ensure_nodes(self.options.nodes, self.options.shape)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        stop_pids(self.pids)
        self.pids.clear()
        self._procs.clear()
        with contextlib.suppress(FileNotFoundError):
            (self.workdir / "state.json").unlink()

    def _spawn(
        self, name: str, args: Sequence[str], die_with_parent: bool, binary: Path | None = None
    ) -> None:
        log = (self.logs / f"{name}.log").open("ab")
        proc = subprocess.Popen(
            [str(binary or self.bin_dir / name.split("@")[0]), *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=_die_with_parent if die_with_parent else None,
            cwd=self.workdir,
        )
        self._procs[name] = proc
        self.pids[name] = proc.pid

    def _start_provisioner(self, die_with_parent: bool) -> None:
        """The dynamic provisioner, its helper pods' namespace and its StorageClass."""
        self.kubectl("apply", "-f", "-", input=provisioner.setup_manifests())
        self._spawn("local-path-provisioner",
                    provisioner.provisioner_args(self.workdir, self.kubeconfig),
                    die_with_parent, binary=provisioner.ensure_provisioner_binary())

    def _check_alive(self) -> None:
        for name, proc in self._procs.items():
            if proc.poll() is not None:
                raise ClusterError(f"{name} exited with {proc.returncode}:\n{self._tail(name)}")

    def _tail(self, name: str, lines: int = 30) -> str:
        path = self.logs / f"{name}.log"
        if not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def _wait_http(self, url: str, name: str, certs: CertFiles | None = None) -> None:
        context = None
        if certs is not None:
            context = ssl.create_default_context(cafile=str(certs.ca_cert))
            context.load_cert_chain(str(certs.admin_cert), str(certs.admin_key))
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            self._check_alive()
            try:
                with urllib.request.urlopen(url, context=context, timeout=2) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError, ssl.SSLError):
                pass
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"{name} not ready after {READY_TIMEOUT_S}s:\n{self._tail(name)}"
                )
            time.sleep(0.2)

    # ---- component flags ---------------------------------------------------
    def _etcd_args(self) -> list[str]:
        client = f"http://127.0.0.1:{self.ports['etcd']}"
        peer = f"http://127.0.0.1:{self.ports['etcd_peer']}"
        return [
            "--name=local",
            f"--data-dir={self.workdir / 'etcd'}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=local={peer}",
            "--unsafe-no-fsync",
            "--log-level=warn",
        ]

    def _apiserver_args(self, certs: CertFiles) -> list[str]:
        return [
            f"--etcd-servers=http://127.0.0.1:{self.ports['etcd']}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            # 1.37 refuses a loopback advertise address for the kubernetes Service
            # endpoints; nothing here reaches the API server through that Service.
            "--endpoint-reconciler-type=none",
            f"--secure-port={self.ports['apiserver']}",
            f"--tls-cert-file={certs.serving_cert}",
            f"--tls-private-key-file={certs.serving_key}",
            f"--client-ca-file={certs.ca_cert}",
            f"--service-account-key-file={certs.sa_public}",
            f"--service-account-signing-key-file={certs.sa_private}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--authorization-mode=RBAC",
            "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
            *gates_flag(self.bin_dir / "kube-apiserver", NATIVE_API_GATES),
            "--runtime-config=" + ",".join(["scheduling.k8s.io/v1beta1=true", *(
                [f"{COMPOSITE_API}=true"]
                if release_of(self.bin_dir / "kube-apiserver") == COMPOSITE_RELEASE else []), *(
                f"{api}=false" for api in self.options.without_apis)]),
            "--allow-privileged=true",
            "--profiling=false",
            "--v=1",
            *self._audit_args(),
        ]

    def _audit_args(self) -> list[str]:
        if not self.options.audited_users:
            return []
        policy = self.workdir / "audit-policy.json"
        policy.write_text(json.dumps({
            "apiVersion": "audit.k8s.io/v1", "kind": "Policy",
            "omitStages": ["RequestReceived"],
            "rules": [{"level": "Metadata", "users": list(self.options.audited_users)},
                      {"level": "None"}],
        }))
        return [f"--audit-policy-file={policy}", f"--audit-log-path={self.audit_log}",
                "--audit-log-format=json", "--audit-log-maxbackup=0"]

    def _kwok_args(self) -> list[str]:
        return [
            f"--kubeconfig={self.kubeconfig}",
            f"--config={self.bin_dir / 'kwok-node-stages.yaml'}",
            f"--config={STAGES}",
            "--manage-all-nodes=false",
            f"--manage-nodes-with-label-selector={KWOK_LABEL[0]}={KWOK_LABEL[1]}",
            f"--server-address=127.0.0.1:{self.ports['kwok']}",
            "--cidr=10.244.0.1/16",
            "--node-ip=10.1.0.1",
        ]

    def _scheduler_args(self) -> list[str]:
        """kube-scheduler's flags; its client limits only go through a config file."""
        connection: dict[str, Any] = {"kubeconfig": str(self.kubeconfig)}
        if self.options.scheduler_qps is not None:
            connection["qps"] = self.options.scheduler_qps
            connection["burst"] = self.options.scheduler_qps
        config = self.workdir / "kube-scheduler.yaml"
        config.write_text(json.dumps({
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "clientConnection": connection,
            "leaderElection": {"leaderElect": False},
        }))
        args = [
            f"--config={config}",
            f"--authentication-kubeconfig={self.kubeconfig}",
            f"--authorization-kubeconfig={self.kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={self.ports['scheduler']}",
        ]
        if self.options.native_gang:
            args += gates_flag(self.bin_dir / "kube-scheduler", NATIVE_SCHEDULER_GATES)
        return args

    def restart_apiserver(self, down_s: float, *, die_with_parent: bool = True) -> None:
        """Stop kube-apiserver, keep it down ``down_s`` seconds, start it again on the
        same port with the same certificates: an outage as clients see one."""
        assert self._certs is not None, "the cluster was not started"
        self._stop_for("kube-apiserver", down_s)
        self._spawn("kube-apiserver", self._apiserver_args(self._certs), die_with_parent)
        self._wait_apiserver_ready()

    def restart_etcd(self, down_s: float, *, die_with_parent: bool = True) -> None:
        """Stop etcd at once, keep it down ``down_s`` seconds, start it again on the same
        ports and data. kube-apiserver runs on meanwhile, answering what it can from its
        caches and failing the rest; this returns once it is ready again.

        No grace: etcd stops serving on SIGTERM but then waits seconds for its open
        streams before it exits, which would lengthen every outage by that wait.
        """
        self._stop_for("etcd", down_s, grace=0.0)
        self._spawn("etcd", self._etcd_args(), die_with_parent)
        self._wait_http(f"http://127.0.0.1:{self.ports['etcd']}/health", "etcd")
        self._wait_apiserver_ready()

    def _stop_for(self, name: str, down_s: float, grace: float = STOP_GRACE_S) -> None:
        stop_pids({name: self.pids.pop(name)}, grace=grace)
        self._procs.pop(name, None)
        time.sleep(down_s)

    def _wait_apiserver_ready(self) -> None:
        assert self._certs is not None, "the cluster was not started"
        self._wait_http(f"{self.server}/readyz", "kube-apiserver", self._certs)
        self._save_state()

    def stop_kube_scheduler(self) -> None:
        """Stop kube-scheduler (a backlog then builds up for its next start)."""
        stop_pids({"kube-scheduler": self.pids.pop("kube-scheduler")}
                  if "kube-scheduler" in self.pids else {})
        self._procs.pop("kube-scheduler", None)
        self._save_state()

    def restart_kube_scheduler(
        self, *, native_gang: bool, qps: int | None, die_with_parent: bool = True
    ) -> None:
        """Run kube-scheduler again with other gates or client limits, on the same cluster.

        A comparison runs every contender on the same nodes and API server; only
        the scheduler's own settings change between them.
        """
        self.stop_kube_scheduler()
        self.options.native_gang = native_gang
        self.options.scheduler_qps = qps
        self._spawn("kube-scheduler", self._scheduler_args(), die_with_parent)
        self._save_state()

    def _kcm_args(self, certs: CertFiles) -> list[str]:
        binary = self.bin_dir / "kube-controller-manager"
        return [
            f"--kubeconfig={self.kubeconfig}",
            f"--authentication-kubeconfig={self.kubeconfig}",
            f"--authorization-kubeconfig={self.kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={self.ports['kcm']}",
            "--leader-elect=false",
            "--controllers=" + ",".join(c for c in KCM_CONTROLLERS if c in known_to(binary)),
            f"--root-ca-file={certs.ca_cert}",
            f"--service-account-private-key-file={certs.sa_private}",
            *(gates_flag(binary, NATIVE_CONTROLLER_GATES) if self.options.native_gang else []),
            *([f"--kube-api-qps={qps}", f"--kube-api-burst={qps}"]
              if (qps := self.options.controller_manager_qps) is not None else []),
        ]

    def _write_kubeconfig(self, certs: CertFiles) -> None:
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "local",
                    "cluster": {
                        "server": f"https://127.0.0.1:{self.ports['apiserver']}",
                        "certificate-authority": str(certs.ca_cert),
                    },
                }
            ],
            "users": [
                {
                    "name": "admin",
                    "user": {
                        "client-certificate": str(certs.admin_cert),
                        "client-key": str(certs.admin_key),
                    },
                }
            ],
            "contexts": [{"name": "local", "context": {"cluster": "local", "user": "admin"}}],
            "current-context": "local",
        }
        self.kubeconfig.write_text(json.dumps(config, indent=2))

    def _save_state(self) -> None:
        state = {"pids": self.pids, "ports": self.ports, "bin_dir": str(self.bin_dir)}
        (self.workdir / "state.json").write_text(json.dumps(state, indent=2))

    # ---- using the cluster -------------------------------------------------
    @property
    def client(self) -> pykube.HTTPClient:
        if self._client is None:
            self._client = pykube.HTTPClient(pykube.KubeConfig.from_file(str(self.kubeconfig)))
        return self._client

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        """Run the real kubectl against this cluster (text in and out)."""
        result = subprocess.run(
            [str(self.bin_dir / "kubectl"), f"--kubeconfig={self.kubeconfig}", *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and result.returncode != 0:
            raise subprocess.CalledProcessError(
                result.returncode, result.args, result.stdout, result.stderr
            )
        return result

    def apply_crds(self) -> None:
        """Install the project's CRDs and wait until the API serves them."""
        crds = sorted((REPO / "crds").glob("*.scheduling.gangsched.io.yaml"))
        files = [arg for path in crds for arg in ("-f", str(path))]
        self.kubectl("apply", "--server-side", "--force-conflicts", *files)
        self.kubectl(
            "wait", "--for=condition=Established", "--timeout=60s",
            "crd/podgroups.scheduling.gangsched.io", "crd/queues.scheduling.gangsched.io",
        )

    def ensure_nodes(
        self,
        count: int,
        shape: NodeShape | None = None,
        *,
        prefix: str = "kwok-node",
        labels: dict[str, str] | None = None,
        taints: list[dict[str, str]] | None = None,
        wait: bool = True,
    ) -> list[str]:
        """Make exactly ``count`` fake nodes named ``{prefix}-{i}`` exist with this shape.

        Nodes of the prefix beyond ``count`` and nodes whose shape differs are
        deleted and recreated; reshaping a cluster this way takes well under a
        second, so tests ask for the cluster they need instead of restarting it.
        """
        shape = shape or self.options.shape
        wanted = {
            f"{prefix}-{i}": _node_manifest(f"{prefix}-{i}", shape, labels, taints)
            for i in range(count)
        }
        existing = {
            n.name: n
            for n in pykube.Node.objects(self.client).filter(
                selector={KWOK_LABEL[0]: KWOK_LABEL[1]}
            )
            if n.name.startswith(prefix + "-") and n.name[len(prefix) + 1:].isdigit()
        }
        for name, node in existing.items():
            annotations = node.obj.get("metadata", {}).get("annotations", {})
            if name not in wanted or annotations.get("gangsched.io/shape") != _shape_key(
                wanted[name]
            ):
                node.delete()
                self._wait_node_gone(name)
        current = {n.name for n in pykube.Node.objects(self.client)}
        for name, manifest in wanted.items():
            if name not in current:
                pykube.Node(self.client, manifest).create()
        if wait:
            self.wait_nodes_ready(list(wanted))
        return list(wanted)

    def _wait_node_gone(self, name: str, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while pykube.Node.objects(self.client).get_or_none(name=name) is not None:
            if time.monotonic() > deadline:
                raise ClusterError(f"node {name} not deleted after {timeout}s")
            time.sleep(0.1)

    def wait_nodes_ready(self, names: list[str], timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        pending = set(names)
        while pending:
            self._check_alive()
            for name in list(pending):
                node = pykube.Node.objects(self.client).get_or_none(name=name)
                conditions = (node.obj.get("status", {}).get("conditions") or []) if node else []
                if any(c["type"] == "Ready" and c["status"] == "True" for c in conditions):
                    pending.discard(name)
            if pending and time.monotonic() > deadline:
                raise ClusterError(f"nodes not Ready after {timeout}s: {sorted(pending)}\n"
                                   f"{self._tail('kwok')}")
            if pending:
                time.sleep(0.2)


def _node_manifest(
    name: str,
    shape: NodeShape,
    labels: dict[str, str] | None,
    taints: list[dict[str, str]] | None,
) -> dict[str, Any]:
    allocatable = {"cpu": shape.cpu, "memory": shape.memory, "pods": str(shape.pods)}
    if shape.gpus:
        allocatable["nvidia.com/gpu"] = str(shape.gpus)
    shape_key = json.dumps([allocatable, labels or {}, taints or []], sort_keys=True)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                KWOK_LABEL[0]: KWOK_LABEL[1],
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                **(labels or {}),
            },
            "annotations": {"kwok.x-k8s.io/node": "fake", "gangsched.io/shape": shape_key},
        },
        "spec": {"taints": taints or []},
        "status": {"allocatable": allocatable, "capacity": dict(allocatable)},
    }


def _shape_key(manifest: dict[str, Any]) -> str:
    return str(manifest["metadata"]["annotations"]["gangsched.io/shape"])


def _die_with_parent() -> None:
    """Ask the kernel to SIGTERM this child when the Python parent dies."""
    import ctypes

    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    pr_set_pdeathsig = 1
    libc.prctl(pr_set_pdeathsig, signal.SIGTERM)


STOP_ORDER = ("local-path-provisioner", "kwok", "kube-scheduler", "kube-controller-manager",
              "kube-apiserver", "etcd")


def stop_pids(pids: dict[str, int], grace: float = STOP_GRACE_S) -> None:
    """Stop clients before the API server and etcd last, each with SIGTERM then SIGKILL.

    The API server drains watches for a long time on SIGTERM; a test cluster
    has nothing worth draining, so it gets a short grace before SIGKILL.
    """
    ordered = sorted(pids.items(), key=lambda item: (
        STOP_ORDER.index(item[0]) if item[0] in STOP_ORDER else -1))
    for _, pid in ordered:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while _alive(pid):
            if time.monotonic() > deadline:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGKILL)
            time.sleep(0.05)


def wait_ports_closed(ports: list[int], timeout: float = 10.0) -> list[int]:
    """Ports still listening after ``timeout``; sockets may close just after a process is reaped."""
    deadline = time.monotonic() + timeout
    while True:
        open_ports = [p for p in ports if _listening(p)]
        if not open_ports or time.monotonic() > deadline:
            return open_ports
        time.sleep(0.1)


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _alive(pid: int) -> bool:
    with contextlib.suppress(ChildProcessError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie of another parent still answers kill(0): read its state.
    with contextlib.suppress(FileNotFoundError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    return False


def stop_from_state(workdir: Path) -> list[int] | None:
    """Stop a cluster started by another process (``make cluster-down``).

    Returns None when no cluster was running, else the ports left listening.
    """
    path = workdir / "state.json"
    if not path.exists():
        return None
    state = json.loads(path.read_text())
    stop_pids({k: int(v) for k, v in state["pids"].items()})
    path.unlink()
    return wait_ports_closed([int(p) for p in state["ports"].values()])


@contextlib.contextmanager
def running_cluster(workdir: Path, options: ClusterOptions) -> Iterator[LocalCluster]:
    cluster = LocalCluster(workdir=workdir, bin_dir=ensure_binaries(), options=options)
    started = time.monotonic()
    cluster.start()
    print(f"[devcluster] ready in {time.monotonic() - started:.1f}s at {cluster.server}",
          file=sys.stderr)
    try:
        yield cluster
    finally:
        cluster.stop()
