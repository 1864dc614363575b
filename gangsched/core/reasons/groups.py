"""The pod's PodGroup holds it back: it does not exist yet, or cannot be read."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from gangsched.core.model.objects import GangKey


@dataclass(frozen=True, slots=True)
class GroupMissing:
    """The pod names a PodGroup that does not exist (yet): no cycle can place it."""

    code: ClassVar[str] = "GroupMissing"
    group: GangKey

    def text(self) -> str:
        return f"waiting for PodGroup {self.group} to exist"


@dataclass(frozen=True, slots=True)
class GroupInvalid:
    """The pod's PodGroup is invalid (``error`` says how): no cycle can place it."""

    code: ClassVar[str] = "GroupInvalid"
    group: GangKey
    error: str

    def text(self) -> str:
        return f"PodGroup {self.group} is invalid: {self.error}"
