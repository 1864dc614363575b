"""Reported reasons: a new reason at once, unless only its moving figures changed."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gangsched.core.model.objects import GangKey, PodKey, PodPlacementRules
from gangsched.core.model.resources import Resources
from gangsched.core.reasons import (
    AdmissionNoRoom,
    DevicesShort,
    DoesNotFit,
    InSubGroup,
    MembersMissing,
    Reason,
    ShapeFigures,
    ShortOfMembers,
    Starved,
    Starving,
)
from gangsched.core.reports.report_plan import reported_reasons
from gangsched.core.state import Reported

GANG = GangKey("ns/train")
GPU = Resources.of({"nvidia.com/gpu": 1, "pods": 1})


def room(nodes: int, wanted: int = 8) -> DoesNotFit:
    """Gang ns/train needs ``wanted`` pods of 1 GPU; ``nodes`` nodes can take 1 each."""
    shape = ShapeFigures(GPU, PodPlacementRules(), wanted, {1: nodes} if nodes else {}, {}, {})
    return DoesNotFit(GANG, need=wanted, bound=0, min_member=wanted, shapes=(shape,))


def starving(cause: Reason, gpus: int = 8) -> Starving:
    return Starving(Starved(60.0), Resources.of({"nvidia.com/gpu": gpus}), cause)


def test_moving_figures_keep_the_reported_reason_until_it_is_old() -> None:
    first = reported_reasons({}, {GANG: room(3)}, now=0.0, hold_s=60.0)
    assert first[GANG] == Reported(room(3), 0.0)
    later = reported_reasons(first, {GANG: room(4)}, now=59.0, hold_s=60.0)
    assert later[GANG] == Reported(room(3), 0.0)
    refreshed = reported_reasons(later, {GANG: room(4)}, now=60.0, hold_s=60.0)
    assert refreshed[GANG] == Reported(room(4), 60.0)


def test_what_the_gang_asks_is_not_a_moving_figure() -> None:
    first = reported_reasons({}, {GANG: room(3)}, now=0.0, hold_s=60.0)
    fewer = reported_reasons(first, {GANG: room(3, wanted=6)}, now=1.0, hold_s=60.0)
    assert fewer[GANG] == Reported(room(3, wanted=6), 1.0)


def test_members_created_one_by_one_do_not_rewrite_a_short_gang_s_reason_each_time() -> None:
    first = reported_reasons({}, {GANG: ShortOfMembers(GANG, 1, 8)}, now=0.0, hold_s=60.0)
    more = reported_reasons(first, {GANG: ShortOfMembers(GANG, 5, 8)}, now=1.0, hold_s=60.0)
    assert more[GANG] == first[GANG]
    raised = reported_reasons(more, {GANG: ShortOfMembers(GANG, 5, 9)}, now=2.0, hold_s=60.0)
    assert raised[GANG] == Reported(ShortOfMembers(GANG, 5, 9), 2.0)


def test_members_of_a_sub_group_created_one_by_one_do_not_rewrite_the_reason_each_time(
) -> None:
    def short(has: int) -> InSubGroup:
        return InSubGroup("tp0", ShortOfMembers(GANG, has, 8))

    first = reported_reasons({}, {GANG: short(1)}, now=0.0, hold_s=60.0)
    more = reported_reasons(first, {GANG: short(5)}, now=1.0, hold_s=60.0)
    assert more[GANG] == first[GANG]
    other = InSubGroup("tp1", ShortOfMembers(GANG, 5, 8))
    assert reported_reasons(more, {GANG: other}, now=2.0, hold_s=60.0)[GANG] == Reported(
        other, 2.0)


def test_a_new_kind_of_reason_is_reported_at_once() -> None:
    members = MembersMissing(GANG, need=8, min_member=8, bound=0)
    first = reported_reasons({}, {GANG: members}, now=0.0, hold_s=60.0)
    fits = reported_reasons(first, {GANG: room(0)}, now=1.0, hold_s=60.0)
    assert fits[GANG] == Reported(room(0), 1.0)
    held = reported_reasons(fits, {GANG: starving(room(0))}, now=2.0, hold_s=60.0)
    assert held[GANG] == Reported(starving(room(0)), 2.0)


def test_a_new_kind_of_reason_waits_out_the_gap_after_the_last() -> None:
    """A gang whose reason changes at every cycle for a moment (its last pods being
    created, gangs coming and going) is told the one that holds, not each in between."""
    members = MembersMissing(GANG, need=8, min_member=8, bound=0)
    first = reported_reasons({}, {GANG: members}, now=0.0, hold_s=60.0, gap_s=2.0)
    soon = reported_reasons(first, {GANG: room(0)}, now=0.5, hold_s=60.0, gap_s=2.0)
    assert soon[GANG] == Reported(members, 0.0)
    flapped = reported_reasons(soon, {GANG: starving(room(0))}, now=1.5, hold_s=60.0,
                               gap_s=2.0)
    assert flapped[GANG] == Reported(members, 0.0)
    held = reported_reasons(flapped, {GANG: starving(room(0))}, now=2.0, hold_s=60.0,
                            gap_s=2.0)
    assert held[GANG] == Reported(starving(room(0)), 2.0)


def test_a_wrapping_reason_holds_while_only_its_cause_s_figures_move() -> None:
    first = reported_reasons({}, {GANG: starving(room(0))}, now=0.0, hold_s=60.0)
    moved = reported_reasons(first, {GANG: starving(room(2))}, now=1.0, hold_s=60.0)
    assert moved[GANG] == Reported(starving(room(0)), 0.0)
    more = reported_reasons(moved, {GANG: starving(room(2), gpus=4)}, now=2.0, hold_s=60.0)
    assert more[GANG] == Reported(starving(room(2), gpus=4), 2.0)


def test_a_reason_whose_every_figure_matters_is_reported_whenever_it_changes() -> None:
    def admission(free: int) -> AdmissionNoRoom:
        cpu = Resources.of({"cpu": 8000})
        return AdmissionNoRoom(cpu, Resources.of({"cpu": free * 1000}), Resources.zero(), cpu)

    first = reported_reasons({}, {GANG: admission(3)}, now=0.0, hold_s=60.0)
    assert reported_reasons(first, {GANG: admission(4)}, now=1.0,
                            hold_s=60.0)[GANG].reason == admission(4)


def test_gangs_no_longer_waiting_are_forgotten() -> None:
    first = reported_reasons({}, {GANG: room(3)}, now=0.0, hold_s=60.0)
    assert reported_reasons(first, {}, now=1.0, hold_s=60.0) == {}


@given(st.lists(st.tuples(st.floats(0, 30), st.integers(0, 3), st.integers(0, 2)),
                min_size=1, max_size=30))
def test_the_reported_reason_is_never_stale_beyond_the_hold(
    steps: list[tuple[float, int, int]],
) -> None:
    kinds = (
        room,
        lambda nodes: starving(room(nodes)),
        lambda nodes: MembersMissing(GANG, need=8, min_member=8, bound=nodes),
    )
    reported: dict[GangKey, Reported] = {}
    now = 0.0
    for seconds, figure, kind in steps:
        now += seconds
        reason = kinds[kind](figure)
        reported = reported_reasons(reported, {GANG: reason}, now, hold_s=60.0)
        shown = reported[GANG]
        assert shown.reason == reason or (
            now - shown.since < 60.0 and type(shown.reason) is type(reason)
            and kind != 2)


def short(free: int, need: int = 4) -> DevicesShort:
    """Member w-0's claim needs ``need`` GPUs of one clique; the best node has ``free``."""
    return DevicesShort(GANG, PodKey("ns/w-0"), "ns/w-0-gpus", "gpus", "gpu.example.com",
                        need, 2, attribute="gpu.example.com/clique", best_node="n-1",
                        best_free=free, best_total=8, best_group="n-1-b")


def test_free_devices_are_a_moving_figure_what_the_claim_asks_is_not() -> None:
    first = reported_reasons({}, {GANG: short(2)}, now=0.0, hold_s=60.0)
    later = reported_reasons(first, {GANG: short(3)}, now=30.0, hold_s=60.0)
    assert later[GANG] == Reported(short(2), 0.0)
    asks_more = reported_reasons(later, {GANG: short(3, need=8)}, now=31.0, hold_s=60.0)
    assert asks_more[GANG] == Reported(short(3, need=8), 31.0)
