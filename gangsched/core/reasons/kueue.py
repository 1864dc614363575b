"""Kueue admits the workload: the gang waits for its word and holds no room before it.

Kueue decides when a job may start (quota); gangsched decides where its pods go, all
at once. A gang whose job Kueue has not admitted yet would, if gangsched admitted it,
hold room for pods that cannot exist while Kueue lets other jobs take what is left:
each would then wait for the other. So it is neither admitted nor tried, and says why.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from gangsched.core.model.objects import GangKey, PodKey
from gangsched.core.reasons.wording import more_pods

KUEUE_GATE = "kueue.x-k8s.io/admission"
"""The scheduling gate Kueue puts on the pods it manages one by one (plain pods, pod
groups) and lifts when it admits their workload."""


@dataclass(frozen=True, slots=True)
class SuspendedByKueue:
    """The gang's PodGroup belongs to a job whose Kueue Workload is not admitted: Kueue
    keeps the job suspended, so none of its pods can come yet."""

    code: ClassVar[str] = "SuspendedByKueue"
    gang: GangKey
    workload: str
    """``namespace/name`` of the Kueue Workload."""

    def text(self) -> str:
        return (f"suspended by Kueue: gang {self.gang} waits for Kueue to admit workload "
                f"{self.workload}, and holds no room until then")


@dataclass(frozen=True, slots=True)
class GatedByKueue:
    """A pending pod of the gang carries Kueue's scheduling gate: Kueue has not admitted
    its workload yet."""

    code: ClassVar[str] = "GatedByKueue"
    pod: PodKey
    others: int
    """Other pending pods of the gang that are gated too."""

    def text(self) -> str:
        return (f"gated by Kueue: pod {self.pod} waits for Kueue to admit its workload "
                f"(scheduling gate {KUEUE_GATE}){more_pods(self.others)}; the gang holds "
                f"no room until then")
