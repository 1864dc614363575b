"""Reported reasons: a new reason at once, unless only the figures after its first clause moved."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gangsched.core.model import GangKey
from gangsched.core.reasons import Reported, reported_reasons

GANG = GangKey("ns/train")
ROOM = "gang ns/train needs 8 pods \u00d7 1 nvidia.com/gpu; {} nodes can take 1 each"


def test_moving_figures_keep_the_reported_text_until_it_is_old() -> None:
    first = reported_reasons({}, {GANG: ROOM.format(3)}, now=0.0, hold_s=60.0)
    assert first[GANG] == Reported(ROOM.format(3), 0.0)
    later = reported_reasons(first, {GANG: ROOM.format(4)}, now=59.0, hold_s=60.0)
    assert later[GANG] == Reported(ROOM.format(3), 0.0)
    refreshed = reported_reasons(later, {GANG: ROOM.format(4)}, now=60.0, hold_s=60.0)
    assert refreshed[GANG] == Reported(ROOM.format(4), 60.0)


def test_a_new_first_clause_is_reported_at_once() -> None:
    members = "gang ns/train waits for its members: it needs 8 more pods"
    first = reported_reasons({}, {GANG: members}, now=0.0, hold_s=60.0)
    room = reported_reasons(first, {GANG: ROOM.format(0)}, now=1.0, hold_s=60.0)
    assert room[GANG] == Reported(ROOM.format(0), 1.0)
    starving = "starving (unplaced over 60s): holding 8 nvidia.com/gpu for it; " + ROOM.format(0)
    assert reported_reasons(room, {GANG: starving}, now=2.0, hold_s=60.0)[GANG].text == starving


def test_a_reason_of_one_clause_is_reported_whenever_it_changes() -> None:
    admission = "waiting for admission: minResources 8 cpu do not fit: {} cpu free"
    first = reported_reasons({}, {GANG: admission.format(3)}, now=0.0, hold_s=60.0)
    assert reported_reasons(first, {GANG: admission.format(4)}, now=1.0,
                            hold_s=60.0)[GANG].text == admission.format(4)


def test_gangs_no_longer_waiting_are_forgotten() -> None:
    first = reported_reasons({}, {GANG: ROOM.format(3)}, now=0.0, hold_s=60.0)
    assert reported_reasons(first, {}, now=1.0, hold_s=60.0) == {}


@given(st.lists(st.tuples(st.floats(0, 30), st.integers(0, 3), st.integers(0, 2)),
                min_size=1, max_size=30))
def test_the_reported_text_is_never_stale_beyond_the_hold(
    steps: list[tuple[float, int, int]],
) -> None:
    clauses = ("gang ns/train needs 8 pods", "starving: holding 8 cpu for it",
               "gang ns/train waits for its members")
    reported: dict[GangKey, Reported] = {}
    now = 0.0
    for seconds, figure, clause in steps:
        now += seconds
        reason = f"{clauses[clause]}; {figure} nodes can take 1 each"
        reported = reported_reasons(reported, {GANG: reason}, now, hold_s=60.0)
        shown = reported[GANG]
        assert shown.text == reason or (
            now - shown.since < 60.0 and shown.text.startswith(clauses[clause] + "; "))
