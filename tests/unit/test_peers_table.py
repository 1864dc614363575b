"""The peer comparison docs/comparison.md and README quote is what
bench/results/peers.json says, and each peer gets the gang it is asked for."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from demo.comparison import QUOTED_IN, RESULTS, TABLE_END, TABLE_START, table
from demo.contenders import YUNIKORN, YUNIKORN_TASK_GROUPS, Gang


@pytest.mark.parametrize("path", QUOTED_IN, ids=lambda path: path.name)
def test_the_quoted_peer_table_is_generated_from_the_results(path: Path) -> None:
    text = path.read_text()
    quoted = text.split(TABLE_START, 1)[1].split(TABLE_END, 1)[0].strip()
    assert quoted == table(json.loads(RESULTS.read_text())), (
        f"{path} is stale: run python -m demo.comparison")


def test_a_yunikorn_gang_declared_by_its_whole_jobs_resources_reserves_every_member() -> None:
    """A Spark driver alone declares 3 CPU of 1-CPU pods: three placeholders of its size."""
    driver = {"metadata": {"name": "spark-0-driver"},
              "spec": {"containers": [{"resources": {"requests": {"cpu": "1"}}}]}}
    pod = YUNIKORN.member(driver, Gang("spark-0", 1, {"cpu": "3"}))
    groups = json.loads(pod["metadata"]["annotations"][YUNIKORN_TASK_GROUPS])
    assert groups == [{"name": "spark-0", "minMember": 3, "minResource": {"cpu": "1"}}]
    assert pod["spec"]["schedulerName"] == "yunikorn"
