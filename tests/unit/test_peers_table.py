"""The peer comparisons docs/comparison.md, docs/benchmarks.md and README quote are what
bench/results/peers.json and peers-throughput.json say, and each peer gets the gang it is
asked for."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.peers import QUOTED_IN as THROUGHPUT_QUOTED_IN
from bench.peers import RESULTS as THROUGHPUT_RESULTS
from bench.peers import TABLE_END as THROUGHPUT_END
from bench.peers import TABLE_START as THROUGHPUT_START
from bench.peers import ratios
from bench.peers import table as throughput_table
from demo.comparison import QUOTED_IN, RESULTS, TABLE_END, TABLE_START, quoted, table
from demo.contenders import YUNIKORN, YUNIKORN_TASK_GROUPS, Gang


@pytest.mark.parametrize("path", QUOTED_IN, ids=lambda path: path.name)
def test_the_quoted_peer_table_is_generated_from_the_results(path: Path) -> None:
    assert quoted(path, TABLE_START, TABLE_END) == table(json.loads(RESULTS.read_text())), (
        f"{path} is stale: run python -m demo.comparison")


@pytest.mark.parametrize("path", THROUGHPUT_QUOTED_IN, ids=lambda path: path.name)
def test_the_quoted_peer_throughput_table_is_generated_from_the_results(path: Path) -> None:
    assert quoted(path, THROUGHPUT_START, THROUGHPUT_END) == throughput_table(
        json.loads(THROUGHPUT_RESULTS.read_text())), (
        f"{path} is stale: run python -m bench.peers --quote")


def test_a_yunikorn_gang_declared_by_its_whole_jobs_resources_reserves_every_member() -> None:
    """A Spark driver alone declares 3 CPU of 1-CPU pods: three placeholders of its size."""
    driver = {"metadata": {"name": "spark-0-driver"},
              "spec": {"containers": [{"resources": {"requests": {"cpu": "1"}}}]}}
    pod = YUNIKORN.member(driver, Gang("spark-0", 1, {"cpu": "3"}))
    groups = json.loads(pod["metadata"]["annotations"][YUNIKORN_TASK_GROUPS])
    assert groups == [{"name": "spark-0", "minMember": 3, "minResource": {"cpu": "1"}}]
    assert pod["spec"]["schedulerName"] == "yunikorn"


def test_a_peer_stopped_at_its_time_limit_is_reported_with_what_it_bound() -> None:
    """gangsched's rate over a peer that had not finished is at least its rate times the
    limit over the backlog: the peer would have needed longer than the limit."""
    ours = {"title": "gangsched", "all_bound": True, "pods": 5000, "bound": 5000,
            "wall_s": 36.9, "pods_per_s": 135.6, "first_bind_after_s": 1.3,
            "time_limit_s": 400}
    theirs = {"title": "YuniKorn", "all_bound": False, "pods": 5000, "bound": 1207,
              "wall_s": 380.0, "pods_per_s": 3.2, "first_bind_after_s": 12.0,
              "time_limit_s": 400}
    runs = {"gangsched": ours, "yunikorn": theirs}
    assert ratios(runs) == {"yunikorn": {"at_least": 10.8}}
    row = throughput_table({"sizes": {"pods": 5000, "gang_size": 8}, "runs": runs,
                            "gangsched_over_peer_pods_per_s": ratios(runs)}).splitlines()[-1]
    assert row.split(" | ")[1:3] == ["**not done**: 1,207 of 5,000 bound when stopped at 400 s",
                                     "3.0 until then"]
    assert row.endswith("at least 10.8x |")


def test_gangsched_over_a_peer_that_finished_is_the_ratio_of_their_rates() -> None:
    ours = {"all_bound": True, "pods": 5000, "pods_per_s": 135.6, "time_limit_s": 400}
    theirs = {"all_bound": True, "pods": 5000, "pods_per_s": 30.4, "time_limit_s": 400}
    assert ratios({"gangsched": ours, "volcano": theirs}) == {"volcano": {"ratio": 4.46}}
