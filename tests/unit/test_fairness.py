"""Weighted dominant share and the order of gangs inside a queue."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gangsched.core.model.objects import Gang, GangKey
from gangsched.core.model.resources import Resources
from gangsched.core.queues.fairness import dominant_share, gang_order

NAMES = ("cpu", "memory", "nvidia.com/gpu")

totals = st.fixed_dictionaries({name: st.integers(1, 10**6) for name in NAMES})
weights = st.integers(1, 100)


@st.composite
def allocation_within(draw: st.DrawFn, total: dict[str, int]) -> dict[str, int]:
    return {name: draw(st.integers(0, amount)) for name, amount in total.items()}


def test_dominant_share_is_the_largest_fraction_over_the_weight() -> None:
    total = Resources.of({"cpu": 8000, "nvidia.com/gpu": 4})
    allocated = Resources.of({"cpu": 2000, "nvidia.com/gpu": 3})
    assert dominant_share(allocated, total, 1) == Fraction(3, 4)
    assert dominant_share(allocated, total, 3) == Fraction(1, 4)


def test_a_resource_the_cluster_lacks_is_not_charged() -> None:
    total = Resources.of({"cpu": 8000})
    allocated = Resources.of({"cpu": 2000, "nvidia.com/gpu": 1})
    assert dominant_share(allocated, total, 1) == Fraction(1, 4)


def test_weight_below_one_is_a_bug() -> None:
    with pytest.raises(ValueError, match="weight"):
        dominant_share(Resources.zero(), Resources.of({"cpu": 1}), 0)


@given(total=totals, data=st.data(), weight=weights)
def test_share_is_monotonic_in_allocation(
    total: dict[str, int], data: st.DataObject, weight: int
) -> None:
    smaller = data.draw(allocation_within(total))
    larger = {name: data.draw(st.integers(amount, total[name])) for name, amount in smaller.items()}
    cluster = Resources.of(total)
    assert dominant_share(Resources.of(smaller), cluster, weight) <= dominant_share(
        Resources.of(larger), cluster, weight
    )


@given(total=totals, data=st.data(), weight=weights, extra=st.integers(1, 100))
def test_share_falls_as_weight_rises(
    total: dict[str, int], data: st.DataObject, weight: int, extra: int
) -> None:
    allocated = Resources.of(data.draw(allocation_within(total)))
    cluster = Resources.of(total)
    light = dominant_share(allocated, cluster, weight)
    heavy = dominant_share(allocated, cluster, weight + extra)
    assert heavy <= light
    assert heavy * (weight + extra) == light * weight  # exactly inverse, no rounding


@given(total=totals, data=st.data(), weight=weights)
def test_share_of_an_allocation_within_the_cluster_is_at_most_one_over_weight(
    total: dict[str, int], data: st.DataObject, weight: int
) -> None:
    allocated = Resources.of(data.draw(allocation_within(total)))
    assert 0 <= dominant_share(allocated, Resources.of(total), weight) <= Fraction(1, weight)


def _gang(key: str, priority: int, created: float) -> Gang:
    return Gang(GangKey(key), 1, (), priority=priority, created=created)


def test_gang_order_is_priority_then_age_then_key() -> None:
    gangs = [
        _gang("ns/low-old", 0, 1.0),
        _gang("ns/high-new", 10, 5.0),
        _gang("ns/high-old-b", 10, 2.0),
        _gang("ns/high-old-a", 10, 2.0),
    ]
    assert [g.key for g in sorted(gangs, key=gang_order)] == [
        "ns/high-old-a",
        "ns/high-old-b",
        "ns/high-new",
        "ns/low-old",
    ]
