"""The ``gangsched`` command. Every flag of ``run`` also reads ``GANGSCHED_<FLAG>``
from the environment (``--scheduler-name`` from ``GANGSCHED_SCHEDULER_NAME``);
the repeatable ones, ``GANGSCHED_SCHEDULER_NAME`` and ``GANGSCHED_NAMESPACE``,
take several values separated by spaces."""

from __future__ import annotations

import asyncio
import sys

import click

from gangsched import __version__
from gangsched.core.model import Policy


@click.group()
@click.version_option(__version__)
def main() -> None:
    """A gang scheduler for Kubernetes."""


def _env(flag: str) -> str:
    return "GANGSCHED_" + flag.upper().replace("-", "_")


@main.command()
@click.option("--kubeconfig", envvar=[_env("kubeconfig"), "KUBECONFIG"],
              type=click.Path(exists=True, dir_okay=False),
              help="Kubeconfig file; in-cluster service account when absent.")
@click.option("--scheduler-name", "scheduler_names", envvar=_env("scheduler-name"),
              multiple=True, default=("gang",), show_default=True,
              help="Pods with this spec.schedulerName are ours (repeatable: e.g. also "
              "volcano, to stand in for Volcano with nothing else changed).")
@click.option("--namespace", "namespaces", envvar=_env("namespace"), multiple=True,
              help="Only schedule pods of this namespace (repeatable); all by default.")
@click.option("--policy", envvar=_env("policy"), type=click.Choice([p.value for p in Policy]),
              default="binpack", show_default=True,
              help="Placement policy; a PodGroup may override it by the "
              "scheduling.gangsched.io/policy annotation.")
@click.option("--bind-concurrency", envvar=_env("bind-concurrency"),
              type=click.IntRange(1, 512), default=32, show_default=True,
              help="Binding calls in flight at once.")
@click.option("--metrics-port", envvar=_env("metrics-port"), type=click.IntRange(0, 65535),
              default=8080, show_default=True,
              help="Port serving /metrics, /healthz and /readyz; 0 turns them off.")
@click.option("--starvation-seconds", envvar=_env("starvation-seconds"),
              type=click.FloatRange(0), default=60.0, show_default=True,
              help="After this long unplaced, a gang holds its room against gangs "
              "ordered after it.")
@click.option("--replacement-grace-seconds", envvar=_env("replacement-grace-seconds"),
              type=click.FloatRange(0), default=60.0, show_default=True,
              help="When a running gang drops below its minMember, the room of each "
              "departed member is held this long for its replacement.")
@click.option("--leader-elect/--no-leader-elect", envvar=_env("leader-elect"), default=False,
              show_default=True, help="Schedule only while holding a Lease (for replicas > 1).")
@click.option("--lease-namespace", envvar=[_env("lease-namespace"), "POD_NAMESPACE"],
              default="default", show_default=True)
@click.option("--lease-name", envvar=_env("lease-name"), default="gangsched", show_default=True)
@click.option("--log-format", envvar=_env("log-format"), type=click.Choice(["json", "console"]),
              default="json", show_default=True)
@click.option("--log-level", envvar=_env("log-level"),
              type=click.Choice(["debug", "info", "warning", "error"]), default="info",
              show_default=True)
def run(
    kubeconfig: str | None,
    scheduler_names: tuple[str, ...],
    namespaces: tuple[str, ...],
    policy: str,
    bind_concurrency: int,
    metrics_port: int,
    starvation_seconds: float,
    replacement_grace_seconds: float,
    leader_elect: bool,
    lease_namespace: str,
    lease_name: str,
    log_format: str,
    log_level: str,
) -> None:
    """Run the scheduler until SIGTERM or SIGINT."""
    from gangsched import app, logs

    logs.configure(log_format, log_level)
    code = asyncio.run(
        app.run(
            app.RunOptions(
                kubeconfig=kubeconfig,
                scheduler_names=frozenset(scheduler_names),
                namespaces=namespaces,
                policy=Policy(policy),
                bind_concurrency=bind_concurrency,
                metrics_port=metrics_port,
                starvation_seconds=starvation_seconds,
                replacement_grace_seconds=replacement_grace_seconds,
                leader_elect=leader_elect,
                lease_namespace=lease_namespace,
                lease_name=lease_name,
            )
        )
    )
    sys.exit(code)
