"""Resource vectors in integer canonical units.

A :class:`Resources` is what a pod asks for, what a node offers, or what is
left on it. Amounts are plain ints (milli-CPU, bytes, device counts), so
adding, subtracting and comparing them is exact: ``a + b - b == a`` always
holds, which is what lets a placement be released without drift. Zero
entries are dropped so that two vectors that mean the same thing compare (and
hash) equal, and a resource nobody mentions costs nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gangsched.core.model.quantity import QuantityError, canonical_amount, is_byte_resource

__all__ = [
    "CPU",
    "DEVICE_CLASS_PREFIX",
    "EPHEMERAL",
    "GPU",
    "MEMORY",
    "PODS",
    "VOLUME_LIMIT_PREFIX",
    "Resources",
    "device_backable",
    "devices_first",
    "format_amount",
    "is_extended",
    "resource_words",
    "volume_driver",
]

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL = "ephemeral-storage"
PODS = "pods"
GPU = "nvidia.com/gpu"

VOLUME_LIMIT_PREFIX = "attachable-volumes-csi-"
"""A CSI driver's volumes on a node, a resource of the cycle's model only (see
:mod:`gangsched.core.placement.volumelimits`): never one a pod or a node states."""

_NATIVE = frozenset({CPU, MEMORY, EPHEMERAL, PODS})
_FIRST = {CPU: 0, MEMORY: 1, EPHEMERAL: 2}

_BINARY_SUFFIXES = (("Ei", 1024**6), ("Pi", 1024**5), ("Ti", 1024**4), ("Gi", 1024**3),
                    ("Mi", 1024**2), ("Ki", 1024))
_DECIMAL_SUFFIXES = (("E", 10**18), ("P", 10**15), ("T", 10**12), ("G", 10**9),
                     ("M", 10**6), ("k", 10**3))


def is_extended(name: str) -> bool:
    """Whether a resource is a device or other extended resource (GPUs and the like).

    These are the scarce, indivisible resources that placement tries not to
    strand: a CPU-only pod on a GPU node leaves GPUs nobody else can reach.
    """
    return (name not in _NATIVE and not name.startswith("hugepages-")
            and not name.startswith(VOLUME_LIMIT_PREFIX))


def volume_driver(name: str) -> str | None:
    """The CSI driver whose attachable volumes the resource counts, or None."""
    return name[len(VOLUME_LIMIT_PREFIX):] if name.startswith(VOLUME_LIMIT_PREFIX) else None


def resource_words(name: str) -> str:
    """A resource as a person reads it: ``volumes of CSI driver ebs.csi.aws.com`` for a
    driver's volume limit, the resource's own name otherwise."""
    driver = volume_driver(name)
    return name if driver is None else f"volumes of CSI driver {driver}"


DEVICE_CLASS_PREFIX = "deviceclass.resource.kubernetes.io/"
"""The extended resource every DeviceClass serves, whatever its ``extendedResourceName``."""


def device_backable(name: str) -> bool:
    """Whether a DeviceClass may serve the resource in place of a node's count: an
    extended resource name (in a domain that is not ``kubernetes.io``'s), or a class's
    implicit name, as kube-scheduler reads container requests."""
    if name.startswith(DEVICE_CLASS_PREFIX):
        return True
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


_DEVICES_FIRST = {CPU: 1, MEMORY: 2, EPHEMERAL: 3, PODS: 4}


def devices_first(name: str) -> tuple[int, str]:
    """Sort key naming scarce devices (GPUs...) before cpu, memory, storage and pods.

    Used wherever a resource is named to a person: what a pod lacks, what it
    asks for. The scarce device is what explains why it waits.
    """
    return (_DEVICES_FIRST.get(name, 0), name)


def format_amount(name: str, amount: int) -> str:
    """An amount the way a person would write it in a manifest (``1500m``, ``2Gi``)."""
    if amount < 0:
        return "-" + format_amount(name, -amount)
    if name == CPU:
        return str(amount // 1000) if amount % 1000 == 0 else f"{amount}m"
    if is_byte_resource(name) and amount:
        for suffix, size in _BINARY_SUFFIXES:
            if amount % size == 0:
                return f"{amount // size}{suffix}"
        for suffix, size in _DECIMAL_SUFFIXES:
            if amount % size == 0:
                return f"{amount // size}{suffix}"
    return str(amount)


def _order(name: str) -> tuple[int, str]:
    return (_FIRST.get(name, 3), name)


@dataclass(frozen=True, slots=True, eq=False, repr=False, init=False)
class Resources:
    """An immutable map from resource name to a non-zero integer amount.

    Built through :meth:`of`, :meth:`parse` or :meth:`zero`; arithmetic
    returns new vectors. Subtraction may go negative (a node overcommitted by
    another scheduler has negative free CPU) and stays exact.
    """

    _amounts: Mapping[str, int]
    _hash: int | None

    @staticmethod
    def _trusted(amounts: dict[str, int]) -> Resources:
        """Wrap a dict the caller guarantees has str keys, int values and no zeros."""
        obj = object.__new__(Resources)
        object.__setattr__(obj, "_amounts", amounts)
        object.__setattr__(obj, "_hash", None)
        return obj

    @staticmethod
    def zero() -> Resources:
        return _ZERO

    @staticmethod
    def of(mapping: Mapping[str, int]) -> Resources:
        """A vector from already-canonical integer amounts; zeros are dropped."""
        amounts: dict[str, int] = {}
        for name in sorted(mapping):
            value = mapping[name]
            if not isinstance(name, str) or not name:
                raise TypeError(f"resource name must be a non-empty str, not {name!r}")
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name}: amount must be an int, not {value!r}")
            if value:
                amounts[name] = value
        return Resources._trusted(amounts)

    @staticmethod
    def sum(vectors: Iterable[Resources]) -> Resources:
        """The total of many vectors, summed in one dict rather than one per addition."""
        total: dict[str, int] = {}
        for vector in vectors:
            for name, value in vector._amounts.items():
                total[name] = total.get(name, 0) + value
        return Resources._trusted({name: value for name, value in total.items() if value})

    @staticmethod
    def parse(mapping: Mapping[str, str | int | float]) -> Resources:
        """A vector from quantity strings as they appear in a manifest.

        Raises QuantityError naming the resource, so the caller can say which
        entry of which object is wrong.
        """
        amounts: dict[str, int] = {}
        for name in sorted(mapping, key=str):
            if not isinstance(name, str) or not name:
                raise QuantityError(f"{name!r}: not a resource name")
            value = canonical_amount(name, mapping[name])
            if value:
                amounts[name] = value
        return Resources._trusted(amounts)

    @property
    def amounts(self) -> Mapping[str, int]:
        """The non-zero amounts, read-only; for loops that must not allocate."""
        return self._amounts

    def get(self, name: str) -> int:
        return self._amounts.get(name, 0)

    def items(self) -> tuple[tuple[str, int], ...]:
        return tuple(sorted(self._amounts.items()))

    def names(self) -> tuple[str, ...]:
        return tuple(sorted(self._amounts))

    @property
    def is_zero(self) -> bool:
        return not self._amounts

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Resources):
            return NotImplemented
        return self._amounts == other._amounts

    def __hash__(self) -> int:
        cached = self._hash
        if cached is None:
            cached = hash(frozenset(self._amounts.items()))
            object.__setattr__(self, "_hash", cached)
        return cached

    def __add__(self, other: Resources) -> Resources:
        theirs = other._amounts
        if not theirs:
            return self
        mine = self._amounts
        if not mine:
            return other
        out = dict(mine)
        for name, value in theirs.items():
            total = out.get(name, 0) + value
            if total:
                out[name] = total
            else:
                del out[name]
        return Resources._trusted(out)

    def __sub__(self, other: Resources) -> Resources:
        theirs = other._amounts
        if not theirs:
            return self
        out = dict(self._amounts)
        for name, value in theirs.items():
            total = out.get(name, 0) - value
            if total:
                out[name] = total
            else:
                del out[name]
        return Resources._trusted(out)

    def scale(self, n: int) -> Resources:
        """``n`` copies of this vector (n identical pods)."""
        if n == 0:
            return _ZERO
        return Resources._trusted({name: value * n for name, value in self._amounts.items()})

    def fits(self, within: Resources) -> bool:
        """Whether every amount asked for is available in ``within``.

        Only resources this vector mentions are checked, as kube-scheduler
        does: a pod asking for no CPU still fits on a node whose free CPU went
        negative because another scheduler overcommitted it.
        """
        available = within._amounts
        for name, value in self._amounts.items():  # noqa: SIM110 - hot loop, all() is slower
            if value > available.get(name, 0):
                return False
        return True

    def short_of(self, within: Resources) -> Resources:
        """How much of each resource is missing from ``within`` (positive entries only)."""
        available = within._amounts
        out: dict[str, int] = {}
        for name, value in self._amounts.items():
            missing = value - available.get(name, 0)
            if missing > 0:
                out[name] = missing
        return Resources._trusted(out)

    def max_each(self, other: Resources) -> Resources:
        """The larger amount of each resource; callable as ``Resources.max_each(a, b)``."""
        out: dict[str, int] = {}
        mine = self._amounts
        theirs = other._amounts
        for name in mine.keys() | theirs.keys():
            value = max(mine.get(name, 0), theirs.get(name, 0))
            if value:
                out[name] = value
        return Resources._trusted(out)

    def __str__(self) -> str:
        if not self._amounts:
            return "none"
        return " ".join(
            f"{name}={format_amount(name, self._amounts[name])}"
            for name in sorted(self._amounts, key=_order)
        )

    def __repr__(self) -> str:
        return f"Resources({dict(sorted(self._amounts.items()))!r})"


_ZERO = Resources._trusted({})


@dataclass(frozen=True, slots=True)
class Capability:
    """A queue's cap: a limit for each resource it names, zero included.

    Unlike :class:`Resources` a zero is kept: ``nvidia.com/gpu: 0`` is a
    queue that may use no GPU at all, not a queue without a GPU cap. A
    resource the cap does not name is not limited, as in Volcano.
    """

    limits: tuple[tuple[str, int], ...]
    """Sorted by name."""

    @staticmethod
    def parse(mapping: Mapping[str, str | int | float]) -> Capability:
        """A cap from quantity strings; raises QuantityError naming the resource."""
        limits: dict[str, int] = {}
        for name in mapping:
            if not isinstance(name, str) or not name:
                raise QuantityError(f"{name!r}: not a resource name")
            limits[name] = canonical_amount(name, mapping[name])
        return Capability(tuple(sorted(limits.items())))

    def allows(self, amount: Resources) -> bool:
        """Whether ``amount`` stays within the limit of every resource the cap names.

        Not ``Resources.fits``: a cap that names only cpu must not turn every
        memory request into an overrun.
        """
        return all(amount.get(name) <= limit for name, limit in self.limits)

    def items(self) -> tuple[tuple[str, int], ...]:
        return self.limits

    def __str__(self) -> str:
        if not self.limits:
            return "none"
        return " ".join(
            f"{name}={format_amount(name, limit)}"
            for name, limit in sorted(self.limits, key=lambda item: _order(item[0]))
        )
