"""One queue for every call to the API server: binds, evictions, status writes and Events.

As kube-scheduler's ``api_dispatcher``: at most one pending call per object,
keyed by the object's UID (a pod deleted and created again under the same
name is another object, with nothing of the old one's history), so memory
follows the cluster, not the rate of decisions.

- Ranked: a bind goes before an eviction, an eviction before a status write,
  a status write before an Event; a lower rank waits while a higher one is
  pending, so a flood of binds is not slowed by the writes it causes.
- Coalescing: a new call replaces the object's pending one (the latest
  desired state wins), or merges with it where the call says how (a claim's
  second reservation keeps the first); a call of lower rank than the pending
  one is dropped.
- Skipping: a call that would set what the API server last accepted for the
  object goes nowhere. Only what was accepted is remembered, so a write that
  failed is not mistaken for one that went through: it is retried, backing
  off per object, until it is accepted or a newer call replaces it.
- Fenced: ``may_act`` is asked right before each call goes out; a replica
  that cannot be sure it leads sends nothing and says so.

Binds run on their own workers (the bind concurrency), everything else on a
smaller pool; workers live while there is work, never a task per call.
"""

from __future__ import annotations

import asyncio
import enum
import json
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import aiohttp
import structlog
from kubernetes_asyncio.client.exceptions import ApiException

log = structlog.get_logger(__name__)

NOT_LEADING = "not sent: this replica's lease was not renewed within the renew deadline"
SUPERSEDED = "not sent: a newer call for the same object replaced it"
BACKOFF_BASE_S = 0.5
BACKOFF_MAX_S = 16.0
"""A failed write is tried again after 0.5 s, 1 s, 2 s ... at most this long apart."""
FINAL_STATUSES = frozenset({404, 409})
"""The object is gone, or changed since the call was decided: trying again cannot help,
the next decision about the object (if any) makes a new call."""


class Rank(enum.IntEnum):
    """What goes out first; a lower value outranks a higher one."""

    BIND = 0
    ALLOCATE = 1
    """Device claim allocations, which must land before their pod's bind."""
    EVICT = 2
    STATUS = 3
    """Status subresources and pod conditions."""
    EVENT = 4


BIND_RANKS = (Rank.BIND, Rank.ALLOCATE)
WRITE_RANKS = (Rank.EVICT, Rank.STATUS, Rank.EVENT)

ObjectId = str
"""An object's UID where it has one, else a name no UID can take (``queue/default``)."""
CallKey = tuple[ObjectId, str]
"""An object and what the call does to it: one slot for the object itself (bind, evict,
status share ``""``, so a bind replaces a pending condition of its pod), one per kind
of Event about it (an Event is an object of its own)."""


class Answer(NamedTuple):
    """A named tuple, not a dataclass, as ``Call``: one is made for every bind."""

    status: int
    """HTTP status; 0 when the request failed or never went out."""
    detail: str = ""
    sent: bool = True
    """False when the call never went out (replaced, skipped, or this replica may not act)."""

    @property
    def accepted(self) -> bool:
        return 200 <= self.status <= 299


_NOTHING = object()
"""What no accepted state equals."""


class Call(NamedTuple):
    """One call to make; ``send`` makes it and answers, never raising for a refusal.

    ``state`` is what the call sets: a call whose state equals the one last
    accepted for the key is skipped. None: never skipped, nothing remembered
    (binds, evictions, Events). When a call is due is its caller's to decide
    (the report plan's, for what users see): the dispatcher coalesces, skips
    no-ops and retries, and holds nothing back but a failed call's backoff.
    """

    key: CallKey
    rank: Rank
    what: str
    send: Callable[[], Awaitable[Answer]]
    state: object = None
    retry: bool = False
    """Retry failures with backoff (status writes); binds and evictions answer their caller."""
    done: asyncio.Future[Answer] | None = None
    merge: Callable[[Call], Callable[[], Awaitable[Answer]] | None] | None = None
    """Given the object's pending call of the same rank, a send that does what both
    ask (the pending call then gets this one's answer), or None: this one replaces it.
    None: it always replaces it."""


@dataclass(slots=True)
class _Pool:
    """Workers for some ranks, and the lanes they take calls from."""

    ranks: tuple[Rank, ...]
    size: int
    lanes: tuple[deque[CallKey], ...]
    """One lane per rank, highest first."""
    queued: int = 0
    """Keys in the lanes, stale ones included (they are skipped when met)."""
    working: int = 0
    sending: int = 0
    tasks: set[asyncio.Task[None]] = field(default_factory=set)


def status_message(body: str) -> str:
    """The ``message`` of a Kubernetes Status body, else the body itself."""
    try:
        status = json.loads(body)
    except ValueError:
        return body
    message = status.get("message") if isinstance(status, dict) else None
    return message if isinstance(message, str) and message else body


async def answer_of(request: Awaitable[Any]) -> Answer:
    """The answer to a request made through the generated client with ``_preload_content=False``."""
    try:
        response = await request
    except ApiException as error:
        body = error.body if isinstance(error.body, str) else ""
        return Answer(error.status or 0, status_message(body)[:300] if body else str(error.reason))
    except (TimeoutError, aiohttp.ClientError) as error:
        return Answer(0, str(error) or type(error).__name__)
    try:
        status = response.status
        return Answer(status, "" if 200 <= status <= 299
                      else status_message(await response.text())[:300])
    finally:
        response.release()


FENCED = Answer(0, NOT_LEADING, sent=False)


class Dispatcher:
    """The one way out to the API server; see the module docstring for its rules."""

    def __init__(
        self,
        *,
        bind_workers: int,
        write_workers: int = 16,
        may_act: Callable[[], bool] = lambda: True,
    ) -> None:
        self._may_act = may_act
        self._pending: dict[CallKey, Call] = {}
        """Calls not yet out, one per key; those of in-flight or delayed keys wait here."""
        self._lanes = tuple(deque[CallKey]() for _ in Rank)
        self._lane_of: dict[CallKey, Rank] = {}
        """The lane a pending key sits in; a key met in another lane left it (lazy removal)."""
        self._in_flight: set[CallKey] = set()
        self._delayed: dict[CallKey, asyncio.TimerHandle] = {}
        self._accepted: dict[CallKey, object] = {}
        self._failures: dict[CallKey, int] = {}
        self._binds = _Pool(BIND_RANKS, bind_workers,
                            tuple(self._lanes[rank] for rank in BIND_RANKS))
        self._writes = _Pool(WRITE_RANKS, write_workers,
                             tuple(self._lanes[rank] for rank in WRITE_RANKS))
        self._pool_of = tuple(self._binds if rank in BIND_RANKS else self._writes
                              for rank in Rank)
        self._binds_idle = asyncio.Event()
        self._binds_idle.set()

    def __len__(self) -> int:
        """Calls waiting to go out (the write queue depth): one per key at most."""
        return len(self._pending)

    # ---- taking calls ---------------------------------------------------------
    def submit(self, call: Call) -> None:
        """Queue ``call``; its ``done`` future, if any, gets its answer or why it was not sent."""
        key = call.key
        current = self._pending.get(key)
        if current is not None and current.rank < call.rank:
            _resolve(call, Answer(0, "not sent: a call of higher rank is pending", sent=False))
            return
        if call.state is not None and self._skippable(call) and key not in self._in_flight:
            if current is not None:
                self._drop(key)
                _resolve(current, Answer(0, SUPERSEDED, sent=False))
            _resolve(call, Answer(200, "unchanged", sent=False))
            return
        if current is not None:
            send = (call.merge(current) if call.merge is not None and call.rank == current.rank
                    else None)
            if send is None:
                _resolve(current, Answer(0, SUPERSEDED, sent=False))
            else:
                call = _joined(call._replace(send=send), current)
            if call.rank < current.rank and key in self._delayed:
                self._delayed.pop(key).cancel()  # a bind waits for no status write's backoff
        self._pending[key] = call
        if key in self._in_flight or key in self._delayed:
            return  # goes once the call in flight ends or the backoff runs out
        self._enqueue(key, call.rank)

    def _skippable(self, call: Call) -> bool:
        return call.state is not None and self._accepted.get(call.key, _NOTHING) == call.state

    def _drop(self, key: CallKey) -> None:
        self._pending.pop(key, None)
        self._lane_of.pop(key, None)
        timer = self._delayed.pop(key, None)
        if timer is not None:
            timer.cancel()

    def _delay(self, key: CallKey, seconds: float) -> None:
        loop = asyncio.get_running_loop()
        self._delayed[key] = loop.call_later(seconds, self._delay_over, key)

    def _delay_over(self, key: CallKey) -> None:
        self._delayed.pop(key, None)
        call = self._pending.get(key)
        if call is not None and key not in self._in_flight:
            self._enqueue(key, call.rank)

    def _enqueue(self, key: CallKey, rank: Rank) -> None:
        if self._lane_of.get(key) == rank:
            return
        self._lane_of[key] = rank
        self._lanes[rank].append(key)
        pool = self._pool_of[rank]
        pool.queued += 1
        if pool is self._binds:
            self._binds_idle.clear()
        # A worker for every call waiting, up to the pool's size: a new gang does
        # not queue behind binds still waiting for their answer.
        while pool.working < pool.size and pool.working - pool.sending < pool.queued:
            pool.working += 1
            task = asyncio.create_task(self._work(pool))
            pool.tasks.add(task)
            task.add_done_callback(pool.tasks.discard)

    # ---- sending --------------------------------------------------------------
    def _next(self, pool: _Pool) -> Call | None:
        for rank, lane in zip(pool.ranks, pool.lanes, strict=True):
            while lane:
                key = lane.popleft()
                pool.queued -= 1
                if self._lane_of.get(key) != rank:
                    continue  # replaced by a call of another rank, or dropped
                del self._lane_of[key]
                self._in_flight.add(key)
                if pool is self._binds and not pool.queued:
                    self._binds_idle.set()
                return self._pending.pop(key)
        if pool is self._binds:
            self._binds_idle.set()
        return None

    async def _work(self, pool: _Pool) -> None:
        """Send waiting calls of the pool's ranks, highest first, until none is left."""
        try:
            while True:
                if pool is self._writes and not self._binds_idle.is_set():
                    await self._binds_idle.wait()
                call = self._next(pool)
                if call is None:
                    return
                if not self._may_act():
                    self._in_flight.discard(call.key)
                    self._finish(call, FENCED)
                    continue
                pool.sending += 1
                try:
                    answer = await call.send()
                except asyncio.CancelledError:
                    if call.done is not None:
                        call.done.cancel()
                    raise
                except Exception as error:  # a bug in a call: its caller, else the log, hears
                    if call.done is not None and not call.done.done():
                        call.done.set_exception(error)
                    else:
                        log.exception("call_failed", what=call.what)
                    answer = Answer(0, repr(error), sent=False)
                finally:
                    pool.sending -= 1
                    self._in_flight.discard(call.key)
                self._finish(call, answer)
        finally:
            pool.working -= 1

    def _finish(self, call: Call, answer: Answer) -> None:
        key = call.key
        _resolve(call, answer)
        if answer.accepted:
            self._failures.pop(key, None)
            if call.state is not None:
                self._accepted[key] = call.state
        elif answer.sent and answer.status in FINAL_STATUSES:
            self._failures.pop(key, None)
            self._accepted.pop(key, None)
        elif call.retry and (answer.sent or answer is FENCED):
            # Fenced too: a leader unsure of its lease for a moment may be sure again
            # soon, and the status it held back is still owed.
            failures = self._failures.get(key, 0) + 1
            self._failures[key] = failures
            log.warning("write_failed", what=call.what, status=answer.status,
                        detail=answer.detail[:200], failures=failures)
            self._pending.setdefault(key, call)  # a newer call, if any, goes instead
            self._delay(key, min(BACKOFF_MAX_S, BACKOFF_BASE_S * 2 ** (failures - 1)))
            return
        elif answer.sent and call.done is None:
            log.warning("write_failed", what=call.what, status=answer.status,
                        detail=answer.detail[:200])
        waiting = self._pending.get(key)
        if waiting is None:
            return
        if self._skippable(waiting):
            self._drop(key)
            _resolve(waiting, Answer(200, "unchanged", sent=False))
            return
        if key not in self._delayed:
            self._enqueue(key, waiting.rank)

    # ---- memory and shutdown ----------------------------------------------------
    def retain(self, keep: Callable[[ObjectId], bool]) -> None:
        """Forget what was accepted for objects not kept: memory follows the cluster."""
        for memory in (self._accepted, self._failures):
            for key in [k for k in memory if not keep(k[0])]:
                del memory[key]

    def remembered(self) -> int:
        """Keys with something remembered (accepted state or failures): bounded by objects."""
        return len(self._accepted.keys() | self._failures.keys())

    async def drain(self) -> None:
        """Wait until every call out or waiting has gone, except those backing off after
        a failure (shutdown, tests)."""
        while True:
            tasks = self._binds.tasks | self._writes.tasks
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)
            elif any(key not in self._failures for key in self._delayed):
                await asyncio.sleep(0.05)
            else:
                return


def _joined(call: Call, pending: Call) -> Call:
    """The call, answering the pending call it merged with too."""
    later, earlier = call.done, pending.done
    if earlier is None:
        return call
    if later is None:
        return call._replace(done=earlier)

    def follow(answered: asyncio.Future[Answer]) -> None:
        if earlier.done():
            return
        if answered.cancelled():
            earlier.cancel()
        elif (error := answered.exception()) is not None:
            earlier.set_exception(error)
        else:
            earlier.set_result(answered.result())

    later.add_done_callback(follow)
    return call


def _resolve(call: Call, answer: Answer) -> None:
    if call.done is not None and not call.done.done():
        call.done.set_result(answer)
