"""What users see of the scheduler's decisions: pod conditions, Events, group and queue status.

Every write is skipped when it would change nothing, and ``FailedScheduling``
Events are rate-limited per pod: a gang that waits an hour must not write an
Event every cycle. Writes go out on background tasks so a slow API server
never stalls a scheduling cycle; failures are logged and retried by the next
change, never raised into the cycle.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import aiohttp
import structlog
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from gangsched.binder import FIELD_MANAGER
from gangsched.core.groups import Flavor, GroupStatus, Phase
from gangsched.core.model import GangKey, NodeName, PodKey, QueueName
from gangsched.core.resources import Resources, format_amount
from gangsched.core.status_bodies import (
    EVENT_MESSAGE_LIMIT,
    QUIET_REASONS,
    invalid_body,
    scheduled_message,
    status_body,
)
from gangsched.mirror import GroupRecord, PodRecord
from gangsched.writequeue import WriteQueue

log = structlog.get_logger(__name__)

EVENT_INTERVAL_S = 60.0
"""An unchanged message is not sent again as an Event within this time."""
EVENT_CHANGE_GAP_S = 10.0
"""A changed message waits this long after the object's last Event: a gang still being
created changes its reason with every pod, and must not cost an Event each time."""
CONDITION_CHANGE_GAP_S = 2.0
"""The least time between two rewrites of one pod's condition; the latest wins."""
MERGE_PATCH = "application/merge-patch+json"
COMPONENT = "gangsched"


def _now_iso() -> str:
    """The time as the API writes it (whole seconds): asked once per group per cycle."""
    return _iso_second(int(time.time()))


@functools.lru_cache(maxsize=1)
def _iso_second(second: int) -> str:
    return datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _written_key(group: GroupRecord) -> str:
    """What is remembered of a group is keyed by its UID, not its name.

    A PodGroup deleted and created again under the same name (a resubmitted
    job) is a new object with no status: the status written for the old one
    must not make the new one's look written already.
    """
    return f"{group.flavor.value}/{group.key}/{group.uid}"


def _quantities(resources: Resources) -> dict[str, str]:
    return {name: format_amount(name, amount) for name, amount in resources.items()}


async def _no_wait() -> None:
    return None


class Reporter:
    """Writes what users see; status and conditions go ahead of Events.

    ``placed`` tells whether a pod is assumed or bound by now: a queued
    "cannot be placed" write for such a pod is dropped rather than sent late.
    """

    def __init__(
        self,
        api: client.ApiClient,
        placed: Callable[[PodKey], bool],
        concurrency: int = 16,
        wait_turn: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._core = client.CoreV1Api(api)
        self._custom = client.CustomObjectsApi(api)
        self._placed = placed
        # While binds wait for a slot, the binds go out before any status or
        # Event; what is queued meanwhile coalesces, latest wins.
        self._wait_turn = wait_turn or _no_wait
        self._write_slots = asyncio.Semaphore(concurrency)
        self._writes = WriteQueue(self._send, concurrency, self._wait_turn)
        self._events = WriteQueue(self._send, max(1, concurrency // 4), self._wait_turn)
        self._tasks: set[asyncio.Task[None]] = set()
        self._last_event: dict[tuple[str, str], tuple[str, float]] = {}
        self._written_status: dict[str, Mapping[str, Any]] = {}
        self._pod_messages: dict[PodKey, str] = {}
        self._pod_wanted: dict[PodKey, tuple[str, str, str]] = {}
        self._pod_writing: set[PodKey] = set()
        self._loop_time: Callable[[], float] = asyncio.get_event_loop().time

    # ---- plumbing -------------------------------------------------------------
    def queued(self) -> int:
        """Writes waiting to go out (one per object at most)."""
        return len(self._writes) + len(self._events)

    def _track(self, task: asyncio.Task[None]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, what: str, make: Callable[[], Awaitable[Any]]) -> bool:
        """One write; a 404 (the object is gone) or 409 (it changed under us) is not a failure."""
        try:
            result = await make()
        except ApiException as error:
            status, detail = error.status, str(error.reason)
        except (TimeoutError, aiohttp.ClientError) as error:
            log.warning("report_failed", what=what, error=str(error))
            return False
        else:
            if not isinstance(result, aiohttp.ClientResponse):
                return True
            status = result.status
            detail = "" if status < 300 else await result.text()
            result.release()
            if status < 300:
                return True
        if status not in (404, 409):
            log.warning("report_failed", what=what, status=status, detail=detail[:200])
        return False

    async def drain(self) -> None:
        """Wait for the writes under way (used at shutdown and by tests)."""
        while self._tasks or self._writes or self._events:
            await asyncio.gather(*list(self._tasks), self._writes.drain(), self._events.drain(),
                                 return_exceptions=True)

    def _event_due(self, key: tuple[str, str], message: str) -> bool:
        """Whether an Event with this message may go out for the object now.

        The same message at most every ``EVENT_INTERVAL_S``; a new one only
        ``EVENT_CHANGE_GAP_S`` after the last, so a reason that changes every
        cycle costs an Event every ten seconds, not one per cycle. Once it
        settles, the next cycle's call sends it.
        """
        now = self._loop_time()
        last = self._last_event.get(key)
        if last is not None:
            gap = EVENT_INTERVAL_S if last[0] == message else EVENT_CHANGE_GAP_S
            if now - last[1] < gap:
                return False
        self._last_event[key] = (message, now)
        return True

    def event(
        self,
        involved: Mapping[str, str],
        *,
        kind: str,
        reason: str,
        message: str,
        type_: str = "Normal",
    ) -> None:
        namespace = involved.get("namespace", "default")
        stamp = _now_iso()
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{involved['name']}.", "namespace": namespace},
            "involvedObject": {**involved, "kind": kind},
            "reason": reason,
            "message": message[:EVENT_MESSAGE_LIMIT],
            "type": type_,
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": COMPONENT,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        self._events.put(
            ("event", namespace, involved["name"], reason),
            f"event {reason}",
            lambda: self._core.create_namespaced_event(
                namespace, body, field_manager=FIELD_MANAGER, _preload_content=False),
        )

    # ---- pods -------------------------------------------------------------------
    def pod_unschedulable(self, record: PodRecord, message: str) -> None:
        """``PodScheduled=False/Unschedulable`` as kube-scheduler writes it: autoscalers read it."""
        self._unschedulable(record.pod.key, record.uid, record.scheduled_message, message,
                            record.resource_version)

    def pod_gated(self, record: PodRecord, message: str) -> None:
        """``PodScheduled=False/SchedulingGated`` as kube-scheduler writes it, and no Event.

        Not ``Unschedulable``: cluster autoscalers would add nodes for a pod
        that waits for its gate, not for room.
        """
        self._unschedulable(record.pod.key, record.uid, record.scheduled_message, message,
                            record.resource_version, reason="SchedulingGated")

    def pod_invalid(self, pod: PodKey, error: str) -> None:
        """A pod of ours the core cannot read (a malformed quantity) waits, saying why."""
        self._unschedulable(pod, "", None, f"invalid pod: {error}", "")

    def _unschedulable(
        self, pod: PodKey, uid: str, current: str | None, message: str, version: str,
        reason: str = "Unschedulable",
    ) -> None:
        namespace, name = pod.split("/", 1)
        if current != message and self._pod_messages.get(pod) != message:
            self._pod_messages[pod] = message
            self._pod_wanted[pod] = (message, version, reason)
            if pod not in self._pod_writing:
                self._pod_writing.add(pod)
                self._track(asyncio.create_task(self._write_condition(pod)))
        if reason == "Unschedulable" and self._event_due(("pod", pod), message):
            involved = {"apiVersion": "v1", "namespace": namespace, "name": name}
            if uid:
                involved["uid"] = uid
            self.event(involved, kind="Pod", reason="FailedScheduling", message=message,
                       type_="Warning")

    async def _write_condition(self, pod: PodKey) -> None:
        """Write the newest wanted condition of one pod; one writer per pod at a time.

        The patch carries the resourceVersion the message was decided on, so it
        fails with 409 instead of overwriting ``PodScheduled=True`` if the pod
        was bound in between; and it is not sent at all once the pod is placed.
        A write that fails is forgotten, so the next cycle writes it again.
        """
        namespace, name = pod.split("/", 1)
        try:
            while True:
                started = self._loop_time()
                await self._wait_turn()
                async with self._write_slots:
                    wanted = self._pod_wanted.pop(pod, None)
                    if wanted is None or self._placed(pod):
                        return
                    message, version, reason = wanted
                    body: dict[str, Any] = {"status": {"conditions": [{
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": reason,
                        "message": message,
                        "lastTransitionTime": _now_iso(),
                    }]}}
                    if version:
                        body["metadata"] = {"resourceVersion": version}
                    written = await self._send(
                        f"pod condition {pod}",
                        functools.partial(self._core.patch_namespaced_pod_status,
                                          name, namespace, body, field_manager=FIELD_MANAGER,
                                          _preload_content=False),
                    )
                if not written and self._pod_messages.get(pod) == message:
                    del self._pod_messages[pod]
                if pod in self._pod_wanted:  # changed again: the latest goes out, not each
                    await asyncio.sleep(max(0.0, started + CONDITION_CHANGE_GAP_S
                                            - self._loop_time()))
        finally:
            self._pod_writing.discard(pod)

    def pod_placed(self, pod: PodKey) -> None:
        """The pod is assumed: a condition still queued for it would arrive after its bind."""
        self._pod_wanted.pop(pod, None)
        self._pod_messages.pop(pod, None)

    def pod_scheduled(self, record: PodRecord, node: NodeName, gang: str,
                      event: bool = True) -> None:
        """A pod bound: what was said about it waiting is over; ``event``: say where it went."""
        self._pod_messages.pop(record.pod.key, None)
        self._last_event.pop(("pod", record.pod.key), None)
        if event:
            self._pod_event(record, "Scheduled",
                            f"Successfully assigned {record.pod.key} to {node} with gang {gang}")

    def gang_scheduled(self, group: GroupRecord, bound: list[tuple[PodKey, NodeName]]) -> None:
        """One Event on the PodGroup for the pods of a gang bound together: where each went."""
        self._group_event(group, "Scheduled", scheduled_message(bound))

    # ---- preemption ---------------------------------------------------------------
    def preempted(
        self,
        preemptor: GangKey,
        victims: Mapping[GangKey, tuple[PodKey, ...]],
        groups: Mapping[GangKey, GroupRecord],
        pods: Mapping[PodKey, PodRecord],
        preemptor_pods: tuple[PodKey, ...],
    ) -> None:
        """An Event on every victim pod and group naming the preemptor, and one on the
        preemptor (its PodGroup, else its pods) naming every victim."""
        names = ", ".join(sorted(victims))
        for victim, members in victims.items():
            message = f"Preempted by gang {preemptor}: evicted whole ({len(members)} pods)"
            for pod in members:
                record = pods.get(pod)
                if record is not None:
                    self._pod_event(record, "Preempted", message)
            group = groups.get(victim)
            if group is not None:
                self._group_event(group, "Preempted", message)
        message = f"Preempting {len(victims)} gang(s) of lower priority to make room: {names}"
        group = groups.get(preemptor)
        if group is not None:
            self._group_event(group, "Preempting", message)
            return
        for pod in preemptor_pods:
            record = pods.get(pod)
            if record is not None:
                self._pod_event(record, "Preempting", message)

    def _pod_event(self, record: PodRecord, reason: str, message: str) -> None:
        namespace, name = record.pod.key.split("/", 1)
        self.event({"apiVersion": "v1", "namespace": namespace, "name": name, "uid": record.uid},
                   kind="Pod", reason=reason, message=message)

    def _group_event(self, group: GroupRecord, reason: str, message: str,
                     type_: str = "Normal") -> None:
        namespace, name = group.key.split("/", 1)
        self.event({"apiVersion": group.flavor.value, "namespace": namespace, "name": name,
                    "uid": group.uid}, kind="PodGroup", reason=reason, message=message,
                   type_=type_)

    # ---- PodGroups --------------------------------------------------------------
    def group_status(self, group: GroupRecord, status: GroupStatus, observed: int) -> None:
        body = status_body(
            group.flavor, status, observed_generation=observed,
            previous_conditions=group.status.get("conditions") or [], now=_now_iso(),
        )
        key = _written_key(group)
        if self._written_status.get(key) == body:
            return
        previous = self._written_status.get(key)
        self._written_status[key] = body
        self._patch_group_status(group, body)
        old_phase = (previous or {}).get("phase")
        if status.phase in (Phase.UNSCHEDULABLE, Phase.PENDING) and (
            status.reason not in QUIET_REASONS
        ) and self._event_due(("podgroup", key), status.message):
            self._group_event(group, status.reason, status.message, type_="Warning")
        elif old_phase != body.get("phase") and status.phase in (Phase.RUNNING, Phase.INQUEUE):
            self._group_event(group, status.reason, status.message)

    def _patch_group_status(self, group: GroupRecord, body: Mapping[str, Any]) -> None:
        """Volcano's PodGroup CRD has no status subresource: its status is patched in place."""
        namespace, name = group.key.split("/", 1)
        patch = (
            self._custom.patch_namespaced_custom_object
            if group.flavor is Flavor.VOLCANO
            else self._custom.patch_namespaced_custom_object_status
        )
        self._writes.put(
            ("podgroup", group.flavor, group.key),
            f"podgroup status {group.key}",
            lambda: patch(
                group.flavor.group, group.flavor.version, namespace, "podgroups", name,
                {"status": body}, field_manager=FIELD_MANAGER, _content_type=MERGE_PATCH,
            ),
        )

    def retain(self, groups: Mapping[GangKey, GroupRecord], pods: Mapping[PodKey, Any]) -> None:
        """Drop what is remembered of deleted groups and pods, so memory follows the cluster."""
        live = {_written_key(g) for g in groups.values()}
        for key in [k for k in self._written_status if not k.startswith("queue/")]:
            if key not in live:
                del self._written_status[key]
        for pod in [p for p in self._pod_messages if p not in pods]:
            del self._pod_messages[pod]
        for event_key in list(self._last_event):
            kind, name = event_key
            if (kind == "pod" and name not in pods) or (kind == "podgroup" and name not in live):
                del self._last_event[event_key]

    def group_invalid(self, group: GroupRecord) -> None:
        """An invalid PodGroup is reported on its own status and as an Event, and skipped.

        Once per distinct error, whatever the flavour: the scheduler calls this
        every cycle, and a status patch plus an Event each time would flood the
        API server. Volcano's status takes a condition as ours does;
        scheduler-plugins' has no place for one, so there the Event says why.
        """
        message = (group.error or "invalid")[:1024]
        key = _written_key(group)
        if self._written_status.get(key) == {"invalid": message}:
            return
        self._written_status[key] = {"invalid": message}
        self._patch_group_status(group, invalid_body(group.flavor, message, _now_iso()))
        if self._event_due(("podgroup", key), message):
            self._group_event(group, "InvalidSpec", message, type_="Warning")

    # ---- Queues -------------------------------------------------------------------
    def queue_status(
        self, name: QueueName, allocated: Resources, pending: int, running: int
    ) -> None:
        body = {"allocated": _quantities(allocated), "pending": pending, "running": running}
        key = f"queue/{name}"
        if self._written_status.get(key) == body:
            return
        self._written_status[key] = body
        self._writes.put(
            ("queue", name),
            f"queue status {name}",
            lambda: self._custom.patch_cluster_custom_object_status(
                "scheduling.gangsched.io", "v1alpha1", "queues", name, {"status": body},
                field_manager=FIELD_MANAGER, _content_type=MERGE_PATCH,
            ),
        )

    async def ensure_default_queue(self) -> None:
        body = {
            "apiVersion": "scheduling.gangsched.io/v1alpha1",
            "kind": "Queue",
            "metadata": {"name": "default"},
            "spec": {"weight": 1, "state": "Open"},
        }
        with contextlib.suppress(ApiException):
            await self._custom.create_cluster_custom_object(
                "scheduling.gangsched.io", "v1alpha1", "queues", body,
                field_manager=FIELD_MANAGER,
            )
