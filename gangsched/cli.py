"""The ``gangsched`` command, also installed as ``kubectl-gangsched`` so that
``kubectl gangsched status`` works. Every flag of ``run`` also reads
``GANGSCHED_<FLAG>`` from the environment (``--scheduler-name`` from
``GANGSCHED_SCHEDULER_NAME``); the repeatable ones, ``GANGSCHED_SCHEDULER_NAME``
and ``GANGSCHED_NAMESPACE``, take several values separated by spaces.

Exit codes, as scripts expect them: 0 done (for ``explain``: bound or running),
1 an error (no kubeconfig, no such object, the API server refused), 2 a usage
error, 3 ``explain`` found the pod or PodGroup still waiting.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import re
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from gangsched import __version__
from gangsched.core.model.objects import GangKey, Policy

if TYPE_CHECKING:
    import pykube
    from rich.console import Console

    from gangsched.clusterobjects import ClusterObjects
    from gangsched.core.kubeobjects.podgroups import GroupRecord
    from gangsched.core.step import StepConfig, Stepped
    from gangsched.mirror import View


EXIT_ERROR = 1
EXIT_WAITING = 3
"""``explain``'s answer when the pod or PodGroup is not bound yet (2 is click's usage error)."""


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__)
def main() -> None:
    """A gang scheduler for Kubernetes."""


def _env(flag: str) -> str:
    return "GANGSCHED_" + flag.upper().replace("-", "_")


DECISION_FLAGS = (
    click.option("--policy", envvar=_env("policy"),
                 type=click.Choice([p.value for p in Policy]), default="binpack",
                 show_default=True,
                 help="Placement policy; a PodGroup may override it by the "
                 "scheduling.gangsched.io/policy annotation."),
    click.option("--starvation-seconds", envvar=_env("starvation-seconds"),
                 type=click.FloatRange(0), default=60.0, show_default=True,
                 help="After this long unplaced, a gang holds its room against gangs "
                 "ordered after it."),
    click.option("--replacement-grace-seconds", envvar=_env("replacement-grace-seconds"),
                 type=click.FloatRange(0), default=60.0, show_default=True,
                 help="When a running gang drops below its minMember, the room of each "
                 "departed member is held this long for its replacement."),
    click.option("--provisioning-timeout-seconds",
                 envvar=_env("provisioning-timeout-seconds"),
                 type=click.FloatRange(0, min_open=True), default=120.0, show_default=True,
                 help="A placed gang waits this long for its WaitForFirstConsumer claims to "
                 "be provisioned on their nodes; then the nodes are taken back and it tries "
                 "again."),
    click.option("--preemption/--no-preemption", envvar=_env("preemption"), default=True,
                 show_default=True,
                 help="A gang that cannot fit may evict whole gangs of lower priority "
                 "(Eviction API: PodDisruptionBudgets hold)."),
    click.option("--reclaim/--no-reclaim", envvar=_env("reclaim"), default=False,
                 show_default=True,
                 help="A queue below its deserved share may evict whole gangs of queues "
                 "above theirs to take back the room they borrowed (needs --preemption; a "
                 "Queue with reclaimable: false opts out)."),
    click.option("--reclaim-interval-seconds", envvar=_env("reclaim-interval-seconds"),
                 type=click.FloatRange(0), default=10.0, show_default=True,
                 help="A queue that reclaimed reclaims again only after this long: at most "
                 "one reclaim decision per queue per interval."),
    click.option("--backfill/--no-backfill", envvar=_env("backfill"), default=True,
                 show_default=True,
                 help="A gang expected to end before the starving gang's estimated start "
                 "may use the room kept for it (EASY backfill; gangs of unknown runtime "
                 "never do)."),
    click.option("--disruption-budgets/--no-disruption-budgets",
                 envvar=_env("disruption-budgets"), default=True, show_default=True,
                 help="A gang bound whole gets a PodDisruptionBudget named after its "
                 "PodGroup and owned by it (minAvailable: minMember), so node "
                 "consolidation and drains take none of its pods one by one."),
    click.option("--node-hold-seconds", envvar=_env("node-hold-seconds"),
                 type=click.FloatRange(0, min_open=True), default=300.0, show_default=True,
                 help="Where Karpenter's NodePools are served: a gang asking for nodes "
                 "(PodScheduled=False/Unschedulable) this long without being placed "
                 "stops asking."),
    click.option("--ask-backoff-seconds", envvar=_env("ask-backoff-seconds"),
                 type=click.FloatRange(0), default=300.0, show_default=True,
                 help="A gang that stopped asking for nodes asks again after this long "
                 "(meanwhile what was bought for it goes back to consolidation)."),
)
"""The flags that change decisions (see :func:`_step_options`)."""


def _step_options(command: Callable[..., None]) -> Callable[..., None]:
    """The flags that change decisions, taken alike by ``run``, ``explain``, ``status`` and
    ``simulate`` and handed to the command as one :class:`StepConfig`, ``step``: what the
    CLI answers is decided as the scheduler started with the same flags decides."""

    @functools.wraps(command)
    def with_step(*args: Any, policy: str, starvation_seconds: float,
                  replacement_grace_seconds: float, provisioning_timeout_seconds: float,
                  preemption: bool, reclaim: bool, reclaim_interval_seconds: float,
                  backfill: bool, disruption_budgets: bool, node_hold_seconds: float,
                  ask_backoff_seconds: float, **kwargs: Any) -> None:
        from gangsched.core.asking import AskLimits
        from gangsched.core.provisioning import ProvisionLimits
        from gangsched.core.step import StepConfig

        step = StepConfig(
            policy=Policy(policy), starvation_s=starvation_seconds,
            replacement_grace_s=replacement_grace_seconds,
            provisioning=ProvisionLimits(timeout_s=provisioning_timeout_seconds),
            preemption=preemption, reclaim=reclaim,
            reclaim_interval_s=reclaim_interval_seconds, backfill=backfill,
            disruption_budgets=disruption_budgets,
            asking=AskLimits(node_hold_s=node_hold_seconds, backoff_s=ask_backoff_seconds),
        )
        command(*args, step=step, **kwargs)

    for option in reversed(DECISION_FLAGS):
        with_step = option(with_step)
    return with_step


@main.command()
@click.option("--kubeconfig", envvar=[_env("kubeconfig"), "KUBECONFIG"],
              help="Kubeconfig file, or several separated by ':' as in $KUBECONFIG (merged "
              "as kubectl merges them); ~/.kube/config, else the in-cluster service "
              "account, when absent.")
@click.option("--context", envvar=_env("context"), default=None,
              help="Kubeconfig context; the current one by default.")
@click.option("--scheduler-name", "scheduler_names", envvar=_env("scheduler-name"),
              multiple=True, default=("gang",), show_default=True,
              help="Pods with this spec.schedulerName are ours (repeatable: e.g. also "
              "volcano, to stand in for Volcano with nothing else changed).")
@click.option("--namespace", "namespaces", envvar=_env("namespace"), multiple=True,
              help="Only schedule pods of this namespace (repeatable); all by default.")
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
@_step_options
@click.option("--leader-elect/--no-leader-elect", envvar=_env("leader-elect"), default=False,
              show_default=True, help="Schedule only while holding a Lease (for replicas > 1).")
@click.option("--lease-namespace", envvar=[_env("lease-namespace"), "POD_NAMESPACE"],
              default="default", show_default=True,
              help="Namespace of the leader-election Lease; the pod's own in the chart.")
@click.option("--lease-name", envvar=_env("lease-name"), default="gangsched", show_default=True,
              help="Name of the leader-election Lease.")
@click.option("--log-format", envvar=_env("log-format"), type=click.Choice(["json", "console"]),
              default="json", show_default=True,
              help="json: one structlog key/value object a line; console: for people.")
@click.option("--log-level", envvar=_env("log-level"),
              type=click.Choice(["debug", "info", "warning", "error"]), default="info",
              show_default=True, help="debug adds a cycle_done line for every cycle.")
def run(
    kubeconfig: str | None,
    context: str | None,
    scheduler_names: tuple[str, ...],
    namespaces: tuple[str, ...],
    bind_concurrency: int,
    scheduled_events: str,
    metrics_port: int,
    step: StepConfig,
    leader_elect: bool,
    lease_namespace: str,
    lease_name: str,
    log_format: str,
    log_level: str,
) -> None:
    """Run the scheduler until SIGTERM or SIGINT."""
    from gangsched import app, logs
    from gangsched.kubeconfig import KubeconfigError, connection
    from gangsched.scheduler import ScheduledEvents

    logs.configure(log_format, log_level)
    try:
        # One connection for the scheduler's client and kopf's login alike.
        chosen = connection(kubeconfig, context)
    except KubeconfigError as error:
        _fail(error)
    options = app.RunOptions(
        connection=chosen,
        scheduler_names=frozenset(scheduler_names),
        namespaces=namespaces,
        step=step,
        bind_concurrency=bind_concurrency,
        scheduled_events=ScheduledEvents(scheduled_events),
        metrics_port=metrics_port,
        leader_elect=leader_elect,
        lease_namespace=lease_namespace,
        lease_name=lease_name,
    )
    code = asyncio.run(app.run(options))
    sys.exit(code)


# ---- commands for people: status, explain, simulate ---------------------------------------

OUTPUTS = ("text", "wide", "json", "yaml")
GROUP_KINDS = frozenset({"podgroup", "podgroups", "gpg", "pg"})
POD_KINDS = frozenset({"", "pod", "pods", "po"})


def _kube_options(command: Callable[..., None]) -> Callable[..., None]:
    """--kubeconfig and --context as kubectl reads them."""
    command = click.option("--context", default=None,
                           help="Kubeconfig context; the current one by default.")(command)
    return click.option("--kubeconfig", envvar="KUBECONFIG", default=None,
                        help="Kubeconfig file, or several separated by ':' (merged as kubectl "
                             "merges them); $KUBECONFIG, ~/.kube/config or the in-cluster "
                             "service account by default.")(command)


def _decision_options(command: Callable[..., None]) -> Callable[..., None]:
    """The flags of ``run`` that change decisions and the output format, for the commands
    that answer people: they decide as the scheduler started with the same flags does."""
    for option in reversed((
        click.option("--scheduler-name", "scheduler_names", envvar=_env("scheduler-name"),
                     multiple=True,
                     help="Pods with this spec.schedulerName are gangsched's (repeatable). "
                          "Default: the names the installed gangsched Deployment serves "
                          "(read from the cluster when the account may list Deployments), "
                          f"else {DEFAULT_SCHEDULER_NAME}."),
        _step_options,
        click.option("-o", "--output", type=click.Choice(OUTPUTS), default="text",
                     show_default=True,
                     help="text or wide (reasons in a column) for people; json or yaml for "
                          "programs."),
    )):
        command = option(command)
    return command


DEFAULT_SCHEDULER_NAME = "gang"


def _names(given: tuple[str, ...], api: pykube.HTTPClient | None) -> tuple[str, ...]:
    """The schedulerNames that make a pod gangsched's: those given, else those the installed
    Deployment serves, else the chart's default."""
    if given:
        return given
    from gangsched.clusterobjects import deployed_scheduler_names

    deployed = deployed_scheduler_names(api) if api is not None else frozenset()
    return tuple(sorted(deployed)) or (DEFAULT_SCHEDULER_NAME,)


def _fail(error: Exception) -> NoReturn:
    click.echo(f"error: {error}", err=True)
    sys.exit(EXIT_ERROR)


def _client(kubeconfig: str | None, context: str | None) -> pykube.HTTPClient:
    from gangsched.kubeconfig import KubeconfigError, connection, pykube_client

    try:
        return pykube_client(connection(kubeconfig, context))
    except KubeconfigError as error:
        _fail(error)


def _read(api: pykube.HTTPClient, namespace: str | None = None,
          if_forbidden: str = "") -> ClusterObjects:
    """The objects a decision reads; kinds the account may not list are said on stderr,
    and ``if_forbidden`` tells what to do when a kind it needs is refused."""
    from gangsched.clusterobjects import Forbidden, ObjectsError, from_cluster

    try:
        objects = from_cluster(api, namespace)
    except Forbidden as error:
        _fail(Forbidden(f"{error}{if_forbidden}"))
    except ObjectsError as error:
        _fail(error)
    for kind in objects.unreadable:
        click.echo(f"warning: may not list {kind}: read as none", err=True)
    return objects


def _decide(objects: ClusterObjects, scheduler_names: tuple[str, ...], step: StepConfig,
            now: float) -> tuple[View, Stepped]:
    """The scheduler's step over the objects, from the state their status shows."""
    from gangsched.decisions import decide, published_state, step_view

    mirror = objects.mirror(frozenset(scheduler_names))
    view = mirror.view()
    seen = step_view(mirror, view)
    return view, decide(seen, published_state(seen, now), now, step)


def _print_data(data: object, output: str) -> None:
    if output == "yaml":
        import yaml

        click.echo(yaml.safe_dump(json.loads(json.dumps(data, default=str)), sort_keys=False,
                                  allow_unicode=True), nl=False)
    else:
        click.echo(json.dumps(data, indent=2, default=str, ensure_ascii=False))


@main.command()
@click.option("-n", "--namespace", default=None,
              help="PodGroups of this namespace, as the scheduler last wrote them; the "
                   "context's namespace by default.")
@click.option("-A", "--all-namespaces", is_flag=True,
              help="Every namespace and the Queues, reasons worked out again over the whole "
                   "cluster (needs rights to list nodes and pods cluster-wide).")
@_kube_options
@_decision_options
def status(namespace: str | None, all_namespaces: bool, kubeconfig: str | None,
           context: str | None, scheduler_names: tuple[str, ...], step: StepConfig,
           output: str) -> None:
    """Queues and PodGroups of every flavour: phase, members bound, waiting time, reason.

    Within one namespace (-n, or the context's) only that namespace's pods,
    PodGroups and Workloads are read, so a tenant whose Role covers its own
    namespace gets an answer; the reasons are those the scheduler last wrote
    on each PodGroup. With -A the reasons are worked out again by the step the
    scheduler runs, over every node, pod and Queue.
    """
    from rich.console import Console

    from gangsched import console as views
    from gangsched.clusterobjects import current_namespace

    if namespace and all_namespaces:
        raise click.UsageError("give -n NAMESPACE or -A, not both")
    now = time.time()
    api = _client(kubeconfig, context)
    scope = None if all_namespaces else namespace or current_namespace(api)
    objects = _read(api, scope, if_forbidden="" if scope else (
        "\n(gangsched status -n NAMESPACE reads one namespace alone, as a namespaced Role "
        "allows)"))
    view, decision = _decide(objects, _names(scheduler_names, api), step, now)
    if scope is not None:
        # Without nodes the cycle's reasons would be about an empty cluster: keep
        # what the scheduler, which sees every node, wrote on each PodGroup.
        decision = dataclasses.replace(
            decision, result=dataclasses.replace(decision.result, unplaceable=(), unadmitted=()),
            state=dataclasses.replace(decision.state, estimates={}))
    queues, groups = views.status_rows(view, decision, now)
    if scope is not None:
        queues = []
    if output in ("json", "yaml"):
        _print_data({"namespace": scope,
                     "queues": [views.row_json(q) for q in queues],
                     "podGroups": [views.row_json(g) for g in groups]}, output)
    elif output == "wide":
        _print_wide(Console(), [views.row_json(q) for q in queues],
                    [views.row_json(g) for g in groups])
    elif scope is not None and not groups:
        click.echo(f"No PodGroups in namespace {scope}.")
    else:
        views.print_status(Console(), queues, groups)


def _print_wide(console: Console, queues: Sequence[dict[str, Any]],
                groups: Sequence[dict[str, Any]]) -> None:
    """Every field of every row (as ``-o json`` has them), one column each, as
    ``kubectl get -o wide`` adds columns."""
    from rich import box
    from rich.table import Table

    for title, rows in (("Queues", queues), ("PodGroups", groups)):
        if not rows:
            continue
        table = Table(title=title, box=box.SIMPLE_HEAD, title_justify="left")
        for column in rows[0]:
            table.add_column(re.sub(r"(?<=[a-z])(?=[A-Z])", " ", column).upper(),
                             overflow="fold")
        for row in rows:
            table.add_row(*(_cell(value) for value in row.values()))
        console.print(table)


def _cell(value: object) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{v} {k}" for k, v in value.items()) or "-"
    if value is None or value == "":
        return "-"
    return str(value)


def _placed_as(groups: Mapping[GangKey, GroupRecord], key: GangKey) -> GangKey:
    """The gang that places group ``key``: a native PodGroup under a CompositePodGroup
    waits as the composite's gang, with its siblings."""
    group = groups.get(key)
    if group is None or group.spec is None or group.spec.composite is None:
        return key
    return group.spec.composite


@main.command()
@click.argument("target")
@click.option("-n", "--namespace", default=None,
              help="Namespace of the pod or PodGroup; the context's by default.")
@_kube_options
@_decision_options
def explain(target: str, namespace: str | None, kubeconfig: str | None, context: str | None,
            scheduler_names: tuple[str, ...], step: StepConfig, output: str) -> None:
    """Why a pod or a PodGroup waits: TARGET is POD, pod/NAME or podgroup/NAME (gpg/NAME).

    Decided by the same step the scheduler runs, over the cluster as it is now:
    what each kind of pod lacks, the nodes that came closest, reservations and
    queue caps in the way, the gangs a preemption would evict, and what would
    let the gang run. An account that
    may not list nodes and pods cluster-wide gets the reason the scheduler last
    wrote instead. Exits 0 when bound or running, 3 while still waiting.
    """
    from rich.console import Console

    from gangsched import console as views
    from gangsched.clusterobjects import Forbidden, ObjectsError, current_namespace, from_cluster
    from gangsched.core.kubeobjects.groups import gang_key, solo_gang_key
    from gangsched.core.model.objects import PodKey
    from gangsched.core.reports.explain import Verdict, as_said, explain_gang

    kind, _, name = target.rpartition("/")
    if kind not in GROUP_KINDS | POD_KINDS or not name:
        raise click.UsageError(f"cannot explain {target!r}: give POD, pod/NAME or podgroup/NAME")
    api = _client(kubeconfig, context)
    namespace = namespace or current_namespace(api)
    try:
        objects = from_cluster(api)
    except Forbidden as error:
        click.echo(f"warning: {error}; showing what the scheduler last wrote", err=True)
        _explain_from_status(_read(api, namespace), kind in GROUP_KINDS, namespace, name,
                             output)
    except ObjectsError as error:
        _fail(error)
    scheduler_names = _names(scheduler_names, api)
    view, decision = _decide(objects, scheduler_names, step, time.time())
    if kind in GROUP_KINDS:
        key = gang_key(namespace, name)
        what = f"PodGroup {key}"
        if key not in view.groups:
            _fail(LookupError(f"no PodGroup {name} in namespace {namespace}"))
    else:
        pod_key = PodKey(f"{namespace}/{name}")
        what = f"Pod {pod_key}"
        record = view.pods.get(pod_key)
        if record is None:
            _fail(LookupError(f"no pod {name} in namespace {namespace}"))
        if not record.ours:
            _fail(LookupError(f"pod {pod_key} is not gangsched's: its schedulerName is "
                              f"{_scheduler_name_of(objects, namespace, name)!r}, none of "
                              f"{', '.join(scheduler_names)}"))
        if record.pod.node_name is not None:
            if output in ("json", "yaml"):
                _print_data({"pod": pod_key, "node": record.pod.node_name}, output)
            else:
                click.echo(f"{what} is bound to node {record.pod.node_name}")
            return
        key = record.group or solo_gang_key(pod_key)
    key = _placed_as(view.groups, key)
    orphans = decision.gathered.orphans
    if key in orphans:
        if output in ("json", "yaml"):
            _print_data({"gang": key, "verdict": "waiting",
                         "reason": f"PodGroup {key} does not exist"}, output)
        else:
            click.echo(f"{what} waits for PodGroup {key} to exist")
        sys.exit(EXIT_WAITING)
    if key in decision.gathered.theirs:
        _fail(LookupError(f"{what}: PodGroup {key} is another scheduler's: only pods of "
                          f"other schedulers name it"))
    explanation = as_said(explain_gang(decision.input, decision.result, key), decision.state)
    if explanation is None:
        _fail(LookupError(f"{what}: PodGroup {key} has finished or is invalid"))
    estimate = decision.state.estimates.get(key)
    if output in ("json", "yaml"):
        _print_data(views.explanation_json(explanation, estimate), output)
    else:
        views.print_explanation(Console(), explanation, what, estimate)
    running = (explanation.verdict is Verdict.IDLE
               and explanation.bound >= explanation.min_member)
    sys.exit(0 if running else EXIT_WAITING)


def _scheduler_name_of(objects: ClusterObjects, namespace: str, name: str) -> str:
    """The ``schedulerName`` a pod carries (kube-scheduler's ``default-scheduler`` when
    it names none)."""
    for pod in objects.pods:
        meta = pod.get("metadata") or {}
        if (meta.get("namespace"), meta.get("name")) == (namespace, name):
            return str((pod.get("spec") or {}).get("schedulerName") or "default-scheduler")
    return "default-scheduler"


def _explain_from_status(objects: ClusterObjects, group: bool, namespace: str, name: str,
                         output: str) -> NoReturn:
    """The scheduler's own last word on a pod (its PodScheduled condition) or a PodGroup
    (its phase and conditions), for an account that may read its namespace alone."""
    if group:
        found = [body for _, body in objects.groups
                 if (body.get("metadata") or {}).get("name") == name]
        what = f"PodGroup {namespace}/{name}"
    else:
        found = [body for body in objects.pods if (body.get("metadata") or {}).get("name") == name]
        what = f"Pod {namespace}/{name}"
    if not found:
        _fail(LookupError(f"no {what.split()[0]} {name} in namespace {namespace}"))
    status = found[0].get("status") or {}
    node = (found[0].get("spec") or {}).get("nodeName")
    phase = str(status.get("phase") or "")
    done = bool(node) if not group else phase in ("Running", "Succeeded")
    reason = next((str(c.get("message")) for c in status.get("conditions") or []
                   if c.get("message") and (group or c.get("type") == "PodScheduled")), "")
    data = {"target": what, "verdict": "bound" if done else "waiting", "phase": phase or None,
            "node": node, "reason": reason, "source": "status written by the scheduler"}
    if output in ("json", "yaml"):
        _print_data(data, output)
    elif node:
        click.echo(f"{what} is bound to node {node}")
    else:
        click.echo(f"{what}: {'running' if done else 'waiting'}"
                   f"{f' ({phase})' if phase else ''}: {reason or 'no reason written yet'}")
    sys.exit(0 if done else EXIT_WAITING)


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
             step: StepConfig, output: str) -> None:
    """What gangsched would do, offline: which gangs run now, where, and in what order
    the rest follow as pods finish. Nothing is written anywhere."""
    from rich.console import Console

    from gangsched import console as views
    from gangsched.clusterobjects import ClusterObjects, ObjectsError, from_files
    from gangsched.simulation import simulate as run_simulation

    if not files and not from_cluster:
        raise click.UsageError("give -f FILE (nodes, jobs) or --from-cluster")
    objects = ClusterObjects()
    api = _client(kubeconfig, context) if from_cluster else None
    if api is not None:
        objects = _read(api)
    scheduler_names = _names(scheduler_names, api)
    now = time.time()
    try:
        objects.extend(from_files(files, created=now))
    except ObjectsError as error:
        _fail(error)
    simulation = run_simulation(objects, scheduler_names=frozenset(scheduler_names),
                                step_config=step, default_run_s=default_run_seconds,
                                now=now)
    if output in ("json", "yaml"):
        _print_data(simulation.as_json(), output)
    else:
        views.print_simulation(Console(), simulation)
