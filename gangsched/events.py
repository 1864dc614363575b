"""Events about pods and PodGroups, posted through the dispatcher.

kube-scheduler's habits, kept: ``Scheduled`` where a pod went,
``FailedScheduling`` while it waits, and a PodGroup's or Queue's warnings (when
the report plan says they are due, so a pod that waits an hour does not cost an
Event a cycle),
``Preempted``/``Preempting`` naming the other side. Each Event is keyed by its
object's UID, so an object created again under an old name gets its first Event
at once.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from kubernetes_asyncio import client

from gangsched.binder import FIELD_MANAGER
from gangsched.core.kubeobjects.composites import COMPOSITE_API, COMPOSITE_PREFIX
from gangsched.core.kubeobjects.status_bodies import EVENT_MESSAGE_LIMIT
from gangsched.core.model.objects import GangKey, PodKey, QueueName
from gangsched.dispatcher import Answer, Call, Dispatcher, ObjectId, Rank, answer_of
from gangsched.mirror import GroupRecord, PodRecord

COMPONENT = "gangsched"


def now_iso() -> str:
    """The time as the API writes it (whole seconds): asked once per group per cycle."""
    return _iso_second(int(time.time()))


@functools.lru_cache(maxsize=1)
def _iso_second(second: int) -> str:
    return datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def object_id(uid: str, kind: str, key: str) -> ObjectId:
    """What is remembered of an object is keyed by its UID, not its name.

    A PodGroup (or pod) deleted and created again under the same name is a
    new object: what was written for the old one must not make the new one's
    look written already. Without a UID (a pod the mirror could not read) the
    name stands in, under a prefix no UID takes.
    """
    return uid or f"{kind}/{key}"


class Events:
    def __init__(self, core: client.CoreV1Api, dispatcher: Dispatcher) -> None:
        self._core = core
        self._dispatcher = dispatcher

    def post(
        self,
        involved: Mapping[str, str],
        *,
        kind: str,
        reason: str,
        message: str,
        type_: str = "Normal",
    ) -> None:
        """Post an Event about ``involved``, keyed by its UID and reason: the dispatcher
        coalesces two of one reason asked before the first went out."""
        namespace = involved.get("namespace", "default")
        key = object_id(involved.get("uid", ""), kind,
                               f"{namespace}/{involved['name']}")
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
            "count": 1,
        }
        self._dispatcher.submit(Call(
            (key, f"event/{reason}"), Rank.EVENT,
            f"event {reason} {namespace}/{involved['name']}",
            functools.partial(self._post_event, namespace, body),
        ))

    async def _post_event(self, namespace: str, body: Mapping[str, Any]) -> Answer:
        stamp = now_iso()  # when it goes out, not when it was asked for
        return await answer_of(self._core.create_namespaced_event(
            namespace, {**body, "firstTimestamp": stamp, "lastTimestamp": stamp},
            field_manager=FIELD_MANAGER, _preload_content=False))

    def preempted(
        self,
        preemptor: GangKey,
        victims: Mapping[GangKey, tuple[PodKey, ...]],
        groups: Mapping[GangKey, GroupRecord],
        pods: Mapping[PodKey, PodRecord],
        preemptor_pods: tuple[PodKey, ...],
        reclaim_for: QueueName | None = None,
    ) -> None:
        """An Event on every victim pod and group naming the preemptor, and one on the
        preemptor (its PodGroup, else its pods) naming every victim; a reclaim says so,
        and for which queue."""
        names = ", ".join(sorted(victims))
        why = f" reclaiming for queue {reclaim_for}" if reclaim_for else ""
        for victim, members in victims.items():
            message = f"Preempted by gang {preemptor}{why}: evicted whole ({len(members)} pods)"
            for pod in members:
                record = pods.get(pod)
                if record is not None:
                    self.on_pod(record, "Preempted", message)
            group = groups.get(victim)
            if group is not None:
                self.on_group(group, "Preempted", message)
        message = (f"Reclaiming room queue {reclaim_for} deserves: evicting {len(victims)} "
                   f"gang(s) of queues above their deserved share: {names}" if reclaim_for else
                   f"Preempting {len(victims)} gang(s) of lower priority to make room: {names}")
        group = groups.get(preemptor)
        if group is not None:
            self.on_group(group, "Preempting", message)
            return
        for pod in preemptor_pods:
            record = pods.get(pod)
            if record is not None:
                self.on_pod(record, "Preempting", message)

    def on_pod(self, record: PodRecord, reason: str, message: str,
               type_: str = "Normal") -> None:
        namespace, name = record.pod.key.split("/", 1)
        self.post({"apiVersion": "v1", "namespace": namespace, "name": name, "uid": record.uid},
                   kind="Pod", reason=reason, message=message, type_=type_)

    def on_group(self, group: GroupRecord, reason: str, message: str,
                 type_: str = "Normal") -> None:
        """An Event on the group's object; a CompositePodGroup's gang has no PodGroup of its
        own, and its Events go on the CompositePodGroup."""
        namespace, name = group.key.split("/", 1)
        api_version, kind = group.flavor.value, "PodGroup"
        if group.spec is not None and group.spec.parts:
            api_version, kind = COMPOSITE_API, "CompositePodGroup"
            name = name.removeprefix(COMPOSITE_PREFIX)
        self.post({"apiVersion": api_version, "namespace": namespace, "name": name,
                   "uid": group.uid}, kind=kind, reason=reason, message=message, type_=type_)
