"""The peer comparison ``make demo-peers`` measures: bench/results/peers.json, and the
table docs/comparison.md and README quote from it (a unit test keeps them equal).

``python -m demo.comparison`` writes both tables again from the results alone.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from demo.timeline import RunSummary

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results" / "peers.json"
QUOTED_IN = (REPO / "docs" / "comparison.md", REPO / "README.md")
TABLE_START = "<!-- peers: make demo-peers -->"
TABLE_END = "<!-- end of peers -->"
BASELINE = "gangsched"


def _cell(run: dict[str, Any], baseline: dict[str, Any] | None) -> str:
    if run["stuck"]:
        # Deadlocked: jobs hold nodes with part of their pods; else nothing was placed.
        what = "deadlock" if run["most_partly_bound"] else "stuck"
        return (f"**{what}**: {run['finished']} of {run['jobs']} jobs, "
                f"nothing moves from {run['seconds']:g} s")
    ratio = ""
    if baseline is not None and not baseline["stuck"] and run is not baseline:
        ratio = f" ({run['seconds'] / baseline['seconds']:.2f}x)"
    partly = f", {run['partly_bound_s']:g} s partly bound" if run["partly_bound_s"] else ""
    return f"{run['seconds']:g} s{ratio}{partly}"


def table(results: dict[str, Any]) -> str:
    """Wall time per scenario and contender, with its ratio to gangsched's."""
    runs: list[dict[str, Any]] = results["runs"]
    contenders = list(dict.fromkeys(run["contender"] for run in runs))
    scenarios = list(dict.fromkeys(run["scenario"] for run in runs))
    by = {(run["scenario"], run["contender"]): run for run in runs}
    lines = ["| scenario | " + " | ".join(contenders) + " |",
             "| --- | " + " | ".join("---" for _ in contenders) + " |"]
    for scenario in scenarios:
        baseline = by.get((scenario, BASELINE))
        cells = [_cell(by[scenario, c], baseline) if (scenario, c) in by else ""
                 for c in contenders]
        lines.append(f"| {scenario} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def splice(path: Path, start: str, end: str, text: str) -> None:
    """Put ``text`` between the lines ``start`` and ``end`` of ``path``, in place of what
    was there: how a generated table is quoted in a document."""
    head, rest = path.read_text().split(start, 1)
    _, tail = rest.split(end, 1)
    path.write_text(f"{head}{start}\n{text}\n{end}{tail}")


def quoted(path: Path, start: str, end: str) -> str:
    """What ``path`` holds between the lines ``start`` and ``end``."""
    return path.read_text().split(start, 1)[1].split(end, 1)[0].strip()


def quote(results: dict[str, Any], path: Path) -> None:
    splice(path, TABLE_START, TABLE_END, table(results))


def write_comparison(summaries: Sequence[Sequence[RunSummary]], machine: str) -> Path:
    """Write the results and the tables quoting them; returns the results' path."""
    results = {"measured": datetime.now(UTC).isoformat(timespec="seconds"), "machine": machine,
               "runs": [s.as_json() for row in summaries for s in row]}
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    for path in QUOTED_IN:
        quote(results, path)
    return RESULTS


if __name__ == "__main__":
    for doc in QUOTED_IN:
        quote(json.loads(RESULTS.read_text()), doc)
