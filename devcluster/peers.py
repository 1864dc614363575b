"""Peer schedulers run out of cluster against the local control plane.

Volcano (vc-scheduler with its default configuration, gang plugin included,
and vc-controller-manager, which opens queues and gives every lone pod a
PodGroup) and Apache YuniKorn (the k8shim in its default mode: task-group
annotations, placeholders), built from the Go module proxy by
``cluster/build.sh peers`` at the versions pinned in ``cluster/versions.env``.
Each talks to the API server through the cluster's kubeconfig; their
admission webhooks do not run (nothing here needs them: pods name their
scheduler and their gang themselves). Their processes die with this one.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from devcluster.build import built
from devcluster.controlplane import LocalCluster, _die_with_parent, free_port

VOLCANO_QUEUE = {
    "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
    "metadata": {"name": "default"}, "spec": {"weight": 1, "reclaimable": True},
}
"""The queue Volcano's installer creates and every PodGroup without one goes to."""
STARTED = {"volcano": ("vc-scheduler.log", "Scheduler completes Initialization"),
           "yunikorn": ("yunikorn-scheduler.log", "scheduler state initialized")}
"""The log, and the line in it, that says a peer schedules."""


def ensure_peer_binaries() -> Path:
    """Build or reuse the pinned peers (``cluster/build.sh peers``); returns their bin/
    (``GANGSCHED_PEERS_BIN_DIR`` names another, its CRDs in ``../crds``)."""
    return built("peers", override="GANGSCHED_PEERS_BIN_DIR")


def _spawn(binary: Path, args: Sequence[str], log: Path,
           env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            [str(binary), *args], stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=_die_with_parent,
            env={**os.environ, **(env or {})}, cwd=log.parent,
        )


def install_volcano_crds(cluster: LocalCluster, bin_dir: Path) -> None:
    """Volcano's CRDs as its module ships them, and its ``default`` Queue."""
    crds = sorted((bin_dir.parent / "crds" / "volcano").glob("*.yaml"))
    cluster.kubectl("apply", "--server-side", "--force-conflicts",
                    *(arg for path in crds for arg in ("-f", str(path))))
    for attempt in range(3):  # a CRD just created may be unknown to the watch cache
        waited = cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                                 "crd/podgroups.scheduling.volcano.sh",
                                 "crd/queues.scheduling.volcano.sh", check=attempt == 2)
        if waited.returncode == 0:
            break
        time.sleep(1)
    cluster.kubectl("apply", "-f", "-", input=json.dumps(VOLCANO_QUEUE))


def install(name: str, cluster: LocalCluster, bin_dir: Path | None = None) -> None:
    """What peer ``name`` needs in the API before its gang objects can be made, as its
    starter makes it (YuniKorn needs nothing); making it again changes nothing."""
    if name == "volcano":
        install_volcano_crds(cluster, bin_dir or ensure_peer_binaries())


def _volcano(cluster: LocalCluster, bin_dir: Path, logs: Path,
             scheduler_args: Sequence[str] = ()) -> list[subprocess.Popen[bytes]]:
    install_volcano_crds(cluster, bin_dir)
    common = [f"--kubeconfig={cluster.kubeconfig}", "--leader-elect=false",
              f"--listen-address=127.0.0.1:{free_port()}",
              f"--healthz-address=127.0.0.1:{free_port()}"]
    return [
        _spawn(bin_dir / "vc-controller-manager", common, logs / "vc-controller-manager.log"),
        _spawn(bin_dir / "vc-scheduler", [*common, "--v=2", *scheduler_args],
               logs / "vc-scheduler.log"),
    ]


def _yunikorn(cluster: LocalCluster, bin_dir: Path, logs: Path,
              scheduler_args: Sequence[str] = ()) -> list[subprocess.Popen[bytes]]:
    return [_spawn(bin_dir / "yunikorn-scheduler", scheduler_args,
                   logs / "yunikorn-scheduler.log",
                   env={"KUBECONFIG": str(cluster.kubeconfig)})]


STARTERS = {"volcano": _volcano, "yunikorn": _yunikorn}


@contextlib.contextmanager
def peer(name: str, cluster: LocalCluster, logs: Path,
         bin_dir: Path | None = None, scheduler_args: Sequence[str] = ()) -> Iterator[None]:
    """The peer ``name`` running against ``cluster`` until the block ends; its
    processes write ``<logs>/<binary>.log``; ``scheduler_args`` go to its scheduler
    (a configuration of its own, client limits)."""
    bin_dir = bin_dir or ensure_peer_binaries()
    procs = STARTERS[name](cluster, bin_dir, logs, scheduler_args)
    try:
        deadline = time.monotonic() + 60
        log, line = STARTED[name]
        while line not in (logs / log).read_text(errors="replace"):
            if any(p.poll() is not None for p in procs) or time.monotonic() > deadline:
                raise RuntimeError(f"{name} did not start; see {logs / log}")
            time.sleep(0.2)
        yield
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
