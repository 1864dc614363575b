"""Estimated starts and backfill, measured: ``python -m bench.eta`` (``make bench-eta``) writes
bench/results/eta.json and bench/results/backfill.json.

Both run in-process, on the scheduler's own pure step (:func:`gangsched.core.step.step`)
over a mirror fed as the watches feed it, with a clock that jumps from one event to the
next (a gang arrives, a pod ends, a threshold such as starvation is reached). That is the
honest way to run the same decisions over hours of traced jobs whose runtimes are exact:
a control plane would add nothing to what is decided, only its own latency to when.

- ETA: a trace of gangs of 1 to 32 GPUs arriving on 4 nodes of 8 GPUs, each with an exact
  ``scheduling.gangsched.io/expected-runtime``. For every gang that waited, the first
  estimate its PodGroup would have shown (the step after it arrived) against when it
  actually started: the absolute error, and the error as a part of its wait.
- Backfill: a 16-GPU gang (2 pods of 8) arriving behind a stream of 1- and 2-GPU jobs of
  known runtime (2 to 10 minutes) on 2 nodes of 8 GPUs; each trace run with backfill on
  and off, in the same process, for several seeds: the GPUs in use while the big gang
  waits, and when it starts, beside the most any scheduler could have used them. The
  stream brings 2x or 1.25x the work the GPUs drain, the big gang arrives
  after 30 or 10 minutes: the deeper the backlog of small jobs, the more of them end
  before the reservation and fill the room kept for it.
"""

from __future__ import annotations

import argparse
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.harness import PODGROUP_VERSION, machine, pod_manifest, write_report
from gangsched.core.actions import Bind
from gangsched.core.model.objects import Flavor, GangKey, PodKey, gang_key
from gangsched.core.model.runtimes import RUNTIME_ANNOTATION
from gangsched.core.state import State
from gangsched.core.step import StepConfig, step
from gangsched.core.thresholds import next_threshold
from gangsched.core.view import StepView
from gangsched.feed import Feed
from gangsched.mirror import Mirror

RESULTS = Path(__file__).parent / "results"
T0 = 1_700_000_000.0
"""The trace's time zero, as seconds since the epoch (creation times are RFC 3339)."""
NAMESPACE = "eta"
GPU = "nvidia.com/gpu"


@dataclass(frozen=True, slots=True)
class Job:
    name: str
    pods: int
    gpus: int
    """Per pod."""
    runtime: float
    arrival: float


@dataclass
class Outcome:
    arrival: float
    estimate: float | None = None
    estimated: bool = False
    """An estimate was published while it waited (the first is kept)."""
    start: float | None = None


@dataclass
class Run:
    outcomes: dict[GangKey, Outcome] = field(default_factory=dict)
    busy: list[tuple[float, float, int]] = field(default_factory=list)
    """(start, end, GPUs) of every pod that ran."""
    steps: int = 0

    def utilisation(self, start: float, end: float, total: int) -> float:
        if end <= start:
            return 1.0
        used = sum(max(0.0, min(e, end) - max(s, start)) * gpus for s, e, gpus in self.busy)
        return used / (total * (end - start))


def _iso(at: float) -> str:
    return datetime.fromtimestamp(T0 + at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _node(name: str, gpus: int) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {},
        "status": {
            "allocatable": {"cpu": "64", "memory": "512Gi", GPU: str(gpus), "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def _job_objects(job: Job) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    created = _iso(job.arrival)
    group = {
        "apiVersion": PODGROUP_VERSION, "kind": "PodGroup",
        "metadata": {"name": job.name, "namespace": NAMESPACE, "uid": f"uid-{job.name}",
                     "creationTimestamp": created,
                     "annotations": {RUNTIME_ANNOTATION: f"{job.runtime:g}s"}},
        "spec": {"minMember": job.pods},
    }
    pods = []
    for i in range(job.pods):
        pod = pod_manifest(NAMESPACE, f"{job.name}-{i}", "gang", job.name)
        pod["metadata"].update(uid=f"uid-{job.name}-{i}", creationTimestamp=created)
        resources = pod["spec"]["containers"][0]["resources"]
        resources["requests"] = {"cpu": "1", "memory": "1Gi", GPU: str(job.gpus)}
        resources["limits"] = {GPU: str(job.gpus)}
        pod["status"] = {"phase": "Pending"}
        pods.append(pod)
    return group, pods


def replay(jobs: Sequence[Job], nodes: int, gpus_per_node: int, config: StepConfig,
           *, until: GangKey | None = None, max_steps: int = 200_000) -> Run:
    """Run the trace through the step; stop once every job started (or ``until`` did)."""
    mirror = Mirror(scheduler_names=frozenset({"gang"}))
    feed = Feed(mirror)
    feed.replace("nodes", [_node(f"node-{i}", gpus_per_node) for i in range(nodes)])
    arrivals = sorted(jobs, key=lambda job: (job.arrival, job.name))
    by_gang = {gang_key(NAMESPACE, job.name): job for job in jobs}
    pods: dict[PodKey, dict[str, Any]] = {}
    ends: dict[PodKey, float] = {}
    run, state = Run(), State()
    at, arrived = 0.0, 0
    while run.steps < max_steps:
        while arrived < len(arrivals) and arrivals[arrived].arrival <= at:
            job = arrivals[arrived]
            group, members = _job_objects(job)
            feed.upsert_group(Flavor.GANGSCHED, group)
            for pod in members:
                key = PodKey(f"{NAMESPACE}/{pod['metadata']['name']}")
                pods[key] = pod
                feed.upsert("pods", pod)
            run.outcomes[gang_key(NAMESPACE, job.name)] = Outcome(job.arrival)
            arrived += 1
        for key in [k for k, end in ends.items() if end <= at]:
            del ends[key]
            pods[key]["status"]["phase"] = "Succeeded"
            feed.upsert("pods", pods[key])
        while True:  # a placement can change admission and reservations: decide again now
            run.steps += 1
            view = StepView(mirror.view(),
                            priority_classes=mirror.groups_and_queues.priority_classes)
            stepped = step(state, view, T0 + at, config)
            state = stepped.state
            for gang, estimate in state.estimates.items():
                outcome = run.outcomes.get(gang)
                if outcome is not None and not outcome.estimated:
                    outcome.estimated = True
                    outcome.estimate = None if estimate.at is None else estimate.at - T0
            binds = [a for a in stepped.actions if isinstance(a, Bind)]
            for bind in binds:
                job = by_gang[bind.placement.gang]
                run.outcomes[bind.placement.gang].start = at
                for key, node in bind.placement.assignments:
                    pod = pods[key]
                    pod["spec"]["nodeName"] = node
                    pod["status"] = {"phase": "Running", "startTime": _iso(at)}
                    feed.upsert("pods", pod)
                    ends[key] = at + job.runtime
                    run.busy.append((at, at + job.runtime, job.gpus))
            if not binds:
                break
        done = until is not None and run.outcomes.get(until, Outcome(0.0)).start is not None
        if done or (arrived == len(arrivals) and not ends):
            break
        upcoming = [next_threshold(T0 + at, stepped.thresholds) - T0]
        if arrived < len(arrivals):
            upcoming.append(arrivals[arrived].arrival)
        upcoming.extend(ends.values())
        at = max(at + 1e-3, min(upcoming))
    return run


# ---- ETA ---------------------------------------------------------------------------------

ETA_SHAPES = ((1, 1), (1, 2), (2, 1), (1, 4), (4, 1), (2, 4), (1, 8), (2, 8), (4, 8))
"""(pods, GPUs per pod) of the ETA trace's gangs, drawn uniformly: 1 to 32 GPUs."""


def eta_trace(seed: int, count: int, mean_gap_s: float) -> list[Job]:
    rng = random.Random(seed)
    jobs, at = [], 0.0
    for i in range(count):
        pods, gpus = rng.choice(ETA_SHAPES)
        runtime = float(rng.randrange(120, 1800, 30))
        jobs.append(Job(f"job-{i:03d}", pods, gpus, runtime, round(at, 1)))
        at += rng.expovariate(1 / mean_gap_s)
    return jobs


def _percentile(values: Sequence[float], part: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(part * (len(ordered) - 1)))]


def eta_report(run: Run) -> dict[str, Any]:
    waited = {gang: o for gang, o in run.outcomes.items()
              if o.start is not None and o.start > o.arrival}
    known = {gang: o for gang, o in waited.items() if o.estimate is not None}
    errors = [abs(o.estimate - o.start) for o in known.values()
              if o.start is not None and o.estimate is not None]
    parts = [abs(o.estimate - o.start) / (o.start - o.arrival)
             for o in known.values() if o.start is not None and o.estimate is not None]
    waits = [o.start - o.arrival for o in waited.values() if o.start is not None]
    return {
        "gangs": len(run.outcomes),
        "started_at_once": sum(1 for o in run.outcomes.values() if o.start == o.arrival),
        "waited": len(waited),
        "estimated": len(known),
        "unknown": len(waited) - len(known),
        "wait_s": {"p50": round(statistics.median(waits), 1),
                   "p90": round(_percentile(waits, 0.9), 1)} if waits else {},
        "abs_error_s": {"p50": round(statistics.median(errors), 1),
                        "p90": round(_percentile(errors, 0.9), 1)} if errors else {},
        "error_part_of_wait": {"p50": round(statistics.median(parts), 3),
                               "p90": round(_percentile(parts, 0.9), 3)} if parts else {},
        "exact": sum(1 for e in errors if e < 1.0),
        "goal": "p90 of the error as a part of the wait <= 0.20",
        "goal_met": bool(parts) and _percentile(parts, 0.9) <= 0.20,
        "steps": run.steps,
    }


# ---- backfill ----------------------------------------------------------------------------

BIG = gang_key(NAMESPACE, "big")


def backfill_trace(seed: int, big_at: float, count: int, runtimes: tuple[int, int],
                   load: float) -> list[Job]:
    """Small jobs (1 or 2 GPUs, runtimes drawn from ``runtimes`` seconds) bringing ``load``
    times the work 16 GPUs drain, so a backlog builds, and the 16-GPU gang among them."""
    rng = random.Random(seed)
    jobs, at = [], 0.0
    shortest, longest = runtimes
    gap = (shortest + longest) / 2 * 1.5 / 16 / load
    for i in range(count):
        jobs.append(Job(f"small-{i:03d}", 1, rng.choice((1, 2)),
                        float(rng.randrange(shortest, longest, 10)), round(at, 1)))
        at += rng.expovariate(1 / gap)
    jobs.append(Job("big", 2, 8, 600.0, big_at))
    return jobs


def backfill_report(run: Run, total_gpus: int) -> dict[str, Any]:
    big = run.outcomes[BIG]
    start = big.start if big.start is not None else float("nan")
    return {
        "big_arrived_s": big.arrival,
        "big_started_s": start,
        "big_start_delay_s": round(start - big.arrival, 1),
        "big_estimate_at_arrival_s": big.estimate,
        "utilisation_while_big_waits": round(run.utilisation(big.arrival, start, total_gpus), 3),
        "small_started_while_big_waits": sum(
            1 for gang, o in run.outcomes.items()
            if gang != BIG and o.start is not None and big.arrival <= o.start < start),
        "steps": run.steps,
    }


def utilisation_bound(jobs: Sequence[Job], run: Run, total_gpus: int) -> float:
    """The most any scheduler could use the GPUs while the big gang waits, if it starts
    when it did: what ran then, plus every job not started before it arrived that could
    run whole between its arrival (or the big gang's) and that start, however the jobs
    would pack. A trace whose bound is under the goal cannot meet it."""
    big = run.outcomes[BIG]
    arrived, start = big.arrival, big.start
    if start is None or start <= arrived:
        return 1.0
    running = sum(max(0.0, min(end, start) - max(begin, arrived)) * gpus
                  for begin, end, gpus in run.busy if begin < arrived)
    outcomes = {key.split("/", 1)[1]: o for key, o in run.outcomes.items()}
    possible = sum(
        job.runtime * job.gpus * job.pods for job in jobs
        if job.name != "big" and job.arrival < start
        and not ((o := outcomes.get(job.name)) and o.start is not None and o.start < arrived)
        and job.runtime <= start - max(job.arrival, arrived))
    return round(min(1.0, (running + possible) / (total_gpus * (start - arrived))), 3)


def backfill_streams(seeds: Sequence[int], config: StepConfig) -> dict[str, Any]:
    """Each trace, on and off, for every seed: the first seed's runs in full, all seeds'
    utilisation and start delay summed up."""
    streams: dict[str, Any] = {}
    for load, big_at in ((2.0, 1800.0), (2.0, 600.0), (1.25, 1800.0), (1.25, 600.0)):
        per_seed = []
        for seed in seeds:
            trace = backfill_trace(seed, big_at=big_at, count=int(big_at / 10) + 200,
                                   runtimes=(120, 600), load=load)
            runs = {mode: replay(trace, 2, 8, replace(config, backfill=on), until=BIG)
                    for mode, on in (("backfill_on", True), ("backfill_off", False))}
            reports = {mode: backfill_report(run, 16) for mode, run in runs.items()}
            on, off = reports["backfill_on"], reports["backfill_off"]
            per_seed.append({
                "seed": seed, **reports,
                "utilisation_bound": utilisation_bound(trace, runs["backfill_on"], 16),
                "goal_met": (on["utilisation_while_big_waits"] >= 0.90
                             and on["big_started_s"] <= off["big_started_s"]),
            })
        on_use = [r["backfill_on"]["utilisation_while_big_waits"] for r in per_seed]
        off_use = [r["backfill_off"]["utilisation_while_big_waits"] for r in per_seed]
        streams[f"load_{load:g}x_big_at_{big_at:g}s"] = {
            **per_seed[0],
            "seeds": {
                "seeds": list(seeds),
                "utilisation_on": {"min": min(on_use), "median": statistics.median(on_use)},
                "utilisation_off": {"min": min(off_use), "median": statistics.median(off_use)},
                "utilisation_bound": [r["utilisation_bound"] for r in per_seed],
                "big_start_later_with_backfill_s": max(
                    r["backfill_on"]["big_started_s"] - r["backfill_off"]["big_started_s"]
                    for r in per_seed),
                "goal_met": sum(r["goal_met"] for r in per_seed),
                "bound_under_goal": sum(r["utilisation_bound"] < 0.90 for r in per_seed),
            },
        }
    return streams


def _seeds(text: str) -> list[int]:
    return [int(seed) for seed in text.split(",")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--eta-seeds", type=_seeds, default=[7, 1, 2, 3, 4],
                        help="Seeds of the ETA traces, comma-separated (the first is reported "
                             "in full).")
    parser.add_argument("--gangs", type=int, default=150)
    parser.add_argument("--mean-gap", type=float, default=400.0,
                        help="Mean seconds between arrivals in the ETA trace (400: the GPUs "
                             "are 63 %% busy on average; a second trace arrives 1.6x as fast).")
    parser.add_argument("--backfill-seeds", type=_seeds,
                        default=[7, 1, 2, 3, 4],
                        help="Seeds of the backfill traces, comma-separated (the first is "
                             "reported in full).")
    parser.add_argument("--starvation-seconds", type=float, default=60.0)
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    config = StepConfig(starvation_s=args.starvation_seconds)

    traces = {}
    for name, gap in (("load_63pct", args.mean_gap), ("overloaded_100pct", args.mean_gap * 0.625)):
        reports = [eta_report(replay(eta_trace(seed, args.gangs, gap), 4, 8, config))
                   for seed in args.eta_seeds]
        p90s = [r["error_part_of_wait"].get("p90", 0.0) for r in reports]
        traces[name] = {"mean_gap_s": gap, **reports[0], "seeds": {
            "seeds": list(args.eta_seeds),
            "error_part_of_wait_p90": p90s,
            "unknown": [r["unknown"] for r in reports],
            "goal_met": sum(r["goal_met"] for r in reports),
        }}
    write_report(args.output / "eta.json", {
        "machine": machine(), "how": "in-process: gangsched.core.step on a jumping clock",
        "cluster": "4 nodes x 8 GPUs", "seed": args.eta_seeds[0],
        "starvation_s": args.starvation_seconds,
        "shapes_pods_x_gpus": [list(shape) for shape in ETA_SHAPES],
        "runtimes_s": [120, 1800], **traces,
    })

    streams = backfill_streams(args.backfill_seeds, config)
    write_report(args.output / "backfill.json", {
        "machine": machine(), "how": "in-process: gangsched.core.step on a jumping clock, "
                                     "each trace run with backfill on and off in one run",
        "cluster": "2 nodes x 8 GPUs", "seeds": args.backfill_seeds,
        "starvation_s": args.starvation_seconds,
        "big_gang": "2 pods x 8 GPUs, 600 s",
        "stream": "1 or 2 GPUs, 2 to 10 minutes, bringing 1.25x or 2x the work 16 GPUs drain",
        "goal": "utilisation while the big gang waits >= 0.90 with backfill, and it starts "
                "no later than without",
        **streams,
    })


if __name__ == "__main__":
    main()
