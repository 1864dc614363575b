"""Gangs held back by placement rules gangsched does not evaluate yet.

A pod is only ever bound where kube-scheduler would also put it: until a
rule (inter-pod affinity, a required spread, a resource claim) is
honoured here, a gang with a pending member carrying one
waits whole and says which rule, instead of being bound against it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

from gangsched.core.model import Gang, Pod, PodAffinityTerm, UnhonouredRule
from gangsched.core.nodefit import requirement_matches
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


def _selects(term: PodAffinityTerm, holder: Pod, pod: Pod) -> bool:
    """Whether the holder's term selects the pod (namespace and labels), as
    kube-scheduler matches existing pods' anti-affinity against a newcomer."""
    if not term.selects_pods or pod.key == holder.key:
        return False
    namespace = pod.key.split("/", 1)[0]
    if not term.any_namespace and namespace not in term.namespaces:
        return False
    labels = dict(pod.labels)
    if any(labels.get(key) != value for key, value in term.match_labels):
        return False
    return all(requirement_matches(r, labels) for r in term.match_expressions)


def against_existing_anti_affinity(gangs: Sequence[Gang], pods: Iterable[Pod]) -> tuple[Gang, ...]:
    """The gangs, their pending pods that a live pod's required anti-affinity selects
    marked as carrying an unhonoured rule.

    Which nodes such a term keeps the pod off depends on the holder's node
    and topology key, which the placement search does not weigh yet; so the
    pod waits, saying so, rather than risk the holder's node or domain.
    Pods that finished hold nothing; terminating ones still count, as in
    kube-scheduler.
    """
    holders = [(holder, term) for holder in pods
               if holder.node_name and not holder.terminal
               for term in holder.anti_affinity]
    if not holders:
        return tuple(gangs)
    rule = UnhonouredRule.EXISTING_ANTI_AFFINITY

    def marked(pod: Pod) -> Pod:
        if rule in pod.unhonoured or not any(_selects(t, h, pod) for h, t in holders):
            return pod
        return replace(pod, unhonoured=(*pod.unhonoured, rule))

    result = []
    for gang in gangs:
        pending = tuple(marked(pod) for pod in gang.pending)
        result.append(gang if pending == gang.pending else replace(gang, pending=pending))
    return tuple(result)
