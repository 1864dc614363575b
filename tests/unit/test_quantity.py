"""Quantity grammar and rounding into canonical units."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gangsched.core.model.quantity import QuantityError, canonical_amount, parse_quantity
from gangsched.core.model.resources import format_amount


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0", Fraction(0)),
        ("1", Fraction(1)),
        ("+1", Fraction(1)),
        ("-1", Fraction(-1)),
        ("1.5", Fraction(3, 2)),
        (".5", Fraction(1, 2)),
        ("5.", Fraction(5)),
        ("+.5", Fraction(1, 2)),
        ("100m", Fraction(1, 10)),
        ("1n", Fraction(1, 10**9)),
        ("1u", Fraction(1, 10**6)),
        ("2k", Fraction(2000)),
        ("1M", Fraction(10**6)),
        ("1G", Fraction(10**9)),
        ("1T", Fraction(10**12)),
        ("1P", Fraction(10**15)),
        ("1E", Fraction(10**18)),
        ("1Ki", Fraction(1024)),
        ("1.5Mi", Fraction(3 * 2**19)),
        ("2Gi", Fraction(2 * 2**30)),
        ("1Ti", Fraction(2**40)),
        ("1Pi", Fraction(2**50)),
        ("1Ei", Fraction(2**60)),
        ("1e3", Fraction(1000)),
        ("1E3", Fraction(1000)),
        ("1e+3", Fraction(1000)),
        ("15e-1", Fraction(3, 2)),
        ("1.5e2", Fraction(150)),
    ],
)
def test_parse_quantity_accepts_the_kubernetes_grammar(text: str, value: Fraction) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize(
    "text",
    ["", " ", "1 ", " 1", ".", "+", "-", "1e", "e3", "Ki", "1KiB", "1ki", "1K", "1.5.5",
     "1,5", "0x10", "1m1", "1e3k", "\u0661", "1e1001", "9" * 200, "inf", "NaN", "1_000"],
)
def test_parse_quantity_rejects_garbage(text: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text)


def test_cpu_rounds_up_to_milli_cpu() -> None:
    assert canonical_amount("cpu", "1") == 1000
    assert canonical_amount("cpu", "1500m") == 1500
    assert canonical_amount("cpu", "0.0001") == 1
    assert canonical_amount("cpu", "100u") == 1
    assert canonical_amount("cpu", 0.5) == 500
    assert canonical_amount("cpu", 2) == 2000


def test_bytes_round_up() -> None:
    assert canonical_amount("memory", "1Gi") == 2**30
    assert canonical_amount("memory", "1m") == 1
    assert canonical_amount("memory", "1.5") == 2
    assert canonical_amount("ephemeral-storage", "1G") == 10**9
    assert canonical_amount("hugepages-2Mi", "4Mi") == 4 * 2**20


def test_counts_are_whole_and_never_rounded() -> None:
    assert canonical_amount("nvidia.com/gpu", "2") == 2
    assert canonical_amount("nvidia.com/gpu", 2) == 2
    assert canonical_amount("pods", "110") == 110
    assert canonical_amount("example.com/foo", "1k") == 1000
    for bad in ("0.5", "500m", 1.5):
        with pytest.raises(QuantityError, match="whole number"):
            canonical_amount("nvidia.com/gpu", bad)


def test_canonical_amount_rejects_negative_and_non_numbers() -> None:
    with pytest.raises(QuantityError, match="negative"):
        canonical_amount("cpu", "-1")
    for bad in (True, float("inf"), float("nan"), "12Gb"):
        with pytest.raises(QuantityError):
            canonical_amount("memory", bad)


def test_error_names_the_resource() -> None:
    with pytest.raises(QuantityError, match=r"memory '12Gb': not a quantity"):
        canonical_amount("memory", "12Gb")


@given(st.integers(0, 10**15), st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "pods"]))
def test_formatted_amounts_parse_back_exactly(amount: int, resource: str) -> None:
    assert canonical_amount(resource, format_amount(resource, amount)) == amount


@given(st.integers(-(10**12), 10**12), st.integers(0, 9), st.sampled_from(["", "m", "k", "Ki"]))
def test_decimal_text_parses_exactly(whole: int, digit: int, suffix: str) -> None:
    scale = {"": Fraction(1), "m": Fraction(1, 1000), "k": Fraction(1000), "Ki": Fraction(1024)}[
        suffix
    ]
    text = f"{whole}.{digit}{suffix}"
    sign = -1 if whole < 0 else 1
    assert parse_quantity(text) == (whole + sign * Fraction(digit, 10)) * scale
