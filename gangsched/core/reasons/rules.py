"""The gang's inter-pod rules (affinity, anti-affinity, spread, host ports, disks) leave a
member no node."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from gangsched.core.model.objects import GangKey, NodeName, PodKey
from gangsched.core.reasons.wording import excluded_text, plural


@dataclass(frozen=True, slots=True)
class RuleBlock:
    """One node kept from a pod by an inter-pod rule, with what the rule read there."""

    node: NodeName
    rule: str
    """The rule, as ``interpod.PodRule`` names it."""
    topology_key: str
    domain: str
    """The node's value of ``topology_key``; empty when the node lacks that label."""
    other: PodKey | None = None
    """The pod whose presence (or whose anti-affinity) keeps this one off."""
    same_gang: bool = False
    max_skew: int = 0
    skew: int = 0

    def text(self) -> str:
        """``node-3: anti-affinity with pod w-0 of this gang``, ``zone b would break maxSkew 1``."""
        where = f"{self.topology_key}={self.domain}"
        other = self.other or ""
        if self.same_gang and other:
            other = f"{other.split('/', 1)[1]} of this gang"
        match self.rule:
            case "host port":
                whose = f" by pod {other}" if other else ""
                return f"{self.node}: host port {self.topology_key} taken{whose}"
            case "disk":
                whose = f" by pod {other}" if other else ""
                return f"{self.node}: disk {self.topology_key} in use{whose}"
            case "pod anti-affinity":
                with_whom = f" with pod {other}" if other else ""
                return f"{self.node}: anti-affinity{with_whom} in {where}"
            case "anti-affinity of a pod already there":
                whose = f"pod {other}'s" if other else "a pod's"
                return f"{self.node}: {whose} anti-affinity in {where}"
            case "pod affinity":
                if not self.domain:
                    return f"{self.node}: no {self.topology_key} label for its affinity"
                return f"{self.node}: no pod matching its affinity in {where}"
            case "topology spread":
                name = self.topology_key.rsplit("/", 1)[-1]
                return (f"{name} {self.domain} would break maxSkew {self.max_skew} "
                        f"(skew {self.skew})")
            case _:
                return f"{self.node}: no {self.topology_key} label for its topology spread"


@dataclass(frozen=True, slots=True)
class PodRulesUnmet:
    """The gang's inter-pod rules (affinity, anti-affinity, spread) leave a member no node:
    how many were placed together first, and why each node refused the next."""

    code: ClassVar[str] = "PodRulesUnmet"
    gang: GangKey
    need: int
    placed: int
    pod: PodKey
    refused: tuple[tuple[str, int], ...]
    """Rule to the number of nodes it kept the pod off."""
    short: tuple[tuple[str, int], ...] = ()
    excluded: tuple[tuple[str, int], ...] = ()
    shown: tuple[RuleBlock, ...] = ()
    search_stopped_after: int | None = None

    def text(self) -> str:
        head = f"gang {self.gang} needs {plural(self.need, 'pod')} under their inter-pod rules"
        if self.placed:
            head += f"; {self.placed} placed together, then pod {self.pod} finds no node"
        else:
            head += f"; pod {self.pod} finds no node"
        parts = [head]
        counted = [f"{plural(nodes, 'node')} by {rule}" for rule, nodes in self.refused]
        counted += [f"{plural(nodes, 'node')} short of {name}" for name, nodes in self.short]
        if counted:
            parts.append(", ".join(counted))
        if self.excluded:
            parts.append(excluded_text(dict(self.excluded)))
        parts.extend(block.text() for block in self.shown)
        if self.search_stopped_after is not None:
            parts.append(f"search stopped after examining {self.search_stopped_after} nodes")
        return "; ".join(parts)
