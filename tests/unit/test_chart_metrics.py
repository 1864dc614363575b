"""The chart's dashboard and alerts read only metrics that gangsched exports.

A panel or alert naming a metric that was renamed or never existed shows "No
data" or never fires, silently; these tests fail instead. The exported names
come from the process's own registry after importing the application, so a
metric moved between modules still counts and one deleted does not.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import prometheus_client
import pytest

import gangsched.app  # noqa: F401  (registers every metric of the scheduler)

CHART = Path(__file__).resolve().parents[2] / "helm" / "gangsched"
DASHBOARD = CHART / "dashboards" / "gangsched.json"
ALERTS = CHART / "templates" / "prometheusrule.yaml"

SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "summary": ("", "_sum", "_count", "_created"),
    "gauge": ("",),
    "info": ("_info",),
}
METRIC = re.compile(r"\b((?:gangsched|process)_[a-z0-9_]+)\b")


def exported() -> set[str]:
    names: set[str] = set()
    for family in prometheus_client.REGISTRY.collect():
        names.update(family.name + suffix for suffix in SUFFIXES.get(family.type, ("",)))
        names.update(sample.name for sample in family.samples)
    return names


def panel_queries(dashboard: dict[str, object]) -> dict[str, str]:
    panels = dashboard["panels"]
    assert isinstance(panels, list)
    return {f"{panel['title']}/{target['refId']}": target["expr"]
            for panel in panels for target in panel.get("targets", [])}


def test_dashboard_has_panels_for_what_operators_ask() -> None:
    titles = {panel["title"] for panel in json.loads(DASHBOARD.read_text())["panels"]}
    assert {"Pending PodGroups per queue", "Gang wait time", "Pods bound / s",
            "Cycle time", "Bind failures / s", "Queue share against weight", "Queue usage",
            "Gang wait p95 per queue", "Version"} <= titles


@pytest.mark.parametrize(("panel", "query"),
                         panel_queries(json.loads(DASHBOARD.read_text())).items())
def test_every_panel_query_names_an_exported_metric(panel: str, query: str) -> None:
    named = set(METRIC.findall(query))
    assert named, f"{panel} names no metric: {query}"
    assert named <= exported(), f"{panel}: {sorted(named - exported())} are not exported"


def test_every_alert_names_an_exported_metric() -> None:
    named = set(METRIC.findall(ALERTS.read_text()))
    assert {"gangsched_cycles_total", "gangsched_bind_failures_total"} <= named
    assert named <= exported(), sorted(named - exported())


def test_a_misspelt_metric_would_be_caught() -> None:
    assert "gangsched_pods_bound_total" in exported()
    assert "gangsched_pod_bound_total" not in exported()
