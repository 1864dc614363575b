"""Resource vectors: exact arithmetic, fit, formatting."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gangsched.core.model.quantity import QuantityError
from gangsched.core.model.resources import CPU, GPU, MEMORY, PODS, Resources

NAMES = [CPU, MEMORY, PODS, GPU, "example.com/fpga"]
amounts = st.dictionaries(st.sampled_from(NAMES), st.integers(-(10**12), 10**12), max_size=5)
non_negative = st.dictionaries(st.sampled_from(NAMES), st.integers(0, 10**12), max_size=5)
vectors = amounts.map(Resources.of)


def test_zero_entries_are_dropped_so_equal_things_compare_equal() -> None:
    a = Resources.of({CPU: 1000, GPU: 0})
    b = Resources.of({CPU: 1000})
    assert a == b
    assert hash(a) == hash(b)
    assert a.names() == (CPU,)
    assert Resources.of({CPU: 0}).is_zero
    assert Resources.zero().is_zero
    assert not a.is_zero


def test_parse_and_accessors() -> None:
    r = Resources.parse({CPU: "1500m", MEMORY: "2Gi", GPU: 2, PODS: "1"})
    assert r.get(CPU) == 1500
    assert r.get(MEMORY) == 2 * 2**30
    assert r.get(GPU) == 2
    assert r.get("absent") == 0
    assert r.items() == ((CPU, 1500), (MEMORY, 2 * 2**30), (GPU, 2), (PODS, 1))


def test_parse_error_names_the_resource() -> None:
    with pytest.raises(QuantityError, match="memory"):
        Resources.parse({CPU: "1", MEMORY: "12Gb"})


def test_of_rejects_non_integers() -> None:
    with pytest.raises(TypeError):
        Resources.of({CPU: 1.5})  # type: ignore[dict-item]
    with pytest.raises(TypeError):
        Resources.of({CPU: True})


def test_str_is_human_readable() -> None:
    r = Resources.parse({CPU: "1500m", MEMORY: "2Gi", GPU: 2})
    assert str(r) == "cpu=1500m memory=2Gi nvidia.com/gpu=2"
    assert str(Resources.parse({CPU: "2", MEMORY: "1G"})) == "cpu=2 memory=1G"
    assert str(Resources.of({MEMORY: 1000001})) == "memory=1000001"
    assert str(Resources.zero()) == "none"


def test_fits_and_short_of() -> None:
    node = Resources.parse({CPU: "4", MEMORY: "8Gi", PODS: 110})
    small = Resources.parse({CPU: "1", MEMORY: "1Gi", PODS: 1})
    gpu_pod = Resources.parse({CPU: "1", GPU: 1, PODS: 1})
    assert small.fits(node)
    assert not gpu_pod.fits(node)
    assert gpu_pod.short_of(node) == Resources.of({GPU: 1})
    assert small.scale(5).short_of(node) == Resources.parse({CPU: "1", MEMORY: "0"})
    assert Resources.zero().fits(Resources.zero())


def test_resources_not_asked_for_never_block_a_fit() -> None:
    overcommitted = Resources.of({CPU: -500, MEMORY: 2**30, PODS: 5})
    assert Resources.of({MEMORY: 1024, PODS: 1}).fits(overcommitted)
    assert not Resources.of({CPU: 1, PODS: 1}).fits(overcommitted)


def test_max_each() -> None:
    a = Resources.of({CPU: 1000, MEMORY: 5})
    b = Resources.of({CPU: 500, GPU: 2})
    assert Resources.max_each(a, b) == Resources.of({CPU: 1000, MEMORY: 5, GPU: 2})
    assert a.max_each(b) == Resources.max_each(b, a)


@given(vectors, vectors, vectors)
def test_addition_is_an_abelian_group(a: Resources, b: Resources, c: Resources) -> None:
    assert a + b == b + a
    assert (a + b) + c == a + (b + c)
    assert a + Resources.zero() == a
    assert a - a == Resources.zero()
    assert (a + b) - b == a
    assert a - b == a + (Resources.zero() - b)


@given(vectors, st.integers(0, 50))
def test_scale_is_repeated_addition(a: Resources, n: int) -> None:
    total = Resources.zero()
    for _ in range(n):
        total = total + a
    assert a.scale(n) == total


@given(st.lists(vectors, max_size=8))
def test_sum_is_repeated_addition(many: list[Resources]) -> None:
    total = Resources.zero()
    for vector in many:
        total = total + vector
    assert Resources.sum(many) == total
    assert all(Resources.sum(many).amounts.values())  # no zero kept


@given(non_negative.map(Resources.of), non_negative.map(Resources.of),
       non_negative.map(Resources.of))
def test_fit_is_monotonic(request: Resources, within: Resources, extra: Resources) -> None:
    if request.fits(within):
        assert request.fits(within + extra)
    assert request.fits(request)
    assert request.fits(within) == request.short_of(within).is_zero
    assert (request - request.short_of(within)).fits(within)


@given(vectors, vectors)
def test_max_each_bounds_both(a: Resources, b: Resources) -> None:
    top = Resources.max_each(a, b)
    assert a.fits(top)
    assert b.fits(top)
    for name in top.names():
        assert top.get(name) in (a.get(name), b.get(name))


@given(vectors)
def test_vectors_are_immutable_and_hashable(a: Resources) -> None:
    assert {a: 1}[Resources.of(dict(a.items()))] == 1
    with pytest.raises(AttributeError):
        a._amounts = {}  # type: ignore[misc]
