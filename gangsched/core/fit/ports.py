"""Host ports, as kube-scheduler's NodePorts decides them, through the inter-pod rules.

Two pods conflict on a node when they ask for the same protocol and host port
and their host IPs overlap: either binds every address (``0.0.0.0``, the
default) or both bind the same one. So a pod's host port is a thing it holds
on its node (core.fit.nodelocal) named by protocol and port, held at its host IP:
a pod binding every address excludes every holder; one binding an address
excludes holders of that address and of every address.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gangsched.core.fit.nodelocal import Held, held_terms
from gangsched.core.model.objects import PodAffinityTerm

__all__ = ["ANY_ADDRESS", "HostPort", "port_labels", "port_terms"]

ANY_ADDRESS = "0.0.0.0"
KIND = "host-port"


@dataclass(frozen=True, slots=True, order=True)
class HostPort:
    """One ``hostPort`` a container asks for; an empty IP or protocol as the API defaults them."""

    port: int
    protocol: str = "TCP"
    ip: str = ANY_ADDRESS

    @property
    def held(self) -> Held:
        excludes = () if self.ip == ANY_ADDRESS else tuple(sorted({self.ip, ANY_ADDRESS}))
        return Held(KIND, f"{self.protocol}/{self.port}", self.ip, excludes)


def port_labels(ports: Iterable[HostPort]) -> tuple[tuple[str, str], ...]:
    """The labels that stand for the ports a pod holds."""
    return tuple(sorted({(port.held.label, port.ip) for port in ports}))


def port_terms(ports: Iterable[HostPort]) -> tuple[PodAffinityTerm, ...]:
    """The anti-affinity terms that keep the pod off a node where its ports are taken."""
    return held_terms(port.held for port in ports)

