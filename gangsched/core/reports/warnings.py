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
from gangsched.core.view import ClusterView

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
    """The groups that run or are admitted, by UID: one that turns so says it once."""
    runtime_told: Mapping[str, str]
    moments: tuple[float, ...]


def object_events(view: ClusterView, actions: Sequence[Action],
                  lone: Sequence[tuple[PodKey, str]], state: State, now: float,
                  gap_s: float, repeat_s: float) -> ObjectEvents:
    """``actions`` (group and queue writes), each marked when its Event is due, then the
    Events of unreadable runtimes not told yet (``lone``: of pods in no PodGroup).

    One pass over thousands of groups every full cycle: a group's memory is kept only
    while it has something to say, and only the actions whose Event is due are copied.
    """
    groups = view.groups
    warnings: list[tuple[str, str, str]] = []
    owner: dict[str, int] = {}
    """The action whose Event each warning is."""
    due: list[int] = []
    phases: dict[GangKey, tuple[str, str]] = {}
    problems: dict[str, str] = {}
    told_as: dict[str, Action] = {}
    before = state.phases
    for index, action in enumerate(actions):
        if type(action) is WriteGroupStatus:
            key, status = action.group, action.status
            if status.phase is Phase.RUNNING or status.phase is Phase.INQUEUE:
                phases[key] = phase = (groups[key].uid, status.phase)
                if before.get(key) != phase:
                    due.append(index)
            elif (warning := warning_of(status)) is not None:
                uid = groups[key].uid
                owner[oid := _group_id(key, uid)] = index
                warnings.append((oid, uid, warning))
            if status.runtime_problem is not None:
                problems[oid := _group_id(key, groups[key].uid)] = status.runtime_problem
                told_as[oid] = TellGroupRuntimeProblem(key, status.runtime_problem)
        elif isinstance(action, MarkGroupInvalid):
            group = groups[action.group]
            owner[oid := _group_id(action.group, group.uid)] = index
            warnings.append((oid, group.uid, invalid_message(action.error, group.error)))
        elif isinstance(action, WriteQueueStatus) and action.status.problem is not None:
            owner[oid := f"queue/{action.queue}"] = index
            warnings.append((oid, "", action.status.problem_message))
    pods = view.pods
    for pod, problem in lone:
        record = pods.get(pod)
        if record is not None:
            problems[oid := f"pod/{record.uid or pod}"] = problem
            told_as[oid] = TellRuntimeProblem(pod, problem)
    said = warnings_due(state.warned, warnings, now, gap_s, repeat_s)
    told, new = told_once(state.runtime_told, problems)
    marked = list(actions)
    for index in (*due, *(owner[oid] for oid in said.due)):
        marked[index] = _with_event(marked[index])
    marked.extend(told_as[oid] for oid in told_as if oid in new)
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


def _with_event(action: Action) -> Action:
    if isinstance(action, (WriteGroupStatus, MarkGroupInvalid, WriteQueueStatus)):
        return replace(action, event=True)
    return action
