"""Tentative changes to a cycle's state, kept all together or undone all together.

In the manner of Volcano's ``framework/statement.go``: a stage that tries
something (a gang's placement, a backfill into the starving gang's room, a
question asked with the pins given back) opens a statement, changes the
cycle's state through it, and then commits or discards it. Every change made
while a statement is open leaves its undo with the statement; ``discard`` runs
them newest first, so the state is exactly as the statement found it, and a
half-kept trial cannot leave room taken or totals moved behind it.

A statement opened while another is open is nested in it: committing the
inner one hands its undos to the outer one, which may still discard them.
"""

from __future__ import annotations

from collections.abc import Callable

Undo = Callable[[], None]


class Statement:
    """The undos of the changes made since it was opened; closed by commit or discard."""

    __slots__ = ("_close", "_undos", "outer")

    def __init__(self, outer: Statement | None, close: Callable[[Statement], None]) -> None:
        self.outer = outer
        self._undos: list[Undo] = []
        self._close = close

    def record(self, undo: Undo) -> None:
        """Keep the undo of a change just made under this statement."""
        self._undos.append(undo)

    def commit(self) -> None:
        """Keep the changes: for good, or, nested, as changes of the outer statement."""
        if self.outer is not None:
            self.outer._undos.extend(self._undos)
        self._undos = []
        self._close(self)

    def discard(self) -> None:
        """Undo the changes, newest first, leaving the state as the statement found it."""
        undos, self._undos = self._undos, []
        for undo in reversed(undos):
            undo()
        self._close(self)
