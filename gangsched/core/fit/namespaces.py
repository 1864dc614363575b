"""Which namespaces an inter-pod term selects by their labels.

A required or preferred pod (anti-)affinity term selects pods of the
namespaces it lists or that its ``namespaceSelector`` matches, as
kube-scheduler's InterPodAffinity reads it. The labels live on Namespace
objects, not on pods; so a term's selector is resolved here, where they are
known, into the namespaces the term names, and every inter-pod count then
reads the term as one that lists its namespaces. Resolving again after a
namespace's labels change starts from the namespaces the term lists itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from gangsched.core.fit.interpod import selector_matches
from gangsched.core.model.objects import NamespaceSelector, Pod, PodAffinityTerm

__all__ = ["NamespaceLabels", "resolve_pod", "selects_by_labels"]

NamespaceLabels = Mapping[str, Mapping[str, str]]
"""Each namespace's labels, by its name."""


def _selected(selector: NamespaceSelector, labels: NamespaceLabels) -> set[str]:
    return {name for name, own in labels.items()
            if selector_matches(selector.match_labels, selector.match_expressions, own)}


def _resolved(term: PodAffinityTerm, labels: NamespaceLabels) -> PodAffinityTerm:
    if term.namespace_selector is None:
        return term
    names = tuple(sorted({*term.listed, *_selected(term.namespace_selector, labels)}))
    return term if names == term.namespaces else replace(term, namespaces=names)


def selects_by_labels(pod: Pod) -> bool:
    """Whether one of the pod's inter-pod terms has a non-empty ``namespaceSelector``."""
    return any(term.namespace_selector is not None for term in (
        *pod.affinity, *pod.anti_affinity, *(preferred.term for preferred in pod.preferred)))


def resolve_pod(pod: Pod, labels: NamespaceLabels) -> Pod:
    """The pod with each term's ``namespaceSelector`` resolved against the namespaces'
    labels; the pod itself when that changes nothing.

    A namespace not yet known is selected by no selector, as kube-scheduler's
    namespace lister would not return it.
    """
    if not selects_by_labels(pod):
        return pod
    affinity = tuple(_resolved(term, labels) for term in pod.affinity)
    anti_affinity = tuple(_resolved(term, labels) for term in pod.anti_affinity)
    preferred = tuple(replace(p, term=_resolved(p.term, labels)) for p in pod.preferred)
    if (affinity, anti_affinity, preferred) == (pod.affinity, pod.anti_affinity, pod.preferred):
        return pod
    return replace(pod, affinity=affinity, anti_affinity=anti_affinity, preferred=preferred)
