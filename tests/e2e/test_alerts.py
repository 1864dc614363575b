"""Every alert the chart ships fires on the series that should fire it and stays silent on
the ones that should not, as Prometheus itself evaluates them (``promtool test rules``).

The rules are the chart's PrometheusRule rendered by Helm with its default
values; the series are what gangsched's metrics read in each situation. A
gang retried for ever on refused claim writes is among them: its binds count
as failures and nothing counts as placed.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster.build import built
from devcluster.controlplane import REPO, ensure_binaries

CHART = REPO / "helm" / "gangsched"
JOB = 'job="gangsched",namespace="gangsched-system"'
"""What the rendered rules select: the release's Service, as the ServiceMonitor scrapes it."""


@dataclass(frozen=True, slots=True)
class Case:
    alert: str
    series: dict[str, str]
    """promtool's expanding notation, one sample a minute: ``'0+12x90'``."""
    fires: bool
    at: str = "60m"


def series(name: str, **labels: str) -> str:
    extra = "".join(f',{k}="{v}"' for k, v in labels.items())
    return f"{name}{{{JOB}{extra}}}"


WAIT = "gangsched_gang_wait_seconds_bucket"
CASES = [
    # Every gang of the last hour waited between 10 and 30 minutes.
    Case("GangschedGangsWaitingLong", {
        series(WAIT, le="300"): "0x90", series(WAIT, le="600"): "0x90",
        series(WAIT, le="1800"): "0+1x90", series(WAIT, le="+Inf"): "0+1x90"}, True, "90m"),
    # Every gang bound within five minutes.
    Case("GangschedGangsWaitingLong", {
        series(WAIT, le="300"): "0+1x90", series(WAIT, le="600"): "0+1x90",
        series(WAIT, le="1800"): "0+1x90", series(WAIT, le="+Inf"): "0+1x90"}, False, "90m"),
    # Gangs wait and none is placed: its claim writes are refused on every retry.
    Case("GangschedGangsStuck", {
        series("gangsched_gangs_waiting"): "1x60",
        series("gangsched_gangs_placed_total"): "5x60",
        series("gangsched_bind_failures_total", code="422"): "0+8x60"}, True),
    Case("GangschedGangsStuck", {
        series("gangsched_gangs_waiting"): "1x60",
        series("gangsched_gangs_placed_total"): "0+1x60"}, False),
    Case("GangschedNoCycles", {series("gangsched_cycles_total"): "100x60"}, True),
    Case("GangschedNoCycles", {series("gangsched_cycles_total"): "0+30x60"}, False),
    Case("GangschedNoLeader", {series("gangsched_leader", pod="a"): "0x60",
                               series("gangsched_leader", pod="b"): "0x60"}, True),
    Case("GangschedNoLeader", {series("gangsched_leader", pod="a"): "1x60",
                               series("gangsched_leader", pod="b"): "0x60"}, False),
    # 12 pods a minute not bound as decided: 0.2/s, over the 0.1/s default.
    Case("GangschedBindFailures", {
        series("gangsched_bind_failures_total", code="422"): "0+12x60"}, True),
    Case("GangschedBindFailures", {
        series("gangsched_bind_failures_total", code="409"): "0+1x60"}, False),
]


def rendered_rules(helm: Path) -> list[dict[str, Any]]:
    out = subprocess.run(
        [str(helm), "template", "gangsched", str(CHART), "--namespace", "gangsched-system",
         "--set", "metrics.prometheusRule.enabled=true"],
        capture_output=True, text=True, check=True, timeout=60).stdout
    rule = next(doc for doc in yaml.safe_load_all(out) if doc and doc["kind"] == "PrometheusRule")
    groups: list[dict[str, Any]] = rule["spec"]["groups"]
    return groups


def promtool_test(case: Case, rules: dict[str, dict[str, Any]]) -> dict[str, Any]:
    rule = rules[case.alert]
    expected = [{"exp_labels": rule["labels"], "exp_annotations": rule["annotations"]}]
    return {
        "interval": "1m",
        "input_series": [{"series": name, "values": values}
                         for name, values in case.series.items()],
        "alert_rule_test": [{"eval_time": case.at, "alertname": case.alert,
                             "exp_alerts": expected if case.fires else []}],
    }


@pytest.fixture(scope="module")
def promtool() -> Path:
    return built("promtool") / "promtool"


def test_every_shipped_alert_fires_when_it_should_and_only_then(
    promtool: Path, tmp_path: Path
) -> None:
    groups = rendered_rules(ensure_binaries() / "helm")
    rules = {rule["alert"]: rule for group in groups for rule in group["rules"]}
    assert {case.alert for case in CASES} == set(rules), "every shipped alert has its cases"
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": groups}))
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump({
        "rule_files": ["rules.yaml"], "evaluation_interval": "1m",
        "tests": [promtool_test(case, rules) for case in CASES]}))
    result = subprocess.run([str(promtool), "test", "rules", "tests.yaml"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
