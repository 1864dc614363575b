"""The demo's outputs in ``demo-out/``: a timeline picture, an HTML page, the figures as JSON."""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display on these machines
import matplotlib.pyplot as plt
from matplotlib.patches import Patch

from demo.timeline import PodTrack, Run, RunSummary

PENDING = "#d9d9d9"
HELD_IDLE = "#d62728"
OUTSIDE = "#555555"
JOB_COLORS = ("#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#17becf", "#e377c2", "#bcbd22")
"""Colours of running jobs: none of them red, which marks room held idle."""


def outcome(summary: RunSummary) -> str:
    if summary.stuck:
        return (f"{summary.finished} of {summary.jobs} jobs finished; "
                f"stuck from {summary.seconds:g} s")
    return f"{summary.finished} of {summary.jobs} jobs finished in {summary.seconds:g} s"


def draw_timeline(runs: Sequence[Sequence[Run]], titles: Sequence[str],
                  scenario_titles: Sequence[str], path: Path) -> None:
    """One row of panels per scenario, one column per scheduler, one bar row per pod.

    Grey: created, not bound. Red, hatched: bound while other pods of its job still
    wait (holding room without running). Coloured by job: running.
    """
    heights = [max(len(row[0].pods), 3) + 3 for row in runs]
    fig, axes = plt.subplots(
        len(runs), len(titles), figsize=(6.2 * len(titles), 0.24 * sum(heights) + 1.8),
        gridspec_kw={"height_ratios": heights}, squeeze=False,
    )
    for r, row in enumerate(runs):
        horizon = max(run.ended for run in row)
        for c, run in enumerate(row):
            ax = axes[r][c]
            jobs = sorted({t.job for t in run.pods if t.job})
            for y, track in enumerate(run.pods):
                end = track.done if track.done is not None else run.ended
                bound = track.bound if track.bound is not None else end
                ax.barh(y, bound - track.created, left=track.created, color=PENDING, height=0.7)
                if track.bound is not None:
                    color = (JOB_COLORS[jobs.index(track.job) % len(JOB_COLORS)] if track.job
                             else OUTSIDE)
                    ax.barh(y, end - track.bound, left=track.bound, color=color, height=0.7)
                    start, waiting = _held_idle(run, track)
                    if waiting > 0:
                        ax.barh(y, waiting, left=start, color=HELD_IDLE, height=0.7,
                                hatch="////", edgecolor="white", linewidth=0)
            ax.set_yticks(range(len(run.pods)))
            ax.set_yticklabels([t.name for t in run.pods], fontsize=6)
            ax.invert_yaxis()
            ax.set_xlim(0, horizon * 1.02 + 0.5)
            ax.set_title(f"{scenario_titles[r]}: {titles[c]}\n{outcome(run.summary)}",
                         fontsize=9)
            ax.grid(axis="x", alpha=0.3)
            if r == len(runs) - 1:
                ax.set_xlabel("seconds since the jobs were submitted")
    fig.legend(
        handles=[Patch(color=PENDING, label="pending (not bound)"),
                 Patch(facecolor=HELD_IDLE, hatch="////", edgecolor="white",
                       label="bound, holding room while its job's other pods wait"),
                 Patch(color=JOB_COLORS[0], label="bound and running (colour per job)"),
                 Patch(color=OUTSIDE, label="a pod outside the jobs (a blocker, a serving pod)")],
        loc="lower center", ncol=4, fontsize=9, frameon=False,
    )
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _held_idle(run: Run, track: PodTrack) -> tuple[float, float]:
    """When, after binding, this pod held its room while other pods of its job waited."""
    if track.job is None or track.bound is None:
        return (0.0, 0.0)
    mates = [t for t in run.pods if t.job == track.job and t is not track]
    if not mates:
        return (0.0, 0.0)
    end = track.done if track.done is not None else run.ended
    start = max(track.bound, min(t.created for t in mates))
    last_bound = max(t.bound if t.bound is not None else run.ended for t in mates)
    return (start, max(0.0, min(last_bound, end) - start))


def write_html(summaries: Sequence[Sequence[RunSummary]], titles: Sequence[str],
               scenario_titles: Sequence[str], picture: str, path: Path,
               machine: str, poll_s: float) -> None:
    rows = []
    for r, row in enumerate(summaries):
        cells = "".join(
            f"<td>{html.escape(outcome(s))}<br>{s.pods_bound} of {s.pods} pods bound<br>"
            f"partly bound: {s.partly_bound_s:g} s (at most {s.most_partly_bound} jobs)"
            + ("" if s.jobs_split is None else f"<br>split across racks: {s.jobs_split} of "
               f"{s.jobs} jobs")
            + "</td>"
            for s in row
        )
        rows.append(f"<tr><th>{html.escape(scenario_titles[r])}</th>{cells}</tr>")
    head = "".join(f"<th>{html.escape(t)}</th>" for t in titles)
    path.write_text(f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>gangsched demo</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:1400px}}
table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:.5em;text-align:left;
vertical-align:top}}img{{max-width:100%}}</style></head><body>
<h1>gangsched demo: the same workloads under each scheduler</h1>
<p>Measured by <code>make demo</code> on {html.escape(machine)}: a local control plane
(kube-apiserver, etcd, kube-scheduler, KWOK nodes), each workload submitted as its
operator would, its pods listed every {poll_s:g} s plus the time the listing takes.
"Partly bound": seconds during which a job
held nodes with some pods while others of it waited.</p>
<table><tr><th>scenario</th>{head}</tr>{''.join(rows)}</table>
<h2>Timeline</h2><img src="{html.escape(picture)}" alt="one row per pod, one panel per scheduler">
</body></html>
""")


def write_json(summaries: Sequence[Sequence[RunSummary]], path: Path) -> None:
    path.write_text(json.dumps([s.as_json() for row in summaries for s in row], indent=2) + "\n")
