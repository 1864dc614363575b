"""What the CLI shows: the rows and answers of ``status``, ``explain`` and ``simulate``.

Each answer is plain data first (what ``--output json`` prints), then drawn
with rich for people. The data comes from the scheduler's own step
(``gangsched.decisions``) over the objects the command read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from fractions import Fraction
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from gangsched.core.forecast import Estimate
from gangsched.core.kubeobjects.groups import MemberCounts
from gangsched.core.model.objects import DEFAULT_QUEUE, GangKey, QueueName
from gangsched.core.model.resources import PODS, Capability, Resources, format_amount
from gangsched.core.queues.fairness import dominant_share
from gangsched.core.queues.hierarchy import QueueTree, build_tree, deserved_shares, subtree_total
from gangsched.core.reasons import code_of, describe_request, render
from gangsched.core.reports.explain import Explanation
from gangsched.core.stages.session import schedulable_total
from gangsched.core.step import Stepped
from gangsched.mirror import View
from gangsched.simulation import Simulation

WAITING_PHASES = frozenset({"Pending", "Inqueue", "Scheduling", "Unschedulable", "Unknown", ""})
FLAVOR_NAMES = {
    "scheduling.gangsched.io": "gangsched",
    "scheduling.x-k8s.io": "coscheduling",
    "scheduling.volcano.sh": "volcano",
    "scheduling.k8s.io": "native",
}


def quantities(resources: Resources | Capability) -> dict[str, str]:
    return {name: format_amount(name, amount) for name, amount in resources.items()
            if name != PODS}


def _text(resources: Resources | Capability | None) -> str:
    if resources is None:
        return "-"
    shown = quantities(resources)
    return ", ".join(f"{v} {k}" for k, v in shown.items()) if shown else "-"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{(seconds % 3600) // 60:02d}m"


# ---- status ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GroupRow:
    group: GangKey
    flavor: str
    queue: str
    phase: str
    bound: int
    min_member: int
    pending: int
    min_resources: dict[str, str]
    waiting_seconds: float | None
    reason: str
    estimated_start: str | None = None
    """RFC 3339 or ``Unknown`` while it waits (core.forecast); None otherwise."""


@dataclass(frozen=True, slots=True)
class QueueRow:
    queue: QueueName
    weight: int
    state: str
    capability: dict[str, str] | None
    allocated: dict[str, str]
    pending: int
    running: int
    parent: QueueName | None = None
    depth: int = 0
    """Levels below the top of the queue tree: how far the table indents it."""
    share: str = "-"
    """The largest part of any schedulable resource its subtree holds, as a percentage."""
    deserved: str = "-"
    """Its deserved part of the cluster now (core.queues.hierarchy.deserved_shares), a
    percentage."""
    invalid: str = ""
    """Why it has no place in the tree, when it has none."""


def status_rows(
    view: View, decision: Stepped, now: float
) -> tuple[list[QueueRow], list[GroupRow]]:
    said = decision.state.reported
    # As said on the PodGroups: asking for nodes, or why not (core.asking).
    reasons = {u.gang: said[u.gang].text if u.gang in said else render(u.reason)
               for u in (*decision.result.unplaceable, *decision.result.unadmitted)}
    counts = decision.gathered.counts
    groups: list[GroupRow] = []
    pending: dict[QueueName, int] = {}
    running: dict[QueueName, int] = {}
    for key in sorted(view.groups):
        record = view.groups[key]
        spec = record.spec
        tally = counts.get(key, MemberCounts())
        phase = str(record.status.get("phase") or "")
        queue = spec.queue if spec is not None else DEFAULT_QUEUE
        waiting = phase in WAITING_PHASES and spec is not None
        if waiting:
            pending[queue] = pending.get(queue, 0) + 1
        elif phase == "Running":
            running[queue] = running.get(queue, 0) + 1
        reason = record.error or reasons.get(key) or _status_message(record.status)
        estimate = decision.state.estimates.get(key)
        written = record.status.get("estimatedStart")
        groups.append(GroupRow(
            group=key,
            flavor=FLAVOR_NAMES.get(record.flavor.group, record.flavor.group),
            queue=queue,
            phase=phase or "-",
            bound=tally.scheduled + tally.succeeded,
            min_member=spec.min_member if spec is not None else 0,
            pending=tally.pending,
            min_resources=quantities(spec.min_resources) if spec is not None else {},
            waiting_seconds=round(now - spec.created, 1) if waiting and spec is not None else None,
            reason=reason,
            estimated_start=(estimate.text if estimate is not None
                             else str(written) if waiting and written else None),
        ))
    allocated: dict[QueueName, Resources] = {}
    for gang in decision.gathered.gangs:
        used = decision.gathered.bound_requests.get(gang.key, Resources.zero())
        allocated[gang.queue] = allocated.get(gang.queue, Resources.zero()) + used
    tree = build_tree(view.queues)
    deserved = deserved_shares(tree, {gang.queue for gang in decision.gathered.gangs})
    whole = schedulable_total(view.snapshot)
    queues = [
        QueueRow(
            queue=name,
            weight=spec.weight,
            state="Open" if spec.open else "Closed",
            capability=quantities(spec.capability) if spec.capability is not None else None,
            allocated=quantities(subtree_total(tree, allocated, name)),
            pending=pending.get(name, 0),
            running=running.get(name, 0),
            parent=spec.parent,
            depth=len(tree.path(name)) - 1,
            share=_percent(dominant_share(subtree_total(tree, allocated, name), whole, 1)),
            deserved=_percent(deserved[name]) if name in deserved else "-",
            invalid=render(tree.invalid[name]) if name in tree.invalid else "",
        )
        for name, spec in ((name, view.queues[name]) for name in tree_order(tree))
    ]
    return queues, groups


def tree_order(tree: QueueTree) -> list[QueueName]:
    """The valid queues depth first (each parent before its children, siblings by name),
    then the invalid ones by name: the order the status table draws them in."""
    order: list[QueueName] = []
    stack = list(reversed(tree.children.get(None, ())))
    while stack:
        name = stack.pop()
        order.append(name)
        stack.extend(reversed(tree.children.get(name, ())))
    return [*order, *sorted(tree.invalid)]


def _percent(share: Fraction) -> str:
    return f"{float(share) * 100:.1f}%"


def _tree_names(queues: list[QueueRow]) -> list[str]:
    """Each queue's name drawn under its parent: ``├─ `` and ``└─ `` before a child, ``│  ``
    where an ancestor has a later sibling. ``queues`` is in :func:`tree_order`."""
    drawn: list[str] = []
    for i, row in enumerate(queues):
        if row.depth == 0 or row.invalid:
            drawn.append(row.queue)
            continue
        rest = queues[i + 1:]
        lines = []
        for level in range(1, row.depth + 1):
            later = _later_sibling_at(rest, level)
            if level == row.depth:
                lines.append("├─ " if later else "└─ ")
            else:
                lines.append("│  " if later else "   ")
        drawn.append("".join(lines) + row.queue)
    return drawn


def _later_sibling_at(rest: list[QueueRow], depth: int) -> bool:
    """Whether a queue at ``depth`` follows before the subtree one level up closes."""
    for row in rest:
        if row.invalid or row.depth < depth:
            return False
        if row.depth == depth:
            return True
    return False


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def row_json(row: GroupRow | QueueRow) -> dict[str, Any]:
    """A row as ``--output json`` prints it: camelCase keys, as Kubernetes objects have."""
    return {_camel(key): value for key, value in asdict(row).items()}


def _status_message(status: Mapping[str, Any]) -> str:
    for condition in status.get("conditions") or []:
        if condition.get("message"):
            return str(condition["message"])
    return ""


def _amounts(amounts: Mapping[str, str] | None) -> str:
    if amounts is None:
        return "-"
    return ", ".join(f"{v} {k}" for k, v in amounts.items()) or "-"


def print_status(console: Console, queues: list[QueueRow], groups: list[GroupRow]) -> None:
    table = Table(title="Queues", box=box.SIMPLE_HEAD, title_justify="left")
    for column in ("QUEUE", "WEIGHT", "STATE", "CAPABILITY", "ALLOCATED", "SHARE", "DESERVED",
                   "PENDING", "RUNNING"):
        table.add_column(column)
    for q, drawn in zip(queues, _tree_names(queues), strict=True):
        table.add_row(drawn, str(q.weight), q.state, _amounts(q.capability),
                      _amounts(q.allocated), q.share, q.deserved, str(q.pending),
                      str(q.running))
    console.print(table)
    for q in queues:
        if q.invalid:
            console.print(f"[bold]queue {q.queue}[/bold]: {q.invalid}", highlight=False)
    table = Table(title="PodGroups", box=box.SIMPLE_HEAD, title_justify="left")
    for column in ("PODGROUP", "FLAVOR", "QUEUE", "PHASE", "BOUND/MIN", "PENDING",
                   "MIN RESOURCES", "WAITING", "ESTIMATED START"):
        table.add_column(column, overflow="fold")
    for g in groups:
        table.add_row(g.group, g.flavor, g.queue, g.phase, f"{g.bound}/{g.min_member}",
                      str(g.pending), _amounts(g.min_resources), _duration(g.waiting_seconds),
                      g.estimated_start or "-")
    if not groups:
        console.print("No PodGroups.")
        return
    console.print(table)
    # Reasons are sentences: each on its own line under the table, where they can wrap.
    for g in groups:
        if g.reason:
            console.print(f"[bold]{g.group}[/bold]: {g.reason}", highlight=False)


# ---- explain -----------------------------------------------------------------------------


def explanation_json(explanation: Explanation,
                     estimate: Estimate | None = None) -> dict[str, Any]:
    return {
        "gang": explanation.gang,
        "verdict": explanation.verdict.value,
        "estimatedStart": estimate.text if estimate is not None else None,
        "estimateUnknownBecause": (estimate.unknown.value if estimate is not None
                                   and estimate.unknown is not None else None),
        "reason": render(explanation.reason) if explanation.reason is not None else None,
        "code": code_of(explanation.reason) if explanation.reason is not None else None,
        "minMember": explanation.min_member,
        "bound": explanation.bound,
        "pending": explanation.pending,
        "queue": explanation.queue,
        "pods": [
            {
                "requests": quantities(shape.requests),
                "pending": shape.pending,
                "room": shape.room,
                "closestNodes": [
                    {"node": fit.node, "fits": fit.fits, "lacks": quantities(fit.lacks)}
                    for fit in shape.closest
                ],
                "excludedNodes": dict(shape.excluded),
            }
            for shape in explanation.shapes
        ],
        "placement": [{"pod": pod, "node": node} for pod, node in explanation.assignments],
        "preempts": list(explanation.preempts),
        "reservedByOthers": [
            {"gang": gang, "resources": quantities(held)}
            for gang, held in explanation.reserved_by_others
        ],
        "queueCapability": (quantities(explanation.queue_capability)
                            if explanation.queue_capability is not None else None),
        "queueAllocated": quantities(explanation.queue_allocated),
        "wouldLetItRun": list(explanation.remedies),
    }


def print_explanation(console: Console, explanation: Explanation, what: str,
                      estimate: Estimate | None = None) -> None:
    e = explanation
    console.print(f"[bold]{what}[/bold]: gang {e.gang}, queue {e.queue}: [bold]{e.verdict}[/bold]")
    console.print(f"  minMember {e.min_member}, bound {e.bound}, pending {e.pending}")
    if e.reason is not None:
        console.print(f"  why: {render(e.reason)}", highlight=False)
    if estimate is not None:
        console.print(f"  expected to start: {estimate.explained}", highlight=False)
    if e.preempts:
        console.print(f"  evicts for its room: {', '.join(e.preempts)}", highlight=False)
    if e.assignments:
        placed = ", ".join(f"{pod.split('/', 1)[1]} → {node}" for pod, node in e.assignments)
        console.print(f"  would be placed: {placed}", highlight=False)
    for shape in e.shapes:
        console.print(f"  pods of {describe_request(shape.requests)}: {shape.pending} pending, "
                      f"room for {shape.room}", highlight=False)
        for fit in shape.closest:
            said = (f"takes {fit.fits}" if fit.fits
                    else f"lacks {_text(fit.lacks)}")
            console.print(f"    {fit.node}: {said}", highlight=False)
        if shape.excluded:
            excluded = ", ".join(f"{n} by {r}" for r, n in sorted(shape.excluded.items()))
            console.print(f"    nodes excluded: {excluded}", highlight=False)
    if e.reserved_by_others:
        held = "; ".join(f"{gang} holds {_text(r)}" for gang, r in e.reserved_by_others)
        console.print(f"  reserved for admitted gangs: {held}", highlight=False)
    if e.queue_capability is not None:
        console.print(f"  queue {e.queue}: {_text(e.queue_allocated)} allocated of capability "
                      f"{_text(e.queue_capability)}", highlight=False)
    if e.remedies:
        console.print("  what would let it run:")
        for remedy in e.remedies:
            console.print(f"    - {remedy}", highlight=False)


# ---- simulate ----------------------------------------------------------------------------


def print_simulation(console: Console, simulation: Simulation) -> None:
    table = Table(title="Gangs in the order gangsched places them", box=box.SIMPLE_HEAD,
                  title_justify="left")
    for column in ("#", "GANG", "STARTS", "ENDS", "ESTIMATED", "NODES", "WHERE"):
        table.add_column(column, overflow="fold")
    for number, run in enumerate(simulation.runs, 1):
        estimated = run.estimated_start_s
        nodes: dict[str, int] = {}
        for _, node in run.nodes:
            nodes[node] = nodes.get(node, 0) + 1
        table.add_row(
            str(number), run.gang, "now" if run.start_s == 0 else f"+{run.start_s:g}s",
            "-" if run.end_s is None else f"+{run.end_s:g}s",
            "-" if estimated is None else f"+{estimated:g}s",
            ", ".join(f"{node} ({count} pods)" if count > 1 else node
                      for node, count in nodes.items()),
            "" if run.level is None else run.level.text(),
        )
    if simulation.runs:
        console.print(table)
    else:
        console.print("No gang can be placed.")
    for gang, reason in simulation.never:
        console.print(f"[bold]never runs[/bold]: {gang}: {render(reason)}", highlight=False)
    if simulation.not_ours:
        console.print(f"not simulated (another scheduler's pods): "
                      f"{', '.join(simulation.not_ours)}", highlight=False)
