"""The dispatcher against an in-memory API server that records calls and answers as told."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import pytest

from gangsched.dispatcher import Answer, Call, CallKey, Dispatcher, Rank


@dataclass
class FakeServer:
    """Answers every call with ``status`` (or what ``answers`` holds for its key, in turn)
    after ``delay`` seconds, and records what it received."""

    status: int = 200
    delay: float = 0.0
    answers: dict[CallKey, list[int]] = field(default_factory=dict)
    received: list[tuple[CallKey, str, object]] = field(default_factory=list)
    gate: asyncio.Event | None = None
    """While set to an unset event, calls wait for it before answering."""

    async def answer(self, key: CallKey, what: str, state: object) -> Answer:
        self.received.append((key, what, state))
        if self.gate is not None:
            await self.gate.wait()
        await asyncio.sleep(self.delay)
        statuses = self.answers.get(key)
        return Answer(statuses.pop(0) if statuses else self.status)

    def call(self, key: CallKey, rank: Rank, what: str = "write", state: object = None,
             **kwargs: object) -> Call:
        send: Callable[[], Awaitable[Answer]] = functools.partial(
            self.answer, key, what, state)
        return Call(key, rank, what, send, state=state, **kwargs)  # type: ignore[arg-type]

    def sent(self, key: CallKey | None = None) -> list[object]:
        return [state for k, _, state in self.received if key is None or k == key]


def status(server: FakeServer, uid: str, body: object, **kwargs: object) -> Call:
    return server.call((uid, ""), Rank.STATUS, "status", body, retry=True, **kwargs)


async def test_binds_go_before_evictions_before_statuses_before_events() -> None:
    server = FakeServer(gate=asyncio.Event())
    dispatcher = Dispatcher(bind_workers=1, write_workers=1)
    dispatcher.submit(server.call(("e1", "event/x"), Rank.EVENT, "event"))
    dispatcher.submit(server.call(("g1", ""), Rank.STATUS, "status"))
    dispatcher.submit(server.call(("p1", ""), Rank.EVICT, "evict"))
    dispatcher.submit(server.call(("p2", ""), Rank.BIND, "bind"))
    dispatcher.submit(server.call(("p3", ""), Rank.BIND, "bind"))
    await asyncio.sleep(0.01)
    # One bind worker is busy and a second bind waits: no other write may start.
    assert [what for _, what, _ in server.received] == ["bind"]
    assert server.gate is not None
    server.gate.set()
    await dispatcher.drain()
    assert [what for _, what, _ in server.received] == [
        "bind", "bind", "evict", "status", "event"]


async def test_the_latest_status_of_an_object_replaces_its_pending_one() -> None:
    server = FakeServer()
    dispatcher = Dispatcher(bind_workers=1, write_workers=1)
    for body in ("a", "b", "c"):
        dispatcher.submit(status(server, "g1", body))
    dispatcher.submit(status(server, "g2", "x"))
    assert len(dispatcher) == 2  # one pending call per object
    await dispatcher.drain()
    assert server.sent() == ["c", "x"]


async def test_a_write_of_what_was_accepted_is_skipped_and_a_change_goes_out() -> None:
    server = FakeServer()
    dispatcher = Dispatcher(bind_workers=1, write_workers=2)
    dispatcher.submit(status(server, "g1", "a"))
    await dispatcher.drain()
    dispatcher.submit(status(server, "g1", "a"))
    await dispatcher.drain()
    dispatcher.submit(status(server, "g1", "b"))
    await dispatcher.drain()
    assert server.sent() == ["a", "b"]


async def test_a_refused_write_is_tried_again_until_accepted_then_remembered(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("gangsched.dispatcher.BACKOFF_BASE_S", 0.01)
    server = FakeServer(answers={("g1", ""): [422, 500, 0]})
    dispatcher = Dispatcher(bind_workers=1, write_workers=1)
    dispatcher.submit(status(server, "g1", "Inqueue"))
    await asyncio.sleep(0.2)
    # Refused, failed, unanswered, then accepted: four tries of the same body.
    assert server.sent() == ["Inqueue"] * 4
    assert len(dispatcher) == 0
    dispatcher.submit(status(server, "g1", "Inqueue"))
    await dispatcher.drain()
    assert server.sent() == ["Inqueue"] * 4  # accepted now: nothing more to send


async def failed_once(monkeypatch: pytest.MonkeyPatch,
                      backoff: float) -> tuple[FakeServer, Dispatcher]:
    """A dispatcher whose write of "a" to g1 just failed with 503, backing off."""
    monkeypatch.setattr("gangsched.dispatcher.BACKOFF_BASE_S", backoff)
    server = FakeServer(answers={("g1", ""): [503]})
    dispatcher = Dispatcher(bind_workers=1, write_workers=1)
    dispatcher.submit(status(server, "g1", "a"))
    await asyncio.sleep(0.02)
    return server, dispatcher


async def test_a_failed_write_is_not_remembered_as_written(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The body that failed is asked for again later: it goes out, not skipped."""
    server, dispatcher = await failed_once(monkeypatch, backoff=10.0)
    assert server.sent() == ["a"] and len(dispatcher) == 1  # backing off
    dispatcher.submit(status(server, "g1", "b"))  # supersedes it, after the backoff
    dispatcher.submit(status(server, "g1", "a"))
    assert len(dispatcher) == 1
    await asyncio.sleep(0.05)
    assert server.sent() == ["a"]  # the object still backs off


async def test_a_newer_call_during_a_backoff_goes_instead_of_the_failed_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    server, dispatcher = await failed_once(monkeypatch, backoff=0.1)
    dispatcher.submit(status(server, "g1", "b"))
    await asyncio.sleep(0.3)
    assert server.sent() == ["a", "b"]


async def test_an_object_gone_or_changed_is_not_retried() -> None:
    server = FakeServer(answers={("g1", ""): [404], ("p1", ""): [409]})
    dispatcher = Dispatcher(bind_workers=1, write_workers=1)
    dispatcher.submit(status(server, "g1", "a"))
    dispatcher.submit(status(server, "p1", "c"))
    await dispatcher.drain()
    assert len(dispatcher) == 0 and len(server.received) == 2


async def test_nothing_goes_out_while_the_replica_may_not_act(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("gangsched.dispatcher.BACKOFF_BASE_S", 0.05)
    leading = False
    server = FakeServer()
    dispatcher = Dispatcher(bind_workers=2, write_workers=2, may_act=lambda: leading)
    done = asyncio.get_running_loop().create_future()
    dispatcher.submit(server.call(("p1", ""), Rank.BIND, "bind", done=done))
    dispatcher.submit(server.call(("p2", ""), Rank.EVICT, "evict"))
    dispatcher.submit(status(server, "g1", "a"))
    dispatcher.submit(server.call(("g1", "event/x"), Rank.EVENT, "event"))
    await dispatcher.drain()
    assert server.received == []
    assert not (await done).sent
    leading = True
    await asyncio.sleep(0.1)  # the status held back goes once its backoff ends
    assert server.sent() == ["a"]


async def test_a_bind_replaces_a_pending_condition_of_its_pod_and_outranks_later_ones() -> None:
    server = FakeServer(gate=asyncio.Event())
    dispatcher = Dispatcher(bind_workers=1, write_workers=1)
    dispatcher.submit(status(server, "busy", "x"))  # holds the only write worker
    await asyncio.sleep(0.01)
    dispatcher.submit(status(server, "p1", "unschedulable"))
    dispatcher.submit(server.call(("p1", ""), Rank.BIND, "bind", "bind"))
    late = status(server, "p1", "late", done=asyncio.get_running_loop().create_future())
    assert late.done is not None
    dispatcher.submit(late)
    assert not (await late.done).sent
    assert server.gate is not None
    server.gate.set()
    await dispatcher.drain()
    assert server.sent() == ["x", "bind"]


async def test_a_changed_state_and_a_new_object_go_at_once_and_an_unchanged_one_not() -> None:
    """The dispatcher holds nothing back (when a write is due is the report plan's):
    a changed condition goes at once, a pod created again under its name (a new UID)
    too, and a condition already accepted is skipped."""
    server = FakeServer()
    dispatcher = Dispatcher(bind_workers=1, write_workers=1)
    dispatcher.submit(status(server, "uid-1", "unschedulable"))
    await dispatcher.drain()
    dispatcher.submit(status(server, "uid-1", "unschedulable"))
    dispatcher.submit(status(server, "uid-1", "other reason"))
    dispatcher.submit(status(server, "uid-2", "unschedulable"))
    await dispatcher.drain()
    assert server.received == [(("uid-1", ""), "status", "unschedulable"),
                               (("uid-1", ""), "status", "other reason"),
                               (("uid-2", ""), "status", "unschedulable")]


async def test_two_events_of_one_reason_asked_before_the_first_went_out_are_one() -> None:
    server = FakeServer(gate=asyncio.Event())
    dispatcher = Dispatcher(bind_workers=1, write_workers=1)
    dispatcher.submit(status(server, "busy", "x"))  # holds the only write worker
    await asyncio.sleep(0.01)
    for message in ("m1", "m2"):
        dispatcher.submit(server.call(("p1", "event/Unschedulable"), Rank.EVENT, "event",
                                      message))
    assert server.gate is not None
    server.gate.set()
    await dispatcher.drain()
    assert server.sent() == ["x", "m2"]


async def test_a_flood_of_writes_holds_one_entry_per_object() -> None:
    server = FakeServer(delay=0.001)
    dispatcher = Dispatcher(bind_workers=4, write_workers=4)
    for round_ in range(50):
        for obj in range(100):
            dispatcher.submit(status(server, f"g{obj}", round_))
        assert len(dispatcher) <= 100
    await dispatcher.drain()
    assert dispatcher.remembered() == 100
    assert {state for key, _, state in server.received if key == ("g7", "")} >= {49}
    dispatcher.retain(lambda object_id: object_id in {"g1", "g2"})
    assert dispatcher.remembered() == 2


async def test_more_binds_than_workers_all_go_out_with_their_callers_told() -> None:
    server = FakeServer(delay=0.001)
    dispatcher = Dispatcher(bind_workers=4, write_workers=1)
    loop = asyncio.get_running_loop()
    futures = []
    for i in range(15):
        done: asyncio.Future[Answer] = loop.create_future()
        dispatcher.submit(server.call((f"p{i}", ""), Rank.BIND, "bind", i, done=done))
        futures.append(done)
    answers = await asyncio.wait_for(asyncio.gather(*futures), timeout=5)
    assert all(answer.accepted for answer in answers)
    assert sorted(server.sent()) == list(range(15))  # type: ignore[type-var]


async def test_a_call_that_merges_with_the_pending_one_sends_both_and_answers_both() -> None:
    server = FakeServer(gate=asyncio.Event())
    dispatcher = Dispatcher(bind_workers=1, write_workers=1)
    loop = asyncio.get_running_loop()
    dispatcher.submit(server.call(("busy", ""), Rank.ALLOCATE, "allocate", "x"))
    await asyncio.sleep(0.01)  # holds the only worker

    def merging(body: str) -> Call:
        call = server.call(("c1", ""), Rank.ALLOCATE, "allocate", body, done=loop.create_future())
        return call._replace(merge=lambda pending: functools.partial(
            server.answer, ("c1", ""), "allocate", f"{pending.state}+{body}"))

    first, second = merging("a"), merging("b")
    dispatcher.submit(first)
    dispatcher.submit(second)
    assert len(dispatcher) == 1
    assert server.gate is not None
    server.gate.set()
    await dispatcher.drain()
    assert server.sent(("c1", "")) == ["a+b"]
    assert first.done is not None and second.done is not None
    assert (await first.done).accepted and (await second.done).accepted
