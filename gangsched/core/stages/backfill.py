"""Backfill: a gang expected to end before the starving gang's reservation may use its room.

EASY backfill. The reservation is the starving gang's estimated start
(:mod:`gangsched.core.forecast`): a gang gone by then leaves the room as it
found it, so the starving gang starts no later, and the room does not stand
idle meanwhile. A gang of unknown runtime never backfills. What the gang
leaves of the pinned room stays pinned.
"""

from __future__ import annotations

from gangsched.core.model.objects import Gang
from gangsched.core.model.resources import Resources
from gangsched.core.model.runtimes import backfills
from gangsched.core.stages.session import Session, repin, unpin
from gangsched.core.stages.trial import try_place


def backfill(session: Session, gang: Gang) -> bool:
    """Place the gang in the room held for the starving gang; True when it was placed."""
    starving = session.starving
    inp = session.inp
    if (not inp.backfill or starving is None or starving == gang.key
            or not backfills(gang, inp.now, inp.estimated_starts.get(starving))):
        return False
    borrowed = session.open()
    freed = unpin(session)
    spare = (session.holding.get(starving, Resources.zero())
             - session.pinned.get(starving, Resources.zero()))
    if try_place(session, gang, spare=spare, freed=freed).reason is not None:
        borrowed.discard()
        return False
    borrowed.commit()
    repin(session, starving)
    return True
