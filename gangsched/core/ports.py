"""Host ports, as kube-scheduler's NodePorts decides them, through the inter-pod rules.

Two pods conflict on a node when they ask for the same protocol and host port
and their host IPs overlap: either binds every address (``0.0.0.0``, the
default) or both bind the same one. That is exactly a required anti-affinity,
in both directions, on ``kubernetes.io/hostname`` between pods carrying a
label per (protocol, port) whose value is the host IP: a pod binding every
address selects every pod with the label; one binding an address selects
pods of that address and of every address. So a pod's host ports become one
such label and term each, and the search that already counts inter-pod rules
(existing pods, terminating ones, and the gang's own members as it places
them) keeps two users of one port apart, with kube-scheduler's semantics.
The labels live only in gangsched's model of the pod, never on the API.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gangsched.core.model import PodAffinityTerm, SelectorRequirement

__all__ = [
    "ANY_ADDRESS",
    "HOST_PORT_RULE",
    "PORT_LABEL_PREFIX",
    "HostPort",
    "port_labels",
    "port_of_term",
    "port_terms",
]

ANY_ADDRESS = "0.0.0.0"
PORT_LABEL_PREFIX = "host-port.gangsched.io/"
HOSTNAME = "kubernetes.io/hostname"


@dataclass(frozen=True, slots=True, order=True)
class HostPort:
    """One ``hostPort`` a container asks for; an empty IP or protocol as the API defaults them."""

    port: int
    protocol: str = "TCP"
    ip: str = ANY_ADDRESS

    @property
    def label(self) -> str:
        return f"{PORT_LABEL_PREFIX}{self.protocol}-{self.port}"


def port_labels(ports: Iterable[HostPort]) -> tuple[tuple[str, str], ...]:
    """The labels that stand for the ports a pod holds."""
    return tuple(sorted({(port.label, port.ip) for port in ports}))


def port_terms(ports: Iterable[HostPort]) -> tuple[PodAffinityTerm, ...]:
    """The anti-affinity terms that keep the pod off a node where its ports are taken."""
    terms = []
    for port in sorted(set(ports)):
        requirement = (
            SelectorRequirement(port.label, "Exists", ())
            if port.ip == ANY_ADDRESS
            else SelectorRequirement(port.label, "In", tuple(sorted({port.ip, ANY_ADDRESS})))
        )
        terms.append(PodAffinityTerm(topology_key=HOSTNAME, match_expressions=(requirement,),
                                     any_namespace=True))
    return tuple(dict.fromkeys(terms))


HOST_PORT_RULE = "host port"
"""How a reason names a host port conflict (see :class:`~gangsched.core.reasons.RuleBlock`)."""


def port_of_term(term: PodAffinityTerm) -> str | None:
    """``TCP/8080`` for a host port's term; None for a term a user wrote."""
    for requirement in term.match_expressions:
        if requirement.key.startswith(PORT_LABEL_PREFIX):
            protocol, _, port = requirement.key[len(PORT_LABEL_PREFIX):].partition("-")
            return f"{protocol}/{port}"
    return None
