"""The gang's persistent volumes hold it back: a claim keeps a member off every node, or
the claims of a placed gang are still being provisioned."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from gangsched.core.model.objects import PodKey, VolumeBlock
from gangsched.core.reasons.wording import more_pods, plural


@dataclass(frozen=True, slots=True)
class VolumeBlocked:
    """A pending member's claim keeps it off every node (missing, unbound with an
    Immediate class, lost, ReadWriteOncePod in use...); the gang waits whole."""

    code: ClassVar[str] = "VolumeBlocked"
    pod: PodKey
    block: VolumeBlock
    others: int
    """Other pending pods of the gang blocked by a claim too."""

    def text(self) -> str:
        block = self.block
        held = f" ({block.other})" if block.other else ""
        return (f"pod {self.pod}: persistentvolumeclaim {block.claim} "
                f"{block.problem.value}{held}{more_pods(self.others)}")


@dataclass(frozen=True, slots=True)
class ClaimsProvisioning:
    """The gang is placed, and waits for its WaitForFirstConsumer claims to be
    provisioned on the nodes chosen for them before any member is bound."""

    code: ClassVar[str] = "ClaimsProvisioning"
    claims: tuple[str, ...]
    """The claims not bound yet, ``namespace/name``."""
    nodes: int

    def text(self) -> str:
        return (f"waiting for {plural(len(self.claims), 'claim')} "
                f"({', '.join(self.claims)}) to be provisioned on the "
                f"{plural(self.nodes, 'node')} chosen for the gang before binding it")


@dataclass(frozen=True, slots=True)
class ProvisioningTimedOut:
    """Its claims were not provisioned in time: their chosen nodes were taken back and
    the gang tries again after a while."""

    code: ClassVar[str] = "ProvisioningTimedOut"
    claims: tuple[str, ...]
    seconds: float

    def text(self) -> str:
        return (f"{plural(len(self.claims), 'claim')} ({', '.join(self.claims)}) "
                f"were not provisioned within {self.seconds:g}s: their nodes were "
                f"released and the gang tries again later")
