"""Allocation: the waiting gangs in their order, each admitted then placed.

In the spirit of Volcano's allocate action. Replacements for gangs that
already run go first, because a running gang that cannot get a dead worker
back holds all its other workers idle. A preemptor whose victims are going
comes next, before anyone who could take the room it evicted for. Every
other gang is taken in fair order: always the queue furthest below its
weighted dominant share, recharged for what it just got, so weights hold
within one cycle and not only across many; within a queue, priority, then
age.
"""

from __future__ import annotations

from gangsched.core.fairness import gang_order, lowest_share
from gangsched.core.model import Gang, QueueName
from gangsched.core.stages.admit import admit
from gangsched.core.stages.place import place
from gangsched.core.stages.session import Session


def allocate(session: Session, known: list[Gang]) -> None:
    """Place or tell why not, for every gang ``triage`` let through and every unborn one."""
    for gang in sorted((g for g in known if is_running(g)), key=gang_order):
        place(session, gang)
    preempting = session.inp.preempting
    nominated = sorted(
        (g for g in known if g.key in preempting and not is_running(g)), key=gang_order
    )
    for gang in nominated:
        _consider(session, gang)
    known = [g for g in known if g.key not in preempting]

    # PodGroups with no pods yet still ask for admission, in the same fair
    # order: Kubeflow's training-operator creates no pod of a Volcano job
    # until its PodGroup is Inqueue, so waiting for pods would wait forever.
    unborn = [
        gang for gang in session.gangs
        if not gang.pending and gang.bound == 0 and gang.key not in session.admitted
        and gang.queue in session.queues
    ]
    per_queue: dict[QueueName, list[Gang]] = {}
    for gang in sorted([*(g for g in known if not is_running(g)), *unborn], key=gang_order):
        per_queue.setdefault(gang.queue, []).append(gang)
    # Reversed so the next gang of a queue is a cheap pop() from the end.
    for gangs in per_queue.values():
        gangs.reverse()
    shares = {queue: session.share(queue) for queue in per_queue}
    while shares:
        name = lowest_share(shares)
        queue_gangs = per_queue[name]
        _consider(session, queue_gangs.pop())
        if queue_gangs:
            shares[name] = session.share(name)
        else:
            del shares[name]


def _consider(session: Session, gang: Gang) -> None:
    """Admit the gang if it is not yet, then place its pods if it has any."""
    if admit(session, gang) and gang.pending:
        place(session, gang)


def is_running(gang: Gang) -> bool:
    """A gang with members bound goes first: its pending pods replace dead members or
    complete a gang whose binding was cut short, and until they are placed the bound
    members hold their nodes without making progress."""
    return gang.bound > 0
