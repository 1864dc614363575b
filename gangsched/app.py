"""Wires the process together: one event loop holding kopf, the watches, the loop, metrics.

Start order matters: the scheduling loop starts only after pods and nodes are
listed in full, because a cycle over a partial view would see free room where
other schedulers' pods already sit.
"""

from __future__ import annotations

import asyncio
import gc
import signal
import socket
import urllib.parse
import urllib.request
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import NoReturn

import kopf
import structlog
from kubernetes_asyncio import client
from kubernetes_asyncio.leaderelection.electionconfig import Config as ElectionConfig
from kubernetes_asyncio.leaderelection.leaderelection import LeaderElection

from gangsched import __version__, handlers
from gangsched.allocations import ClaimWriter
from gangsched.binder import FIELD_MANAGER, Binder
from gangsched.core.step import StepConfig
from gangsched.discovery import DEVICES, Served, discover
from gangsched.dispatcher import Dispatcher
from gangsched.evictor import Evictor
from gangsched.feed import CUSTOM_KINDS, Feed
from gangsched.health import Health, HealthServer
from gangsched.kubeconfig import Context, configure
from gangsched.leadership import (
    LEASE_DURATION_S,
    RENEW_DEADLINE_S,
    RETRY_PERIOD_S,
    FencedLeaseLock,
    Leadership,
)
from gangsched.mirror import Mirror
from gangsched.reflector import Reflector
from gangsched.reporting import Reporter
from gangsched.scheduler import ScheduledEvents, Scheduler, SchedulerConfig

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class RunOptions:
    connection: Context
    """Where the API server is and who we are to it, for the scheduler's client and kopf's."""
    scheduler_names: frozenset[str]
    namespaces: tuple[str, ...]
    step: StepConfig
    """How each cycle decides, as ``explain``, ``status`` and ``simulate`` decide."""
    bind_concurrency: int
    metrics_port: int
    leader_elect: bool = False
    lease_namespace: str = "default"
    scheduled_events: ScheduledEvents = ScheduledEvents.GANG
    lease_name: str = "gangsched"


STOP_GRACE_S = 5.0
"""How long queued writes and kopf get to finish once the process is told to stop."""

OTHER_CONNECTIONS = 64
"""Connections beside the binds': watches, status and Event writers, the Lease."""


async def api_client(connection: Context, bind_concurrency: int) -> client.ApiClient:
    """A client whose every write is ours by name, with a connection for every bind
    in flight.

    The API server names the field manager of a write that gives none after
    the user agent; the client library's default would make our writes (the
    Lease included) look like any other generated client's.
    """
    configuration = client.Configuration()
    configuration.connection_pool_maxsize = bind_concurrency + OTHER_CONNECTIONS
    await configure(configuration, connection)
    api = client.ApiClient(configuration)
    api.user_agent = f"{FIELD_MANAGER}/{__version__}"
    rest = api.rest_client
    rest.proxy = rest.proxy or proxy_from_environment(configuration.host)
    # Read once, as client-go does: left to the session, the proxy variables and
    # ~/.netrc are looked up again in a thread for every request, two thread
    # hops per bind (a fifth of the process's time under a flood of binds).
    rest.pool_manager._trust_env = False
    return api


def proxy_from_environment(host: str) -> str | None:
    """The proxy ``HTTPS_PROXY`` (``HTTP_PROXY`` for http) names for ``host``, unless
    ``NO_PROXY`` exempts it."""
    url = urllib.parse.urlsplit(host)
    proxy = urllib.request.getproxies().get(url.scheme)
    if not proxy or urllib.request.proxy_bypass(url.hostname or ""):
        return None
    return proxy


async def lead(
    options: RunOptions,
    api: client.ApiClient,
    leadership: Leadership,
    schedule: Callable[[], Awaitable[None]],
    health: Health,
) -> None:
    """Schedule only while holding the Lease, so two replicas never bind the same room twice.

    Followers keep their watches and mirror warm, so a new leader schedules
    within one lease period. ``leadership`` fences the leader between renewals
    (see :mod:`gangsched.leadership`). Leadership lost returns, which stops the
    process: its restart comes back as a follower with a clean state. The
    scheduling loop failing while leading raises: the process gives the lease
    up and exits non-zero rather than lead without scheduling.
    """
    if not options.leader_elect:
        await schedule()
        return
    identity = f"{socket.gethostname()}-{uuid.uuid4().hex[:6]}"
    lock = FencedLeaseLock(options.lease_name, options.lease_namespace, identity, api)
    leadership.lock = lock
    log.info("leader_election_started", identity=identity,
             lease=f"{options.lease_namespace}/{options.lease_name}")

    scheduling_ended: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def started() -> None:
        log.info("leader_elected", identity=identity, lease=options.lease_name)
        # The election runs this as a task nobody awaits: an error left in it would
        # be lost while the lease goes on being renewed, a leader that schedules
        # nothing and keeps every standby out. It is handed to ``lead`` instead.
        try:
            await schedule()
        except Exception as error:
            scheduling_ended.set_exception(error)
        else:
            scheduling_ended.set_result(None)

    async def stopped() -> None:
        health.stop_scheduling()
        log.error("leadership_lost", identity=identity, lease=options.lease_name)

    election = asyncio.create_task(LeaderElection(
        ElectionConfig(lock, lease_duration=LEASE_DURATION_S, renew_deadline=RENEW_DEADLINE_S,
                       retry_period=RETRY_PERIOD_S,
                       onstarted_leading=started, onstopped_leading=stopped)
    ).run(), name="leader-election")
    try:
        await asyncio.wait([election, scheduling_ended], return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        election.cancel()
        raise
    if election.done():
        election.result()
        return
    await give_up_leading(election, scheduling_ended, health, identity, options.lease_name)


async def give_up_leading(
    election: asyncio.Task[None], scheduling_ended: asyncio.Future[None], health: Health,
    identity: str, lease: str,
) -> NoReturn:
    """The scheduling loop ended while leading: stop renewing the lease, so a standby
    takes over once it runs out, and end the process with the loop's error."""
    election.cancel()
    health.stop_scheduling()
    await asyncio.gather(election, return_exceptions=True)
    error = scheduling_ended.exception()
    log.error("leadership_given_up", identity=identity, lease=lease,
              error=repr(error) if error else "the scheduling loop returned")
    if error is not None:
        raise error
    raise RuntimeError("the scheduling loop ended while leading")


@dataclass
class Parts:
    """The long-lived parts of one process, built before any of them starts."""

    api: client.ApiClient
    mirror: Mirror
    scheduler: Scheduler
    reflectors: list[Reflector]
    health: Health
    leadership: Leadership


def assemble(options: RunOptions, api: client.ApiClient, served: Served) -> Parts:
    """Wire the mirror, the dispatcher and its writers, the loop and the watches together;
    kinds the API server does not serve (``served``) are not watched."""
    core = client.CoreV1Api(api)
    resource = client.ResourceV1Api(api)
    config_ = SchedulerConfig(step=options.step, scheduled_events=options.scheduled_events)
    health = Health(stale_after_s=2 * config_.resync_s, leader_election=options.leader_elect)
    mirror = Mirror(scheduler_names=options.scheduler_names,
                    namespaces=frozenset(options.namespaces))
    leadership = Leadership()
    # Every call to the API server but the watches and the Lease goes out through
    # it, fenced by leadership right before it is sent.
    dispatcher = Dispatcher(bind_workers=options.bind_concurrency, may_act=leadership.may_act)
    scheduler = Scheduler(
        mirror=mirror,
        binder=Binder(api, dispatcher),
        may_act=leadership.may_act,
        reporter=Reporter(api, dispatcher, placed=mirror.is_placed),
        config=config_,
        on_cycle=health.cycle_ran,
        evictor=Evictor(core, dispatcher, client.PolicyV1Api(api)),
        claims=ClaimWriter(api, dispatcher),
    )
    mirror.on_status_change = scheduler.status_changed
    feed = Feed(mirror)
    reflectors = [
        Reflector("priorityclasses", client.SchedulingV1Api(api).list_priority_class, feed,
                  scheduler.trigger),
        Reflector("nodes", core.list_node, feed, scheduler.trigger),
        # Namespace labels: what inter-pod terms with a namespaceSelector select.
        Reflector("namespaces", core.list_namespace, feed, scheduler.trigger),
        Reflector("pods", core.list_pod_for_all_namespaces, feed, scheduler.trigger),
        # Claims, their volumes and classes: where a pod's volumes let it go.
        Reflector("persistentvolumeclaims",
                  core.list_persistent_volume_claim_for_all_namespaces, feed, scheduler.trigger),
        Reflector("persistentvolumes", core.list_persistent_volume, feed, scheduler.trigger),
        Reflector("storageclasses", client.StorageV1Api(api).list_storage_class, feed,
                  scheduler.trigger),
        # CSI volume limits per node, the volumes attached there, and the CSI drivers.
        Reflector("csinodes", client.StorageV1Api(api).list_csi_node, feed, scheduler.trigger),
        Reflector("volumeattachments", client.StorageV1Api(api).list_volume_attachment, feed,
                  scheduler.trigger),
        Reflector("csidrivers", client.StorageV1Api(api).list_csi_driver, feed,
                  scheduler.trigger),
        # Where drivers that publish their storage capacity can still make volumes.
        Reflector("csistoragecapacities",
                  client.StorageV1Api(api).list_csi_storage_capacity_for_all_namespaces, feed,
                  scheduler.trigger),
        # Dynamic resource allocation: the devices drivers publish, and the claims on them.
        Reflector("resourceslices", resource.list_resource_slice, feed, scheduler.trigger),
        Reflector("deviceclasses", resource.list_device_class, feed, scheduler.trigger),
        Reflector("resourceclaims", resource.list_resource_claim_for_all_namespaces, feed,
                  scheduler.trigger),
    ]
    if options.step.preemption or options.step.disruption_budgets:
        reflectors.append(Reflector(
            "poddisruptionbudgets",
            client.PolicyV1Api(api).list_pod_disruption_budget_for_all_namespaces, feed,
            scheduler.trigger))
    # PodGroups of every flavour, Queues and native Workloads: a flavour whose API is not
    # served is looked for again now and then.
    custom = client.CustomObjectsApi(api)
    reflectors.extend(
        Reflector(kind, partial(custom.list_cluster_custom_object, *resource), feed,
                  scheduler.trigger)
        for kind, resource in CUSTOM_KINDS.items())
    reflectors = [r for r in reflectors if served.serves(r.kind)]
    mirror.devices.unserved = None if served.devices else DEVICES
    health.unserved = served.summary()
    health.failing = lambda: {r.kind: r.failure for r in reflectors if r.failure}
    return Parts(api, mirror, scheduler, reflectors, health, leadership)


async def schedule_when_synced(options: RunOptions, parts: Parts) -> None:
    """Start the loop once every watched kind is listed in full: a first cycle before
    the PodGroups' list would tell every member of a gang that its PodGroup does not
    exist, one before the pods' would see free room where other schedulers' pods sit.
    """
    await asyncio.gather(*(r.synced.wait() for r in parts.reflectors))
    # The mirror now holds the cluster; its long-lived objects need no more
    # collection passes, which otherwise stall cycles by hundreds of ms.
    gc.freeze()
    scheduler = parts.scheduler
    await scheduler.reporter.ensure_default_queue()
    log.info("scheduler_started", scheduler_names=sorted(options.scheduler_names),
             nodes=len(parts.mirror.nodes), pods=len(parts.mirror.pods),
             policy=options.step.policy.value)
    scheduler.trigger()
    parts.health.start_scheduling()
    await scheduler.run()


def start_kopf(options: RunOptions, parts: Parts, stop: asyncio.Event,
               ready: asyncio.Event) -> asyncio.Task[None]:
    """kopf, embedded in this loop, logged in as the scheduler's client is."""
    registry = kopf.OperatorRegistry()
    handlers.register(registry, options.connection)
    return asyncio.create_task(
        kopf.operator(registry=registry, standalone=True, clusterwide=not options.namespaces,
                      namespaces=options.namespaces, stop_flag=stop, ready_flag=ready),
        name="kopf",
    )


async def run(options: RunOptions) -> int:
    """Run until a signal (returns 0) or until a part of the process ends (returns 1)."""
    # Watches allocate many short-lived dicts; collecting every 700 allocations
    # (the default) spends more time scanning the mirror than freeing garbage.
    gc.set_threshold(20_000, 20, 50)
    # A signal before kopf installs its handlers stops the process cleanly too: as
    # PID 1 in a container, a signal with no handler is ignored, not fatal.
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    api = await api_client(options.connection, options.bind_concurrency)
    parts = assemble(options, api, await discover(api))
    health = parts.health
    server = HealthServer(health, options.metrics_port) if options.metrics_port else None
    if server is not None:
        await server.start()
    kopf_ready = asyncio.Event()
    tasks = [asyncio.create_task(r.run(), name=f"watch-{r.kind}") for r in parts.reflectors]

    async def report_synced(part: str, synced: asyncio.Event) -> None:
        await synced.wait()
        health.synced(part)

    probes = [asyncio.create_task(report_synced(r.kind, r.synced)) for r in parts.reflectors]
    probes.append(asyncio.create_task(report_synced("kopf", kopf_ready)))
    operator = start_kopf(options, parts, stop, kopf_ready)
    tasks.append(asyncio.create_task(
        lead(options, parts.api, parts.leadership,
             lambda: schedule_when_synced(options, parts), health),
        name="scheduler"))
    code = await wait_for_end(stop, kopf_ready, operator, tasks)
    await shut_down(parts, stop, operator, tasks, probes)
    if server is not None:
        await server.stop()
    await parts.api.close()
    log.info("stopped", exit_code=code)
    return code


async def wait_for_end(stop: asyncio.Event, kopf_ready: asyncio.Event,
                       operator: asyncio.Task[None], tasks: list[asyncio.Task[None]]) -> int:
    """Wait for a signal (0) or for any part to end on its own (1)."""
    # kopf installs its own SIGINT/SIGTERM handlers before it reports ready; ours
    # replace them then, so a signal stops every part of the process, not kopf alone.
    ready = asyncio.create_task(kopf_ready.wait())
    await asyncio.wait([ready, operator], return_when=asyncio.FIRST_COMPLETED)
    ready.cancel()
    if operator.done() and not operator.cancelled() and operator.exception() is None:
        stop.set()  # kopf stopped before it was ready: its handlers caught a signal meant for us
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    waiter = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait([waiter, operator, *tasks], return_when=asyncio.FIRST_COMPLETED)
    # Only a signal ends the process cleanly; any part ending on its own (kopf
    # failing to log in, leadership lost) is a failure the pod restart should see.
    for task in done:
        if task is not waiter and not (task is operator and stop.is_set()):
            error = task.exception()
            log.error("task_ended", task=task.get_name(), error=repr(error) if error else None)
    waiter.cancel()
    return 0 if waiter in done else 1


async def shut_down(parts: Parts, stop: asyncio.Event, operator: asyncio.Task[None],
                    tasks: list[asyncio.Task[None]], probes: list[asyncio.Task[None]]) -> None:
    """Stop every part within one bound, well inside a pod's termination grace period."""
    log.info("stopping")
    stop.set()
    for task in tasks:
        task.cancel()
    # Queued writes go out while kopf stops, both within one bound.
    draining = asyncio.create_task(parts.scheduler.drain())
    await asyncio.wait([draining, operator], timeout=STOP_GRACE_S)
    log.debug("stop_step", step="drained", writes_left=parts.scheduler.reporter.queued(),
              kopf_stopped=operator.done())
    for part in (draining, operator):
        part.cancel()
    await asyncio.gather(draining, operator, return_exceptions=True)
    for probe in probes:
        probe.cancel()
    await asyncio.gather(*tasks, *probes, return_exceptions=True)
    # Nothing acts any more: the next leader need not wait for the Lease to run out.
    await parts.leadership.release()
