"""The CLI's answers when it cannot reach a cluster: a plain error, no traceback."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from gangsched.cli import main


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
