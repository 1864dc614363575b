"""The demo's measurements: pod transitions and the time some job was partly bound."""

from __future__ import annotations

from typing import Any

from demo.timeline import JOB_LABEL, Recorder, summarize


def pod(job: str | None, node: str | None = None, phase: str = "Pending") -> dict[str, Any]:
    return {"metadata": {"labels": {JOB_LABEL: job} if job else {}},
            "spec": {"nodeName": node} if node else {}, "status": {"phase": phase}}


def test_a_job_with_one_pod_bound_and_one_waiting_is_partly_bound_until_both_are() -> None:
    recorder = Recorder()
    recorder.observe({"w0": pod("train"), "w1": pod("train"), "blocker": pod(None, "n0")}, 0.0)
    recorder.observe({"w0": pod("train", "n1", "Running"), "w1": pod("train"),
                      "blocker": pod(None, "n0", "Running")}, 1.0)
    assert recorder.partly_bound_jobs() == 1
    recorder.observe({"w0": pod("train", "n1", "Running"), "w1": pod("train")}, 4.0)
    recorder.observe({"w0": pod("train", "n1", "Running"), "w1": pod("train", "n0")}, 5.0)
    assert recorder.partly_bound_jobs() == 0
    recorder.observe({"w0": pod("train", "n1", "Succeeded"),
                      "w1": pod("train", "n0", "Succeeded")}, 7.0)

    run = summarize("blocker", "kube-scheduler", 1, 1, recorder, ended=7.0, finished_at=7.0)
    summary = run.summary
    assert summary.partly_bound_s == 4.0, "from 1 s (w0 bound) to 5 s (w1 bound)"
    assert (summary.pods, summary.pods_bound, summary.stuck) == (2, 2, False)
    blocker = next(t for t in run.pods if t.name == "blocker")
    assert (blocker.bound, blocker.running, blocker.done) == (0.0, 1.0, 4.0), "deleted at 4 s"


def test_a_run_that_stops_changing_is_stuck_from_its_last_change() -> None:
    recorder = Recorder()
    recorder.observe({"d": pod("spark", "n0")}, 0.5)
    recorder.observe({"d": pod("spark", "n0", "Running"), "e": pod("spark")}, 0.7)
    recorder.observe({"d": pod("spark", "n0", "Running"), "e": pod("spark")}, 7.0)
    summary = summarize("spark", "kube-scheduler", 1, 0, recorder, 7.0, None).summary
    assert (summary.stuck, summary.seconds, summary.finished) == (True, 0.7, 0)


def test_a_job_whose_pods_are_bound_in_two_racks_counts_as_split() -> None:
    racks = {"n0": "r0", "n1": "r0", "n2": "r1", "n3": "r1"}
    recorder = Recorder()
    recorder.observe({"a0": pod("a", "n0"), "a1": pod("a", "n2"),
                      "b0": pod("b", "n1"), "b1": pod("b", "n1"), "other": pod(None, "n3")}, 1.0)
    summary = summarize("racks", "kube-scheduler", 2, 0, recorder, 1.0, None, racks).summary
    assert summary.jobs_split == 1
    assert summarize("racks", "x", 2, 0, recorder, 1.0, None).summary.jobs_split is None


def test_a_bought_node_with_no_working_pod_on_it_counts_idle() -> None:
    recorder = Recorder()
    recorder.observe_nodes(set(), set(), 0.0)
    recorder.observe_nodes({"n0", "n1"}, set(), 2.0)
    recorder.observe_nodes({"n0", "n1"}, {"n0"}, 5.0)
    recorder.observe_nodes({"n1"}, set(), 6.0)
    summary = summarize("autoscaling", "gangsched", 1, 1, recorder, 6.0, 6.0).summary
    assert (summary.nodes_bought, summary.idle_node_s) == (2, 2 * 2 + 3 + 1)


def test_a_run_without_bought_nodes_has_no_idle_figure() -> None:
    summary = summarize("spark", "gangsched", 1, 1, Recorder(), 1.0, 1.0).summary
    assert (summary.nodes_bought, summary.idle_node_s) == (None, None)
