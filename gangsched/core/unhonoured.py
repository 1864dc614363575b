"""Gangs held back by placement rules gangsched does not evaluate yet.

A pod is only ever bound where kube-scheduler would also put it: until a
rule (an inter-pod term selecting namespaces by their labels) is honoured
here, a gang with a pending member carrying one
waits whole and says which rule, instead of being bound against it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

from gangsched.core.interpod import term_selects
from gangsched.core.model import Gang, Pod, UnhonouredRule
from gangsched.core.reasons import Unhonoured

__all__ = ["against_existing_anti_affinity", "unhonoured_reason"]


def unhonoured_reason(gang: Gang) -> Unhonoured | None:
    """Why the gang waits for rules it carries, or None when it carries none.

    Placing the other members would split the gang around one that can
    never be bound safely, so the whole gang waits and is not even tried.
    """
    carrying = [pod for pod in gang.pending if pod.unhonoured]
    if not carrying:
        return None
    return Unhonoured(carrying[0].key, carrying[0].unhonoured, len(carrying) - 1)


def against_existing_anti_affinity(gangs: Sequence[Gang], pods: Iterable[Pod]) -> tuple[Gang, ...]:
    """The gangs, their pending pods that a live pod's required anti-affinity term with a
    non-empty ``namespaceSelector`` selects marked as carrying an unhonoured rule.

    Which namespaces such a term selects depends on namespace labels the core
    does not see; so the pod waits, saying so, rather than risk the holder's
    domain. Every other anti-affinity term of a live pod is honoured by the
    placement search. Pods that finished hold nothing; terminating ones still
    count, as in kube-scheduler.
    """
    holders = [term for holder in pods
               if holder.node_name and not holder.terminal
               for term in holder.anti_affinity if term.namespace_selected]
    if not holders:
        return tuple(gangs)
    rule = UnhonouredRule.EXISTING_ANTI_AFFINITY

    def marked(pod: Pod) -> Pod:
        if rule in pod.unhonoured or not any(term_selects(term, pod) for term in holders):
            return pod
        return replace(pod, unhonoured=(*pod.unhonoured, rule))

    result = []
    for gang in gangs:
        pending = tuple(marked(pod) for pod in gang.pending)
        result.append(gang if pending == gang.pending else replace(gang, pending=pending))
    return tuple(result)
