"""Kubeflow's training-operator and mpi-operator, run against the local control plane.

Both are built by ``cluster/build.sh operators`` through the Go module proxy
at the versions pinned in ``cluster/versions.env``, with their CRDs copied
from their modules beside the binaries. Each runs as its own process, as in a
cluster, with the harness's admin kubeconfig. Their traps, and how they are
met here:

- training-operator's webhook has no off switch: at start it rotates a
  certificate into the Secret ``training-operator-webhook-cert`` of its
  namespace and injects its CA into the ValidatingWebhookConfiguration
  ``validator.training-operator.kubeflow.org``, and waits for both to exist.
  An empty Secret and a configuration with no webhooks satisfy it: the API
  server then never calls the webhook, and jobs are created as users write them.
- It reads that certificate from a hard-coded ``/tmp/k8s-webhook-server``,
  where a kubelet would mount the Secret, and starts no controller until the
  files are there: it runs in a private mount namespace (``unshare --mount``)
  with a tmpfs there, so parallel runs never share or clobber it, and a shell
  beside it plays the kubelet, copying the rotated certificate from the Secret.
- mpi-operator serves a health check on a hard-coded ``:8080`` and exits if
  the port is taken: an exclusive file lock keeps two of them on one machine
  from running at once, and nothing else in the suite binds 8080.
- mpi-operator always elects a leader, on a Lease in ``--lock-namespace``:
  each run gets a namespace of its own, so it never waits out an old Lease.

KubeRay's ray-operator (``cluster/build.sh kuberay``) runs without its webhooks
or leader election, with ``--batch-scheduler`` naming the gang mode.

Volcano's vc-controller-manager (``cluster/build.sh volcano-controller``, the
peers' key) runs alone, without vc-scheduler, as for a user who replaces only
the scheduler: its job, queue and garbage controllers, no leader election.

Kubeflow Trainer v2's controller manager and the JobSet controller it runs on
(``cluster/build.sh trainer``) run with their own certificate management off and
no leader election. Neither can turn its webhook server off, and each stops if
that server finds no certificate: both are given the cluster's serving pair for
127.0.0.1 (JobSet in its ``webhook.certDir``, Trainer under ``$TMPDIR``, where it
looks). Their webhooks are not registered, so the API server never calls them:
JobSets get no defaults from JobSet's webhook (the runtimes write them), and
TrainJobs and runtimes are not validated beyond their CRDs' schemas.

LeaderWorkerSet's controller manager (``cluster/build.sh lws``) cannot do without its
webhooks: the pod webhook labels each leader with its group's index (no worker
StatefulSet is made without it) and, with the Volcano gang option, writes the group's
PodGroup name on every pod. It serves them on 127.0.0.1 with the cluster's serving
pair, and a MutatingWebhookConfiguration naming that address (``url``, the cluster's CA)
sends it LeaderWorkerSets and their pods alone, for as long as it runs.
"""

from __future__ import annotations

import base64
import fcntl
import os
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pykube
import yaml

from devcluster.build import built
from devcluster.controlplane import LocalCluster, free_port
from tests.e2e.workspace import wait_for

WEBHOOK_CONFIGURATION = "validator.training-operator.kubeflow.org"
WEBHOOK_SECRET = "training-operator-webhook-cert"
CERT_DIR = "/tmp/k8s-webhook-server"
MPI_PORT_LOCK = Path("/tmp/gangsched-mpi-operator-8080.lock")
READY_TIMEOUT_S = 60.0


def operators_dir() -> Path:
    """Build or reuse the pinned operators; returns the directory holding bin/ and crds/."""
    return built("operators").parent


def install_crds(
    cluster: LocalCluster, crds: Path,
    names: tuple[str, ...] = ("tfjobs.kubeflow.org", "pytorchjobs.kubeflow.org",
                              "mpijobs.kubeflow.org"),
) -> None:
    """The CRDs in ``crds`` (by default the TFJob, PyTorchJob and MPIJob ones), as their
    modules ship them, once ``names`` are served."""
    files = [arg for path in sorted(crds.glob("*.yaml")) for arg in ("-f", str(path))]
    cluster.kubectl("apply", "--server-side", "--force-conflicts", *files, timeout=120)
    crd = pykube.object_factory(cluster.client, "apiextensions.k8s.io/v1",
                                "CustomResourceDefinition")

    def established(name: str) -> bool:
        found = crd.objects(cluster.client).get_or_none(name=name)
        conditions = (found.obj.get("status") or {}).get("conditions") or [] if found else []
        return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)

    wait_for(lambda: all(established(name) for name in names), timeout=60,
             what="the operators' CRDs to be served")


@dataclass
class OperatorProcess:
    name: str
    proc: subprocess.Popen[bytes]
    log_path: Path
    _held: list[IO[bytes]] = field(default_factory=list)

    def logs(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for_log(self, text: str, count: int = 1) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while self.logs().count(text) < count:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} did not start:\n{self.logs()[-4000:]}")
            time.sleep(0.2)

    def stop(self) -> None:
        """Stop the operator and whatever it started: it runs in a session of its own."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        for handle in self._held:
            handle.close()


def _namespace(cluster: LocalCluster, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    pykube.Namespace(cluster.client, {"apiVersion": "v1", "kind": "Namespace",
                                      "metadata": {"name": name}}).create()
    return name


def _spawn(name: str, args: list[str], log_path: Path, env: dict[str, str]) -> OperatorProcess:
    log = log_path.open("ab")
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            env={**os.environ, **env}, start_new_session=True)
    return OperatorProcess(name, proc, log_path, [log])


def _started(running: OperatorProcess, line: str, count: int = 1) -> Iterator[OperatorProcess]:
    """The process once its log shows ``line`` ``count`` times; stopped when the caller's
    ``with`` block ends, however it ends."""
    try:
        running.wait_for_log(line, count)
        yield running
    finally:
        running.stop()


def _webhook_stand_ins(cluster: LocalCluster, namespace: str) -> None:
    """The empty Secret and webhook-less configuration training-operator's webhook waits for."""
    pykube.Secret(cluster.client, {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                                   "metadata": {"name": WEBHOOK_SECRET,
                                                "namespace": namespace}}).create()
    configuration = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": WEBHOOK_CONFIGURATION},
    }
    cls = pykube.object_factory(cluster.client, "admissionregistration.k8s.io/v1",
                                "ValidatingWebhookConfiguration")
    if cls.objects(cluster.client).get_or_none(name=WEBHOOK_CONFIGURATION) is None:
        cls(cluster.client, configuration).create()


@contextmanager
def training_operator(
    cluster: LocalCluster, home: Path, workdir: Path, gang_scheduler: str
) -> Iterator[OperatorProcess]:
    """training-operator for TFJobs and PyTorchJobs, ``--gang-scheduler-name=gang_scheduler``."""
    namespace = _namespace(cluster, "kubeflow")
    _webhook_stand_ins(cluster, namespace)
    binary = home / "bin" / "training-operator.v1"
    secret = (f"{cluster.bin_dir / 'kubectl'} --kubeconfig={cluster.kubeconfig} -n {namespace} "
              f"get secret {WEBHOOK_SECRET} -o")
    certs = f"{CERT_DIR}/serving-certs"
    mount_secret = f"""
        mkdir -p {CERT_DIR} && mount -t tmpfs tmpfs {CERT_DIR} && mkdir -p {certs} || exit 1
        "$@" & operator=$!
        until {secret} jsonpath='{{.data.tls\\.key}}' | grep -q .; do sleep 0.3; done
        for name in ca.crt tls.crt tls.key; do
          {secret} jsonpath="{{.data.${{name%.*}}\\.${{name#*.}}}}" | base64 -d > {certs}/$name
        done
        wait $operator
    """
    args = [
        "unshare", "--mount", "--propagation", "private", "sh", "-c", mount_secret, "sh",
        str(binary),
        f"--gang-scheduler-name={gang_scheduler}",
        "--enable-scheme=tfjob", "--enable-scheme=pytorchjob",
        f"--metrics-bind-address=127.0.0.1:{free_port()}",
        f"--health-probe-bind-address=127.0.0.1:{free_port()}",
        f"--webhook-server-port={free_port()}",
    ]
    running = _spawn("training-operator", args, workdir / "training-operator.log",
                     {"KUBECONFIG": str(cluster.kubeconfig), "MY_POD_NAMESPACE": namespace})
    yield from _started(running, "Starting workers", count=2)


def volcano_controller_dir() -> Path:
    """Build or reuse vc-controller-manager; returns the directory holding bin/ and crds/."""
    return built("volcano-controller").parent


@contextmanager
def volcano_controller(cluster: LocalCluster, home: Path, workdir: Path
                       ) -> Iterator[OperatorProcess]:
    """vc-controller-manager running Volcano Jobs, creating their pods and PodGroups."""
    args = [
        str(home / "bin" / "vc-controller-manager"),
        f"--kubeconfig={cluster.kubeconfig}", "--leader-elect=false",
        "--controllers=job-controller,queue-controller,gc-controller",
        f"--listen-address=127.0.0.1:{free_port()}",
        f"--healthz-address=127.0.0.1:{free_port()}",
    ]
    running = _spawn("vc-controller-manager", args, workdir / "vc-controller-manager.log", {})
    yield from _started(running, "JobController is running")


def kuberay_dir() -> Path:
    """Build or reuse ray-operator; returns the directory holding bin/ and crds/."""
    return built("kuberay").parent


@contextmanager
def kuberay_operator(cluster: LocalCluster, home: Path, workdir: Path, batch_scheduler: str
                     ) -> Iterator[OperatorProcess]:
    """ray-operator with ``--batch-scheduler=batch_scheduler`` (volcano, scheduler-plugins)."""
    args = [
        str(home / "bin" / "ray-operator"),
        f"--batch-scheduler={batch_scheduler}",
        f"--metrics-addr=127.0.0.1:{free_port()}",
        f"--health-probe-bind-address=127.0.0.1:{free_port()}",
        "--enable-leader-election=false", "--log-stdout-encoder=console",
    ]
    running = _spawn("ray-operator", args, workdir / "ray-operator.log",
                     {"KUBECONFIG": str(cluster.kubeconfig)})
    yield from _started(running, "Starting workers", count=3)


@contextmanager
def mpi_operator(
    cluster: LocalCluster, home: Path, workdir: Path, gang_scheduling: str
) -> Iterator[OperatorProcess]:
    """mpi-operator with ``--gang-scheduling=gang_scheduling``, alone on port 8080."""
    lock = MPI_PORT_LOCK.open("wb")
    fcntl.flock(lock, fcntl.LOCK_EX)
    namespace = _namespace(cluster, "mpi-operator")
    args = [
        str(home / "bin" / "mpi-operator"),
        f"--kubeConfig={cluster.kubeconfig}",
        f"--gang-scheduling={gang_scheduling}",
        f"--lock-namespace={namespace}",
        "--monitoring-port=0",
        "--kube-api-qps=50", "--kube-api-burst=100",
    ]
    running = _spawn("mpi-operator", args, workdir / "mpi-operator.log", {})
    running._held.append(lock)
    yield from _started(running, "Starting workers")


def trainer_dir() -> Path:
    """Build or reuse Trainer's and JobSet's controller managers; returns the directory
    holding bin/ and crds/."""
    return built("trainer").parent


def _serving_pair(cluster: LocalCluster, cert_dir: Path) -> None:
    """The cluster's serving pair for 127.0.0.1 where a controller-runtime webhook
    server reads its certificate."""
    cert_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(cluster.certs.serving_cert, cert_dir / "tls.crt")
    shutil.copyfile(cluster.certs.serving_key, cert_dir / "tls.key")


@contextmanager
def _mutating_webhooks(cluster: LocalCluster, name: str, port: int,
                       webhooks: list[dict[str, Any]]) -> Iterator[None]:
    """``webhooks`` (each ``url`` a path on the out-of-cluster server at ``port``)
    registered until the caller's ``with`` block ends, however it ends: a configuration
    left behind would refuse what it matches once the server is gone."""
    ca = base64.b64encode(cluster.certs.ca_cert.read_bytes()).decode()
    for hook in webhooks:
        hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{hook.pop('url')}",
                                "caBundle": ca}
        hook.update(admissionReviewVersions=["v1"], sideEffects="None", failurePolicy="Fail")
    kind = pykube.object_factory(cluster.client, "admissionregistration.k8s.io/v1",
                                 "MutatingWebhookConfiguration")
    kind(cluster.client, {"apiVersion": "admissionregistration.k8s.io/v1",
                          "kind": "MutatingWebhookConfiguration",
                          "metadata": {"name": name}, "webhooks": webhooks}).create()
    try:
        yield
    finally:
        kind.objects(cluster.client).get(name=name).delete()


@contextmanager
def jobset_controller(cluster: LocalCluster, home: Path, workdir: Path
                      ) -> Iterator[OperatorProcess]:
    """JobSet's controller manager, creating each JobSet's Jobs (and restarting them)."""
    cert_dir = workdir / "jobset-certs"
    _serving_pair(cluster, cert_dir)
    config = workdir / "jobset-config.yaml"
    config.write_text(yaml.safe_dump({
        "apiVersion": "config.jobset.x-k8s.io/v1alpha1", "kind": "Configuration",
        "webhook": {"port": free_port(), "host": "127.0.0.1", "certDir": str(cert_dir)},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{free_port()}"},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
    }))
    args = [str(home / "bin" / "jobset"), f"--config={config}", "--metrics-bind-address=0",
            "--kube-api-qps=50", "--kube-api-burst=100"]
    running = _spawn("jobset", args, workdir / "jobset.log",
                     {"KUBECONFIG": str(cluster.kubeconfig)})
    yield from _started(running, "Starting workers", count=2)


@contextmanager
def trainer_controller(cluster: LocalCluster, home: Path, workdir: Path
                       ) -> Iterator[OperatorProcess]:
    """Trainer's controller manager, turning TrainJobs into JobSets and PodGroups."""
    _serving_pair(cluster, workdir / "k8s-webhook-server" / "serving-certs")
    config = workdir / "trainer-config.yaml"
    config.write_text(yaml.safe_dump({
        "apiVersion": "config.trainer.kubeflow.org/v1alpha1", "kind": "Configuration",
        "webhook": {"port": free_port(), "host": "127.0.0.1"},
        "metrics": {"bindAddress": "0", "secureServing": False},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{free_port()}"},
        "leaderElection": {"leaderElect": False},
        "certManagement": {"enable": False},
    }))
    args = [str(home / "bin" / "trainer-controller-manager"), f"--config={config}"]
    running = _spawn("trainer-controller-manager", args, workdir / "trainer.log",
                     {"KUBECONFIG": str(cluster.kubeconfig), "TMPDIR": str(workdir)})
    yield from _started(running, "Starting workers")


def lws_dir() -> Path:
    """Build or reuse LeaderWorkerSet's controller manager; returns the directory holding
    bin/ and crds/."""
    return built("lws").parent


LWS_WEBHOOKS = "gangsched-e2e-lws"
LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"


@contextmanager
def lws_controller(cluster: LocalCluster, home: Path, workdir: Path
                   ) -> Iterator[OperatorProcess]:
    """LeaderWorkerSet's controller manager with its Volcano gang option: a Volcano
    PodGroup per group (minMember: the group's size), its name on each pod."""
    cert_dir = workdir / "lws-certs"
    _serving_pair(cluster, cert_dir)
    port = free_port()
    config = workdir / "lws-config.yaml"
    config.write_text(yaml.safe_dump({
        "apiVersion": "config.lws.x-k8s.io/v1alpha1", "kind": "Configuration",
        "webhook": {"port": port, "host": "127.0.0.1", "certDir": str(cert_dir)},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{free_port()}"},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "gangSchedulingManagement": {"schedulerProvider": "volcano"},
    }))
    args = [str(home / "bin" / "lws-controller-manager"), f"--config={config}",
            "--metrics-bind-address=0", "--leader-elect=false"]
    webhooks: list[dict[str, Any]] = [
        {"name": "mleaderworkerset.lws.gangsched.io",
         "url": "/mutate-leaderworkerset-x-k8s-io-v1-leaderworkerset",
         "rules": [{"apiGroups": ["leaderworkerset.x-k8s.io"], "apiVersions": ["v1"],
                    "operations": ["CREATE", "UPDATE"], "resources": ["leaderworkersets"]}]},
        {"name": "mpod.lws.gangsched.io", "url": "/mutate--v1-pod",
         "objectSelector": {"matchExpressions": [{"key": LWS_NAME_LABEL,
                                                  "operator": "Exists"}]},
         "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                    "resources": ["pods"]}]},
    ]
    running = _spawn("lws-controller-manager", args, workdir / "lws.log",
                     {"KUBECONFIG": str(cluster.kubeconfig)})
    with _mutating_webhooks(cluster, LWS_WEBHOOKS, port, webhooks):
        yield from _started(running, "Starting workers", count=2)
