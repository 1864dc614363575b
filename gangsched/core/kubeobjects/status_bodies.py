"""PodGroup and Queue status: the verdict on a group, and the body each API expects, built once.

:func:`group_status` decides one ``GroupStatus`` (phase, member counts, reason,
message) from the group's members and the cycle's verdict; :func:`status_body`
builds the whole status of every flavour from that one value, and is the only
place a PodGroup's status body is made (:func:`invalid_body` for a group that
cannot be read at all). :func:`queue_status_body` is the one place a Queue's
status body is made.

Operators read these fields: Kubeflow's training-operator waits for a Volcano
PodGroup's ``phase: Inqueue`` before it creates pods, dashboards read
scheduler-plugins' counts. So each flavour gets its own shape and phase
names, from the same ``GroupStatus``. Pure: the time is a parameter.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from gangsched.core.model.objects import Flavor, GroupSpec, MemberCounts, NodeName, PodKey
from gangsched.core.model.resources import Resources, format_amount


class Phase(StrEnum):
    PENDING = "Pending"
    INQUEUE = "Inqueue"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNSCHEDULABLE = "Unschedulable"

    @property
    def finished(self) -> bool:
        return self in (Phase.SUCCEEDED, Phase.FAILED)


FINISHED_PHASES = frozenset({"Succeeded", "Failed", "Completed", "Finished"})
"""Status phases that mean a group's job is over, in any flavour: ours, Volcano's
(``Completed``) and scheduler-plugins' (``Finished``, ``Failed``)."""


@dataclass(frozen=True, slots=True)
class GroupStatus:
    """The whole truth a status write says of a group, in every flavour's shape alike."""

    phase: Phase
    counts: MemberCounts
    reason: str
    message: str
    observed_generation: int = 0
    """The group's ``metadata.generation`` this verdict was reached on."""
    estimated_start: str | None = None
    """When it is expected to start, RFC 3339, or ``Unknown``; None once it does not wait."""
    runtime_problem: str | None = None
    """Why its expected runtime (or a member's) could not be read: it counts as unknown."""
    min_member: int = 0
    """The group's minMember (0: not known), which Volcano's phase names are relative to."""


def group_status(
    spec: GroupSpec,
    counts: MemberCounts,
    *,
    admitted: bool,
    waiting_reason: str | None,
    waited_seconds: float,
    binding: bool = False,
    holding: str | None = None,
    estimated_start: str | None = None,
    runtime_problem: str | None = None,
) -> GroupStatus:
    """The phase a group is in and why, from its members and the last cycle's verdict.

    ``binding``: this cycle placed the gang and its binds are under way; its
    members are not counted as placed until the watch confirms them.

    ``holding``: the gang lost members while it ran and holds their room for
    their replacements; it still runs, one short, and says so.

    A group that outlived ``scheduleTimeoutSeconds`` without being placed turns
    Unschedulable but keeps waiting: the timeout tells people, it does not
    give up on their job.
    """
    phase, reason, message = _verdict(spec, counts, admitted=admitted,
                                      waiting_reason=waiting_reason,
                                      waited_seconds=waited_seconds, binding=binding,
                                      holding=holding)
    waits = phase in (Phase.PENDING, Phase.INQUEUE, Phase.UNSCHEDULABLE) and reason != "Binding"
    return GroupStatus(phase, counts, reason, message, spec.generation,
                       estimated_start if waits else None, runtime_problem, spec.min_member)


def _verdict(
    spec: GroupSpec,
    counts: MemberCounts,
    *,
    admitted: bool,
    waiting_reason: str | None,
    waited_seconds: float,
    binding: bool,
    holding: str | None,
) -> tuple[Phase, str, str]:
    live = counts.scheduled  # non-terminal members with a node
    done = counts.succeeded + counts.failed
    total = counts.pending + live + done
    if total > 0 and counts.pending == 0 and live == 0 and done >= spec.min_member:
        if counts.failed and counts.succeeded < spec.min_member:
            return Phase.FAILED, "MembersFailed", f"{counts.failed} of {total} members failed"
        return (Phase.SUCCEEDED, "MembersSucceeded",
                f"{counts.succeeded} of {total} members succeeded")
    if live + counts.succeeded >= spec.min_member and live > 0:
        return (Phase.RUNNING, "GangScheduled",
                f"{live} members placed, minMember {spec.min_member}")
    if holding and live > 0:
        return (Phase.RUNNING, "ReplacementHeld",
                f"{live} of minMember {spec.min_member} members placed; {holding}")
    if binding:
        return Phase.INQUEUE, "Binding", "members placed, binding"
    if waiting_reason and spec.timeout_seconds is not None and (
        waited_seconds >= spec.timeout_seconds
    ):
        return (Phase.UNSCHEDULABLE, "ScheduleTimeout",
                f"not placed within {spec.timeout_seconds}s: {waiting_reason}")
    if admitted:
        if waiting_reason:
            return Phase.INQUEUE, "Unschedulable", waiting_reason
        return Phase.INQUEUE, "Admitted", f"admitted; {live} of {spec.min_member} members placed"
    if waiting_reason:
        return Phase.PENDING, "Unschedulable", waiting_reason
    return Phase.PENDING, "Waiting", "waiting for its members"


MESSAGE_LIMIT = 1024
TRANSITION_ID = "gangsched"

COSCHEDULING_PHASE = {
    Phase.PENDING: "Pending",
    Phase.INQUEUE: "Scheduling",
    Phase.RUNNING: "Running",
    Phase.SUCCEEDED: "Finished",
    Phase.FAILED: "Failed",
    Phase.UNSCHEDULABLE: "Pending",
}
VOLCANO_PHASE = {
    Phase.PENDING: "Pending",
    Phase.INQUEUE: "Inqueue",
    Phase.RUNNING: "Running",
    Phase.SUCCEEDED: "Completed",
    Phase.FAILED: "Completed",
    Phase.UNSCHEDULABLE: "Pending",
}
VOLCANO_PARTLY_RUNNING = "Unknown"
"""Volcano's phase for a group some of whose members run, fewer than its minMember."""
QUIET_REASONS = frozenset({"Waiting", "Admitted"})
"""Reasons that report progress, not a problem: no Unschedulable condition for them."""
NATIVE_SCHEDULED = "PodGroupInitiallyScheduled"
"""The one condition kube-scheduler writes on a native PodGroup; True is for good."""
NATIVE_PLACED_PHASES = frozenset({Phase.RUNNING, Phase.SUCCEEDED, Phase.FAILED})


def transition_time(
    previous: Sequence[Mapping[str, Any]], type_: str, status: str, now: str
) -> str:
    """Keep lastTransitionTime while a condition's status stays the same."""
    for condition in previous:
        if condition.get("type") == type_ and condition.get("status") == status:
            return str(condition.get("lastTransitionTime") or now)
    return now


def status_body(
    flavor: Flavor,
    status: GroupStatus,
    *,
    observed_generation: int | None = None,
    previous_conditions: Sequence[Mapping[str, Any]],
    now: str,
) -> dict[str, Any]:
    """The whole status of the group in its flavour's shape, from one verdict.

    ``observed_generation`` defaults to the verdict's; ``previous_conditions``
    keep their transition times while their status stays.
    """
    if observed_generation is None:
        observed_generation = status.observed_generation
    counts = status.counts
    message = status.message[:MESSAGE_LIMIT]
    if flavor is Flavor.NATIVE:
        return native_body(status, observed_generation, previous_conditions, now)
    if flavor is Flavor.GANGSCHED:
        scheduled = "True" if status.phase in (Phase.RUNNING, Phase.SUCCEEDED, Phase.FAILED) \
            else "False"
        return {
            "phase": status.phase.value,
            "scheduled": counts.scheduled + counts.succeeded + counts.failed,
            "running": counts.running,
            "succeeded": counts.succeeded,
            "failed": counts.failed,
            "observedGeneration": observed_generation,
            # null, not left out: the merge patch must remove an estimate that no longer holds
            "estimatedStart": status.estimated_start,
            "conditions": [{
                "type": "Scheduled",
                "status": scheduled,
                "reason": status.reason,
                "message": message,
                "observedGeneration": observed_generation,
                "lastTransitionTime": transition_time(previous_conditions, "Scheduled",
                                                      scheduled, now),
            }, *_runtime_conditions(status, observed_generation, previous_conditions, now)],
        }
    if flavor is Flavor.COSCHEDULING:
        return {
            "phase": COSCHEDULING_PHASE[status.phase],
            "scheduled": counts.scheduled + counts.succeeded + counts.failed,
            "running": counts.running,
            "succeeded": counts.succeeded,
            "failed": counts.failed,
        }
    return {
        "phase": volcano_phase(status),
        "running": counts.running,
        "succeeded": counts.succeeded,
        "failed": counts.failed,
        "conditions": _volcano_conditions(status, message, previous_conditions, now),
    }


def volcano_phase(status: GroupStatus) -> str:
    """Volcano's name for the phase: ``Unknown`` while some members run but fewer than
    minMember (its API's word for that state), else the phase's own counterpart."""
    counts = status.counts
    placed = counts.scheduled + counts.succeeded
    if not status.phase.finished and 0 < placed < status.min_member:
        return VOLCANO_PARTLY_RUNNING
    return VOLCANO_PHASE[status.phase]


RUNTIME_CONDITION = "ExpectedRuntime"


def _runtime_conditions(
    status: GroupStatus, observed_generation: int,
    previous: Sequence[Mapping[str, Any]], now: str,
) -> list[dict[str, Any]]:
    """``ExpectedRuntime=False`` while a stated runtime cannot be read, none otherwise:
    the estimated starts that depend on it are unknown, and the author should know why."""
    if status.runtime_problem is None:
        return []
    return [{
        "type": RUNTIME_CONDITION, "status": "False", "reason": "InvalidRuntime",
        "message": status.runtime_problem[:MESSAGE_LIMIT],
        "observedGeneration": observed_generation,
        "lastTransitionTime": transition_time(previous, RUNTIME_CONDITION, "False", now),
    }]


def _volcano_conditions(
    status: GroupStatus, message: str, previous: Sequence[Mapping[str, Any]], now: str
) -> list[dict[str, Any]]:
    """Always the whole list, empty included.

    Volcano's CRD has no status subresource, so its status is merge-patched in
    place, and a patch that left ``conditions`` out would keep the
    ``Unschedulable`` written while the gang waited on a group that now runs.
    """
    waiting = status.phase in (Phase.PENDING, Phase.UNSCHEDULABLE, Phase.INQUEUE)
    if waiting and status.reason not in QUIET_REASONS:
        type_, reason = "Unschedulable", "NotEnoughResources"
    elif status.phase in (Phase.RUNNING, Phase.SUCCEEDED, Phase.FAILED):
        type_, reason = "Scheduled", status.reason
    else:
        return []
    return [{
        "type": type_,
        "status": "True",
        "reason": reason,
        "message": message,
        "transitionID": TRANSITION_ID,
        "lastTransitionTime": transition_time(previous, type_, "True", now),
    }]


def native_body(
    status: GroupStatus,
    observed_generation: int,
    previous_conditions: Sequence[Mapping[str, Any]],
    now: str,
) -> dict[str, Any]:
    """A native PodGroup's status in kube-scheduler's words.

    ``PodGroupInitiallyScheduled`` turns True (reason ``Scheduled``) once the
    gang is placed and, as kube-scheduler keeps it, never goes back to False;
    until then it is False with reason ``Unschedulable`` and our one-line
    reason as the message. A group that only waits for its members gets no
    condition yet, as kube-scheduler writes none before it tries. Conditions
    of other types (``DisruptionTarget``) are someone else's and are kept.
    """
    others = [dict(c) for c in previous_conditions if c.get("type") != NATIVE_SCHEDULED]
    earlier = next((c for c in previous_conditions if c.get("type") == NATIVE_SCHEDULED), None)
    placed = status.phase in NATIVE_PLACED_PHASES or status.reason == "Binding"
    if earlier is not None and earlier.get("status") == "True":
        return {"conditions": [*others, dict(earlier)]}
    if placed:
        condition = {"status": "True", "reason": "Scheduled",
                     "message": status.message[:MESSAGE_LIMIT]}
    elif status.reason in QUIET_REASONS:
        return {"conditions": others}
    else:
        condition = {"status": "False", "reason": "Unschedulable",
                     "message": status.message[:MESSAGE_LIMIT]}
    return {"conditions": [*others, {
        "type": NATIVE_SCHEDULED,
        **condition,
        "observedGeneration": observed_generation,
        "lastTransitionTime": transition_time(previous_conditions, NATIVE_SCHEDULED,
                                              condition["status"], now),
    }]}


def invalid_body(flavor: Flavor, error: str, now: str) -> dict[str, Any]:
    """An invalid group stays Pending and says why where its API has room for it.

    scheduler-plugins' status has no conditions: there only the Event says why.
    """
    message = error[:MESSAGE_LIMIT]
    if flavor is Flavor.NATIVE:
        return {"conditions": [{
            "type": NATIVE_SCHEDULED, "status": "False", "reason": "SchedulerError",
            "message": message, "observedGeneration": 0, "lastTransitionTime": now,
        }]}
    body: dict[str, Any] = {"phase": "Pending"}
    if flavor is Flavor.GANGSCHED:
        body["conditions"] = [{
            "type": "Scheduled", "status": "False", "reason": "InvalidSpec",
            "message": message, "observedGeneration": 0, "lastTransitionTime": now,
        }]
    elif flavor is Flavor.VOLCANO:
        body["conditions"] = [{
            "type": "Unschedulable", "status": "True", "reason": "InvalidSpec",
            "message": message, "transitionID": TRANSITION_ID, "lastTransitionTime": now,
        }]
    return body


@dataclass(frozen=True, slots=True)
class QueueStatus:
    """The whole truth a Queue's status says: what it holds, its gangs, and its conditions."""

    allocated: Resources
    pending: int
    running: int
    open: bool = True
    error: str | None = None
    """What of the spec could not be read, when something could not."""
    problem: str | None = None
    """Why the queue has no place in the hierarchy, when it has none: the code of its
    ``QueueInvalid`` reason (core.queues.hierarchy)."""
    problem_message: str = ""
    """That reason, rendered."""


def queue_conditions_current(
    is_open: bool, error: str | None, conditions: Sequence[Mapping[str, Any]],
    problem: str | None = None,
) -> bool:
    """Whether a Queue's conditions as read say what its spec does (see
    :func:`queue_status_body`): its ``Open`` condition, and ``Invalid`` only while the
    spec has a part that cannot be read or the queue no place in the hierarchy, with
    the reason that says which."""
    by_type = {c.get("type"): c for c in conditions}
    invalid = by_type.get("Invalid")
    wanted = _invalid_reason(error, problem)
    return ((by_type.get("Open") or {}).get("status") == ("True" if is_open else "False")
            and (invalid or {}).get("reason") == wanted)


def _invalid_reason(error: str | None, problem: str | None) -> str | None:
    if problem is not None:
        return problem
    return "InvalidSpec" if error is not None else None


def queue_status_body(
    status: QueueStatus, previous_conditions: Sequence[Mapping[str, Any]], now: str,
    *, counts: bool = True, shown: Collection[str] = (),
) -> dict[str, Any]:
    """The Queue's whole status, conditions included, so a merge patch leaves nothing stale:
    a resource of ``allocated`` the status ``shown`` has and the queue no longer holds is
    written null, which removes it (a merge patch of a map keeps keys it does not name).

    ``Open`` says whether the queue admits new PodGroups (reason ``Open`` or
    ``Closed``); ``Invalid`` is there only while part of the spec is
    unreadable (reason ``InvalidSpec``) or the queue has no place in the
    hierarchy (the reason names the problem, e.g. ``ParentMissing``), and says
    why. A condition keeps its transition time while its status holds, so an
    unchanged queue gives an unchanged body and no write.
    """
    if status.open:
        opened = ("True", "Open", "admits new PodGroups")
    else:
        opened = ("False", "Closed",
                  "state is Closed: admits no new PodGroups; admitted ones keep their place")
    conditions = [("Open", *opened)]
    reason = _invalid_reason(status.error, status.problem)
    if reason is not None:
        said = [status.problem_message] if status.problem is not None else []
        if status.error:
            said.append(f"left out as unreadable: {status.error}")
        conditions.append(("Invalid", "True", reason, "; ".join(said)[:MESSAGE_LIMIT]))
    body: dict[str, Any] = {"conditions": [{
        "type": type_, "status": value, "reason": reason, "message": message,
        "lastTransitionTime": transition_time(previous_conditions, type_, value, now),
    } for type_, value, reason, message in conditions]}
    if counts:  # else the merge patch leaves the counts another scheduler wrote
        allocated: dict[str, str | None] = dict.fromkeys(shown)
        allocated.update((name, format_amount(name, amount))
                         for name, amount in status.allocated.items() if amount)
        body.update(allocated=allocated,
                    pending=status.pending, running=status.running)
    return body


EVENT_MESSAGE_LIMIT = 1024
"""Kubernetes caps an Event's message at 1 KiB."""


def scheduled_message(
    bound: list[tuple[PodKey, NodeName]], where: str = ""
) -> str:
    """"Successfully assigned 3 pods: node-a: w-0, w-1; node-b: w-2", cut to an Event's size;
    ``where`` says the Topology level a gang landed in ("… 16 pods in rack r1: …")."""
    by_node: dict[NodeName, list[str]] = {}
    for pod, node in sorted(bound):
        by_node.setdefault(node, []).append(pod.split("/", 1)[1])
    text = (f"Successfully assigned {len(bound)} pod{'s' if len(bound) != 1 else ''}"
            f"{' ' if where else ''}{where}: "
            + "; ".join(f"{node}: {', '.join(pods)}" for node, pods in sorted(by_node.items())))
    return text if len(text) <= EVENT_MESSAGE_LIMIT else text[:EVENT_MESSAGE_LIMIT - 1] + "…"
