"""How much room a node has for a pod of a given shape.

Three small measures that every placement decision is made of: how many
such pods fit (:func:`fit_count`), which free devices a pod would leave stranded, and
which resource to blame when not even one fits. They live apart from the
search and the indexes so both use the very same arithmetic.
"""

from __future__ import annotations

from gangsched.core.model.resources import Resources, devices_first, is_extended

__all__ = ["UNBOUNDED", "blamed_resource", "fit_count", "size_order", "stranded_devices"]

UNBOUNDED = 1 << 62
"""The room for a pod that asks for nothing at all."""


def fit_count(free: Resources, items: tuple[tuple[str, int], ...]) -> int:
    """How many pods asking ``items`` (a request's sorted items) fit in ``free``.

    Exact integer division per resource, the smallest wins; resources the
    pod does not ask for never limit it, even when overcommitted.
    """
    amounts = free.amounts
    best = UNBOUNDED
    for name, amount in items:
        have = amounts.get(name, 0)
        if have < amount:
            return 0
        if amount > 0:
            count = have // amount
            if count < best:
                best = count
    return best


def stranded_devices(free: Resources, requests: Resources) -> int:
    """Free devices (GPUs...) on a node that a pod of this shape would not use.

    Putting the pod there makes them harder to use whole: a CPU pod on an
    idle GPU node eats the CPU and memory a GPU job would need.
    """
    asked = requests.amounts
    return sum(
        amount
        for name, amount in free.amounts.items()
        if amount > 0 and name not in asked and is_extended(name)
    )


def blamed_resource(free: Resources, requests: Resources) -> str:
    """The resource to name when a pod does not fit: devices before cpu and memory."""
    missing = requests.short_of(free)
    if missing.is_zero:
        return ""
    return min(missing.amounts, key=devices_first)


def size_order(requests: Resources, largest: Resources) -> tuple[int, ...]:
    """A sort key putting big pods first: they have the fewest places to go.

    The size is the dominant share of the largest node, per million, so a GPU
    is "bigger" than a few CPUs on a cluster where GPUs are scarce; a resource
    no node has is huge.
    """
    shares = []
    for name, amount in requests.amounts.items():
        most = largest.get(name)
        shares.append(amount * 1_000_000 // most if most > 0 else UNBOUNDED)
    shares.sort(reverse=True)
    return tuple(-share for share in shares)
