"""The image `make image` builds, run as a container runtime would run it.

No container engine runs here, so the image's own root filesystem (unpacked
from the OCI archive) is entered with a private mount namespace and chroot:
read-only, with only /tmp writable, as the image's user, with its
entrypoint and environment from the image's config. What runs is therefore
what the image holds — the installed package, the user, the entrypoint —
and `gangsched run` inside it binds a gang on the local control plane.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import tarfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from devcluster.controlplane import REPO, LocalCluster
from gangsched import __version__
from tests.e2e.conftest import SchedulerProcess
from tests.e2e.workspace import Workspace, bound, wait_for

SCHEDULER_NAME = "image-test"
"""Served only by the scheduler in the image: no other scheduler of the session binds its pods."""

NO_TOOLS = 3
"""image/build.sh's exit status when the host lacks debootstrap or umoci and cannot install them."""


@dataclass(frozen=True, slots=True)
class Image:
    """An image built by image/build.sh: its unpacked root and its runtime spec."""

    directory: Path

    @property
    def rootfs(self) -> Path:
        return self.directory / "rootfs"

    @property
    def spec(self) -> dict[str, object]:
        loaded: dict[str, object] = json.loads((self.directory / "config.json").read_text())
        return loaded

    @property
    def process(self) -> dict[str, object]:
        process = self.spec["process"]
        assert isinstance(process, dict)
        return process

    def command(self, args: Sequence[str], kubeconfig: Path | None = None) -> list[str]:
        """`args` run through the image's entrypoint, as its user, in a read-only root.

        The mounts live in a private mount namespace, so they vanish with the
        process and the cached root filesystem is never written to.
        """
        root = shlex.quote(str(self.rootfs))
        user = self.process["user"]
        assert isinstance(user, dict)
        entry = self.process["args"]
        assert isinstance(entry, list)
        env = self.process["env"]
        assert isinstance(env, list)
        argv = [*entry[:1], *args]  # the entrypoint, with our arguments instead of its CMD
        steps = [
            f"mount --bind {root} {root}",
            f"mount -o remount,bind,ro {root}",
            f"mount -t tmpfs -o size=64m,mode=1777 tmpfs {root}/tmp",
            f"mount -t proc proc {root}/proc",
            f"mount --rbind /dev {root}/dev",
        ]
        if kubeconfig is not None:
            steps.append(f"install -m 0444 {shlex.quote(str(kubeconfig))} {root}/tmp/kubeconfig")
        steps.append(" ".join([
            "exec chroot", f"--userspec={user['uid']}:{user['gid']}", root,
            "/usr/bin/env", "-i", *(shlex.quote(str(item)) for item in [*env, *argv]),
        ]))
        return ["unshare", "--mount", "--fork", "sh", "-c", " && ".join(steps)]


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


def test_version_from_inside_the_image(image: Image) -> None:
    result = subprocess.run(image.command(["--version"]), capture_output=True, text=True,
                            timeout=60, check=False)
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


@pytest.fixture
def scheduler_in_image(
    image: Image, cluster: LocalCluster, ws: Workspace, tmp_path: Path
) -> Iterator[SchedulerProcess]:
    log = tmp_path / "gangsched.log"
    # Certificates inlined: the files the session's kubeconfig names are outside the image.
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(cluster.kubectl("config", "view", "--flatten", "--minify").stdout)
    args = ["run", "--kubeconfig=/tmp/kubeconfig", f"--scheduler-name={SCHEDULER_NAME}",
            f"--namespace={ws.name}", "--metrics-port=0", "--log-format=console"]
    with log.open("ab") as out:
        proc = subprocess.Popen(image.command(args, kubeconfig), stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    running = SchedulerProcess(proc, log)
    deadline = time.monotonic() + 60
    while "scheduler_started" not in running.logs():
        if proc.poll() is not None or time.monotonic() > deadline:
            stop(proc, signal.SIGKILL)
            pytest.fail(f"gangsched in the image did not start:\n{running.logs()[-3000:]}")
        time.sleep(0.2)
    yield running
    stop(proc, signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        stop(proc, signal.SIGKILL)
        proc.wait()


def stop(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    """Signal the scheduler and the namespace holder around it (one process group)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)


def test_gangsched_run_in_the_image_binds_a_gang(
    cluster: LocalCluster, ws: Workspace, scheduler_in_image: SchedulerProcess
) -> None:
    cluster.ensure_nodes(2, prefix="image-node")
    try:
        ws.create(ws.podgroup("pair", min_member=2))
        ws.create(*(ws.pod(f"pair-{i}", cpu="1", group="pair", scheduler=SCHEDULER_NAME)
                    for i in range(2)))
        placed = wait_for(lambda: len(bound(ws.pods().values())) == 2, timeout=60,
                          what=f"both pods bound by the image's scheduler:\n"
                               f"{scheduler_in_image.logs()[-2000:]}")
        assert placed
    finally:
        cluster.ensure_nodes(0, prefix="image-node")
