"""CEL selectors over devices, as Kubernetes evaluates them.

An expression sees ``device.driver``, ``device.attributes[domain][name]``
and ``device.capacity[domain][name]`` (a quantity), with the Kubernetes CEL
library's ``quantity()`` and ``semver()`` and their comparison methods. It
must return a bool. Each expression is compiled once and kept; what it says
of a device is cached in the :class:`~.devices.Inventory` for the cycle.

An expression that does not compile, fails at run time (a missing attribute
without ``has()``) or returns something else is an error the claim's pod
reports: the device is not taken to match, as kube-scheduler refuses the node.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from fractions import Fraction

import celpy
from celpy import celtypes
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError, CELFunction, Context

from gangsched.core.dra.devices import AttributeValue, Device, Inventory, SemVer
from gangsched.core.model.quantity import QuantityError, parse_quantity

__all__ = ["SelectorError", "matches"]

_SEMVER = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?")
_EVAL_ERRORS = (CELEvalError, TypeError, ValueError, KeyError, ArithmeticError)


class SelectorError(ValueError):
    """A selector that cannot be evaluated on a device: its message says why."""


class Quantity(celtypes.StringType):
    """A Kubernetes quantity inside CEL, compared exactly.

    A string type to CEL (its text is canonical, so ``==`` is exact), with
    the value the comparison functions read.
    """

    value: Fraction

    def __new__(cls, value: Fraction) -> Quantity:
        made = str.__new__(cls, f"quantity({value})")
        made.value = value
        return made


class Version(celtypes.StringType):
    """A semantic version inside CEL; pre-release and build parts are ignored in order."""

    parts: tuple[int, int, int]

    def __new__(cls, text: str) -> Version:
        found = _SEMVER.fullmatch(text)
        if found is None:
            raise ValueError(f"invalid semver {text!r}")
        parts = (int(found[1]), int(found[2]), int(found[3]))
        made = str.__new__(cls, "semver({}.{}.{})".format(*parts))
        made.parts = parts
        return made


def _amount(value: object) -> Fraction:
    if isinstance(value, Quantity):
        return value.value
    raise TypeError(f"not a quantity: {type(value).__name__}")


def _compare(left: object, right: object) -> celtypes.IntType:
    if isinstance(left, Version) and isinstance(right, Version):
        a: Fraction | tuple[int, int, int] = left.parts
        b: Fraction | tuple[int, int, int] = right.parts
    else:
        a, b = _amount(left), _amount(right)
    return celtypes.IntType((a > b) - (a < b))  # type: ignore[operator]


def _quantity(text: object) -> Quantity:
    try:
        return Quantity(parse_quantity(str(text)))
    except QuantityError as error:
        raise ValueError(str(error)) from error


def _as_integer(value: object) -> celtypes.IntType:
    amount = _amount(value)
    if amount.denominator != 1:
        raise ValueError("quantity is not an integer")
    return celtypes.IntType(int(amount))


def _part(index: int) -> Callable[[object], celtypes.IntType]:
    def part(value: object) -> celtypes.IntType:
        if not isinstance(value, Version):
            raise TypeError("not a semver")
        return celtypes.IntType(value.parts[index])
    return part


_FUNCTIONS: dict[str, CELFunction] = {
    "quantity": _quantity,
    "semver": lambda text: Version(str(text)),
    "isQuantity": lambda text: celtypes.BoolType(_is(lambda: _quantity(text))),
    "isSemver": lambda text: celtypes.BoolType(_is(lambda: Version(str(text)))),
    "compareTo": _compare,
    "isGreaterThan": lambda a, b: celtypes.BoolType(_compare(a, b) > 0),
    "isLessThan": lambda a, b: celtypes.BoolType(_compare(a, b) < 0),
    "asInteger": _as_integer,
    "asApproximateFloat": lambda a: celtypes.DoubleType(float(_amount(a))),
    "isInteger": lambda a: celtypes.BoolType(_is(lambda: _as_integer(a))),
    "sign": lambda a: celtypes.IntType((_amount(a) > 0) - (_amount(a) < 0)),
    "add": lambda a, b: Quantity(_amount(a) + _amount(b)),
    "sub": lambda a, b: Quantity(_amount(a) - _amount(b)),
    "major": _part(0),
    "minor": _part(1),
    "patch": _part(2),
}


def _is(make: Callable[[], object]) -> bool:
    try:
        make()
    except (ValueError, TypeError):
        return False
    return True


@functools.lru_cache(maxsize=1024)
def _compiled(expression: str) -> celpy.Runner | str:
    """The expression's program, or why it does not compile; compiled once."""
    environment = celpy.Environment()
    try:
        return environment.program(environment.compile(expression), functions=_FUNCTIONS)
    except CELParseError as error:
        return f"does not compile: {str(error).splitlines()[0]}"


def _cel_value(value: AttributeValue) -> celtypes.Value:
    if isinstance(value, bool):
        return celtypes.BoolType(value)
    if isinstance(value, int):
        return celtypes.IntType(value)
    if isinstance(value, SemVer):
        return Version(value.text)
    return celtypes.StringType(value)


def _by_domain(items: tuple[tuple[str, celtypes.Value], ...]) -> celtypes.MapType:
    domains: dict[str, dict[celtypes.StringType, celtypes.Value]] = {}
    for qualified, value in items:
        domain, _, name = qualified.rpartition("/")
        domains.setdefault(domain, {})[celtypes.StringType(name)] = value
    return celtypes.MapType({celtypes.StringType(domain): celtypes.MapType(names)
                             for domain, names in domains.items()})


def _activation(device: Device) -> Context:
    attributes = tuple((name, _cel_value(value)) for name, value in device.attributes)
    capacity: tuple[tuple[str, celtypes.Value], ...] = tuple(
        (name, Quantity(amount)) for name, amount in device.capacity)
    return {"device": celtypes.MapType({
        celtypes.StringType("driver"): celtypes.StringType(device.ref.driver),
        celtypes.StringType("attributes"): _by_domain(attributes),
        celtypes.StringType("capacity"): _by_domain(capacity),
        celtypes.StringType("allowMultipleAllocations"): celtypes.BoolType(False),
    })}


@functools.lru_cache(maxsize=1 << 16)
def _evaluate(expression: str, device: Device) -> bool | str:
    """What the expression says of the device; kept, as both are immutable values, so a
    cycle after a claim changed does not evaluate every selector on every device again."""
    program = _compiled(expression)
    if isinstance(program, str):
        return program
    try:
        result = program.evaluate(_activation(device))
    except _EVAL_ERRORS as error:
        return f"failed on device {device.ref}: {_error_text(error)}"
    if isinstance(result, CELEvalError):
        return f"failed on device {device.ref}: {_error_text(result)}"
    if not isinstance(result, celtypes.BoolType):
        return f"returned {type(result).__name__}, not a bool"
    return bool(result)


def _error_text(error: BaseException) -> str:
    if error.args and isinstance(error.args[0], str):
        return error.args[0]
    return str(error) or type(error).__name__


def matches(inventory: Inventory, expression: str, device: Device) -> bool:
    """Whether the device passes the expression; raises SelectorError when it cannot be
    told. Cached in the inventory: one evaluation per device and expression per cycle."""
    key = (expression, device.ref)
    answer = inventory.matches.get(key)
    if answer is None:
        answer = inventory.matches[key] = _evaluate(expression, device)
    if isinstance(answer, str):
        raise SelectorError(f"CEL selector {expression!r} {answer}")
    return answer
