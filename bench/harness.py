"""What the end-to-end benchmarks share: API clients, creating and deleting objects,
a watch noting when pods are bound, and ``gangsched run`` in a process of its own.

Every benchmark here runs on the local control plane (devcluster) and talks to
it as users do; nothing is mocked.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import platform
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pykube
import requests

from devcluster.controlplane import (
    ClusterOptions,
    LocalCluster,
    NodeShape,
    free_port,
    running_cluster,
)
from tests.e2e import oracle

GROUP_LABEL = "scheduling.gangsched.io/pod-group"
PODGROUP_VERSION = "scheduling.gangsched.io/v1alpha1"
NATIVE_VERSION = "scheduling.k8s.io/v1beta1"
SCRAPED = {
    "gangsched_cycles_total": "cycles",
    "gangsched_cycle_seconds_sum": "cycle_seconds",
    "gangsched_pods_bound_total": "pods_bound",
    "gangsched_bind_failures_total": "bind_failures",
    "process_cpu_seconds_total": "cpu_seconds",
}
POD_REQUESTS = {"cpu": "2", "memory": "8Gi", "nvidia.com/gpu": "1"}


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0..100) of a non-empty sequence."""
    ordered = sorted(values)
    return ordered[max(1, math.ceil(q / 100 * len(ordered))) - 1]


# ---- talking to the API server ---------------------------------------------------------
class Clients:
    """One pykube client per thread: a requests Session is not meant to be shared."""

    def __init__(self, kubeconfig: Path) -> None:
        self._config = pykube.KubeConfig.from_file(str(kubeconfig))
        self._local = threading.local()

    def get(self) -> pykube.HTTPClient:
        client = getattr(self._local, "client", None)
        if client is None:
            # A shared 2-core machine under a flood of creates answers slowly at times.
            client = pykube.HTTPClient(self._config, timeout=60)
            self._local.client = client
        return client


def create(clients: Clients, manifest: Mapping[str, Any]) -> None:
    api = clients.get()
    url = {"Pod": "pods", "CompositePodGroup": "compositepodgroups"}.get(
        manifest["kind"], "podgroups")
    response = api.post(version=manifest["apiVersion"], url=url,
                        namespace=manifest["metadata"]["namespace"], json=manifest)
    api.raise_for_status(response)


def create_all(clients: Clients, manifests: Sequence[Mapping[str, Any]], workers: int) -> float:
    """Create every manifest from ``workers`` threads, in order; returns the seconds taken."""
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="create") as pool:
        for future in [pool.submit(create, clients, m) for m in manifests]:
            future.result()
    return time.monotonic() - started


def list_items(api: pykube.HTTPClient, url: str, namespace: str,
               version: str = "v1") -> tuple[list[dict[str, Any]], str]:
    """Every object of a namespace (in pages) and the list's resourceVersion."""
    items: list[dict[str, Any]] = []
    params = {"limit": "500"}
    while True:
        response = api.get(version=version, url=url, namespace=namespace, params=params)
        api.raise_for_status(response)
        body = response.json()
        items.extend(body.get("items") or [])
        token = body["metadata"].get("continue")
        if not token:
            return items, str(body["metadata"]["resourceVersion"])
        params = {"limit": "500", "continue": token}


def create_namespace(api: pykube.HTTPClient, name: str) -> None:
    pykube.Namespace(api, {"apiVersion": "v1", "kind": "Namespace",
                           "metadata": {"name": name}}).create()


def delete_all(api: pykube.HTTPClient, namespace: str, timeout: float = 300) -> float:
    """Delete every pod and PodGroup of ``namespace``; wait until no pod is left.

    Deleting thousands of pods in one call can outlast the API server's own
    request timeout (504, or the connection closed) on a loaded machine: the
    call is then made again for what is left.
    """
    started = time.monotonic()
    options = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}
    for version, url in (("v1", "pods"), (PODGROUP_VERSION, "podgroups"),
                         (NATIVE_VERSION, "podgroups")):
        while True:
            try:
                response = api.delete(version=version, url=url, namespace=namespace,
                                      json=options, timeout=timeout)
            except requests.exceptions.ConnectionError:
                if time.monotonic() - started > timeout:
                    raise
                continue
            if response.status_code != 504 or time.monotonic() - started > timeout:
                api.raise_for_status(response)
                break
    while True:
        response = api.get(url="pods", namespace=namespace, params={"limit": "1"})
        api.raise_for_status(response)
        if not response.json().get("items"):
            return time.monotonic() - started
        if time.monotonic() - started > timeout:
            raise RuntimeError(f"pods of {namespace} not gone after {timeout}s")
        time.sleep(0.5)



def cpu_seconds(pid: int) -> float:
    """User plus system CPU time a process has used so far (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    # utime and stime, fields 14 and 15 of proc(5), counted after the ")" ending the name.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")



def pod_manifest(namespace: str, name: str, scheduler: str, group: str | None,
                 native: bool = False) -> dict[str, Any]:
    """A pod of the batch; a grouped one is labelled, and a native one also names its
    group in ``spec.schedulingGroup`` (the label then only serves the figures)."""
    extra = {"schedulingGroup": {"podGroupName": group}} if native and group else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace,
                     "labels": {GROUP_LABEL: group} if group else {}},
        "spec": {
            **extra,
            "schedulerName": scheduler,
            "terminationGracePeriodSeconds": 0,
            "containers": [{
                "name": "main",
                "image": "busybox",
                "resources": {"requests": dict(POD_REQUESTS),
                              "limits": {"nvidia.com/gpu": POD_REQUESTS["nvidia.com/gpu"]}},
            }],
        },
    }



# ---- watching binds -------------------------------------------------------------------------
@dataclass
class PodWatch:
    """Watches one namespace's pods and notes when each was first seen bound."""

    clients: Clients
    namespace: str
    bound_at: dict[str, float] = field(default_factory=dict)
    seen_at: dict[str, float] = field(default_factory=dict)
    """When each pod was first seen at all: how late the API server's watches run."""
    nodes: dict[str, str] = field(default_factory=dict)
    events_before_bind: Counter[str] = field(default_factory=Counter)
    error: BaseException | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _changed: threading.Condition = field(default_factory=threading.Condition)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        """Watch from now on; pods already bound are noted at once."""
        items, version = list_items(self.clients.get(), "pods", self.namespace)
        now = time.monotonic()
        for item in items:
            self._note(item, now)
        self._thread = threading.Thread(target=self._run, args=(version,),
                                        name=f"watch-{self.namespace}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self.error is not None:
            raise RuntimeError(f"watch of {self.namespace} failed: {self.error!r}")

    def wait_bound(self, count: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self._changed:
            while len(self.bound_at) < count:
                left = deadline - time.monotonic()
                if left <= 0 or self.error is not None:
                    return False
                self._changed.wait(min(left, 1.0))
        return True

    def _run(self, version: str) -> None:
        api = self.clients.get()  # this thread's own client
        try:
            while not self._stop.is_set():
                version = self._watch(api, version)
        except BaseException as error:  # raised again by stop()
            self.error = error
            with self._changed:
                self._changed.notify_all()

    def _watch(self, api: pykube.HTTPClient, version: str) -> str:
        params = {"watch": "true", "resourceVersion": version,
                  "allowWatchBookmarks": "true", "timeoutSeconds": "300"}
        # A short read timeout: an idle stream ends after a second and is
        # reopened from the last version, so ``stop`` is seen promptly.
        try:
            response = api.get(url="pods", namespace=self.namespace, params=params,
                               stream=True, timeout=(5, 1.0))
            api.raise_for_status(response)
            for line in response.iter_lines():
                if not line:
                    continue
                seen = time.monotonic()
                event = json.loads(line)
                obj = event.get("object") or {}
                if event.get("type") == "ERROR":
                    raise RuntimeError(f"watch error: {obj}")
                version = str(obj.get("metadata", {}).get("resourceVersion", version))
                if event.get("type") in ("ADDED", "MODIFIED"):
                    self._note(obj, seen)
                if self._stop.is_set():
                    break
            response.close()
        except (requests.exceptions.ConnectionError, requests.exceptions.Timeout):
            pass
        return version

    def _note(self, pod: Mapping[str, Any], seen: float) -> None:
        name = str((pod.get("metadata") or {}).get("name"))
        self.seen_at.setdefault(name, seen)
        if name in self.bound_at:
            return
        node = (pod.get("spec") or {}).get("nodeName")
        if not node:
            self.events_before_bind[name] += 1
            return
        with self._changed:
            self.bound_at[name] = seen
            self.nodes[name] = str(node)
            self._changed.notify_all()



# ---- gangsched ------------------------------------------------------------------------------
@dataclass
class Gangsched:
    """``gangsched run`` started as tests/e2e/conftest.py starts it; SIGTERM to stop."""

    cluster: LocalCluster
    log_path: Path
    profile: Path | None = None
    proc: subprocess.Popen[bytes] | None = None
    figures: dict[str, Any] = field(default_factory=dict)
    metrics_port: int = field(default_factory=free_port)
    log_level: str = "info"
    """``debug`` adds a ``cycle_done`` line per cycle with its time."""

    def start(self) -> None:
        prefix = [sys.executable]
        if self.profile is not None:
            prefix += ["-m", "pyinstrument", "-o", str(self.profile)]
        command = [*prefix, "-m", "gangsched", "run", f"--kubeconfig={self.cluster.kubeconfig}",
                   f"--metrics-port={self.metrics_port}", "--log-format=json",
                   f"--log-level={self.log_level}"]
        started = time.monotonic()
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
        deadline = started + 60
        while "scheduler_started" not in self.log_path.read_text(errors="replace"):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("gangsched did not start:\n"
                                   + self.log_path.read_text(errors="replace")[-3000:])
            time.sleep(0.05)
        self.figures["start_to_scheduler_started_s"] = round(time.monotonic() - started, 2)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        started = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.figures["exit_code"] = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.figures["exit_code"] = self.proc.wait()
        self.figures["stop_s"] = round(time.monotonic() - started, 2)

    def metrics(self) -> dict[str, float]:
        """The scheduler's own counters: every cycle is counted here, also the
        cycles that place nothing and so write no log line."""
        samples = self.samples()
        return {short: samples.get(name, 0.0) for name, short in SCRAPED.items()}

    def samples(self) -> dict[str, float]:
        """Every unlabelled sample of the metrics page by name, and each counter summed
        over its labels (bind failures are counted per HTTP code; a counter never
        counted under any label has no sample at all)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics",
                                    timeout=10) as response:
            text = response.read().decode()
        values: dict[str, float] = {}
        for line in text.splitlines():
            series, _, value = line.rpartition(" ")
            if not series or series.startswith("#"):
                continue
            name = series.partition("{")[0]
            if "{" not in series:
                values[name] = float(value)
            elif name.endswith("_total"):
                values[name] = values.get(name, 0.0) + float(value)
        return values

    def log_lines(self, event: str | None = None) -> list[dict[str, Any]]:
        """The JSON lines of its log, those of one ``event`` when given."""
        lines = []
        for text in self.log_path.read_text(errors="replace").splitlines():
            if text.startswith("{"):
                try:
                    line = json.loads(text)
                except json.JSONDecodeError:
                    continue
                if event is None or line.get("event") == event:
                    lines.append(line)
        return lines

    def cycles(self) -> dict[str, Any]:
        """Cycle times of the cycles that placed gangs, from the ``gang_placed`` lines."""
        lines = self.log_lines()
        placed = [line for line in lines if line.get("event") == "gang_placed"]
        per_cycle = {int(line["cycle"]): float(line["cycle_ms"]) for line in placed}
        gangs_per_cycle = Counter(int(line["cycle"]) for line in placed)
        warnings = Counter(str(line.get("event")) for line in lines
                           if line.get("level") in ("warning", "error"))
        figures: dict[str, Any] = {"gangs_placed_logged": len(placed),
                                   "warnings": dict(warnings)}
        if per_cycle:
            times = list(per_cycle.values())
            figures.update({
                "cycles_placing": len(times),
                "first_placing_cycle_ms": per_cycle[min(per_cycle)],
                "last_placing_cycle": max(per_cycle),
                "gangs_per_cycle_max": max(gangs_per_cycle.values()),
                "cycle_ms_p50": round(percentile(times, 50), 1),
                "cycle_ms_p95": round(percentile(times, 95), 1),
                "cycle_ms_max": round(max(times), 1),
                "cycle_ms_sum": round(sum(times), 1),
            })
        return figures




# ---- sizes, machine, process memory ---------------------------------------------------------
def gang_manifests(namespace: str, name: str, size: int,
                   requests: Mapping[str, str] = POD_REQUESTS) -> list[dict[str, Any]]:
    """A PodGroup of ``minMember: size`` and its ``size`` pods, the PodGroup first."""
    group: dict[str, Any] = {
        "apiVersion": PODGROUP_VERSION, "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"minMember": size},
    }
    pods = [pod_manifest(namespace, f"{name}-{i}", "gang", name) for i in range(size)]
    for pod in pods:
        resources = pod["spec"]["containers"][0]["resources"]
        resources["requests"] = dict(requests)
        resources["limits"] = {"nvidia.com/gpu": requests["nvidia.com/gpu"]}
    return [group, *pods]


def add_nodes(cluster: LocalCluster, count: int, shape: NodeShape, prefix: str,
              timeout: float = 600) -> float:
    """``count`` KWOK nodes of ``shape``, waited for Ready by listing them (a get per node
    does not scale to thousands); returns the seconds taken."""
    started = time.monotonic()
    cluster.ensure_nodes(count, shape, prefix=prefix, wait=False)
    wait_ready(cluster, prefix, count, timeout)
    return time.monotonic() - started


def wait_ready(cluster: LocalCluster, prefix: str, count: int, timeout: float = 600) -> None:
    """Wait until ``count`` nodes named ``{prefix}-…`` are Ready, listing them in pages."""
    started = time.monotonic()
    api = cluster.client
    while True:
        ready = 0
        params = {"limit": "1000"}
        while True:
            response = api.get(url="nodes", params=params)
            api.raise_for_status(response)
            body = response.json()
            for node in body.get("items") or []:
                if not node["metadata"]["name"].startswith(prefix + "-"):
                    continue
                conditions = (node.get("status") or {}).get("conditions") or []
                if any(c["type"] == "Ready" and c["status"] == "True" for c in conditions):
                    ready += 1
            token = body["metadata"].get("continue")
            if not token:
                break
            params = {"limit": "1000", "continue": token}
        if ready >= count:
            return
        if time.monotonic() - started > timeout:
            raise RuntimeError(f"{ready}/{count} nodes Ready after {timeout}s")
        time.sleep(1.0)


def memory_kib(pid: int) -> dict[str, int]:
    """Resident set now (``VmRSS``) and at its peak (``VmHWM``), in KiB; empty once gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return {}
    found: dict[str, int] = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            found[key] = int(value.split()[0])
    return found


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def machine() -> dict[str, Any]:
    """The host the figures come from, and how busy it was before the bench started."""
    total_kib = 0
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            total_kib = int(line.split()[1])
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "machine": platform.machine(),
        "cores": os.cpu_count(),
        "memory_gib": round(total_kib / 2**20, 1),
        "load_average_1_5_15_before": load_average(),
    }


def say(text: str) -> None:
    print(f"[bench] {text}", file=sys.stderr, flush=True)


def write_report(path: Path, report: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2) + "\n")
    say(f"wrote {path}")


def distribution(values: Sequence[float], digits: int = 1) -> dict[str, float | int]:
    """Count, p50, p95, p99 and max of the values (empty: just the count)."""
    if not values:
        return {"count": 0}
    return {"count": len(values), "p50": round(percentile(values, 50), digits),
            "p95": round(percentile(values, 95), digits),
            "p99": round(percentile(values, 99), digits), "max": round(max(values), digits)}


@contextmanager
def work_directory(keep: Path | None, prefix: str) -> Iterator[Path]:
    """``keep`` (made if missing) when given, else a temporary directory removed afterwards."""
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        yield keep
        return
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        yield Path(tmp)


def bench_parser(prog: str, doc: str | None, results: Path, *, nodes: int,
                 node_gpus: int) -> argparse.ArgumentParser:
    """The flags every cluster benchmark has: sizes of nodes and gangs, where to write."""
    parser = argparse.ArgumentParser(prog=f"python -m {prog}", description=doc,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=nodes)
    parser.add_argument("--node-gpus", type=int, default=node_gpus)
    parser.add_argument("--gang-size", type=int, default=8)
    parser.add_argument("--workdir", type=Path, default=None,
                        help="keep the cluster's files and logs here (default: temporary)")
    parser.add_argument("--output", type=Path, default=results)
    return parser


def node_shape(gpus: int) -> NodeShape:
    return NodeShape(cpu="32", memory="128Gi", gpus=gpus, pods=110)


def shape_figures(shape: NodeShape) -> dict[str, Any]:
    return {"cpu": shape.cpu, "memory": shape.memory, "nvidia.com/gpu": shape.gpus,
            "pods": shape.pods}


def run_oracle(
    results: Path, namespace: str, replay: str, sizes: Mapping[str, int],
    options: ClusterOptions, run: Callable[[LocalCluster, random.Random], Sequence[oracle.Verdict]],
    seed: int | None = None, workdir: Path | None = None,
) -> int:
    """One oracle run on a fresh control plane: a namespace for its objects, ``run`` to
    ask both sides, and the figures written to ``results``; 1 if any pair disagreed."""
    seed = seed if seed is not None else oracle.seed()
    say(f"{oracle.SEED_VARIABLE}={seed}: " + ", ".join(f"{v} {k}" for k, v in sizes.items()))
    started = time.monotonic()
    with work_directory(workdir, f"gangsched-{namespace}-") as directory, \
            running_cluster(directory / "cluster", options) as cluster:
        pykube.Namespace(cluster.client, {"apiVersion": "v1", "kind": "Namespace",
                                          "metadata": {"name": namespace}}).create()
        verdicts = run(cluster, random.Random(seed))
    return report_verdicts(results, seed, replay, sizes, verdicts, started)


def report_verdicts(path: Path, seed: int, replay: str, sizes: Mapping[str, int],
                    verdicts: Sequence[oracle.Verdict], started: float) -> int:
    """Write an oracle run's figures and every disagreement to ``path``; 1 if any."""
    disagreements = [v for v in verdicts if v.kube != v.ours]
    report = {
        "seed": seed,
        "replay": f"{oracle.SEED_VARIABLE}={seed} {replay}",
        **sizes,
        "pairs": len(verdicts),
        "accepted_by_kube_scheduler": sum(v.kube for v in verdicts),
        "disagreements": [dataclasses.asdict(v) for v in disagreements],
        "seconds": round(time.monotonic() - started, 1),
    }
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(report, indent=2) + "\n")
    say(f"{len(verdicts)} pairs, {len(disagreements)} disagreements: {path}")
    if disagreements:
        print(oracle.table(disagreements), file=sys.stderr)
    return 1 if disagreements else 0
