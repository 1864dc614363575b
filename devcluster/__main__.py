"""``python -m devcluster up|down``: the code behind ``make cluster-up`` / ``cluster-down``."""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

import click

from devcluster.controlplane import (
    ClusterOptions,
    LocalCluster,
    NodeShape,
    ensure_binaries,
    stop_from_state,
)

WORKDIR = Path(os.environ.get("GANGSCHED_CLUSTER_DIR", ".cluster")).resolve()


@click.group()
def main() -> None:
    """Start or stop the local control plane in .cluster/."""


@main.command()
@click.option("--nodes", default=4, show_default=True)
@click.option("--node-cpu", default="4", show_default=True)
@click.option("--node-memory", default="16Gi", show_default=True)
@click.option("--node-gpus", default=0, show_default=True)
@click.option("--with-kube-scheduler/--without-kube-scheduler", default=False)
@click.option("--with-controller-manager/--without-controller-manager", default=False)
@click.option("--native-gang/--no-native-gang", default=False,
              help="kube-scheduler gang-schedules native PodGroups (GenericWorkload, "
                   "TopologyAwareWorkloadScheduling); the Job controller creates them "
                   "(WorkloadWithJob).")
@click.option("--with-provisioner/--without-provisioner", default=False,
              help="rancher's local-path-provisioner and a WaitForFirstConsumer StorageClass "
                   "local-path (needs --with-controller-manager for claims to bind).")
@click.option("--keep-state/--fresh", default=False,
              help="Keep the objects of the previous cluster (its etcd data); fresh by default.")
def up(
    nodes: int,
    node_cpu: str,
    node_memory: str,
    node_gpus: int,
    with_kube_scheduler: bool,
    with_controller_manager: bool,
    native_gang: bool,
    with_provisioner: bool,
    keep_state: bool,
) -> None:
    """Start the control plane in the background and print the line to use it."""
    if (WORKDIR / "state.json").exists():
        click.echo("a cluster is already running; `make cluster-down` first", err=True)
        sys.exit(1)
    if not keep_state:
        shutil.rmtree(WORKDIR / "etcd", ignore_errors=True)
    options = ClusterOptions(
        nodes=nodes,
        shape=NodeShape(cpu=node_cpu, memory=node_memory, gpus=node_gpus),
        with_kube_scheduler=with_kube_scheduler,
        with_controller_manager=with_controller_manager,
        native_gang=native_gang,
        with_provisioner=with_provisioner,
    )
    bin_dir = ensure_binaries()
    started = time.monotonic()
    cluster = LocalCluster(workdir=WORKDIR, bin_dir=bin_dir, options=options)
    cluster.start(die_with_parent=False)
    cluster.apply_crds()
    click.echo(
        f"cluster ready in {time.monotonic() - started:.1f}s: {nodes} nodes at {cluster.server}"
        f" (logs in {cluster.logs})",
        err=True,
    )
    click.echo(f"export KUBECONFIG={cluster.kubeconfig} PATH={bin_dir}:$PATH")


@main.command()
def down() -> None:
    """Stop every process of the control plane and check no port is left listening."""
    left = stop_from_state(WORKDIR)
    if left is None:
        click.echo("no cluster running", err=True)
        return
    if left:
        click.echo(f"ports still listening: {left}", err=True)
        sys.exit(1)
    click.echo("cluster stopped", err=True)


if __name__ == "__main__":
    main()
