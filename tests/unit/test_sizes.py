"""No class over 250 lines and no function over 80 in the package.

A class split into a base and its one subclass is still one class: a base defined in
the package that exactly one class of the package derives from counts with that class
(recursively), so moving half of a class into a base meets no limit. A base shared by
several classes is a real abstraction and counts on its own.
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "gangsched"
CLASS_LINES = 250
FUNCTION_LINES = 80
EXEMPT: tuple[str, ...] = ()
"""Modules left out of the limits, each with its reason (none)."""


def definitions() -> Iterator[tuple[str, ast.AST]]:
    """Every class and function of the package, named ``path:qualified name``."""
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative.startswith(EXEMPT):
            continue

        for name, node in nested(ast.parse(path.read_text()), ""):
            yield f"{relative}:{name}", node


def nested(node: ast.AST, prefix: str) -> Iterator[tuple[str, ast.AST]]:
    """The classes and functions inside ``node``, by qualified name."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            name = f"{prefix}{child.name}"
            yield name, child
            yield from nested(child, f"{name}.")
        else:
            yield from nested(child, prefix)


def lines(node: ast.AST) -> int:
    assert isinstance(node, ast.stmt) and node.end_lineno is not None
    return node.end_lineno - node.lineno + 1


def base_names(node: ast.ClassDef) -> list[str]:
    return [b.id if isinstance(b, ast.Name) else b.attr for b in node.bases
            if isinstance(b, ast.Name | ast.Attribute)]


def class_sizes() -> dict[str, int]:
    """Each class's lines with those of the bases only it derives from."""
    classes = {name: node for name, node in definitions() if isinstance(node, ast.ClassDef)}
    by_name = {node.name: node for node in classes.values()}
    derived = Counter(base for node in classes.values() for base in base_names(node))

    def size(node: ast.ClassDef) -> int:
        return lines(node) + sum(size(by_name[base]) for base in base_names(node)
                                 if base in by_name and derived[base] == 1)

    return {name: size(node) for name, node in classes.items()}


def test_no_class_is_over_the_limit() -> None:
    over = {name: size for name, size in class_sizes().items() if size > CLASS_LINES}
    assert over == {}


def test_no_function_is_over_the_limit() -> None:
    over = {name: lines(node) for name, node in definitions()
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and lines(node) > FUNCTION_LINES}
    assert over == {}


@pytest.mark.parametrize(("source", "size"), [
    ("class Part:\n    a = 1\n    b = 2\n\nclass Whole(Part):\n    c = 3\n", 3 + 2),
    ("class Shared:\n    a = 1\n\nclass One(Shared):\n    b = 2\n\nclass Two(Shared):\n"
     "    c = 3\n", 2),
])
def test_a_base_only_one_class_derives_from_counts_with_it(
    source: str, size: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "module.py").write_text(source)
    monkeypatch.setattr(f"{__name__}.PACKAGE", tmp_path)
    assert max(class_sizes().values()) == size
