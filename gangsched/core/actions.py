"""What a step asks the shell to do: bind, evict, write statuses, say why pods wait, log.

The core decides every word that is written or logged; the shell only carries
actions out, in the order given, through the API writers and the logger. An
action names objects by key: the shell finds the records in the view it
handed to the step.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

from gangsched.core.kubeobjects.groups import GroupStatus
from gangsched.core.kubeobjects.status_bodies import QueueStatus
from gangsched.core.model.objects import DEFAULT_QUEUE, GangKey, NodeName, PodKey, QueueName
from gangsched.core.placement.capacity import Placement
from gangsched.core.placement.preemption import Preemption

UNSCHEDULABLE = "Unschedulable"
"""The ``PodScheduled=False`` reason cluster autoscalers add nodes for."""
GANG_WAITING = "GangWaiting"
"""The ``PodScheduled=False`` reason of a pod whose gang new nodes would not let run."""
GATED = "SchedulingGated"


@dataclass(frozen=True, slots=True)
class Bind:
    """Assume the gang on its nodes, then bind its pods."""

    placement: Placement
    first_created: float | None
    """When the first member of a gang placed whole was created (its wait), else None."""
    queue: QueueName = DEFAULT_QUEUE
    """The gang's queue: its wait is counted under it."""


@dataclass(frozen=True, slots=True)
class SelectClaimNode:
    """Set (or, with None, take back) a WaitForFirstConsumer claim's selected node, so its
    volume is provisioned where its pod was placed. It goes out before the pod's Binding,
    which waits until the claim is bound (see core.provisioning)."""

    claim: str
    """``namespace/name``."""
    node: NodeName | None


@dataclass(frozen=True, slots=True)
class Evict:
    """Evict every victim pod, or none when a PodDisruptionBudget forbids any of them."""

    preemption: Preemption
    victim_pods: Mapping[GangKey, tuple[PodKey, ...]]
    preemptor_pods: tuple[PodKey, ...]
    own_budgets: tuple[str, ...] = ()
    """The victims' own PodDisruptionBudgets (``namespace/name``, see core.disruption),
    deleted first: they guard a gang against losing members one by one, and would
    refuse its eviction whole."""


@dataclass(frozen=True, slots=True)
class WriteBudget:
    """Create a running gang's PodDisruptionBudget, named after its PodGroup and owned by
    it (deleted with it): ``minAvailable`` its minMember, its pods selected by ``label``."""

    group: GangKey
    group_api: str
    """The PodGroup's ``apiVersion``."""
    group_uid: str
    min_available: int
    label: tuple[str, str]


@dataclass(frozen=True, slots=True)
class MarkUnschedulable:
    """``PodScheduled=False``: ``Unschedulable`` with an Event for a pod that more nodes
    would let run, ``GangWaiting`` with an Event for any other, or ``SchedulingGated``
    without one (autoscalers add nodes only for ``Unschedulable``: see core.asking)."""

    pod: PodKey
    message: str
    gated: bool = False
    event: bool = True
    """Whether its Event is due (the report plan decides: a new reason, or one unchanged
    for ``pod_report_s``); otherwise only its condition, not showing the reason yet."""
    asks_for_nodes: bool = True
    """Whether its gang would be placed if nodes were added (core.asking)."""

    @property
    def condition_reason(self) -> str:
        """The ``PodScheduled=False`` reason it is written with."""
        if self.gated:
            return GATED
        return UNSCHEDULABLE if self.asks_for_nodes else GANG_WAITING


@dataclass(frozen=True, slots=True)
class MarkInvalid:
    """A pod of ours the core cannot read waits, saying why."""

    pod: PodKey
    error: str


@dataclass(frozen=True, slots=True)
class TellRuntimeProblem:
    """A Warning Event on a pod in no PodGroup whose expected-runtime annotation cannot be
    read (a group's members are told of on the group, with its status)."""

    pod: PodKey
    problem: str


@dataclass(frozen=True, slots=True)
class WriteGroupStatus:
    group: GangKey
    status: GroupStatus
    observed_generation: int


@dataclass(frozen=True, slots=True)
class MarkGroupInvalid:
    group: GangKey
    error: str | None = None
    """Why, when the group's own spec reads well but contradicts its pods."""


@dataclass(frozen=True, slots=True)
class WriteQueueStatus:
    """The Queue's whole status, and the figures of its fair share that go to metrics only
    (they change with every bind, and a status rewritten that often would churn)."""

    queue: QueueName
    status: QueueStatus
    dominant_share: Fraction
    """The largest part of any schedulable resource of the cluster the queue holds."""
    weight_share: Fraction
    """The part its weight entitles it to when every queue wants more: down the queue
    tree, at each level its weight over the sum of its siblings' (0 when invalid)."""
    counts: bool = True
    """False: only the conditions are written (see :func:`gangsched.core.reports.report_plan.
    queue_statuses`); another scheduler's gangs may be what the queue counts."""
    deserved_share: Fraction = Fraction(0)
    """Its deserved part of the cluster now, shared only with the queues that have gangs
    (see :func:`gangsched.core.queues.hierarchy.deserved_shares`)."""


@dataclass(frozen=True, slots=True)
class ForgetWritten:
    """Drop what the writers remember of objects no longer in the view."""


@dataclass(frozen=True, slots=True)
class LogDecision:
    """One log line about a decision: a fixed snake_case event and its fields."""

    event: str
    fields: tuple[tuple[str, object], ...] = ()

    @staticmethod
    def of(event: str, **fields: object) -> LogDecision:
        return LogDecision(event, tuple(fields.items()))


Action = (Bind | Evict | MarkUnschedulable | MarkInvalid | WriteGroupStatus | MarkGroupInvalid
          | WriteQueueStatus | ForgetWritten | LogDecision
          | SelectClaimNode | TellRuntimeProblem | WriteBudget)
