"""The ``gangsched`` command. Every flag of ``run`` also reads ``GANGSCHED_<FLAG>``
from the environment (``--scheduler-name`` from ``GANGSCHED_SCHEDULER_NAME``);
the repeatable ones, ``GANGSCHED_SCHEDULER_NAME`` and ``GANGSCHED_NAMESPACE``,
take several values separated by spaces."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import click

from gangsched import __version__
from gangsched.core.model import Policy

if TYPE_CHECKING:
    import pykube

    from gangsched.clusterobjects import ClusterObjects
    from gangsched.decisions import Decision
    from gangsched.mirror import View


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
              type=click.IntRange(1, 512), default=96, show_default=True,
              help="Binding calls in flight at once.")
@click.option("--scheduled-events", envvar=_env("scheduled-events"),
              type=click.Choice(["gang", "pod"]), default="gang", show_default=True,
              help="One Scheduled Event per gang, on its PodGroup, naming each pod's node; "
              "or one per pod, as kube-scheduler writes them.")
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
@click.option("--preemption/--no-preemption", envvar=_env("preemption"), default=True,
              show_default=True,
              help="A gang that cannot fit may evict whole gangs of lower priority "
              "(Eviction API: PodDisruptionBudgets hold).")
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
    scheduled_events: str,
    metrics_port: int,
    starvation_seconds: float,
    replacement_grace_seconds: float,
    preemption: bool,
    leader_elect: bool,
    lease_namespace: str,
    lease_name: str,
    log_format: str,
    log_level: str,
) -> None:
    """Run the scheduler until SIGTERM or SIGINT."""
    from gangsched import app, logs
    from gangsched.scheduler import ScheduledEvents

    logs.configure(log_format, log_level)
    code = asyncio.run(
        app.run(
            app.RunOptions(
                kubeconfig=kubeconfig,
                scheduler_names=frozenset(scheduler_names),
                namespaces=namespaces,
                policy=Policy(policy),
                bind_concurrency=bind_concurrency,
                scheduled_events=ScheduledEvents(scheduled_events),
                metrics_port=metrics_port,
                starvation_seconds=starvation_seconds,
                replacement_grace_seconds=replacement_grace_seconds,
                preemption=preemption,
                leader_elect=leader_elect,
                lease_namespace=lease_namespace,
                lease_name=lease_name,
            )
        )
    )
    sys.exit(code)


# ---- commands for people: status, explain, simulate ---------------------------------------

def _kube_options(command: Callable[..., None]) -> Callable[..., None]:
    """--kubeconfig and --context as kubectl reads them."""
    command = click.option("--context", default=None,
                           help="Kubeconfig context; the current one by default.")(command)
    return click.option("--kubeconfig", envvar="KUBECONFIG", default=None,
                        type=click.Path(dir_okay=False),
                        help="Kubeconfig file; $KUBECONFIG, ~/.kube/config or the in-cluster "
                             "service account by default.")(command)


def _decision_options(command: Callable[..., None]) -> Callable[..., None]:
    """The flags of ``run`` that change decisions, so the CLI decides as the scheduler does."""
    for option in reversed((
        click.option("--scheduler-name", "scheduler_names", envvar=_env("scheduler-name"),
                     multiple=True, default=("gang",), show_default=True,
                     help="Pods with this spec.schedulerName are gangsched's (repeatable)."),
        click.option("--policy", envvar=_env("policy"),
                     type=click.Choice([p.value for p in Policy]), default="binpack",
                     show_default=True, help="As the scheduler runs with (gangsched run)."),
        click.option("--starvation-seconds", envvar=_env("starvation-seconds"),
                     type=click.FloatRange(0), default=60.0, show_default=True,
                     help="As the scheduler runs with (gangsched run)."),
        click.option("-o", "--output", type=click.Choice(["text", "json"]), default="text",
                     show_default=True, help="text for people, json for programs."),
    )):
        command = option(command)
    return command


def _fail(error: Exception) -> NoReturn:
    click.echo(f"error: {error}", err=True)
    sys.exit(1)


def _load_cluster(
    kubeconfig: str | None, context: str | None
) -> tuple[pykube.HTTPClient, ClusterObjects]:
    from gangsched import clusterobjects

    try:
        api = clusterobjects.client(kubeconfig, context)
        return api, clusterobjects.from_cluster(api)
    except clusterobjects.ObjectsError as error:
        _fail(error)


def _decide(objects: ClusterObjects, scheduler_names: tuple[str, ...], policy: str,
            starvation_seconds: float, now: float) -> tuple[View, Decision]:
    from gangsched.clusterobjects import admitted_groups
    from gangsched.decisions import decide

    mirror = objects.mirror(frozenset(scheduler_names))
    view = mirror.view()
    return view, decide(
        view, admitted=admitted_groups(objects), waiting_since={}, finished_uids=frozenset(),
        priority_classes=mirror.priority_classes, now=now, policy=Policy(policy),
        starvation_s=starvation_seconds,
    )


def _print_json(data: object) -> None:
    click.echo(json.dumps(data, indent=2, default=str, ensure_ascii=False))


@main.command()
@_kube_options
@_decision_options
def status(kubeconfig: str | None, context: str | None, scheduler_names: tuple[str, ...],
           policy: str, starvation_seconds: float, output: str) -> None:
    """Queues and PodGroups of every flavour: phase, members bound, waiting time, reason."""
    from rich.console import Console

    from gangsched import console as views

    now = time.time()
    _, objects = _load_cluster(kubeconfig, context)
    view, decision = _decide(objects, scheduler_names, policy, starvation_seconds, now)
    queues, groups = views.status_rows(view, decision, now)
    if output == "json":
        _print_json({"queues": [views.row_json(q) for q in queues],
                     "podGroups": [views.row_json(g) for g in groups]})
    else:
        views.print_status(Console(), queues, groups)


@main.command()
@click.argument("target")
@click.option("-n", "--namespace", default=None,
              help="Namespace of the pod or PodGroup; the context's by default.")
@_kube_options
@_decision_options
def explain(target: str, namespace: str | None, kubeconfig: str | None, context: str | None,
            scheduler_names: tuple[str, ...], policy: str, starvation_seconds: float,
            output: str) -> None:
    """Why a pod or a PodGroup waits: TARGET is POD, pod/NAME or podgroup/NAME (pg/NAME).

    Decided by the same cycle the scheduler runs, over the cluster as it is now:
    what each kind of pod lacks, the nodes that came closest, reservations and
    queue caps in the way, and what would let the gang run.
    """
    from rich.console import Console

    from gangsched import console as views
    from gangsched.clusterobjects import current_namespace
    from gangsched.core.explain import explain_gang
    from gangsched.core.groups import gang_key, solo_gang_key
    from gangsched.core.model import PodKey

    api, objects = _load_cluster(kubeconfig, context)
    namespace = namespace or current_namespace(api)
    view, decision = _decide(objects, scheduler_names, policy, starvation_seconds, time.time())
    kind, _, name = target.rpartition("/")
    if kind in ("podgroup", "podgroups", "pg"):
        key = gang_key(namespace, name)
        what = f"PodGroup {key}"
        if key not in view.groups:
            _fail(LookupError(f"no PodGroup {name} in namespace {namespace}"))
    elif kind in ("", "pod", "pods", "po"):
        pod_key = PodKey(f"{namespace}/{name}")
        what = f"Pod {pod_key}"
        record = view.pods.get(pod_key)
        if record is None:
            _fail(LookupError(f"no pod {name} in namespace {namespace}"))
        if not record.ours:
            _fail(LookupError(f"pod {pod_key} is not gangsched's: its schedulerName is none "
                              f"of {', '.join(scheduler_names)}"))
        if record.pod.node_name is not None:
            if output == "json":
                _print_json({"pod": pod_key, "node": record.pod.node_name})
            else:
                click.echo(f"{what} is bound to node {record.pod.node_name}")
            return
        key = record.group or solo_gang_key(pod_key)
    else:
        _fail(ValueError(f"cannot explain {target!r}: give POD, pod/NAME or podgroup/NAME"))
    orphans = decision.gathered.orphans
    if key in orphans:
        _fail(LookupError(f"{what} waits for PodGroup {key} to exist"))
    explanation = explain_gang(decision.input, decision.result, key)
    if explanation is None:
        _fail(LookupError(f"{what}: PodGroup {key} has finished or is invalid"))
    if output == "json":
        _print_json(views.explanation_json(explanation))
    else:
        views.print_explanation(Console(), explanation, what)


@main.command()
@click.option("-f", "--filename", "files", multiple=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="YAML of nodes, pods, PodGroups, Queues (repeatable).")
@click.option("--from-cluster", is_flag=True,
              help="Start from the cluster's objects (kubeconfig as kubectl); files add to them.")
@click.option("--default-run-seconds", type=click.FloatRange(0, min_open=True), default=60.0,
              show_default=True,
              help="How long a pod runs when it has no kwok.gangsched.io/run-for annotation.")
@_kube_options
@_decision_options
def simulate(files: tuple[Path, ...], from_cluster: bool, default_run_seconds: float,
             kubeconfig: str | None, context: str | None, scheduler_names: tuple[str, ...],
             policy: str, starvation_seconds: float, output: str) -> None:
    """What gangsched would do, offline: which gangs run now, where, and in what order
    the rest follow as pods finish. Nothing is written anywhere."""
    from rich.console import Console

    from gangsched import console as views
    from gangsched.clusterobjects import ClusterObjects, ObjectsError, from_files
    from gangsched.simulation import simulate as run_simulation

    if not files and not from_cluster:
        _fail(click.UsageError("give -f FILE (nodes, jobs) or --from-cluster"))
    objects = ClusterObjects()
    if from_cluster:
        objects = _load_cluster(kubeconfig, context)[1]
    now = time.time()
    try:
        objects.extend(from_files(files, created=now))
    except ObjectsError as error:
        _fail(error)
    simulation = run_simulation(objects, scheduler_names=frozenset(scheduler_names),
                                policy=Policy(policy),
                                starvation_s=starvation_seconds,
                                default_run_s=default_run_seconds, now=now)
    if output == "json":
        _print_json(simulation.as_json())
    else:
        views.print_simulation(Console(), simulation)
