"""Refused binds back off per pod; the gang waits whole, holds no room and says why."""

from __future__ import annotations

from gangsched.core.model.objects import PodKey
from gangsched.core.reasons import BindBackoff
from gangsched.core.stages.backoff import MAX_S, delay_after, refused
from tests.unit.test_cycle import SIX_CPU, cycle, gang, placed, reasons

DENIED = 'admission webhook "deny.example.com" denied the request: bindings are frozen'


def test_the_delay_doubles_with_every_refusal_in_a_row_up_to_a_cap() -> None:
    assert [delay_after(n) for n in range(1, 7)] == [1.0, 2.0, 4.0, 8.0, MAX_S, MAX_S]
    assert delay_after(10_000) == MAX_S

    first = refused(None, now=100.0, status=403, message=DENIED)
    second = refused(first, now=101.0, status=403, message=DENIED)
    assert (first.refusals, first.until) == (1, 101.0)
    assert (second.refusals, second.until) == (2, 103.0)


def test_the_message_is_one_short_line() -> None:
    refusal = refused(None, now=0.0, status=500, message="line one\n  line two " + "x" * 500)
    assert "\n" not in refusal.message
    assert refusal.message.startswith("line one line two")
    assert len(refusal.message) <= 200


def test_a_gang_waits_whole_while_a_member_backs_off_and_is_tried_after() -> None:
    refusal = {"ns/a-1": refused(None, now=100.0, status=403, message=DENIED)}
    gangs = [gang("ns/a", 3, created=0), gang("ns/b", 3, created=1)]

    during = cycle(SIX_CPU, gangs, now=100.5, bind_refusals=refusal)
    # No member of the gang is placed, and the room it would take goes to the next.
    assert placed(during) == ["ns/b"]
    reason = reasons(during)["ns/a"]
    assert reason == BindBackoff(PodKey("ns/a-1"), 403, DENIED, others=0, refusals=1)
    # The reason stays the same while it backs off: written once, not every cycle.
    assert reasons(cycle(SIX_CPU, gangs, now=100.9, bind_refusals=refusal))["ns/a"] == reason

    after = cycle(SIX_CPU, gangs, now=101.0, bind_refusals=refusal)
    assert placed(after)[0] == "ns/a"


def test_the_reason_counts_the_other_members_backing_off() -> None:
    refusals = {f"ns/a-{i}": refused(None, now=0.0, status=0, message="") for i in range(3)}
    reason = reasons(cycle(SIX_CPU, [gang("ns/a", 3)], now=0.5, bind_refusals=refusals))["ns/a"]
    assert reason == BindBackoff(PodKey("ns/a-0"), 0, "", others=2, refusals=1)
