"""A gang patient for its preferred level: ``topology.preferredWaitSeconds``.

The fabric of test_topology_levels: two blocks of two racks of two 8-GPU nodes. A
gang preferring a rack that no rack holds now, but a block does, waits for a rack
for as long as its PodGroup says, then takes the block; a rack that holds it is
taken at once, whatever it says.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from gangsched.core.actions import GANG_WAITING, Bind
from gangsched.core.kubeobjects.fields import ObjectError
from gangsched.core.kubeobjects.podgroups import group_from_api
from gangsched.core.model.objects import Flavor, Gang, LevelRequest
from gangsched.core.placement.capacity import Capacity, Placement, Unplaceable
from gangsched.core.placement.topology import domains_of, place_in_levels
from gangsched.core.reasons import LevelHeld, NoDomainHolds, WaitsForPreferred, render
from gangsched.core.reports.explain import closest_domains
from gangsched.core.state import State
from gangsched.core.step import step
from gangsched.core.view import StepView
from tests.unit.test_step import CONFIG, Cluster
from tests.unit.test_topology_levels import (
    BLOCK,
    RACK,
    TOPOLOGIES,
    fabric,
    levelled,
    podgroup,
    racks_used,
    two_workers,
)

NO_RACK_HOLDS = (4, 0, 4, 0, 6, 0, 0, 6)
"""One whole node free in each rack: a 16-GPU gang fits in either block, in no rack."""


def patient(gpus: int, wait: int = 30, *, required: str | None = BLOCK) -> Gang:
    subject = levelled(gpus, required=required, preferred=RACK)
    assert subject.levels is not None
    return replace(subject, levels=replace(subject.levels, preferred_wait_s=wait))


def test_a_patient_gang_no_rack_holds_waits_naming_the_block_that_would_and_takes_nothing(
) -> None:
    snapshot = fabric(NO_RACK_HOLDS)
    capacity = Capacity(snapshot)
    before = {name: capacity.free(name) for name in snapshot.nodes}
    subject = patient(16)
    decision = place_in_levels(capacity, subject, CONFIG.policy,
                               lambda keys: domains_of(snapshot, keys), patient=True)
    assert isinstance(decision, Unplaceable)
    reason = decision.reason
    assert isinstance(reason, WaitsForPreferred)
    assert (reason.preferred, reason.wait_s, reason.wider) == (RACK, 30, BLOCK)
    assert isinstance(reason.cause, NoDomainHolds) and reason.cause.domains == 4
    assert {room.value for room in closest_domains(reason)} >= {"r0", "r1"}
    assert {name: capacity.free(name) for name in snapshot.nodes} == before

    impatient = place_in_levels(capacity, subject, CONFIG.policy,
                                lambda keys: domains_of(snapshot, keys))
    assert isinstance(impatient, Placement) and impatient.level == LevelHeld(BLOCK, "b1", RACK)


def test_a_patient_gang_takes_a_rack_that_holds_it_at_once() -> None:
    snapshot = fabric((4, 0, 0, 0, 6, 0, 0, 6))
    decision = place_in_levels(Capacity(snapshot), patient(16), CONFIG.policy,
                               lambda keys: domains_of(snapshot, keys), patient=True)
    assert isinstance(decision, Placement) and racks_used(decision) == {"r1"}


def test_a_patient_gang_no_block_holds_waits_rather_than_spread() -> None:
    taken = (0, 8, 8, 8, 0, 8, 8, 4)  # 8 GPUs free in block b0, 12 in b1
    snapshot = fabric(taken)
    decision = place_in_levels(Capacity(snapshot), patient(20, required=None), CONFIG.policy,
                               lambda keys: domains_of(snapshot, keys), patient=True)
    assert isinstance(decision, Unplaceable)
    assert isinstance(decision.reason, WaitsForPreferred) and decision.reason.wider == ""
    assert "spread across domains" in render(decision.reason)


def _cluster(wait: int) -> Cluster:
    return two_workers({"name": "fabric", "required": BLOCK, "preferred": RACK,
                        "preferredWaitSeconds": wait}, fabric(NO_RACK_HOLDS), TOPOLOGIES)


def test_a_gang_waits_its_preferred_seconds_for_a_rack_then_takes_a_block() -> None:
    view = StepView(_cluster(25))
    first = step(State(), view, 100.0, CONFIG)
    (waiting,) = first.result.unplaceable
    assert isinstance(waiting.reason, WaitsForPreferred)
    assert not first.result.placements
    # The scheduler, which reuses a cycle's answer while nothing changes, wakes then.
    assert 125.0 in first.thresholds

    still = step(first.state, view, 124.0, CONFIG)
    assert not still.result.placements

    later = step(still.state, view, 125.0, CONFIG)
    (placed,) = later.result.placements
    assert placed.level == LevelHeld(BLOCK, "b1", RACK)
    assert any(isinstance(action, Bind) for action in later.actions)


def test_a_gang_waiting_for_its_preferred_level_asks_no_nodes() -> None:
    # It fits now: its pods say GangWaiting, not Unschedulable, so no autoscaler buys nodes.
    first = step(State(), StepView(_cluster(30)), 100.0, CONFIG)
    reports = [action for action in first.actions if hasattr(action, "condition_reason")]
    assert reports and all(action.condition_reason == GANG_WAITING for action in reports)


def test_without_a_wait_the_gang_takes_the_block_at_once() -> None:
    stepped = step(State(), StepView(_cluster(0)), 100.0, CONFIG)
    (placed,) = stepped.result.placements
    assert placed.level == LevelHeld(BLOCK, "b1", RACK)


def test_a_podgroup_says_how_long_it_waits_for_its_preferred_level() -> None:
    spec = group_from_api(podgroup({"name": "fabric", "preferred": RACK,
                                    "preferredWaitSeconds": 45}), Flavor.GANGSCHED)
    assert spec.topology == LevelRequest("fabric", None, RACK, preferred_wait_s=45)
    with pytest.raises(ObjectError, match="preferredWaitSeconds -1"):
        group_from_api(podgroup({"name": "fabric", "preferred": RACK,
                                 "preferredWaitSeconds": -1}), Flavor.GANGSCHED)
    with pytest.raises(ObjectError, match="needs a preferred level"):
        group_from_api(podgroup({"name": "fabric", "required": RACK,
                                 "preferredWaitSeconds": 10}), Flavor.GANGSCHED)
