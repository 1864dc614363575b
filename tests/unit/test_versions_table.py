"""README's supported-versions table is what bench/results/versions.json says."""

from __future__ import annotations

import json

from bench.versions import README, RESULTS, TABLE_END, TABLE_START, readme_table


def test_readmes_supported_versions_table_is_generated_from_the_results() -> None:
    table = README.read_text().split(TABLE_START, 1)[1].split(TABLE_END, 1)[0].strip()
    assert table == readme_table(json.loads(RESULTS.read_text())), (
        "README is stale: run python -m bench.versions --readme")
