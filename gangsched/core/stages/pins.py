"""The starving gang's pins: room taken on the nodes it chose, for the rest of a cycle.

A starving gang cannot wait for room anywhere: it picks nodes and the cycle takes what
is free there from the capacity, so no later gang of the cycle gets it. A gang that may
backfill borrows the pinned room and gives back what it does not use; asking whether a
gang would fit without the pins gives all of it back for the question only (both under
a statement of the session, which pins it all again on discard).
"""

from __future__ import annotations

from collections.abc import Iterable

from gangsched.core.dra.devices import DeviceRef
from gangsched.core.model.objects import GangKey, NodeName, PodKey
from gangsched.core.model.resources import Resources
from gangsched.core.placement.capacity import Capacity, Placement


class Pins:
    """The pinned rooms of one cycle, each with the room it took; the session keeps its
    free room and the starving gang's hold in step with them."""

    def __init__(self, capacity: Capacity) -> None:
        self.capacity = capacity
        self.taken: list[tuple[Placement, Resources]] = []
        """The starving gang's room taken on the nodes it chose, and what each took."""
        self.fits_unpinned: dict[tuple[object, ...], bool] = {}
        """Whether gangs of a shape fit with the pins given back, while no room moved."""

    def __bool__(self) -> bool:
        return bool(self.taken)

    def pin(self, gang: GangKey, pod: PodKey, node: NodeName, room: Resources,
            devices: Iterable[DeviceRef] = ()) -> None:
        """Take ``room``, free on ``node``, and those of ``devices`` free there, for the
        gang's pod ``pod``."""
        self.taken.append((self._take(gang, PodKey(f"{pod}#pinned"), node, room, devices),
                           room))

    def _take(self, gang: GangKey, pod: PodKey, node: NodeName, room: Resources,
              devices: Iterable[DeviceRef]) -> Placement:
        return self.capacity.hold_devices(self.capacity.take(gang, pod, node, room), devices)

    def nodes(self) -> tuple[NodeName, ...]:
        return tuple(sorted({node for placement, _ in self.taken
                             for _, node in placement.assignments}))

    def unpin(self) -> list[tuple[Placement, Resources]]:
        """Give the pinned room back to the capacity (to a gang that may backfill into it, or
        for a question asked without the pins); :meth:`repin` pins again what is left,
        :meth:`pin_again` all of it. Returns the pins given back, each with its room."""
        for placement, _ in self.taken:
            self.capacity.release(placement)
        return list(self.taken)

    def pin_again(self, released: list[tuple[Placement, Resources]]) -> None:
        """Take again, exactly, the pins :meth:`unpin` gave back."""
        self.taken = [
            (self._take(placement.gang, pod, node, room, devices_of(placement)), room)
            for placement, room in released for (pod, node) in placement.assignments
        ]

    def repin(self) -> tuple[Resources, Resources]:
        """Pin again, after :meth:`unpin`, what is still free of each pin: all of it unless
        a gang backfilled into it. Returns the room pinned before and now."""
        pins, self.taken = self.taken, []
        for placement, room in pins:
            (pod, node), = placement.assignments
            free = self.capacity.free(node)
            share = Resources.of({name: min(amount, max(0, free.get(name)))
                                  for name, amount in room.items()})
            devices = self.capacity.devices_free(devices_of(placement))
            if not share.is_zero or devices:
                self.taken.append((self._take(placement.gang, pod, node, share, devices),
                                   share))
        return (Resources.sum(room for _, room in pins),
                Resources.sum(room for _, room in self.taken))


def devices_of(placement: Placement) -> tuple[DeviceRef, ...]:
    """The devices a placement holds through its claims (a pin's or a hold's, see
    :meth:`Capacity.hold_devices`)."""
    return tuple(allocated.device for write in placement.claims if write.allocation is not None
                 for allocated in write.allocation.devices)
