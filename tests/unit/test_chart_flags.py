"""The chart has a value for every flag of `gangsched run`.

A flag added to the command without a value in the chart can only be reached
through `extraArgs`; this test names the flag the chart forgot.
"""

from __future__ import annotations

from pathlib import Path

import click
import pytest

from gangsched.cli import run

CHART = Path(__file__).resolve().parents[2] / "helm" / "gangsched"
DEPLOYMENT = CHART / "templates" / "deployment.yaml"
NOT_IN_A_POD = {"--kubeconfig", "--context"}
"""In a pod the scheduler uses its service account: no kubeconfig, so no context either."""


def options() -> dict[str, list[str]]:
    """Each option of `run` by its name: its long flags (both sides of an on/off pair)."""
    found = {}
    for param in run.params:
        if isinstance(param, click.Option) and param.name:
            names = [n for n in param.opts + param.secondary_opts if n.startswith("--")]
            if not set(names) & NOT_IN_A_POD:
                found[param.name] = names
    return found


def written(flag: str, template: str) -> bool:
    return any(form in template for form in (f"- {flag}=", f"- {flag}\n", f'"{flag}"'))


@pytest.mark.parametrize(("option", "names"), options().items(), ids=options().keys())
def test_deployment_sets_the_option_from_a_value(option: str, names: list[str]) -> None:
    template = DEPLOYMENT.read_text()
    assert any(written(flag, template) for flag in names), f"{names} have no value in the chart"
