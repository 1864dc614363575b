"""The import contracts hold the core/shell line: a probe that crosses it fails lint.

A contract that keeps whatever is added protects nothing, so each probe below adds one
forbidden import to `gangsched/core/step.py` in a copy of the package and runs
lint-imports there: the contract that guards that line must break, and the same copy
without the probe must keep every contract. The lists the contracts name are checked
against the package itself, so a new shell module cannot slip past them unlisted.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "gangsched"
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def contracts() -> dict[str, dict[str, object]]:
    """The import-linter contracts of pyproject.toml by their ids (else their names)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return {c.get("id", c["name"]): c for c in config["tool"]["importlinter"]["contracts"]}


def shell_modules() -> set[str]:
    """Every module and package directly inside gangsched, the core included."""
    return {
        path.stem if path.is_file() else path.name
        for path in PACKAGE.iterdir()
        if (path.suffix == ".py" and path.stem != "__init__") or (path / "__init__.py").is_file()
    }


def broken_contracts(probe: str | None, tmp_path: Path, module: str = "core/step.py") -> set[str]:
    """The ids of the contracts lint-imports finds broken in a copy of the package with
    ``probe`` added to ``module``."""
    copy = tmp_path / "gangsched"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    if probe is not None:
        probed = copy / module
        future = "from __future__ import annotations\n"
        probed.write_text(probed.read_text().replace(future, f"{future}{probe}\n", 1))
    run = subprocess.run(
        [LINT_IMPORTS, "--no-cache", "--no-logo"], cwd=tmp_path, capture_output=True,
        text=True, env={**os.environ, "PYTHONPATH": str(tmp_path), "COLUMNS": "500"},
        check=False,
    )
    assert "Contracts:" in run.stdout, run.stdout + run.stderr
    ids = {str(contract["name"]): name for name, contract in contracts().items()}
    return {ids[line.removesuffix(" BROKEN")] for line in run.stdout.splitlines()
            if line.endswith(" BROKEN")}


def test_the_package_keeps_every_contract(tmp_path: Path) -> None:
    assert broken_contracts(None, tmp_path) == set()


@pytest.mark.parametrize(
    ("probe", "guard"),
    [
        ("import logging", {"core-is-pure"}),
        ("import threading", {"core-is-pure"}),
        ("import time", {"core-is-pure"}),
        ("from gangsched import feed", {"core-is-pure", "shell-layers"}),
        ("from gangsched import devicecache", {"core-is-pure", "shell-layers"}),
        ("from gangsched import allocations", {"core-is-pure", "shell-layers"}),
        ("from gangsched import mirror", {"core-is-pure", "shell-layers"}),
    ],
)
def test_an_import_across_the_line_breaks_its_contract(
    probe: str, guard: set[str], tmp_path: Path
) -> None:
    assert broken_contracts(probe, tmp_path) == guard


def test_an_import_down_the_core_layers_breaks_them(tmp_path: Path) -> None:
    probe = "from gangsched.core.stages import session"
    assert "core-layers" in broken_contracts(probe, tmp_path, "core/kubeobjects/fields.py")


def test_the_shell_layers_name_every_module_of_the_package() -> None:
    layers = contracts()["shell-layers"]["layers"]
    assert isinstance(layers, list)
    named = {name.strip() for layer in layers for name in layer.split("|")}
    assert shell_modules() - named == set()


def test_the_core_is_forbidden_every_other_module_of_the_package() -> None:
    forbidden = contracts()["core-is-pure"]["forbidden_modules"]
    assert isinstance(forbidden, list)
    expected = {f"gangsched.{name}" for name in shell_modules() - {"core"}}
    assert expected - set(forbidden) == set()
