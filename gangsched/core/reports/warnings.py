"""When a PodGroup's or Queue's Event is due: the pacing of a waiting pod's, in one place.

A waiting PodGroup says why in a Warning Event (its status reason), an invalid
one why it is invalid, a Queue that lost its place in the queue tree why; a
group that turns Running or Inqueue says so in a Normal Event, and an
unreadable expected runtime is told once per problem. The report plan decides
when each is due, as it does for a waiting pod's ``FailedScheduling``: a
warning when it is new, no sooner than ``event_gap_s`` after the object's last
(the step wakes when one held back falls due), and again every
``pod_report_s`` while it holds. The writers send what they are handed and
pace nothing. All of it is remembered by UID: an object created again under
an old name starts with nothing said.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from gangsched.core.actions import (
    Action,
    MarkGroupInvalid,
    TellGroupRuntimeProblem,
    TellRuntimeProblem,
    WriteGroupStatus,
    WriteQueueStatus,
)
from gangsched.core.kubeobjects.status_bodies import QUIET_REASONS, GroupStatus, Phase
from gangsched.core.model.objects import GangKey, PodKey
from gangsched.core.state import State, Warned
from gangsched.core.view import ClusterView, GroupFacts

INVALID_MESSAGE_LIMIT = 1024
"""The longest reason of an invalid group a status or Event carries."""


@dataclass(frozen=True, slots=True)
class Said:
    """What of the objects' Events is due now, and what to remember for the next cycle."""

    warned: Mapping[str, Warned]
    due: frozenset[str]
    """The objects whose warning goes out now."""
    moments: tuple[float, ...]
    """When a warning held back by ``event_gap_s`` becomes due."""


def warnings_due(previous: Mapping[str, Warned], warnings: Iterable[tuple[str, str, str]],
                 now: float, gap_s: float, repeat_s: float) -> Said:
    """Of ``warnings`` (object, its UID, what it would say), those due now: a new one
    ``gap_s`` after the object's last, an unchanged one every ``repeat_s``.

    An object with no warning this cycle is forgotten: its next one is new.
    """
    warned: dict[str, Warned] = {}
    due: set[str] = set()
    moments: list[float] = []
    for key, uid, message in warnings:
        last = previous.get(key)
        if last is None or last.uid != uid:
            last = Warned(uid, "", float("-inf"))
        new = last.said != message
        if now - last.at >= (gap_s if new else repeat_s):
            last = Warned(uid, message, now)
            due.add(key)
        elif new:
            moments.append(last.at + gap_s)
        warned[key] = last
    return Said(warned, frozenset(due), tuple(moments))


def told_once(previous: Mapping[str, str], problems: Mapping[str, str]
              ) -> tuple[dict[str, str], frozenset[str]]:
    """The problems to remember, and the objects whose problem is not told yet: each
    is told once, and again only when it changes or comes back."""
    return dict(problems), frozenset(key for key, problem in problems.items()
                                     if previous.get(key) != problem)


@dataclass(frozen=True, slots=True)
class ObjectEvents:
    """The writes of groups and queues with their Events marked due, what is told of
    unreadable runtimes, and what the next plan needs to remember."""

    actions: list[Action]
    warned: Mapping[str, Warned]
    phases: Mapping[GangKey, tuple[str, str]]
    runtime_told: Mapping[str, str]
    moments: tuple[float, ...]


def object_events(view: ClusterView, actions: Sequence[Action],
                  lone: Sequence[tuple[PodKey, str]], state: State, now: float,
                  gap_s: float, repeat_s: float) -> ObjectEvents:
    """``actions`` (group and queue writes), each marked when its Event is due, then the
    Events of unreadable runtimes not told yet (``lone``: of pods in no PodGroup)."""
    groups = view.groups
    warnings: list[tuple[str, str, str]] = []
    phases: dict[GangKey, tuple[str, str]] = {}
    normal: set[int] = set()
    problems: dict[str, str] = {}
    for index, action in enumerate(actions):
        match action:
            case WriteGroupStatus(group=key, status=status):
                uid = groups[key].uid
                warning = warning_of(status)
                if warning is not None:
                    warnings.append((_group_id(key, uid), uid, warning))
                elif status.phase in (Phase.RUNNING, Phase.INQUEUE) and state.phases.get(
                        key) != (uid, status.phase.value):
                    normal.add(index)
                phases[key] = (uid, status.phase.value)
                if status.runtime_problem is not None:
                    problems[_group_id(key, uid)] = status.runtime_problem
            case MarkGroupInvalid(group=key, error=error):
                group = groups[key]
                warnings.append((_group_id(key, group.uid), group.uid,
                                 invalid_message(error, group.error)))
            case WriteQueueStatus(queue=queue, status=status) if status.problem is not None:
                warnings.append((f"queue/{queue}", "", status.problem_message))
            case _:
                pass
    pods = view.pods
    for pod, problem in lone:
        record = pods.get(pod)
        if record is not None:
            problems[f"pod/{record.uid or pod}"] = problem
    said = warnings_due(state.warned, warnings, now, gap_s, repeat_s)
    told, new = told_once(state.runtime_told, problems)
    marked: list[Action] = [
        _with_event(action, index in normal or _object_of(action, groups) in said.due)
        for index, action in enumerate(actions)]
    for pod, problem in lone:
        record = pods.get(pod)
        if record is not None and f"pod/{record.uid or pod}" in new:
            marked.append(TellRuntimeProblem(pod, problem))
    for action in actions:
        if isinstance(action, WriteGroupStatus) and action.status.runtime_problem is not None \
                and _group_id(action.group, groups[action.group].uid) in new:
            marked.append(TellGroupRuntimeProblem(action.group, action.status.runtime_problem))
    return ObjectEvents(marked, said.warned, phases, told, said.moments)


def warning_of(status: GroupStatus) -> str | None:
    """What a group's waiting warning says, or None when its status is no problem."""
    if status.phase in (Phase.UNSCHEDULABLE, Phase.PENDING) and (
            status.reason not in QUIET_REASONS):
        return f"{status.reason}: {status.message}"
    return None


def invalid_message(error: str | None, group_error: str | None) -> str:
    """Why a group is invalid, as its status and Event say it."""
    return (error or group_error or "invalid")[:INVALID_MESSAGE_LIMIT]


def _group_id(key: GangKey, uid: str) -> str:
    return f"podgroup/{uid or key}"


def _object_of(action: Action, groups: Mapping[GangKey, GroupFacts]) -> str | None:
    match action:
        case WriteGroupStatus(group=key) | MarkGroupInvalid(group=key):
            return _group_id(key, groups[key].uid)
        case WriteQueueStatus(queue=queue):
            return f"queue/{queue}"
        case _:
            return None


def _with_event(action: Action, due: bool) -> Action:
    if not due or not isinstance(action, (WriteGroupStatus, MarkGroupInvalid,
                                          WriteQueueStatus)):
        return action
    return replace(action, event=True)
