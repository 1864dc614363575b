"""The queue tree: invalid queues and why, deserved shares, the fair order and caps down it."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import given
from hypothesis import strategies as st

from gangsched.core.model.objects import QueueName, QueueSpec
from gangsched.core.model.resources import Capability, Resources
from gangsched.core.queues.hierarchy import (
    build_tree,
    cap_hit,
    deserved_shares,
    fair_key,
    subtree_total,
)
from gangsched.core.reasons import QueueInvalid, QueueNotLeaf

GPU = "nvidia.com/gpu"


def q(name: str, parent: str | None = None, weight: int = 1, *, open_: bool = True,
      gpus: int | None = None) -> QueueSpec:
    return QueueSpec(QueueName(name), weight=weight, open=open_,
                     parent=QueueName(parent) if parent else None,
                     capability=Capability.parse({GPU: gpus}) if gpus is not None else None)


def specs(*queues: QueueSpec) -> dict[QueueName, QueueSpec]:
    return {spec.name: spec for spec in queues}


def gpus(n: int) -> Resources:
    return Resources.of({GPU: n})


ORG = specs(q("org"), q("t1", "org", 3), q("t2", "org", 1),
            q("a", "t1", 2), q("b", "t1", 1), q("c", "t2"))


def test_a_queue_deserves_its_weights_part_of_its_parents_share() -> None:
    tree = build_tree(ORG)
    shares = deserved_shares(tree, active={QueueName("a"), QueueName("b"), QueueName("c")})
    assert shares == {"org": 1, "t1": Fraction(3, 4), "t2": Fraction(1, 4),
                      "a": Fraction(1, 2), "b": Fraction(1, 4), "c": Fraction(1, 4)}


def test_an_idle_sibling_leaves_its_share_to_the_ones_with_work() -> None:
    tree = build_tree(ORG)
    shares = deserved_shares(tree, active={QueueName("a"), QueueName("c")})
    assert (shares[QueueName("a")], shares[QueueName("c")]) == (Fraction(3, 4), Fraction(1, 4))
    # b has no work: it is shown what it would deserve once it has some.
    assert shares[QueueName("b")] == Fraction(3, 4) * Fraction(1, 3)


def test_a_parents_own_gangs_do_not_make_it_busy_only_its_leaves_take_work() -> None:
    tree = build_tree(ORG)
    shares = deserved_shares(tree, active={QueueName("t1"), QueueName("c")})
    assert (shares[QueueName("t2")], shares[QueueName("c")]) == (Fraction(1), Fraction(1))
    assert tree.refusal(QueueName("t1")) == QueueNotLeaf(QueueName("t1"),
                                                         (QueueName("a"), QueueName("b")))
    assert tree.refusal(QueueName("c")) is None


@st.composite
def forests(draw: st.DrawFn) -> dict[QueueName, QueueSpec]:
    """Random valid trees: each queue's parent is one made before it, or none."""
    count = draw(st.integers(1, 12))
    queues: list[QueueSpec] = []
    for i in range(count):
        parent = draw(st.sampled_from([None, *(spec.name for spec in queues)]))
        queues.append(q(f"q{i}", parent, draw(st.integers(1, 9))))
    return specs(*queues)


@given(forests(), st.data())
def test_active_children_share_exactly_their_parents_deserved_share(
    queues: dict[QueueName, QueueSpec], data: st.DataObject
) -> None:
    tree = build_tree(queues)
    active = data.draw(st.sets(st.sampled_from(sorted(queues))))
    shares = deserved_shares(tree, active)
    assert not tree.invalid and set(shares) == set(queues)
    leaves = {name for name in active if name not in tree.children}
    busy = {ancestor for name in leaves for ancestor in tree.paths[name]}
    for parent, kids in tree.children.items():
        live = [kid for kid in kids if kid in busy]
        if live:
            whole = Fraction(1) if parent is None else shares[parent]
            assert sum(shares[kid] for kid in live) == whole
        for kid in kids:  # and each deserves no more than its parent
            assert shares[kid] <= (Fraction(1) if parent is None else shares[parent])


def test_parents_in_a_cycle_make_every_queue_of_it_and_below_invalid() -> None:
    tree = build_tree(specs(q("x", "z"), q("y", "x"), q("z", "y"), q("leaf", "x"), q("ok")))
    assert tree.invalid[QueueName("x")] == QueueInvalid(
        QueueName("x"), "ParentCycle", QueueName("z"), (QueueName("x"), QueueName("z"),
                                                        QueueName("y")))
    assert {name for name, problem in tree.invalid.items()
            if problem.problem == "ParentCycle"} == {"x", "y", "z"}
    assert tree.invalid[QueueName("leaf")] == QueueInvalid(
        QueueName("leaf"), "ParentInvalid", QueueName("x"))
    assert list(tree.paths) == ["ok"], "nothing else is disturbed"


def test_a_missing_or_weightless_parent_makes_the_queue_invalid() -> None:
    tree = build_tree(specs(q("orphan", "gone"), q("shut", open_=False), q("kid", "shut"),
                            q("zero", weight=0), q("under-zero", "zero")))
    problems = {name: problem.problem for name, problem in tree.invalid.items()}
    assert problems == {"orphan": "ParentMissing", "zero": "WeightBelowOne",
                        "under-zero": "ParentInvalid"}
    assert tree.invalid[QueueName("orphan")] == QueueInvalid(
        QueueName("orphan"), "ParentMissing", QueueName("gone"))


def test_a_closed_queue_and_its_subtree_stay_in_the_tree_counted_in_every_ancestors_cap(
) -> None:
    # org may hold 4 GPUs; its team is Closed while its queue runs 4: the org is full.
    tree = build_tree(specs(q("org", gpus=4), q("team", "org", open_=False),
                            q("kid", "team"), q("deep", "kid"), q("other", "org")))
    assert not tree.invalid
    assert set(tree.subtree(QueueName("org"))) == {"org", "team", "other", "kid", "deep"}
    held = {QueueName("deep"): gpus(4)}
    assert subtree_total(tree, held, QueueName("org")) == gpus(4)
    hit = cap_hit(tree, held, {}, QueueName("other"), gpus(1))
    assert hit is not None and (hit.queue, hit.allocated) == ("org", gpus(4))
    assert [tree.closed(QueueName(name)) for name in ("deep", "kid", "team", "other")] == [
        "team", "team", "team", None]


def test_the_fair_order_walks_the_tree_from_the_top() -> None:
    # t1 (weight 3) holds 4 of 16 GPUs, all in a; t2 (weight 1) holds 2, in c. Flat,
    # b (empty) and then c would go first; down the tree t1 is further behind its
    # weight (4/16/3 < 2/16/1), and within t1 b is behind a.
    tree = build_tree(ORG)
    used = {QueueName("a"): gpus(4), QueueName("c"): gpus(2)}
    keys = {name: fair_key(tree, used, gpus(16), QueueName(name)) for name in ("a", "b", "c")}
    assert sorted(keys, key=keys.__getitem__) == ["b", "a", "c"]
    assert keys["a"][1] == (Fraction(4, 16) / 3, "t1")


def test_a_flat_tree_orders_by_weighted_share_then_name() -> None:
    tree = build_tree(specs(q("b"), q("a"), q("heavy", weight=3)))
    used = {QueueName("heavy"): gpus(3), QueueName("a"): gpus(1), QueueName("b"): gpus(1)}
    keys = {name: fair_key(tree, used, gpus(8), QueueName(name)) for name in ("a", "b", "heavy")}
    assert sorted(keys, key=keys.__getitem__) == ["a", "b", "heavy"]
    assert tree.flat


def test_a_parents_cap_bounds_its_children_together() -> None:
    tree = build_tree(specs(q("team", gpus=4), q("x", "team"), q("y", "team", gpus=3)))
    allocated = {QueueName("x"): gpus(2)}
    reserved = {QueueName("y"): gpus(1)}
    assert cap_hit(tree, allocated, reserved, QueueName("y"), gpus(1)) is None
    hit = cap_hit(tree, allocated, reserved, QueueName("x"), gpus(2))
    assert hit is not None and (hit.queue, hit.allocated, hit.reserved) == (
        "team", gpus(2), gpus(1))
    # The nearest cap is named first: y's own 3 before the team's 4.
    nearest = cap_hit(tree, {}, reserved, QueueName("y"), gpus(3))
    assert nearest is not None and nearest.queue == "y"


@given(forests(), st.data())
def test_no_cap_on_the_way_up_is_exceeded_by_what_cap_hit_allows(
    queues: dict[QueueName, QueueSpec], data: st.DataObject
) -> None:
    capped = {name: QueueSpec(name, spec.weight, parent=spec.parent,
                              capability=Capability.parse({GPU: data.draw(st.integers(0, 8))}))
              for name, spec in queues.items()}
    tree = build_tree(capped)
    allocated: dict[QueueName, Resources] = {}
    for _ in range(20):
        name = data.draw(st.sampled_from(sorted(capped)))
        extra = gpus(data.draw(st.integers(1, 3)))
        if cap_hit(tree, allocated, {}, name, extra) is None:
            allocated[name] = allocated.get(name, Resources.zero()) + extra
    for name, spec in capped.items():
        held = Resources.sum(allocated.get(kid, Resources.zero()) for kid in tree.below[name])
        assert spec.capability is not None and spec.capability.allows(held)
