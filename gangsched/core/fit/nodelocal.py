"""Things only one pod on a node may hold, kept apart through the inter-pod rules.

kube-scheduler refuses a node when the pod asks for something a pod already
there holds in a way that excludes it: a host port (NodePorts), an inline disk
attached read-write (VolumeRestrictions). Each such thing is a label of the
pod in gangsched's model — never on the API — and a required anti-affinity per
node object (``node.gangsched.io/name``, never a label a node may lack or share
with another) against the labels that exclude it. Anti-affinity
is read in both directions (the newcomer's terms and those of pods already
there), so the search that counts inter-pod rules for existing pods,
terminating ones and the gang's own members as it places them keeps two
holders apart, with kube-scheduler's semantics, at no cost to pods without
any such thing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gangsched.core.model.objects import PodAffinityTerm, SelectorRequirement

__all__ = ["NODE_NAME_LABEL", "RULES", "Held", "held_labels", "held_terms", "rule_of_term"]

_DOMAIN = ".gangsched.io/"
NODE_NAME_LABEL = "node.gangsched.io/name"
"""The node's own name as a topology key, in the inter-pod rules' model only: what
kube-scheduler keeps apart per node object (a host port, a disk), whatever labels
the node carries or shares with others."""


@dataclass(frozen=True, slots=True, order=True)
class Held:
    """One thing a pod holds on its node: ``kind`` names the rule (``host-port``,
    ``disk``), ``name`` the thing, ``value`` how the pod holds it; ``excludes`` the
    values of others' holds it cannot share the node with (empty: every one)."""

    kind: str
    name: str
    value: str
    excludes: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return f"{self.kind}{_DOMAIN}{self.name}"


def held_labels(held: Iterable[Held]) -> tuple[tuple[str, str], ...]:
    """The labels that stand for what a pod holds, one per thing (the most exclusive
    value when it holds one thing twice, which :func:`held_terms` already covers)."""
    by_label: dict[str, str] = {}
    for item in sorted(held, key=lambda h: (h.label, not h.excludes, h.value)):
        by_label.setdefault(item.label, item.value)
    return tuple(sorted(by_label.items()))


def held_terms(held: Iterable[Held]) -> tuple[PodAffinityTerm, ...]:
    """The anti-affinity terms that keep the pod off a node where what it holds is taken."""
    terms = []
    for item in sorted(set(held)):
        requirement = (SelectorRequirement(item.label, "In", item.excludes) if item.excludes
                       else SelectorRequirement(item.label, "Exists", ()))
        terms.append(PodAffinityTerm(topology_key=NODE_NAME_LABEL, match_expressions=(requirement,),
                                     any_namespace=True))
    return tuple(dict.fromkeys(terms))


RULES = {"host-port": "host port", "disk": "disk"}
"""How a reason names each kind of held thing (see :class:`~gangsched.core.reasons.RuleBlock`)."""


def rule_of_term(term: PodAffinityTerm) -> tuple[str, str] | None:
    """``("host port", "TCP/8080")`` for a term standing for a held thing: the rule and
    the thing; None for a term a user wrote."""
    for requirement in term.match_expressions:
        kind, found, name = requirement.key.partition(_DOMAIN)
        if found and kind in RULES:
            return RULES[kind], name
    return None
