"""The order in which the waiting gangs take their turn in a cycle.

In the spirit of Volcano's allocate action, which owns the flow. Replacements for members a
gang had, up to its minMember, go first, because a running gang that cannot
get a dead worker back holds all its other workers idle. A preemptor whose
victims are going comes next, before anyone who could take the room it
evicted for. Every other gang is taken in fair order: always the queue
furthest below its weighted dominant share, recharged for what it just got,
so weights hold within one cycle and not only across many; within a queue,
priority, then age. Pods beyond minMember of a gang that runs (elastic
workers, Spark's dynamic executors) are such ordinary work: first in line
they would take the room a preemptor evicted for or a starving gang holds.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from gangsched.core.model.objects import Gang, QueueName
from gangsched.core.placement.capacity import Unplaceable
from gangsched.core.queues.fairness import gang_order
from gangsched.core.queues.hierarchy import FairKey
from gangsched.core.reasons import QueueInvalid, QueueNotLeaf
from gangsched.core.stages.session import Session


def turns(session: Session, known: list[Gang]) -> Iterator[Gang]:
    """Every gang ``triage`` let through and every unborn one, in the order they take their
    turn; each is yielded when the turns before it are over, so the order reads the room
    they left (a replacement placed or not, a queue's share moved)."""
    ordinary = [g for g in known if not is_running(g)]
    for gang in sorted((g for g in known if is_running(g)), key=gang_order):
        lacking = max(0, gang.min_member - gang.bound)
        if lacking == 0:
            ordinary.append(gang)
            continue
        # Only the pods it lacks go first, the oldest, so that a gang that lost one
        # worker does not carry its elastic extras ahead of every queue; the rest wait
        # their queue's turn, as a gang already whole, if the replacements were placed.
        placed_before = len(session.placements)
        yield replace(gang, pending=gang.pending[:lacking])
        rest = gang.pending[lacking:]
        if len(session.placements) > placed_before and rest:
            ordinary.append(replace(gang, pending=rest, bound=gang.min_member))
    preempting = session.inp.preempting
    nominated = sorted(
        (g for g in ordinary if g.key in preempting and g.bound == 0), key=gang_order
    )
    yield from nominated
    first = {g.key for g in nominated}
    ordinary = [g for g in ordinary if g.key not in first]

    # PodGroups with no pods yet still ask for admission, in the same fair
    # order: Kubeflow's training-operator creates no pod of a Volcano job
    # until its PodGroup is Inqueue, so waiting for pods would wait forever.
    unborn = [
        gang for gang in session.gangs
        if not gang.pending and gang.bound == 0 and gang.key not in session.admitted
        and gang.queue in session.queues and gang.kueue_workload is None
    ]
    per_queue: dict[QueueName, list[Gang]] = {}
    for gang in sorted([*ordinary, *unborn], key=gang_order):
        refusal = session.tree.refusal(gang.queue)
        if refusal is not None:
            refuse(session, gang, refusal)
        else:
            per_queue.setdefault(gang.queue, []).append(gang)
    # Reversed so the next gang of a queue is a cheap pop() from the end.
    for gangs in per_queue.values():
        gangs.reverse()
    keys = {queue: session.fair_key(queue) for queue in per_queue}
    while keys:
        name = min(keys, key=keys.__getitem__)
        queue_gangs = per_queue[name]
        allocated = session.allocated[name]
        yield queue_gangs.pop()
        if not queue_gangs:
            del keys[name]
        if session.allocated[name] != allocated:  # a share moves only with its queue's room
            _refresh(session, keys, name)


def _refresh(session: Session, keys: dict[QueueName, FairKey], moved: QueueName) -> None:
    """New keys for the queues whose place in the order moved with ``moved``'s room: itself,
    and on a tree every queue under the same top-level queue (their ancestors' shares moved)."""
    if moved in keys:
        keys[moved] = session.fair_key(moved)
    if session.tree.flat:
        return
    top = session.tree.path(moved)[0]
    for name in keys:
        if name != moved and session.tree.path(name)[0] == top:
            keys[name] = session.fair_key(name)


def refuse(session: Session, gang: Gang, reason: QueueInvalid | QueueNotLeaf) -> None:
    """A gang of a queue that has no place in the tree, or that has child queues, waits
    saying why: its queue has no share to order it by, or only its leaves take work."""
    target = session.unplaceable if gang.pending else session.unadmitted
    if gang.pending or gang.key not in session.admitted:
        target.append(Unplaceable(gang.key, reason))


def is_running(gang: Gang) -> bool:
    """A gang with members bound: its pending pods replace dead members, complete a gang
    whose binding was cut short, or are extras beyond its minMember."""
    return gang.bound > 0
