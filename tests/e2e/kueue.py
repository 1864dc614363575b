"""Kueue, run out of cluster against the local control plane, as gangsched's partner.

Kueue is built by ``cluster/build.sh peers kueue`` (``make binaries``) at the version
pinned in ``cluster/versions.env``, its CRDs copied beside the binary. It
runs as its own process with the harness's admin kubeconfig. Its traps, and how they
are met here:

- With its own certificate management off it reads a metrics certificate from a
  hard-coded ``/etc/kueue/metrics/certs``; with it on (as here), it rotates a
  certificate into the Secret ``kueue-webhook-server-cert`` of its namespace, which
  must exist (an empty one does), and waits for the files a kubelet would mount from
  it in its ``webhook.certDir``: a shell beside it plays the kubelet.
- That rotation injects its CA into the conversion webhook of five of its CRDs and
  waits until it could: they are applied with the conversion webhook its own
  installation gives them. The API server never calls it here, since every client
  reads the stored version (``v1beta2``).
- Its admission webhooks are not registered, so nothing suspends a Job or gates a pod
  for it: the tests create Jobs suspended and pods gated and labelled, as its webhooks
  would have made them.
"""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pykube
import yaml

from devcluster import fakedriver
from devcluster.build import built
from devcluster.controlplane import LocalCluster, free_port
from tests.e2e.operators import OperatorProcess, _spawn
from tests.e2e.workspace import wait_for

SECRET = "kueue-webhook-server-cert"
SERVICE = "kueue-webhook-service"
CONVERTED = ("localqueues", "clusterqueues", "workloads", "cohorts", "multikueueclusters")
"""The CRDs Kueue's installation gives a conversion webhook, whose CA it injects."""
KUEUE_API = "kueue.x-k8s.io/v1beta2"


def kueue_bin() -> Path:
    """Build or reuse the pinned Kueue; returns its bin/ (its CRDs in ``../crds/kueue``)."""
    return built("peers", "kueue")


def _crds(crd_dir: Path, namespace: str) -> list[dict[str, Any]]:
    """Kueue's CRDs, those it converts with its conversion webhook in ``namespace``."""
    crds = []
    for path in sorted(crd_dir.glob("*.yaml")):
        body = yaml.safe_load(path.read_text())
        if body["spec"]["names"]["plural"] in CONVERTED:
            body["spec"]["conversion"] = {"strategy": "Webhook", "webhook": {
                "conversionReviewVersions": ["v1"],
                "clientConfig": {"service": {"namespace": namespace, "name": SERVICE,
                                             "path": "/convert"}}}}
        crds.append(body)
    return crds


def _configuration(namespace: str, cert_dir: Path, ready_timeout_s: float | None
                   ) -> dict[str, Any]:
    """Kueue's manager configuration; with ``ready_timeout_s``, ``waitForPodsReady``: no
    other workload is admitted until the admitted one's pods are all Ready, and one whose
    pods are not Ready in time is evicted and queued again."""
    ready = {} if ready_timeout_s is None else {"waitForPodsReady": {
        "timeout": f"{ready_timeout_s:g}s", "blockAdmission": True}}
    return {**ready,
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
        "namespace": namespace,
        "health": {"healthProbeBindAddress": f"127.0.0.1:{free_port()}"},
        "metrics": {"bindAddress": f"127.0.0.1:{free_port()}"},
        "webhook": {"port": free_port(), "host": "127.0.0.1", "certDir": str(cert_dir)},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": True},
        "visibilityServer": {"bindAddress": "127.0.0.1", "bindPort": free_port()},
        "integrations": {"frameworks": ["batch/job", "pod"]},
        # Kueue refuses a workload claiming devices of a class it has no quota name for.
        "resources": {"deviceClassMappings": [{"name": fakedriver.DEVICE_CLASS,
                                               "deviceClassNames": [fakedriver.DEVICE_CLASS]}]},
    }


@contextmanager
def kueue(cluster: LocalCluster, workdir: Path, *, ready_timeout_s: float | None = None
          ) -> Iterator[OperatorProcess]:
    """Kueue's manager for Jobs and plain pods, until the block ends (with
    ``waitForPodsReady`` when ``ready_timeout_s`` is given)."""
    bin_dir = kueue_bin()
    namespace = f"kueue-{uuid.uuid4().hex[:6]}"
    pykube.Namespace(cluster.client, {"apiVersion": "v1", "kind": "Namespace",
                                      "metadata": {"name": namespace}}).create()
    pykube.Secret(cluster.client, {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                                   "metadata": {"name": SECRET, "namespace": namespace}}
                  ).create()
    crds = _crds(bin_dir.parent / "crds" / "kueue", namespace)
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-",
                    input=json.dumps({"apiVersion": "v1", "kind": "List", "items": crds}),
                    timeout=120)
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                    *(f"crd/{body['metadata']['name']}" for body in crds))
    cert_dir = workdir / "kueue-certs"
    cert_dir.mkdir(parents=True, exist_ok=True)
    config = workdir / "kueue-config.yaml"
    config.write_text(yaml.safe_dump(_configuration(namespace, cert_dir, ready_timeout_s)))
    secret = (f"{cluster.bin_dir / 'kubectl'} --kubeconfig={cluster.kubeconfig} "
              f"-n {namespace} get secret {SECRET} -o")
    mount_secret = f"""
        "$@" & manager=$!
        until {secret} jsonpath='{{.data.tls\\.key}}' | grep -q .; do sleep 0.3; done
        for name in ca.crt tls.crt tls.key; do
          {secret} jsonpath="{{.data.${{name%.*}}\\.${{name#*.}}}}" | base64 -d \
            > {cert_dir}/$name.tmp && mv {cert_dir}/$name.tmp {cert_dir}/$name
        done
        wait $manager
    """
    args = ["sh", "-c", mount_secret, "sh", str(bin_dir / "kueue"), f"--config={config}",
            "--feature-gates=VisibilityOnDemand=false"]
    running = _spawn("kueue", args, workdir / "kueue.log", {"KUBECONFIG": str(cluster.kubeconfig)})
    try:
        running.wait_for_log("Starting workers", count=3)
        yield running
    finally:
        running.stop()


def flavor_and_queues(cluster: LocalCluster, namespace: str, quota: dict[str, str]) -> str:
    """A ResourceFlavor, a ClusterQueue with ``quota`` and a LocalQueue in ``namespace``
    that points at it; returns the LocalQueue's name (what jobs name in their label)."""
    name = f"cq-{namespace}"
    objects: list[dict[str, Any]] = [
        {"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": {"name": "default"}},
        {"apiVersion": KUEUE_API, "kind": "ClusterQueue", "metadata": {"name": name},
         "spec": {"namespaceSelector": {}, "resourceGroups": [{
             "coveredResources": sorted(quota),
             "flavors": [{"name": "default", "resources": [
                 {"name": resource, "nominalQuota": amount}
                 for resource, amount in sorted(quota.items())]}]}]}},
        {"apiVersion": KUEUE_API, "kind": "LocalQueue",
         "metadata": {"name": "jobs", "namespace": namespace},
         "spec": {"clusterQueue": name}},
    ]
    cluster.kubectl("apply", "--server-side", "-f", "-",
                    input=json.dumps({"apiVersion": "v1", "kind": "List",
                                      "items": copy.deepcopy(objects)}))
    queue = pykube.object_factory(cluster.client, KUEUE_API, "ClusterQueue")

    def active() -> bool:
        found = queue.objects(cluster.client).get_or_none(name=name)
        conditions = (found.obj.get("status") or {}).get("conditions") or [] if found else []
        return any(c["type"] == "Active" and c["status"] == "True" for c in conditions)

    wait_for(active, timeout=30, what=f"ClusterQueue {name} to be active")
    return "jobs"
