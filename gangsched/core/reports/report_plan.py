"""What a cycle reports: pod conditions, PodGroup and Queue status, and when.

Every waiting pod says why it waits (``PodScheduled=False``, as
kube-scheduler writes it; autoscalers read it), every PodGroup says the whole
truth of its phase, counts and conditions, every Queue what it holds. Pure:
this plan decides when a waiting gang's reason is said again
(:func:`reported_reasons`: a reason whose figures alone moved waits
``figures_hold_s``) and how often a waiting pod is handed to the writers at
all (:func:`waiting_pods`), because thousands of waiting pods must not cost
thousands of calls every cycle. The writers skip what would change nothing.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from fractions import Fraction

from gangsched.core.actions import (
    Action,
    ForgetWritten,
    MarkGroupInvalid,
    MarkInvalid,
    MarkUnschedulable,
    WriteGroupStatus,
    WriteQueueStatus,
)
from gangsched.core.forecast import Estimate
from gangsched.core.kubeobjects.groups import Flavor, GroupStatus, MemberCounts, Phase, group_status
from gangsched.core.kubeobjects.status_bodies import QueueStatus
from gangsched.core.model.objects import GangKey, Pod, PodKey, QueueName, QueueSpec, solo_gang_key
from gangsched.core.model.resources import Resources
from gangsched.core.queues.fairness import dominant_share
from gangsched.core.queues.hierarchy import QueueTree, build_tree, deserved_shares
from gangsched.core.reasons import (
    AskingForNodes,
    AskingPaused,
    AwaitingVictims,
    BindBackoff,
    DevicesShort,
    DoesNotFit,
    GroupInvalid,
    GroupMissing,
    HeldForStarving,
    InSubGroup,
    NodePoolLimit,
    NodesComing,
    NoDomainHolds,
    NotReclaimable,
    Preempting,
    ProtectedByBudget,
    ProtectedByShare,
    Reason,
    ReservedByAdmitted,
    ShortOfMembers,
    Starving,
    TooBigToHold,
    WaitsForPreferred,
    code_of,
    render,
)
from gangsched.core.reports.warnings import object_events
from gangsched.core.stages.cycle import CycleResult, schedulable_total
from gangsched.core.stages.gangs import Gathered
from gangsched.core.state import PodReport, Reported, State, Warned
from gangsched.core.view import ClusterView, StepView

FORGET_EVERY = 100
"""Every so many full cycles the writers drop what they remember of deleted objects."""


@dataclass(frozen=True, slots=True)
class Pacing:
    figures_hold_s: float = 60.0
    """A waiting gang's reason whose figures alone moved is said again only this long
    after it was first said (see :func:`reported_reasons`)."""
    change_gap_s: float = 2.0
    """Any other new reason of a waiting gang is said no sooner than this after the last:
    a reason that changes at every cycle for a moment is said once it holds."""
    pod_report_s: float = 300.0
    """A waiting pod's unchanged reason is said again (its Event) this often."""
    event_gap_s: float = 10.0
    """A waiting pod's Event for a new reason goes no sooner than this after its last
    Event: a pod whose reason changes twice in a few seconds costs one Event, of the
    reason that holds. So do a PodGroup's and a Queue's warnings, which are said again
    every ``pod_report_s`` too (see :mod:`gangsched.core.reports.warnings`)."""


@dataclass(frozen=True, slots=True)
class ReportPlan:
    pod_reports: Mapping[PodKey, PodReport]
    """What each waiting pod was last reported with: the next plan's pacing."""
    actions: tuple[Action, ...]
    queues_served: frozenset[QueueName] = frozenset()
    """Queues with a gang of this scheduler now (see :func:`queue_statuses`)."""
    event_moments: tuple[float, ...] = ()
    """When an Event held back by ``event_gap_s`` becomes due: the step wakes then."""
    warned: Mapping[str, Warned] = field(default_factory=dict)
    phases: Mapping[GangKey, tuple[str, str]] = field(default_factory=dict)
    runtime_told: Mapping[str, str] = field(default_factory=dict)
    """What the next plan remembers of groups' and queues' Events (see ``State``)."""


def plan_reports(
    view: StepView,
    gathered: Gathered,
    result: CycleResult,
    reasons: Mapping[GangKey, str],
    *,
    waiting_since: Mapping[GangKey, float],
    previous: Mapping[PodKey, PodReport],
    now: float,
    pacing: Pacing,
    cycle: int,
    served_before: frozenset[QueueName] = frozenset(),
    estimates: Mapping[GangKey, Estimate] | None = None,
    state: State | None = None,
    asking: AbstractSet[GangKey] = frozenset(),
) -> ReportPlan:
    """Every report of one full cycle; ``reasons`` are the texts to report per gang;
    ``state`` says what was said before (its ``pod_reports`` are ``previous``), and the
    pods of the ``asking`` gangs ask for nodes (core.asking)."""
    cluster = view.cluster
    reports, actions, moments = waiting_pods(cluster, gathered, reasons, previous, now,
                                             pacing, asking)
    actions.extend(MarkInvalid(pod, error) for pod, error in view.bad_pods.items())
    problems, lone = runtime_problems(gathered)
    statuses, group_actions = group_statuses(cluster, gathered, result, reasons,
                                             waiting_since=waiting_since, now=now,
                                             estimates=estimates or {}, problems=problems)
    # A queue is served by the scheduler whose pods its gangs hold. A group only other
    # schedulers' pods name is no gang here (gather's ``theirs``); one with no pods yet is
    # a gang of every scheduler that reads its API, and must not make this one write its
    # counts over those of the one whose pods will come.
    served = frozenset(g.queue for g in gathered.gangs
                       if g.queue in cluster.queues and g.key in gathered.counts)
    group_actions.extend(queue_statuses(cluster, gathered, statuses,
                                        counted=served | served_before,
                                        settled=view.queues_settled))
    events = object_events(cluster, group_actions, lone, state or State(), now,
                           pacing.event_gap_s, pacing.pod_report_s)
    actions.extend(events.actions)
    if cycle % FORGET_EVERY == 0:
        actions.append(ForgetWritten())
    return ReportPlan(reports, tuple(actions), served, (*moments, *events.moments),
                      events.warned, events.phases, events.runtime_told)


def waiting_pods(
    view: ClusterView,
    gathered: Gathered,
    reasons: Mapping[GangKey, str],
    previous: Mapping[PodKey, PodReport],
    now: float,
    pacing: Pacing,
    asking: AbstractSet[GangKey] = frozenset(),
) -> tuple[dict[PodKey, PodReport], list[Action], list[float]]:
    """Each pending pod of a waiting gang, and each pod of a missing or invalid
    PodGroup (:func:`unplaceable_pods`), when due.

    Its Event is due when its reason is new (a new pod under the same name is new
    too), once ``event_gap_s`` have passed since its last Event (the step wakes then:
    the third thing returned), and again every ``pod_report_s`` while it is unchanged, as
    kube-scheduler retries an unschedulable pod within five minutes. Its condition is
    written at once, and again at any cycle its ``PodScheduled`` condition does not say
    the reason yet: a write refused (the pod changed meanwhile) or not seen yet is made
    good at the next cycle, whenever that is, and the writers skip a write already
    accepted. The pods of ``asking`` gangs say ``Unschedulable``, any other
    ``GangWaiting`` (or ``SchedulingGated``); a condition whose reason is not that yet
    is written again as one whose message is not.
    """
    waiting = [(pod.key, reason, bool(pod.gates), gang.key in asking)
               for gang in gathered.gangs
               if (reason := reasons.get(gang.key)) is not None for pod in gang.pending]
    reports: dict[PodKey, PodReport] = {}
    actions: list[Action] = []
    moments: list[float] = []
    for pod, reason, gated, asks in (*waiting, *unplaceable_pods(view, gathered)):
        record = view.pods.get(pod)
        if record is None:
            continue
        last = previous.get(pod)
        if last is None or last.uid != record.uid:
            last = PodReport(record.uid, reason, now, float("-inf"))
        elif last.reason != reason:
            last = replace(last, reason=reason, since=now)
        event = now - last.at >= (pacing.event_gap_s if last.said != reason
                                  else pacing.pod_report_s)
        if event:
            last = replace(last, at=now, said=reason)
        reports[pod] = last
        if last.said != reason:
            moments.append(last.at + pacing.event_gap_s)
        mark = MarkUnschedulable(pod, reason, gated=gated, event=event, asks_for_nodes=asks)
        if event or record.scheduled_message != reason or (
                record.scheduled_reason != mark.condition_reason):
            actions.append(mark)
    return reports, actions, moments


def unplaceable_pods(
    view: ClusterView, gathered: Gathered
) -> list[tuple[PodKey, str, bool, bool]]:
    """Pods no cycle can place, with why: their PodGroup is missing or invalid (no node
    would help them)."""
    told: list[tuple[PodKey, str, bool, bool]] = []
    for key, pods in gathered.orphans.items():
        group = view.groups.get(key)
        error = gathered.invalid.get(key) or (group.error if group is not None else None)
        message = render(GroupInvalid(key, error) if group is not None and error
                         else GroupMissing(key))
        told.extend((pod.key, message, False, False) for pod in pods)
    return told


def group_statuses(
    view: ClusterView,
    gathered: Gathered,
    result: CycleResult,
    reasons: Mapping[GangKey, str],
    *,
    waiting_since: Mapping[GangKey, float],
    now: float,
    estimates: Mapping[GangKey, Estimate] | None = None,
    problems: Mapping[GangKey, str],
) -> tuple[dict[GangKey, GroupStatus], list[Action]]:
    """The whole status of every group this scheduler serves, and invalid groups marked;
    ``problems`` are the groups' unreadable runtimes (:func:`runtime_problems`)."""
    placed = {p.gang for p in result.placements}
    # A basic-policy group is no gang: its pods are, and the group says what
    # the first of them waits for, and is binding while any of them is.
    group_reasons = dict(reasons)
    for solo, owner in gathered.solo_of.items():
        if solo in reasons:
            group_reasons.setdefault(owner, reasons[solo])
        if solo in placed:
            placed = placed | {owner}
    statuses: dict[GangKey, GroupStatus] = {}
    actions: list[Action] = []
    for key, group in view.groups.items():
        if key in gathered.theirs:
            continue  # only another scheduler's pods name it: its status is that one's
        if group.spec is None:
            if group.flavor is not Flavor.NATIVE or key in gathered.orphans:
                actions.append(MarkGroupInvalid(key))
            continue
        if key in gathered.invalid:
            actions.append(MarkGroupInvalid(key, gathered.invalid[key]))
            continue
        # A PodGroup folded into a CompositePodGroup's gang says what that gang does.
        gang = group.spec.composite or key
        judged = view.groups[gang].spec if gang in view.groups else None
        counts = gathered.counts.get(gang)
        if counts is None and gang in gathered.finished:
            continue  # its pods are gone: the status it ended with stays
        if counts is None and group.flavor is Flavor.NATIVE:
            continue  # none of its pods is ours: kube-scheduler's group, not ours
        status = group_status(
            judged or group.spec,
            counts or MemberCounts(),
            admitted=gang in result.admitted,
            waiting_reason=group_reasons.get(gang),
            waited_seconds=now - waiting_since.get(gang, now),
            binding=gang in placed,
            holding=result.holding.get(gang),
            estimated_start=_estimate_text((estimates or {}).get(gang)),
            runtime_problem=group.spec.runtime_problem or problems.get(gang),
        )
        statuses[key] = status
        if not group.spec.parts:  # a composite's gang: its children's statuses say it
            actions.append(WriteGroupStatus(key, status, group.spec.generation))
    return statuses, actions


def _queue_status(
    tree: QueueTree, spec: QueueSpec, allocated: Resources, pending: int, running: int
) -> QueueStatus:
    problem = tree.invalid.get(spec.name)
    return QueueStatus(
        allocated, pending, running, open=spec.open, error=spec.error,
        problem=problem.problem if problem is not None else None,
        problem_message=render(problem) if problem is not None else "",
    )


def _estimate_text(estimate: Estimate | None) -> str | None:
    return None if estimate is None else estimate.text


def runtime_problems(gathered: Gathered
                     ) -> tuple[dict[GangKey, str], list[tuple[PodKey, str]]]:
    """In one pass over every member, those whose expected-runtime annotation could not
    be read: the first of each group, which its group's status tells of (a pod has no
    place for it; a pod of a basic-policy group is a gang of its own, its group tells
    all the same), and a pod in no PodGroup, told itself in an Event."""
    of_groups: dict[GangKey, str] = {}
    lone: list[tuple[PodKey, str]] = []
    for key, pod in _members(gathered):
        if pod.runtime_problem is None:
            continue
        group = gathered.solo_of.get(key)
        if group is None and key == solo_gang_key(pod.key):
            lone.append((pod.key, pod.runtime_problem))
        else:
            of_groups.setdefault(group or key, f"pod {pod.key}: {pod.runtime_problem}")
    return of_groups, lone


def _members(gathered: Gathered) -> Iterator[tuple[GangKey, Pod]]:
    """Every gang's pending and bound pods, with its key."""
    for gang in gathered.gangs:
        for pod in gang.pending:
            yield gang.key, pod
    for key, pods in gathered.bound_pods.items():
        for pod in pods:
            yield key, pod


def queue_statuses(
    view: ClusterView, gathered: Gathered, statuses: Mapping[GangKey, GroupStatus],
    *, counted: frozenset[QueueName] | None = None,
    settled: frozenset[QueueName] = frozenset(),
) -> list[Action]:
    """What each queue holds (its gangs' bound requests), how many gangs wait or run,
    its conditions, and its share of the schedulable cluster against its weight's.

    Counts go only to the ``counted`` queues (None: all), those this scheduler has
    gangs in or had at the last cycle; another queue gets its conditions alone, and
    only while they do not say its spec yet (not ``settled``). Schedulers by other
    names share the Queues: one with nothing in a queue must not write its zeros
    over the counts of the one that has.
    """
    held: dict[QueueName, list[Resources]] = {q: [] for q in view.queues}
    pending: dict[QueueName, int] = dict.fromkeys(view.queues, 0)
    running: dict[QueueName, int] = dict.fromkeys(view.queues, 0)
    for gang in gathered.gangs:
        queue = gang.queue
        if queue not in held:
            continue  # its queue does not exist: it waits, counted nowhere
        if gang.key in gathered.bound_requests:
            held[queue].append(gathered.bound_requests[gang.key])
        status = statuses.get(gang.key)
        if status is None:
            continue
        if status.phase is Phase.RUNNING:
            running[queue] += 1
        elif not status.phase.finished:
            pending[queue] += 1
    allocated = {queue: Resources.sum(amounts) for queue, amounts in held.items()}
    whole = schedulable_total(view.snapshot)
    tree = build_tree(view.queues)
    nominal = deserved_shares(tree, active=frozenset(view.queues))
    deserved = deserved_shares(tree, active=frozenset(g.queue for g in gathered.gangs))
    return [
        WriteQueueStatus(
            queue,
            _queue_status(tree, spec, allocated[queue], pending[queue], running[queue]),
            dominant_share=dominant_share(allocated[queue], whole, weight=1),
            weight_share=nominal.get(queue, Fraction(0)),
            counts=counted is None or queue in counted,
            deserved_share=deserved.get(queue, Fraction(0)),
        )
        for queue, spec in view.queues.items()
        if counted is None or queue in counted or queue not in settled
    ]


def reported_reasons(
    reported: Mapping[GangKey, Reported],
    reasons: Mapping[GangKey, Reason],
    now: float,
    hold_s: float,
    gap_s: float = 0.0,
) -> dict[GangKey, Reported]:
    """The reasons to report now: a new reason, unless only its figures moved, or it
    comes within ``gap_s`` of the last.

    While other gangs come and go, the room a waiting gang is told about
    ("3 nodes can take 1 each") changes nearly every cycle, and each change
    would rewrite the condition of every waiting pod, send Events and log a
    line: thousands of writes a minute on a busy cluster for nothing anyone
    acts on. So a reason of the same kind whose steady part (see
    :func:`_steady`: what the gang asks, what it holds, what it waits for) is
    unchanged, and whose moving figures differ, keeps the reason reported
    before until that one is ``hold_s`` old. Any other change is reported
    once the reason before is ``gap_s`` old, so a gang whose reason changes with
    every pod an operator creates, or every gang that comes and goes, is told
    the reason that holds, not each one in between. The step wakes when a hold
    or a gap ends (:func:`gangsched.core.step.threshold_moments`).
    """
    settled: dict[GangKey, Reported] = {}
    for gang, reason in reasons.items():
        before = reported.get(gang)
        if before is not None and (before.reason == reason or now - before.since < gap_s or (
            now - before.since < hold_s and _only_figures_moved(before.reason, reason)
        )):
            settled[gang] = before
        else:
            settled[gang] = Reported(reason, now)
    return settled


def _only_figures_moved(old: Reason, new: Reason) -> bool:
    steady = _steady(new)
    return steady is not None and type(old) is type(new) and _steady(old) == steady


def _steady(reason: Reason) -> object | None:
    """What of a reason must stay the same for a change to be only its figures moving;
    None for a reason whose every figure matters at once."""
    match reason:
        case DoesNotFit():
            return (reason.gang, reason.need, reason.bound, reason.min_member,
                    tuple((shape.requests, shape.wanted) for shape in reason.shapes))
        case NoDomainHolds():
            return (reason.label, reason.domains)
        case WaitsForPreferred():
            return (reason.preferred, reason.wait_s, reason.wider, _steady(reason.cause))
        case ShortOfMembers():
            return (reason.gang, reason.needs)
        case BindBackoff():
            return (reason.pod, reason.status, reason.message, reason.others)
        case ReservedByAdmitted():
            return (reason.reserved, reason.starving, reason.starving_held)
        case HeldForStarving():
            return (reason.starving, reason.held)
        case DevicesShort():
            # Which member, claim and request, and what it asks: the devices free on the
            # best node move with every gang that comes and goes.
            return (reason.gang, reason.pod, reason.claim, reason.request, reason.need,
                    reason.attribute, reason.minimum, reason.placed, reason.unreadable,
                    reason.resource)
        case Starving():
            return (reason.urgency, reason.hold, code_of(reason.cause), _steady(reason.cause))
        case TooBigToHold():
            return (reason.urgency, reason.need, code_of(reason.cause), _steady(reason.cause))
        case Preempting() | AwaitingVictims():
            return (reason.victims, reason.hold, code_of(reason.cause), _steady(reason.cause))
        case ProtectedByBudget():
            return (reason.gangs, reason.budgets, code_of(reason.cause), _steady(reason.cause))
        case NotReclaimable() | ProtectedByShare():
            return (reason.queues, code_of(reason.cause), _steady(reason.cause))
        case InSubGroup():
            return (reason.sub_group, code_of(reason.cause), _steady(reason.cause))
        case AskingForNodes():
            return (reason.pods, reason.need, code_of(reason.cause), _steady(reason.cause))
        case NodesComing():
            return (reason.nodes, reason.missing, code_of(reason.cause), _steady(reason.cause))
        case NodePoolLimit():
            # What each NodePool has left moves with every node Karpenter launches.
            return (reason.need, tuple(pool for pool, _ in reason.headroom), reason.ahead,
                    code_of(reason.cause), _steady(reason.cause))
        case AskingPaused():
            return (reason.until, code_of(reason.cause), _steady(reason.cause))
        case _:
            return None
