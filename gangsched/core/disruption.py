"""A running gang's own PodDisruptionBudget: voluntary disruptions take it whole or not at all.

Node consolidation (Karpenter's "Underutilized", cluster-autoscaler's scale
down) and ``kubectl drain`` evict pods one node at a time, and know nothing
of gangs: a bound 8-pod job loses the one worker on an under-used node, and
stalls. Both honour PodDisruptionBudgets, so a gang bound whole gets one,
named after its PodGroup and owned by it (the garbage collector deletes it
with the PodGroup), ``minAvailable`` its minMember, selecting its pods by
the group label they carry. A gang whose pods name their group otherwise
(Volcano's annotation, the native field) has no label to select them by and
gets none.

The budget guards against losing members one by one, not against being
evicted whole: gangsched's own preemption, which takes whole gangs only,
does not count it, and deletes it before evicting its gang (the Eviction
API would refuse). Pure: the step hands the actions to the shell.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import replace

from gangsched.core.actions import Action, Evict, WriteBudget
from gangsched.core.kubeobjects.groups import GroupSpec
from gangsched.core.kubeobjects.podgroups import COSCHEDULING_LABEL, GROUP_LABEL
from gangsched.core.model.objects import DisruptionBudget, GangKey, Pod
from gangsched.core.view import GroupFacts

__all__ = ["budgets_to_write", "others_budgets", "with_own_budgets"]

SELECTING_LABELS = (GROUP_LABEL, COSCHEDULING_LABEL)
"""The pod labels that name a pod's PodGroup, which a budget can select by."""


def budgets_to_write(
    groups: Mapping[GangKey, GroupFacts],
    specs: Mapping[GangKey, GroupSpec],
    bound_pods: Mapping[GangKey, tuple[Pod, ...]],
    budgets: Sequence[DisruptionBudget],
    evicting: AbstractSet[GangKey] = frozenset(),
) -> list[WriteBudget]:
    """A budget for each gang with at least minMember pods bound that has none of its
    name yet; one that exists (ours, or a person's by that name) is left as it is. A gang
    being preempted gets none: its own was deleted so that it may be evicted whole."""
    have = {budget.key for budget in budgets}
    writes: list[WriteBudget] = []
    for key, pods in bound_pods.items():
        spec, group = specs.get(key), groups.get(key)
        if (spec is None or group is None or key in have or key in evicting
                or len(pods) < spec.min_member):
            continue
        label = _selecting_label(pods, key.split("/", 1)[1])
        if label is not None:
            writes.append(WriteBudget(key, group.flavor.value, group.uid, spec.min_member,
                                      label))
    return writes


def _selecting_label(pods: Sequence[Pod], name: str) -> tuple[str, str] | None:
    """The group label every bound member carries with the group's name, if any."""
    for label in SELECTING_LABELS:
        if all(dict(pod.labels).get(label) == name for pod in pods):
            return label, name
    return None


def others_budgets(budgets: Sequence[DisruptionBudget]) -> tuple[DisruptionBudget, ...]:
    """The budgets preemption must keep: all but the gangs' own."""
    return tuple(budget for budget in budgets if not budget.group_uid)


def with_own_budgets(
    actions: Sequence[Action],
    groups: Mapping[GangKey, GroupFacts],
    budgets: Sequence[DisruptionBudget],
) -> list[Action]:
    """Each eviction naming its victims' own budgets, which go before the victims do."""
    owned: dict[str, list[str]] = {}
    for budget in budgets:
        if budget.group_uid:
            owned.setdefault(budget.group_uid, []).append(budget.key)
    if not owned:
        return list(actions)
    return [
        replace(action, own_budgets=tuple(sorted(
            key for victim in action.preemption.victims
            if (group := groups.get(victim)) is not None
            for key in owned.get(group.uid, ()))))
        if isinstance(action, Evict) else action
        for action in actions
    ]
