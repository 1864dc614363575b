"""The CLI's answers when it cannot reach a cluster: a plain error, no traceback."""

from __future__ import annotations

from pathlib import Path

import click
from click.testing import CliRunner

from gangsched.cli import _step_options, main
from gangsched.core.asking import AskLimits
from gangsched.core.model.objects import Policy
from gangsched.core.provisioning import ProvisionLimits
from gangsched.core.step import StepConfig


def test_status_without_a_kubeconfig_says_so(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["status", "--kubeconfig", str(tmp_path / "missing")])
    assert result.exit_code == 1
    assert f"error: no kubeconfig at {tmp_path / 'missing'}" in result.output


def test_explain_with_a_server_that_does_not_answer_says_so(tmp_path: Path) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: k, cluster: {server: 'http://127.0.0.1:9'}}]\n"
        "users: [{name: u, user: {}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
    )
    result = CliRunner().invoke(main, ["explain", "pod/x", "--kubeconfig", str(config)])
    assert result.exit_code == 1
    assert "error: cannot reach the API server at http://127.0.0.1:9" in result.output


def test_usage_errors_exit_2_before_any_cluster_is_asked() -> None:
    for args in (["explain", "deployment/x"], ["status", "-n", "a", "-A"],
                 ["status", "-o", "xml"], ["simulate"]):
        result = CliRunner().invoke(main, [*args, "--kubeconfig", "/nonexistent"])
        assert result.exit_code == 2, (args, result.output)


def test_run_with_a_context_no_kubeconfig_names_says_so(tmp_path: Path) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text("apiVersion: v1\nkind: Config\ncurrent-context: c\n"
                      "contexts: [{name: c, context: {cluster: k, user: u}}]\n")
    result = CliRunner().invoke(main, ["run", "--kubeconfig", str(config), "--context", "d"])
    assert result.exit_code == 1
    assert f"error: no context 'd' in {config}" in result.output


DECISION_FLAGS = {"policy", "starvation_seconds", "replacement_grace_seconds",
                  "provisioning_timeout_seconds", "preemption", "reclaim",
                  "reclaim_interval_seconds", "backfill"}


def test_run_explain_status_and_simulate_take_the_same_decision_flags() -> None:
    """What the CLI answers is decided as the scheduler started with the same flags decides:
    every command takes each flag that changes a decision, with the same default."""
    flags = [
        {p.name: (p.default, p.envvar) for p in main.commands[name].params
         if p.name in DECISION_FLAGS}
        for name in ("run", "explain", "status", "simulate")
    ]
    assert set(flags[0]) == DECISION_FLAGS
    assert all(found == flags[0] for found in flags[1:]), flags


def test_the_decision_flags_become_one_step_configuration() -> None:
    made: list[StepConfig] = []

    @click.command()
    @_step_options
    def probe(step: StepConfig) -> None:
        made.append(step)

    result = CliRunner().invoke(probe, [
        "--policy", "spread", "--starvation-seconds", "30", "--replacement-grace-seconds", "5",
        "--provisioning-timeout-seconds", "90", "--no-preemption", "--reclaim",
        "--reclaim-interval-seconds", "20", "--no-backfill", "--no-disruption-budgets",
        "--node-hold-seconds", "120", "--ask-backoff-seconds", "60"])
    assert result.exit_code == 0, result.output
    assert made == [StepConfig(policy=Policy.SPREAD, starvation_s=30.0, replacement_grace_s=5.0,
                               provisioning=ProvisionLimits(timeout_s=90.0), preemption=False,
                               reclaim=True, reclaim_interval_s=20.0, backfill=False,
                               disruption_budgets=False,
                               asking=AskLimits(node_hold_s=120.0, backoff_s=60.0))]
