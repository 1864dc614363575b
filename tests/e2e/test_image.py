"""The image `make image` builds, run by runc as the chart's pod runs it.

image/build.sh unpacks the OCI archive into a runtime bundle (rootfs and the
runtime spec umoci derives from the image's config: user, entrypoint,
environment). The tests run that bundle with runc, Debian's OCI runtime, the
spec adjusted as the chart's Deployment sets the pod: read-only root, a
writable /tmp (its emptyDir), every capability dropped, uid 65532, and the
ServiceAccount's volume at /var/run/secrets/kubernetes.io/serviceaccount with
``KUBERNETES_SERVICE_HOST``/``PORT`` set, so gangsched logs in as in a pod.
The container shares the host's network namespace (there is no pod network
here), so the Service address it is given, 127.0.0.1, is the local API server.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tarfile
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from devcluster.controlplane import REPO, LocalCluster, free_port
from gangsched import __version__
from tests.e2e.conftest import SchedulerProcess
from tests.e2e.deployed import chart_args, overridden, refusals, service_account_volume
from tests.e2e.workspace import Workspace, bound, wait_for

SCHEDULER_NAME = "image-test"
"""Served only by the scheduler in the image: no other scheduler of the session binds its pods."""

NO_TOOLS = 3
"""image/build.sh's exit status when the host lacks debootstrap, umoci or runc and cannot
install them."""

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
"""Where the kubelet mounts a pod's ServiceAccount token, CA certificate and namespace."""


@dataclass(frozen=True, slots=True)
class Image:
    """An image built by image/build.sh: its unpacked root and its runtime spec."""

    directory: Path

    @property
    def rootfs(self) -> Path:
        return self.directory / "rootfs"

    @property
    def spec(self) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads((self.directory / "config.json").read_text())
        return loaded

    @property
    def process(self) -> dict[str, Any]:
        process: dict[str, Any] = self.spec["process"]
        return process

    def bundle(self, directory: Path, args: Sequence[str], *, env: Mapping[str, str] = {},
               volumes: Mapping[str, Path] = {}) -> Path:
        """A runtime bundle in ``directory`` running ``args`` through the image's
        entrypoint (in place of its CMD) as the chart's pod runs it, ``volumes``
        bind-mounted read-only at the paths that name them.

        The root is the cached image's own, mounted read-only by the runtime, so
        nothing the container does is left in it.
        """
        spec = self.spec
        process = spec["process"]
        process["terminal"] = False
        process["args"] = [*process["args"][:1], *args]
        process["env"] = [*process["env"], *(f"{k}={v}" for k, v in env.items())]
        process["capabilities"] = {kind: [] for kind in process["capabilities"]}  # drop: [ALL]
        spec["root"] = {"path": str(self.rootfs), "readonly": True}
        spec["hostname"] = "gangsched-image"
        spec["mounts"] = [
            *spec["mounts"],
            {"destination": "/tmp", "type": "tmpfs", "source": "tmpfs",  # the chart's emptyDir
             "options": ["nosuid", "nodev", "mode=1777", "size=64m"]},
            *({"destination": target, "type": "bind", "source": str(source),
               "options": ["rbind", "ro"]} for target, source in volumes.items()),
        ]
        linux = spec["linux"]
        linux["namespaces"] = [ns for ns in linux["namespaces"] if ns["type"] != "network"]
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "config.json").write_text(json.dumps(spec, indent=2))
        return directory


def runc(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["runc", *args], capture_output=True, text=True, timeout=timeout,
                          check=False)


@pytest.fixture(scope="module")
def image() -> Image:
    built = subprocess.run(["bash", str(REPO / "image" / "build.sh")],
                           capture_output=True, text=True, timeout=1800, check=False)
    if built.returncode == NO_TOOLS:
        pytest.skip(f"cannot build the image on this host: {built.stderr.strip()}")
    assert built.returncode == 0, built.stderr[-4000:]
    return Image(Path(built.stdout.strip().splitlines()[-1]))


def test_image_runs_as_non_root_user_with_gangsched_run_as_its_command(image: Image) -> None:
    user = image.process["user"]
    assert isinstance(user, dict)
    assert (user["uid"], user["gid"]) == (65532, 65532)
    assert image.process["args"] == ["gangsched", "run"]


def test_version_from_inside_the_image(image: Image, tmp_path: Path) -> None:
    bundle = image.bundle(tmp_path / "bundle", ["--version"])
    result = runc("run", "--bundle", str(bundle), f"gangsched-version-{uuid.uuid4().hex[:8]}",
                  timeout=60)
    assert result.returncode == 0, result.stderr
    assert __version__ in result.stdout


def test_image_is_the_debian_base_and_the_package_in_two_layers(
    image: Image, tmp_path: Path
) -> None:
    """The base layer is the same from one release to the next (its packages alone make
    it), so a node that pulled one release pulls only the package's layer of the next."""
    with tarfile.open(image.directory / "gangsched.oci.tar") as archive:
        archive.extractall(tmp_path, filter="data")
    index = json.loads((tmp_path / "index.json").read_text())
    digest = index["manifests"][0]["digest"].split(":", 1)[1]
    manifest = json.loads((tmp_path / "blobs" / "sha256" / digest).read_text())
    base, package = (layer["size"] for layer in manifest["layers"])
    assert base > package > 0


def test_image_holds_no_compiler_nor_installer(image: Image) -> None:
    root = image.rootfs
    for tool in ("gcc", "cc", "make", "pip", "pip3"):
        assert not (root / "usr" / "bin" / tool).exists(), tool
    assert not list((root / "opt" / "gangsched" / "bin").glob("pip*"))


@dataclass(frozen=True, slots=True)
class Container:
    """gangsched running in a container of the image: its log and its probe port."""

    scheduler: SchedulerProcess
    metrics_port: int

    def get(self, path: str) -> int:
        """The status code of the chart's probe endpoint ``path``; 0 when it does not answer."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}{path}",
                                        timeout=2) as answer:
                return int(answer.status)
        except urllib.error.HTTPError as error:
            return int(error.code)
        except OSError:
            return 0


@pytest.fixture
def scheduler_in_image(
    image: Image, cluster: LocalCluster, tmp_path: Path
) -> Iterator[Container]:
    """gangsched in the image, with the chart's arguments but for three, as a pod of the
    chart: its ServiceAccount's volume mounted, the Service's address in its environment."""
    if shutil.which("runc") is None:
        pytest.fail("runc is not installed: image/build.sh installs it where it builds")
    port = free_port()
    args = overridden(chart_args(cluster), [
        # The session's own scheduler serves the chart's name and holds its Lease.
        f"--scheduler-name={SCHEDULER_NAME}", f"--lease-name={SCHEDULER_NAME}",
        # The host's network is shared with every process of the session: a free port.
        f"--metrics-port={port}",
    ])
    bundle = image.bundle(
        tmp_path / "bundle", args,
        env={"KUBERNETES_SERVICE_HOST": "127.0.0.1",
             "KUBERNETES_SERVICE_PORT": str(cluster.ports["apiserver"])},
        volumes={SERVICE_ACCOUNT_DIR: service_account_volume(cluster, tmp_path / "account")})
    name = f"gangsched-{uuid.uuid4().hex[:8]}"
    log = tmp_path / "gangsched.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(["runc", "run", "--bundle", str(bundle), name], stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    container = Container(SchedulerProcess(proc, log), port)
    try:
        # The chart's startupProbe: /readyz answers 200 once every watch has listed.
        started = wait_for(lambda: proc.poll() is not None or container.get("/readyz") == 200,
                           timeout=60, what="gangsched in the image ready")
        assert started and proc.poll() is None, container.scheduler.logs()[-3000:]
        yield container
    finally:
        runc("kill", name, "TERM")
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            runc("kill", name, "KILL")
            proc.wait()
        runc("delete", "--force", name)
    # A rolling update's SIGTERM: the Lease given up, the process ended cleanly.
    assert proc.returncode == 0, container.scheduler.logs()[-3000:]


def test_gangsched_in_the_image_logs_in_as_the_charts_pod_and_binds_a_gang(
    cluster: LocalCluster, ws: Workspace, scheduler_in_image: Container
) -> None:
    scheduler = scheduler_in_image.scheduler
    cluster.ensure_nodes(2, prefix="image-node")
    try:
        ws.create(ws.podgroup("pair", min_member=2))
        ws.create(*(ws.pod(f"pair-{i}", cpu="1", group="pair", scheduler=SCHEDULER_NAME)
                    for i in range(2)))
        placed = wait_for(lambda: len(bound(ws.pods().values())) == 2, timeout=60,
                          what=f"both pods bound by the image's scheduler:\n"
                               f"{scheduler.logs()[-2000:]}")
        assert placed
        assert scheduler_in_image.get("/healthz") == 200
        assert not refusals(scheduler.logs()), scheduler.logs()[-3000:]
    finally:
        cluster.ensure_nodes(0, prefix="image-node")
