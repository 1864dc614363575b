"""Room held for the replacement of a member a running gang lost.

Operators replace a dead worker only after the old pod is gone: Kubeflow's
training-operator creates the new pod about 0.3 s after the old one is
deleted or fails. In that gap the freed room looks free, and a waiting gang
that takes it leaves the running gang below its minMember, stranded, for as
long as the newcomer runs: the very deadlock a gang scheduler exists to
prevent. So from the moment a running gang drops below its minMember, the
room of each departed member is held for it, for a bounded grace: released
when the gang is whole again, finishes or goes away, or the grace ends.

Pure: the shell passes in what it saw last cycle and now, and the clock.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import NamedTuple

from gangsched.core.dra.devices import DeviceRef, Inventory
from gangsched.core.model.objects import (
    GangKey,
    NodeName,
    Pod,
    PodKey,
    PodPlacementRules,
    SelectorRequirement,
    SelectorTerm,
)
from gangsched.core.model.resources import Resources


class Seat(NamedTuple):
    """A live member of a PodGroup: bound (or assumed) to a node and not finished.

    A named tuple, not a frozen dataclass: one is made for every bound member
    every cycle, and a tuple is made several times faster."""

    pod: Pod
    gang: GangKey
    devices: tuple[DeviceRef, ...] = ()
    """The devices allocated to the claims it holds: once it has gone, its claims are let
    go (or deleted) and nothing else says which devices were its."""


@dataclass(frozen=True, slots=True)
class GroupLife:
    """What a hold needs of a group present this cycle and not finished."""

    uid: str
    min_member: int


@dataclass(frozen=True, slots=True)
class Hold:
    """The room of one departed member, held for its gang until ``until``."""

    gang: GangKey
    uid: str
    """The group's UID: a group created again under the same name holds nothing of this."""
    pod: Pod
    """The departed member: its requests, its node (``node_name``) and its rules."""
    until: float
    devices: tuple[DeviceRef, ...] = ()
    """The devices its claims had on its node, held with its room while free."""
    bought: bool = False
    """Not a departed member: a node an autoscaler made for the gang while it asked for
    nodes, its free room held whole on that node (``pod`` stands in for it; see
    core.asking.bought_holds); never held elsewhere."""


def seats_of(
    pods: Iterable[tuple[Pod, GangKey | None]], devices: Inventory | None = None
) -> dict[PodKey, Seat]:
    """The live members of groups among ``(pod, group)`` pairs, with the devices of the
    claims they hold in ``devices`` (extended resources served by devices need none: a
    stand-in asking them gets devices of its own, see :func:`pinned`)."""
    return {
        pod.key: Seat(pod, gang) if devices is None or not pod.resource_claims
        else Seat(pod, gang, devices.devices_held_by(pod.uid))
        for pod, gang in pods
        if gang is not None and pod.node_name is not None and not pod.terminal
    }


def update_holds(
    before: Mapping[PodKey, Seat],
    now_seated: Mapping[PodKey, Seat],
    holds: Iterable[Hold],
    groups: Mapping[GangKey, GroupLife],
    succeeded: Collection[PodKey],
    *,
    now: float,
    grace: float,
) -> tuple[Hold, ...]:
    """The holds for this cycle, from last cycle's seats, this cycle's and the clock.

    A member departs when it held a seat last cycle and holds none now,
    unless it succeeded (a finished worker is not replaced). Its room is held
    when its gang was running (``min_member`` live) or already holding, and
    is now below ``min_member`` with members left: a gang with none left (a
    job being deleted) strands nobody, and holding for it would only keep
    others out. A gang never holds more rooms than it lacks members: as
    replacements take seats, the oldest holds go first. At most one hold per
    departed pod.
    """
    live_before = Counter(seat.gang for seat in before.values())
    live_now = Counter(seat.gang for seat in now_seated.values())
    holding_before = {hold.gang for hold in holds}
    # Keyed by the departed pod: a replacement created under its name (StatefulSets,
    # training-operator's ``job-worker-N``) that leaves again replaces the old hold,
    # and one back in its seat needs none. Two holds for one pod would hold the
    # same stand-in twice, and releasing it would fail the cycle.
    kept: dict[PodKey, Hold] = {
        hold.pod.key: hold for hold in holds
        if hold.until > now and live_now[hold.gang] > 0 and hold.pod.key not in now_seated
        and (group := groups.get(hold.gang)) is not None and group.uid == hold.uid
    }
    for key, seat in before.items():
        if key in now_seated or key in succeeded:
            continue
        group = groups.get(seat.gang)
        if group is None or not 0 < live_now[seat.gang] < group.min_member:
            continue
        if live_before[seat.gang] >= group.min_member or seat.gang in holding_before:
            kept[key] = Hold(seat.gang, group.uid, seat.pod, now + grace, seat.devices)
    out: list[Hold] = []
    per_gang: dict[GangKey, list[Hold]] = {}
    for hold in kept.values():
        per_gang.setdefault(hold.gang, []).append(hold)
    for gang, gang_holds in sorted(per_gang.items()):
        lacking = max(0, groups[gang].min_member - live_now[gang])
        newest = sorted(gang_holds, key=lambda h: (h.until, h.pod.key))[-lacking:] if lacking \
            else []
        out.extend(newest)
    return tuple(out)


def pinned(pod: Pod) -> Pod:
    """The departed member as a stand-in that fits only on the node it left.

    Its node selector and tolerations stay; its node affinity is replaced by
    the node's name, which it satisfied there.
    """
    if pod.node_name is None:
        return anywhere(pod)
    term = SelectorTerm(match_fields=(
        SelectorRequirement("metadata.name", "In", (pod.node_name,)),
    ))
    rules = PodPlacementRules(node_selector=pod.rules.node_selector, required_affinity=(term,),
                              tolerations=pod.rules.tolerations)
    return replace(pod, key=PodKey(f"{pod.key}#held"), rules=rules, node_name=None,
                   resource_claims=())


def anywhere(pod: Pod) -> Pod:
    """The departed member as a stand-in that may go wherever its own rules let it.

    Without its claims: a stand-in holds room, it is never bound, and its
    replacement comes with claims of its own.
    """
    return replace(pod, key=PodKey(f"{pod.key}#held"), node_name=None, resource_claims=())


def describe(held: Iterable[tuple[Hold, NodeName]]) -> str:
    """What a group's status says while it holds room (the holds and the nodes holding them).

    The words change only when the holds do, never with the clock.
    """
    total = Resources.zero()
    nodes: set[NodeName] = set()
    bought: set[NodeName] = set()
    count = 0
    for hold, node in held:
        if hold.bought:
            bought.add(node)
            continue
        total = total + hold.pod.requests
        nodes.add(node)
        count += 1
    said = []
    if count:
        said.append(f"holding the room of {count} departed member{'s' if count != 1 else ''} "
                    f"({total} on {', '.join(sorted(nodes))}) for its replacement")
    if bought:
        said.append(f"holding the node{'s' if len(bought) != 1 else ''} "
                    f"{', '.join(sorted(bought))} made for it while it asked for nodes")
    return "; ".join(said)
