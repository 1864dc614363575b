"""Kubernetes resource quantities, parsed exactly and turned into integer units.

Quantities arrive as strings (``"1500m"``, ``"2Gi"``, ``"1e3"``) or, from YAML
and JSON, as bare numbers. They are parsed once, at the edge, into a
:class:`fractions.Fraction` so that no float rounding ever decides whether a
pod fits, then rounded up into the integer unit the scheduler compares in:
milli-CPU for ``cpu``, bytes for memory-like resources, a plain count for
everything else. Rounding up is what kube-scheduler does (``MilliValue()`` and
``Value()`` both round toward +inf), so a pod never looks smaller to us than it
does to the kubelet that admits it.
"""

from __future__ import annotations

import functools
import math
import re
from fractions import Fraction

__all__ = ["QuantityError", "canonical_amount", "is_byte_resource", "parse_quantity"]


class QuantityError(ValueError):
    """A quantity that Kubernetes would reject, or that cannot be a request."""


# <quantity> ::= <signedNumber><suffix>, suffix one of binary SI, decimal SI or
# a decimal exponent. Digits are ASCII only: Python's \d would accept other
# scripts' digits, which the API server never does.
_QUANTITY = re.compile(
    r"(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?P<suffix>[eE][+-]?[0-9]+|Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?"
)

_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}

# Far beyond anything a node can hold (an exbibyte is 2**60), yet small enough
# that a hostile "1e999999999" cannot make us build a billion-digit integer.
_MAX_TEXT = 128
_MAX_EXPONENT = 1000

_BYTE_RESOURCES = frozenset({"memory", "ephemeral-storage", "storage"})


def parse_quantity(text: str) -> Fraction:
    """The exact value of a quantity string, or QuantityError.

    Follows the grammar of apimachinery's ``resource.ParseQuantity``: an
    optional sign, digits with an optional fraction (``5.``, ``.5``), then at
    most one suffix. Whitespace is not part of the grammar and is rejected.
    """
    if not isinstance(text, str):
        raise QuantityError(f"not a quantity: {text!r}")
    if len(text) > _MAX_TEXT:
        raise QuantityError(f"not a quantity: {text[:20]!r}... is {len(text)} characters long")
    match = _QUANTITY.fullmatch(text)
    if match is None:
        raise QuantityError(f"not a quantity: {text!r}")
    value = Fraction(match.group("number"))
    suffix: str | None = match.group("suffix")
    if suffix is None:
        return value
    if suffix in _BINARY:
        size: int = 1024 ** _BINARY[suffix]
        return value * size
    if suffix in _DECIMAL:
        return value * Fraction(10) ** _DECIMAL[suffix]
    exponent = int(suffix[1:])
    if abs(exponent) > _MAX_EXPONENT:
        raise QuantityError(f"not a quantity: {text!r} has an exponent out of range")
    return value * Fraction(10) ** exponent


def is_byte_resource(resource: str) -> bool:
    """Whether a resource is counted in bytes (memory, storage, huge pages)."""
    return resource in _BYTE_RESOURCES or resource.startswith("hugepages-")


@functools.lru_cache(maxsize=4096, typed=True)
def canonical_amount(resource: str, text: str | int | float) -> int:
    """The integer amount the scheduler compares for ``resource``.

    ``cpu`` becomes milli-CPU and byte resources become bytes, both rounded up
    as Kubernetes does. Every other resource (``pods``, ``nvidia.com/gpu``,
    any extended resource) is a count of indivisible devices, so a fractional
    amount is an error rather than something to round: the API server
    rejects it too. Negative amounts are errors: no request, allocatable or
    capacity can be negative.

    Cached: a cluster repeats a few amounts ("500m", "8Gi") in thousands of
    pods, and every watch event of a pod is read again.
    """
    try:
        value = _as_fraction(text)
    except QuantityError:
        raise QuantityError(f"{resource} {text!r}: not a quantity") from None
    if value < 0:
        raise QuantityError(f"{resource} {text!r}: must not be negative")
    if resource == "cpu":
        return math.ceil(value * 1000)
    if is_byte_resource(resource):
        return math.ceil(value)
    if value.denominator != 1:
        raise QuantityError(f"{resource} {text!r}: must be a whole number")
    return value.numerator


def _as_fraction(text: str | int | float) -> Fraction:
    # bool is an int to Python but never a quantity to Kubernetes.
    if isinstance(text, bool):
        raise QuantityError(f"not a quantity: {text!r}")
    if isinstance(text, int):
        return Fraction(text)
    if isinstance(text, float):
        if not math.isfinite(text):
            raise QuantityError(f"not a quantity: {text!r}")
        # repr gives the shortest decimal that round-trips, i.e. what the
        # author of the YAML wrote (0.1, not 0.1000000000000000055...).
        return parse_quantity(repr(text))
    return parse_quantity(text)
