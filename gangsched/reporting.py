"""What users see of the scheduler's decisions: pod conditions, Events, group and queue status.

The report plan (:mod:`gangsched.core.reports.report_plan`) decides when a waiting
pod's condition and ``FailedScheduling`` Event are due; the reporter words the
writes, and the dispatcher (:mod:`gangsched.dispatcher`) sends them: it skips
what the API server already accepted, paces the Events of PodGroups and Queues
per object, retries failed status writes with backoff, and never stalls a
scheduling cycle. Everything is keyed by the
object's UID, so a pod or PodGroup created again under an old name starts
with nothing remembered.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import structlog
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from gangsched.binder import FIELD_MANAGER, MERGE_PATCH
from gangsched.core.actions import GANG_WAITING, GATED, UNSCHEDULABLE
from gangsched.core.kubeobjects.groups import Flavor, GroupStatus, Phase
from gangsched.core.kubeobjects.status_bodies import (
    QUIET_REASONS,
    QueueStatus,
    invalid_body,
    queue_status_body,
    scheduled_message,
    status_body,
)
from gangsched.core.model.objects import GangKey, NodeName, PodKey, QueueName
from gangsched.core.reasons import LevelHeld
from gangsched.dispatcher import Answer, Call, Dispatcher, ObjectId, Rank, answer_of
from gangsched.events import Events, now_iso
from gangsched.events import object_id as object_id_of
from gangsched.mirror import GroupRecord, PodRecord

log = structlog.get_logger(__name__)

def _group_id(group: GroupRecord) -> ObjectId:
    return object_id_of(group.uid, f"podgroup/{group.flavor.value}", group.key)


class PodConditions:
    """Writes pods' ``PodScheduled=False`` conditions through the dispatcher; a condition
    for a pod ``placed`` by the time it would go out is dropped."""

    def __init__(self, core: client.CoreV1Api, dispatcher: Dispatcher,
                 placed: Callable[[PodKey], bool]) -> None:
        self._core = core
        self._dispatcher = dispatcher
        self._placed = placed

    def ask(self, pod: PodKey, uid: str, message: str, version: str, reason: str) -> None:
        """The condition is paced per pod (``CONDITION_CHANGE_GAP_S``, the latest wins); a
        pod new under an old name has another UID, so its first condition goes at once."""
        self._dispatcher.submit(Call(
            (object_id_of(uid, "pod", pod), ""), Rank.STATUS, f"pod condition {pod}",
            functools.partial(self._write, pod, message, version, reason),
            state=(reason, message), retry=True,
        ))

    async def _write(self, pod: PodKey, message: str, version: str, reason: str) -> Answer:
        """Write one pod's condition, unless the pod is placed by now.

        The patch carries the resourceVersion the message was decided on, so it
        fails with 409 instead of overwriting ``PodScheduled=True`` if the pod
        was bound in between.
        """
        if self._placed(pod):
            return Answer(0, "placed meanwhile", sent=False)
        namespace, name = pod.split("/", 1)
        body: dict[str, Any] = {"status": {"conditions": [{
            "type": "PodScheduled",
            "status": "False",
            "reason": reason,
            "message": message,
            "lastTransitionTime": now_iso(),
        }]}}
        if version:
            body["metadata"] = {"resourceVersion": version}
        return await answer_of(self._core.patch_namespaced_pod_status(
            name, namespace, body, field_manager=FIELD_MANAGER, _preload_content=False))


class Reporter:
    """Writes what users see, through the dispatcher; status and conditions go ahead of Events.

    ``placed`` tells whether a pod is assumed or bound by now: a waiting
    "cannot be placed" write for such a pod is dropped rather than sent late.
    """

    def __init__(
        self,
        api: client.ApiClient,
        dispatcher: Dispatcher,
        placed: Callable[[PodKey], bool],
    ) -> None:
        core = client.CoreV1Api(api)
        self._custom = client.CustomObjectsApi(api)
        self._dispatcher = dispatcher
        self.events = Events(core, dispatcher)
        """Events about pods and PodGroups (``Scheduled``, ``FailedScheduling``, preemption)."""
        self._conditions = PodConditions(core, dispatcher, placed)
        self._asked: dict[ObjectId, Mapping[str, Any]] = {}
        """The status last asked for, per group and queue: an unchanged one is not asked
        again (the dispatcher retries one that failed until it is accepted)."""
        self._runtime_told: dict[ObjectId, str] = {}
        """The unreadable expected runtime last told of per group and lone pod, told once
        in an Event."""

    # ---- plumbing -------------------------------------------------------------
    def queued(self) -> int:
        """Calls waiting to go out (one per object at most)."""
        return len(self._dispatcher)

    async def drain(self) -> None:
        """Wait for the writes under way (used at shutdown and by tests)."""
        await self._dispatcher.drain()

    # ---- pods -------------------------------------------------------------------
    def pod_unschedulable(self, record: PodRecord, message: str, *, event: bool = True,
                          reason: str = UNSCHEDULABLE) -> None:
        """``PodScheduled=False/Unschedulable`` as kube-scheduler writes it, which autoscalers
        add nodes for, or ``GangWaiting`` for a pod that new nodes would not let run
        (core.asking); ``event``: a ``FailedScheduling`` Event is due too (the report plan
        says when)."""
        self._unschedulable(record.pod.key, record.uid, record.scheduled_message, message,
                            record.resource_version, reason, event=event,
                            current_reason=record.scheduled_reason)

    def pod_gated(self, record: PodRecord, message: str) -> None:
        """``PodScheduled=False/SchedulingGated`` as kube-scheduler writes it, and no Event.

        Not ``Unschedulable``: cluster autoscalers would add nodes for a pod
        that waits for its gate, not for room.
        """
        self._unschedulable(record.pod.key, record.uid, record.scheduled_message, message,
                            record.resource_version, GATED,
                            current_reason=record.scheduled_reason)

    def pod_runtime_problem(self, record: PodRecord, problem: str) -> None:
        """A Warning Event when the expected runtime of a pod in no PodGroup cannot be read:
        it has no group whose status or Events could say so."""
        if self._runtime_news(object_id_of(record.uid, "pod", record.pod.key), problem):
            self.events.on_pod(record, "InvalidRuntime", problem, type_="Warning")

    def pod_invalid(self, pod: PodKey, error: str) -> None:
        """A pod of ours the core cannot read (a malformed quantity) waits, saying why: no
        node would help it."""
        self._unschedulable(pod, "", None, f"invalid pod: {error}", "", GANG_WAITING)

    def _unschedulable(
        self, pod: PodKey, uid: str, current: str | None, message: str, version: str,
        reason: str, *, event: bool = True, current_reason: str | None = None,
    ) -> None:
        """The condition goes when the report plan asks (the dispatcher coalesces, skips
        what was accepted and retries); a pod new under an old name has another UID, so
        nothing of the old one's is skipped."""
        namespace, name = pod.split("/", 1)
        if current != message or current_reason != reason:
            self._conditions.ask(pod, uid, message, version, reason)
        if reason != GATED and event:
            involved = {"apiVersion": "v1", "namespace": namespace, "name": name}
            if uid:
                involved["uid"] = uid
            self.events.post(involved, kind="Pod", reason="FailedScheduling", message=message,
                             type_="Warning")

    def pod_placed(self, pod: PodKey) -> None:
        """The pod is assumed. Nothing to undo here: its bind, keyed by the pod's UID as
        its condition is, replaces a condition still waiting, and a condition asked for
        later is dropped when it would go out (``placed``)."""

    def pod_scheduled(self, record: PodRecord, node: NodeName, gang: str,
                      event: bool = True) -> None:
        """A pod bound; ``event``: say where it went."""
        if event:
            self.events.on_pod(record, "Scheduled",
                            f"Successfully assigned {record.pod.key} to {node} with gang {gang}")

    def gang_scheduled(self, group: GroupRecord, bound: list[tuple[PodKey, NodeName]],
                       level: LevelHeld | None = None) -> None:
        """One Event on the PodGroup for the pods of a gang bound together: where each went,
        and in which level of its Topology."""
        self.events.on_group(group, "Scheduled", scheduled_message(
            bound, "" if level is None else level.text()))

    # ---- PodGroups --------------------------------------------------------------
    def group_status(self, group: GroupRecord, status: GroupStatus, observed: int) -> None:
        body = status_body(
            group.flavor, status, observed_generation=observed,
            previous_conditions=group.status.get("conditions") or [], now=now_iso(),
        )
        object_id = _group_id(group)
        self._tell_runtime_problem(group, object_id, status.runtime_problem)
        previous = self._asked.get(object_id)
        if previous == body:
            return
        self._asked[object_id] = body
        self._patch_group_status(group, object_id, body)
        old_phase = (previous or {}).get("phase")
        if status.phase in (Phase.UNSCHEDULABLE, Phase.PENDING) and (
            status.reason not in QUIET_REASONS
        ):
            self.events.on_group(group, status.reason, status.message, type_="Warning", paced=True)
        elif old_phase != body.get("phase") and status.phase in (Phase.RUNNING, Phase.INQUEUE):
            self.events.on_group(group, status.reason, status.message)

    def _tell_runtime_problem(self, group: GroupRecord, object_id: ObjectId,
                              problem: str | None) -> None:
        """A Warning Event when the group's (or a member's) expected runtime cannot be read:
        every flavour gets it, though only ours has a status condition for it."""
        if problem is None:
            self._runtime_told.pop(object_id, None)
        elif self._runtime_news(object_id, problem):
            self.events.on_group(group, "InvalidRuntime", problem, type_="Warning")

    def _runtime_news(self, object_id: ObjectId, problem: str) -> bool:
        """Whether the object's runtime problem is one not told yet, now remembered as told.

        Told once per problem, its Event is not paced: in the paced slot the
        object's waiting warning (a group's ``Unschedulable``), asked for in the same
        cycle, would replace it before it went out.
        """
        if self._runtime_told.get(object_id) == problem:
            return False
        self._runtime_told[object_id] = problem
        return True

    def _patch_group_status(self, group: GroupRecord, object_id: ObjectId,
                            body: Mapping[str, Any]) -> None:
        """Volcano's PodGroup CRD has no status subresource: its status is patched in place."""
        namespace, name = group.key.split("/", 1)
        patch = (
            self._custom.patch_namespaced_custom_object
            if group.flavor is Flavor.VOLCANO
            else self._custom.patch_namespaced_custom_object_status
        )
        self._dispatcher.submit(Call(
            (object_id, ""), Rank.STATUS, f"podgroup status {group.key}",
            lambda: answer_of(patch(
                group.flavor.group, group.flavor.version, namespace, "podgroups", name,
                {"status": body}, field_manager=FIELD_MANAGER, _content_type=MERGE_PATCH,
                _preload_content=False,
            )),
            state=body, retry=True,
        ))

    def retain(self, groups: Mapping[GangKey, GroupRecord], pods: Mapping[PodKey, Any]) -> None:
        """Drop what is remembered of deleted groups and pods, so memory follows the cluster."""
        live = {_group_id(g) for g in groups.values()}
        for object_id in [k for k in self._asked if not k.startswith("queue/")]:
            if object_id not in live:
                del self._asked[object_id]
        live.update(object_id_of(record.uid, "pod", key) for key, record in pods.items())
        for object_id in [k for k in self._runtime_told if k not in live]:
            del self._runtime_told[object_id]
        self._dispatcher.retain(lambda object_id: object_id in live
                                or object_id.startswith("queue/"))

    def group_invalid(self, group: GroupRecord, error: str | None = None) -> None:
        """An invalid PodGroup is reported on its own status and as an Event, and skipped.

        Once per distinct error, whatever the flavour: the scheduler calls this
        every cycle, and a status patch plus an Event each time would flood the
        API server. Volcano's status takes a condition as ours does;
        scheduler-plugins' has no place for one, so there the Event says why.
        """
        message = (error or group.error or "invalid")[:1024]
        object_id = _group_id(group)
        if self._asked.get(object_id) == {"invalid": message}:
            return
        self._asked[object_id] = {"invalid": message}
        self._patch_group_status(group, object_id,
                                 invalid_body(group.flavor, message, now_iso()))
        self.events.on_group(group, "InvalidSpec", message, type_="Warning", paced=True)

    # ---- Queues -------------------------------------------------------------------
    def queue_status(self, name: QueueName, status: QueueStatus,
                     previous_conditions: Sequence[Mapping[str, Any]], *,
                     counts: bool = True, shown: Collection[str] = ()) -> None:
        """The Queue's whole status (only its conditions when ``counts`` is false: the
        merge patch then leaves the counts another scheduler wrote); skipped when it is
        what was last asked for."""
        object_id = f"queue/{name}"
        earlier = self._asked.get(object_id)
        body = queue_status_body(
            status, previous_conditions or (earlier or {}).get("conditions") or (), now_iso(),
            counts=counts, shown=shown)
        if earlier == body:
            return
        self._asked[object_id] = body
        if status.problem is not None:
            self._queue_invalid(name, body, previous_conditions)
        self._dispatcher.submit(Call(
            (object_id, ""), Rank.STATUS, f"queue status {name}",
            lambda: answer_of(self._custom.patch_cluster_custom_object_status(
                "scheduling.gangsched.io", "v1alpha1", "queues", name, {"status": body},
                field_manager=FIELD_MANAGER, _content_type=MERGE_PATCH, _preload_content=False,
            )),
            state=body, retry=True,
        ))

    def _queue_invalid(self, name: QueueName, body: Mapping[str, Any],
                       previous_conditions: Sequence[Mapping[str, Any]]) -> None:
        """A Warning Event on a queue that has just lost its place in the hierarchy (or
        whose problem changed): ``kubectl describe queue`` shows it, as does the status."""
        said = {c.get("type"): c.get("message") for c in previous_conditions}
        invalid = next(c for c in body["conditions"] if c["type"] == "Invalid")
        if said.get("Invalid") != invalid["message"]:
            self.events.post({"apiVersion": "scheduling.gangsched.io/v1alpha1", "name": name},
                             kind="Queue", reason=invalid["reason"], message=invalid["message"],
                             type_="Warning", paced=True)

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
