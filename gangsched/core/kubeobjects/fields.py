"""Raw API objects and their fields read into typed values, label selectors
included, failing with :class:`ObjectError` naming the object and the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NoReturn

from gangsched.core.model.objects import (
    SelectorRequirement,
    SelectorTerm,
)
from gangsched.core.model.quantity import QuantityError, canonical_amount
from gangsched.core.model.resources import Resources

__all__ = [
    "TERMINAL_PHASES",
    "ObjectError",
    "ObjectRef",
    "RawObject",
    "fail",
    "kind_of",
    "list_at",
    "mapping_at",
    "metadata_of",
    "object_name",
    "object_ref",
    "requirements_at",
    "resources_at",
    "selector_terms_at",
    "str_at",
    "str_map_at",
    "timestamp",
]


RawObject = Mapping[str, Any]
"""An API object as JSON decodes it: what watches, lists and files hand in, read only here."""
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
_SELECTOR_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"})


class ObjectError(ValueError):
    """An API object the core cannot use; the message names the object and the field."""


def fail(where: str, message: str) -> NoReturn:
    raise ObjectError(f"{where}: {message}")


def kind_of(value: object) -> str:
    return "null" if value is None else type(value).__name__


def mapping_at(value: object, where: str, path: str) -> Mapping[str, object]:
    """A JSON object; absent (None) reads as empty, as the API server omits empty maps."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        fail(where, f"{path} must be an object, not {kind_of(value)}")
    for key in value:
        if not isinstance(key, str):
            fail(where, f"{path} has a non-string key {key!r}")
    return value


def list_at(value: object, where: str, path: str) -> list[object] | tuple[object, ...]:
    if value is None:
        return ()
    if not isinstance(value, list | tuple):
        fail(where, f"{path} must be a list, not {kind_of(value)}")
    return value


def owner_uids(meta: Mapping[str, object], where: str, *, controller: bool = False
               ) -> tuple[str, ...]:
    """The UIDs ``metadata.ownerReferences`` names (only the controlling one's when
    ``controller``)."""
    refs = (mapping_at(o, where, "metadata.ownerReferences[]")
            for o in list_at(meta.get("ownerReferences"), where, "metadata.ownerReferences"))
    return tuple(str(ref.get("uid") or "") for ref in refs
                 if not controller or ref.get("controller"))


def str_at(value: object, where: str, path: str, default: str | None = None) -> str:
    if value is None and default is not None:
        return default
    if not isinstance(value, str):
        fail(where, f"{path} must be a string, not {kind_of(value)}")
    return value


def str_map_at(value: object, where: str, path: str) -> tuple[tuple[str, str], ...]:
    mapping = mapping_at(value, where, path)
    pairs = []
    for key, item in mapping.items():
        pairs.append((key, str_at(item, where, f"{path}.{key}")))
    return tuple(sorted(pairs))


def resources_at(value: object, where: str, what: str) -> Resources:
    """A resource map; ``what`` says whose it is, e.g. "container 'main' requests"."""
    mapping = mapping_at(value, where, what)
    amounts: dict[str, int] = {}
    for name, raw in mapping.items():
        if not name:
            fail(where, f"{what} has an empty resource name")
        if isinstance(raw, bool) or not isinstance(raw, str | int | float):
            fail(where, f"{what} {name} {raw!r}: not a quantity")
        try:
            amounts[name] = canonical_amount(name, raw)
        except QuantityError as err:
            fail(where, f"{what} {err}")
    return Resources.of(amounts)


def metadata_of(obj: object, kind: str) -> tuple[Mapping[str, object], str, str]:
    """The metadata, namespace and name, checked before anything else so every later
    message can name the object."""
    if not isinstance(obj, Mapping):
        raise ObjectError(f"{kind}: must be an object, not {kind_of(obj)}")
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        raise ObjectError(f"{kind}: metadata must be an object, not {kind_of(meta)}")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise ObjectError(f"{kind}: metadata.name must be a non-empty string, not {name!r}")
    namespace = meta.get("namespace")
    if namespace is None:
        namespace = "default"
    if not isinstance(namespace, str) or not namespace:
        raise ObjectError(f"{kind} {name}: metadata.namespace must be a non-empty string")
    return meta, namespace, name


def selector_terms_at(
    items: list[object] | tuple[object, ...], where: str, path: str
) -> tuple[SelectorTerm, ...]:
    terms = []
    for index, item in enumerate(items):
        term_path = f"{path}[{index}]"
        term = mapping_at(item, where, term_path)
        terms.append(
            SelectorTerm(
                match_expressions=requirements_at(
                    term.get("matchExpressions"), where, f"{term_path}.matchExpressions"
                ),
                match_fields=requirements_at(
                    term.get("matchFields"), where, f"{term_path}.matchFields"
                ),
            )
        )
    return tuple(terms)


def requirements_at(value: object, where: str, path: str) -> tuple[SelectorRequirement, ...]:
    found = []
    for index, item in enumerate(list_at(value, where, path)):
        entry = mapping_at(item, where, f"{path}[{index}]")
        operator = str_at(entry.get("operator"), where, f"{path}[{index}].operator")
        if operator not in _SELECTOR_OPERATORS:
            fail(where, f"{path}[{index}].operator {operator!r} is not a selector operator")
        values = tuple(
            str_at(v, where, f"{path}[{index}].values[{i}]")
            for i, v in enumerate(list_at(entry.get("values"), where, f"{path}[{index}].values"))
        )
        found.append(
            SelectorRequirement(
                key=str_at(entry.get("key"), where, f"{path}[{index}].key"),
                operator=operator,
                values=values,
            )
        )
    return tuple(found)


def timestamp(value: object, where: str, path: str) -> float:
    """RFC 3339 time as seconds since the epoch; absent reads as 0 (oldest)."""
    if value is None:
        return 0.0
    text = str_at(value, where, path)
    try:
        moment = datetime.fromisoformat(text)
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return moment.timestamp()
    except (ValueError, OverflowError):
        fail(where, f"{path} {text!r} is not an RFC 3339 time")


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """Who an object is, read without failing: a deletion or a list names even a broken one."""

    namespace: str
    """Empty for a cluster-scoped object."""
    name: str
    uid: str

    @property
    def key(self) -> str:
        """``namespace/name``, or ``name`` for a cluster-scoped object."""
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


def object_ref(obj: RawObject) -> ObjectRef:
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    return ObjectRef(str(meta.get("namespace") or ""), str(meta.get("name") or ""),
                     str(meta.get("uid") or ""))


def object_name(obj: RawObject) -> str:
    return object_ref(obj).name
