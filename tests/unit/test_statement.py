"""The cycle's transaction: what a stage tries under a statement is kept whole or undone whole."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gangsched.core.model.objects import Gang, Node, Policy, QueueName, QueueSpec
from gangsched.core.model.resources import Capability
from gangsched.core.placement.capacity import Snapshot
from gangsched.core.reasons import QueueMissing
from gangsched.core.stages.session import CycleInput, Session, unpin
from gangsched.core.stages.starve import wait
from gangsched.core.stages.trial import PLACED, try_place
from tests.unit.test_cycle import DEFAULT, gang, node, pod

CAPPED = QueueSpec(QueueName("q"), capability=Capability.parse({"cpu": 3}))
NODES = [node("n1", 4), node("n2", 4), node("n3", 2)]


def session(*gangs: Gang, starving_since: float | None = None) -> Session:
    waiting = {} if starving_since is None else {gangs[0].key: starving_since}
    return Session(CycleInput(
        snapshot=Snapshot.build(NODES, [pod("other/blocker", 1, on="n1")]),
        gangs=gangs,
        bound_requests={},
        queues={DEFAULT: QueueSpec(DEFAULT), CAPPED.name: CAPPED},
        admitted=frozenset(),
        waiting_since=waiting,
        now=100.0,
        policy=Policy.BINPACK,
    ))


def session_on(nodes: list[Node], *gangs: Gang) -> Session:
    return Session(CycleInput(
        snapshot=Snapshot.build(nodes, []), gangs=gangs, bound_requests={},
        queues={DEFAULT: QueueSpec(DEFAULT)}, admitted=frozenset(), waiting_since={},
        now=100.0, policy=Policy.BINPACK,
    ))


def state(s: Session) -> tuple[object, ...]:
    """Everything a stage may change: room per node and in total, the cycle's answers, the
    gangs' and queues' ledgers, holds and pins."""
    return (
        s.free, {name: s.capacity.free(name) for name in s.inp.snapshot.index.nodes},
        list(s.placements), list(s.placed_pods), dict(s.sole_users), list(s.unplaceable),
        dict(s.bound), dict(s.allocated), dict(s.holding), dict(s.pinned), s.reserved,
        dict(s.queue_reserved), list(s.pins.taken),
    )


def test_discard_leaves_the_state_exactly_as_the_statement_found_it() -> None:
    s = session(gang("ns/a", 3, 2), gang("ns/b", 1))
    a, b = s.gangs
    before = state(s)
    trial = s.open()
    assert try_place(s, a) == PLACED and try_place(s, b) == PLACED
    s.hold(a, s.free)
    s.tell(b, QueueMissing(QueueName("x")))
    assert state(s) != before
    trial.discard()
    assert state(s) == before
    assert s.statement is None


def test_commit_keeps_what_was_done_under_it() -> None:
    s = session(gang("ns/a", 2, 2))
    trial = s.open()
    assert try_place(s, s.gangs[0]) == PLACED
    after = state(s)
    trial.commit()
    assert state(s) == after
    assert [(p.gang, len(p.assignments)) for p in s.placements] == [("ns/a", 2)]


def test_a_trial_committed_inside_a_stage_s_statement_is_undone_with_it() -> None:
    s = session(gang("ns/a", 2, 2), gang("ns/b", 1, 2))
    a, b = s.gangs
    before = state(s)
    stage = s.open()
    assert try_place(s, a) == PLACED  # a nested trial, committed into the stage's statement
    middle = state(s)
    inner = s.open()
    assert try_place(s, b) == PLACED
    inner.discard()  # the inner trial alone goes
    assert state(s) == middle
    stage.discard()
    assert state(s) == before


def test_a_refused_trial_leaves_no_trace() -> None:
    capped = gang("ns/capped", 2, 2, queue="q")  # 4 CPUs asked of a queue capped at 3
    s = session(capped)
    before = state(s)
    tried = try_place(s, s.gangs[0])
    assert tried.reason is not None and tried.fitted
    assert state(s) == before


def test_pins_given_back_under_a_statement_are_pinned_again_exactly_on_discard() -> None:
    s = session(gang("ns/big", 2, 4), starving_since=0.0)
    wait(s, s.gangs[0], QueueMissing(QueueName("x")))
    assert s.starving == "ns/big" and s.pins
    before = state(s)
    question = s.open()
    assert not unpin(s).is_zero
    assert state(s) != before
    question.discard()
    assert state(s) == before


def test_a_statement_closed_while_one_nested_in_it_is_open_is_a_bug() -> None:
    s = session(gang("ns/a", 1))
    outer = s.open()
    s.open()
    try:
        outer.commit()
    except ValueError:
        return
    raise AssertionError("closing the outer statement first must raise")


def test_holds_and_pins_are_not_moved_under_a_statement() -> None:
    s = session(gang("ns/big", 2, 4), starving_since=0.0)
    s.open()
    try:
        wait(s, s.gangs[0], QueueMissing(QueueName("x")))
    except ValueError:
        return
    raise AssertionError("pinning under a statement must raise")


@settings(max_examples=60, deadline=None)
@given(
    shapes=st.lists(st.tuples(st.integers(1, 4), st.integers(1, 3), st.booleans()),
                    min_size=1, max_size=5),
    keep=st.lists(st.booleans(), min_size=5, max_size=5),
    nested=st.booleans(),
)
def test_any_mix_of_kept_and_discarded_trials_leaves_what_was_kept_alone(
    shapes: list[tuple[int, int, bool]], keep: list[bool], nested: bool
) -> None:
    """Whatever was tried before, kept or not, and whether the trials sit inside a
    stage's statement: a discarded trial leaves the state as it was before it, a kept
    one moves it, and discarding the stage's statement takes every kept trial back."""
    s = session(*[gang(f"ns/g{i}", pods, cores, queue="q" if capped else "default")
                  for i, (pods, cores, capped) in enumerate(shapes)])
    start = state(s)
    stage = s.open() if nested else None
    for index, g in enumerate(s.gangs):
        before = state(s)
        trial = s.open()
        tried = try_place(s, g)
        if keep[index]:
            trial.commit()
            assert (state(s) == before) == (tried != PLACED)
        else:
            trial.discard()
            assert state(s) == before
    if stage is not None:
        stage.discard()
        assert state(s) == start
    assert s.statement is None


@settings(max_examples=80, deadline=None)
@given(
    tried=st.lists(st.tuples(st.integers(1, 3), st.integers(1, 2)), min_size=1, max_size=3),
    then=st.tuples(st.integers(1, 3), st.integers(1, 2)),
    cores=st.lists(st.sampled_from([2, 4]), min_size=2, max_size=5),
)
def test_a_discarded_trial_changes_no_later_placement(
    tried: list[tuple[int, int]], then: tuple[int, int], cores: list[int]
) -> None:
    """On nodes many of which are equally free, gangs tried and discarded leave the next
    gang on exactly the nodes it gets when nothing was tried before it."""
    nodes = [node(f"n{i}", size) for i, size in enumerate(cores)]
    trials = [gang(f"ns/t{i}", pods, size) for i, (pods, size) in enumerate(tried)]
    last = gang("ns/last", *then)

    def placed_after(discarded: list[Gang]) -> list[object]:
        s = session_on(nodes, *discarded, last)
        for g in discarded:
            trial = s.open()
            try_place(s, g)
            trial.discard()
        try_place(s, last)
        return list(s.placements)

    assert placed_after(trials) == placed_after([])
