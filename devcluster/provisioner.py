"""rancher's local-path-provisioner, run out of cluster against the local control plane.

It is a real dynamic provisioner that honours a claim's
``volume.kubernetes.io/selected-node``: for a WaitForFirstConsumer claim it
creates a PersistentVolume whose node affinity names the selected node, and
the persistent-volume controller of kube-controller-manager binds the claim
to it. No disk is touched: to make the volume's directory it runs a helper
pod bound to the node by name, and on a KWOK node that pod "runs" like any
other. The helper pod carries ``kwok.gangsched.io/run-for: 0s``, so KWOK's
stages (``kwok-stages.yaml``) make it Running and then Succeeded, which is
all the provisioner waits for.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from devcluster.build import built

NAMESPACE = "local-path-storage"
"""Where the helper pods go; the provisioner's own namespace in its usual install."""
PROVISIONER_NAME = "rancher.io/local-path"
STORAGE_CLASS = "local-path"
BASE_PATH = "/opt/local-path-provisioner"

_HELPER_POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "helper-pod", "annotations": {"kwok.gangsched.io/run-for": "0s"}},
    "spec": {"containers": [{"name": "helper-pod", "image": "busybox"}]},
}


def ensure_provisioner_binary() -> Path:
    """Build or reuse the pinned provisioner (``cluster/build.sh provisioner``)."""
    given = os.environ.get("GANGSCHED_PROVISIONER_BIN")
    return Path(given) if given else built("provisioner") / "local-path-provisioner"


def provisioner_args(workdir: Path, kubeconfig: Path) -> list[str]:
    """The provisioner's command line, its config and helper pod written into ``workdir``.

    Config and helper pod are given as files: the provisioner would
    otherwise read them from a ConfigMap of its own namespace.
    """
    config = workdir / "local-path-config.json"
    config.write_text(json.dumps({
        "nodePathMap": [{"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": [BASE_PATH]}],
        "setupCommand": "/bin/true",
        "teardownCommand": "/bin/true",
        "cmdTimeoutSeconds": 30,
    }))
    helper = workdir / "local-path-helper-pod.json"
    helper.write_text(json.dumps(_HELPER_POD))
    return [
        "start",
        f"--kubeconfig={kubeconfig}",
        f"--config={config}",
        f"--helper-pod-file={helper}",
        f"--provisioner-name={PROVISIONER_NAME}",
        f"--namespace={NAMESPACE}",
        "--helper-image=busybox",
        "--service-account-name=local-path-provisioner",
        "--configmap-name=local-path-config",
        "--worker-threads=4",
    ]


def setup_manifests() -> str:
    """The namespace of the helper pods and the ``local-path`` StorageClass, as JSON for
    ``kubectl apply``."""
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": STORAGE_CLASS},
            "provisioner": PROVISIONER_NAME,
            "volumeBindingMode": "WaitForFirstConsumer",
            "reclaimPolicy": "Delete",
        },
    ]})
