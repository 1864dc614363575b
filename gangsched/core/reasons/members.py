"""The gang's own pods hold it back: too few exist, some are gated, or binds are refused."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from gangsched.core.model.objects import GangKey, PodKey
from gangsched.core.reasons.wording import more_pods


@dataclass(frozen=True, slots=True)
class MembersMissing:
    """Fewer pods exist than the gang needs; the count pending is left out on purpose,
    since it moves with every pod an operator creates."""

    code: ClassVar[str] = "MembersMissing"
    gang: GangKey
    need: int
    min_member: int
    bound: int

    def text(self) -> str:
        return (f"gang {self.gang} waits for its members: it needs {self.need} more "
                f"pods to reach minMember {self.min_member} ({self.bound} bound) and "
                f"fewer are pending")


@dataclass(frozen=True, slots=True)
class ShortOfMembers:
    """Fewer pods exist, pending and bound together, than minMember: as it stands the gang
    can never be whole, so more room would not let it run and it holds none (a Job whose
    parallelism is below its PodGroup's minMember waits here, not in everyone's way)."""

    code: ClassVar[str] = "ShortOfMembers"
    gang: GangKey
    has: int
    needs: int

    def text(self) -> str:
        return (f"gang {self.gang} is short of members: it has {self.has} pods, "
                f"pending and bound, and needs {self.needs} (minMember); it holds no room "
                f"until more exist")


@dataclass(frozen=True, slots=True)
class Gated:
    code: ClassVar[str] = "Gated"
    pod: PodKey
    gates: tuple[str, ...]
    others: int
    """Other pending pods of the gang that are gated too."""

    def text(self) -> str:
        return (f"waiting for scheduling gates to be lifted: pod {self.pod} has "
                f"{', '.join(self.gates)}{more_pods(self.others)}")


@dataclass(frozen=True, slots=True)
class BindBackoff:
    code: ClassVar[str] = "BindBackoff"
    pod: PodKey
    status: int
    """HTTP status of the refusal; 0 when the request got no answer."""
    message: str
    others: int
    """Other pending pods of the gang that back off too."""
    refusals: int

    def text(self) -> str:
        answer = f"HTTP {self.status}: " if self.status else ""
        return (
            f"binding pod {self.pod} was refused ({answer}{self.message or 'no answer'})"
            f"{more_pods(self.others)}; retrying with backoff after {self.refusals} refusal"
            f"{'s' if self.refusals > 1 else ''} in a row"
        )
