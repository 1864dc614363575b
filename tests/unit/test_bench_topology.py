"""The topology benchmark's trace and figures: what its published ratios rest on."""

from __future__ import annotations

import json
from pathlib import Path

from bench.topology import (
    BLOCK,
    CONTENDERS,
    HOST,
    KINDS,
    NODE_GPUS,
    OURS,
    RACK,
    Fabric,
    SubGroup,
    TraceGang,
    fragmentation,
    gangsched_manifests,
    hypernodes,
    in_target,
    kueue_manifests,
    largest_free,
    native_manifests,
    ratios,
    trace,
    trace_figures,
    volcano_manifests,
)

FABRIC = Fabric(racks=4, rack_nodes=2, block_racks=2)
"""Racks r0, r1 in block b0; r2, r3 in block b1; two nodes each."""


def test_the_trace_is_the_same_for_a_seed_and_mixes_every_kind() -> None:
    first = trace(7, 200, 60, (10, 20))
    assert first == trace(7, 200, 60, (10, 20))
    assert first != trace(8, 200, 60, (10, 20))
    assert {g.kind for g in first} == set(KINDS)
    assert all(0 <= g.arrival_s <= 120 and 10 <= g.runtime_s <= 20 for g in first)
    assert [g.arrival_s for g in first] == sorted(g.arrival_s for g in first)
    assert all(sum(s.pods for s in g.sub_groups) == g.pods for g in first if g.sub_groups)


def test_each_api_asks_what_the_gang_asks() -> None:
    gang = TraceGang("tp", "sub_groups", 0, 30, 8, 8, BLOCK, None,
                     (SubGroup("s0", 4, RACK), SubGroup("s1", 4, RACK)))
    ours = gangsched_manifests("ns", gang)
    assert ours[0]["spec"]["topology"] == {
        "name": "bench-fabric", "required": BLOCK,
        "subGroups": [{"name": "s0", "minMember": 4, "required": RACK},
                      {"name": "s1", "minMember": 4, "required": RACK}]}
    assert [p["metadata"]["labels"]["scheduling.gangsched.io/sub-group"]
            for p in ours[1:]] == ["s0"] * 4 + ["s1"] * 4
    native = native_manifests("ns", TraceGang("p", "rack_preferred", 0, 30, 3, 8, BLOCK, RACK))
    assert native[0]["spec"]["schedulingConstraints"] == {"topology": [{"key": RACK}]}
    assert native[1]["spec"]["schedulingGroup"] == {"podGroupName": "p"}
    assert native[1]["metadata"]["annotations"] == {"kwok.gangsched.io/run-for": "30s"}


def test_volcano_is_asked_each_kind_as_its_api_can_say_it() -> None:
    kinds = {
        "rack_preferred": TraceGang("p", "rack_preferred", 0, 30, 3, 8, BLOCK, RACK),
        "rack_required": TraceGang("r", "rack_required", 0, 30, 3, 4, RACK, None),
        "block_preferred": TraceGang("b", "block_preferred", 0, 30, 16, 8, None, BLOCK),
    }
    asked = {kind: volcano_manifests("ns", gang)[0]["spec"] for kind, gang in kinds.items()}
    assert asked["rack_preferred"]["networkTopology"] == {"mode": "hard",
                                                          "highestTierAllowed": 2}
    assert asked["rack_required"]["networkTopology"] == {"mode": "hard",
                                                         "highestTierAllowed": 1}
    assert asked["block_preferred"]["networkTopology"] == {"mode": "soft"}
    subs = volcano_manifests("ns", TraceGang("tp", "sub_groups", 0, 30, 8, 8, BLOCK, None,
                                             (SubGroup("s0", 4, RACK), SubGroup("s1", 4, RACK))))
    assert subs[0]["spec"] == {
        "minMember": 8, "networkTopology": {"mode": "hard", "highestTierAllowed": 2},
        "subGroupPolicy": [{"name": "sub-group", "subGroupSize": 4,
                            "matchLabelKeys": ["scheduling.gangsched.io/sub-group"],
                            "networkTopology": {"mode": "hard", "highestTierAllowed": 1}}]}
    assert {p["metadata"]["annotations"]["scheduling.k8s.io/group-name"]
            for p in subs[1:]} == {"tp"}
    assert {p["spec"]["schedulerName"] for p in subs[1:]} == {"volcano"}


def test_volcano_sees_racks_of_nodes_inside_blocks_of_racks() -> None:
    found = {h["metadata"]["name"]: h["spec"] for h in hypernodes(FABRIC)}
    assert found["r2"] == {"tier": 1, "members": [
        {"type": "Node", "selector": {"labelMatch": {"matchLabels": {RACK: "r2"}}}}]}
    assert found["b1"] == {"tier": 2, "members": [
        {"type": "HyperNode", "selector": {"exactMatch": {"name": "r2"}}},
        {"type": "HyperNode", "selector": {"exactMatch": {"name": "r3"}}}]}
    assert sorted(found) == ["b0", "b1", "r0", "r1", "r2", "r3"]


def test_kueue_is_asked_one_level_per_pod_set_and_sub_groups_as_slices() -> None:
    def annotations(gang: TraceGang) -> list[dict[str, str]]:
        return [p["metadata"]["annotations"] for p in kueue_manifests("ns", gang)]

    prefer = annotations(TraceGang("p", "rack_preferred", 0, 30, 3, 8, BLOCK, RACK))
    assert {a.get("kueue.x-k8s.io/podset-preferred-topology") for a in prefer} == {RACK}
    assert not any("kueue.x-k8s.io/podset-required-topology" in a for a in prefer)
    subs = kueue_manifests("ns", TraceGang("tp", "sub_groups", 0, 30, 8, 8, BLOCK, None,
                                           (SubGroup("s0", 4, RACK), SubGroup("s1", 4, RACK))))
    first = subs[0]["metadata"]
    assert (first["annotations"]["kueue.x-k8s.io/podset-required-topology"],
            first["annotations"]["kueue.x-k8s.io/podset-slice-required-topology"],
            first["annotations"]["kueue.x-k8s.io/podset-slice-size"]) == (BLOCK, RACK, "4")
    assert [p["metadata"]["labels"]["kueue.x-k8s.io/pod-group-pod-index"]
            for p in subs] == [str(i) for i in range(8)], "slices follow the sub-groups"
    assert {p["metadata"]["annotations"]["kueue.x-k8s.io/role-hash"] for p in subs} == {
        "workers"}, "one role, whatever Kueue's admission adds to the spec"
    assert all(p["spec"]["schedulingGates"] == [{"name": "kueue.x-k8s.io/admission"},
                                                {"name": "kueue.x-k8s.io/topology"}]
               for p in subs)


def test_a_gang_counts_in_its_domain_only_whole_in_its_tightest_level() -> None:
    prefer_rack = TraceGang("a", "rack_preferred", 0, 30, 2, 8, BLOCK, RACK)
    assert in_target(prefer_rack, ["topo-r0-0", "topo-r0-1"], FABRIC)
    assert not in_target(prefer_rack, ["topo-r0-0", "topo-r1-0"], FABRIC), "same block only"
    subs = TraceGang("b", "sub_groups", 0, 30, 4, 8, BLOCK, None,
                     (SubGroup("s0", 2, RACK), SubGroup("s1", 2, RACK)))
    assert in_target(subs, ["topo-r0-0", "topo-r0-1", "topo-r1-0", "topo-r1-1"], FABRIC)
    assert not in_target(subs, ["topo-r0-0", "topo-r1-1", "topo-r1-0", "topo-r0-1"], FABRIC)
    assert not in_target(subs, ["topo-r0-0", "topo-r0-1", "topo-r2-0", "topo-r2-1"], FABRIC)
    assert TraceGang("c", "rack_required", 0, 30, 1, 4, None, None).target == HOST


def test_fragmentation_counts_wholly_free_nodes_in_the_emptiest_domain() -> None:
    free = {"topo-r0-0": 0, "topo-r1-0": 4, "topo-r2-0": 0, "topo-r2-1": 0, "topo-r3-1": 1}
    assert largest_free(free, FABRIC, RACK) == 1
    assert largest_free(free, FABRIC, BLOCK) == 2
    assert largest_free({}, FABRIC, BLOCK) == 4
    assert largest_free({n: NODE_GPUS for n in FABRIC.nodes()}, FABRIC, RACK) == 2


def test_figures_count_whole_gangs_and_pods_per_second_from_the_first_arrival() -> None:
    gangs = [TraceGang("a", "rack_preferred", 0.0, 30, 2, 8, BLOCK, RACK),
             TraceGang("b", "rack_preferred", 1.0, 30, 2, 8, BLOCK, RACK),
             TraceGang("c", "rack_required", 2.0, 30, 2, 4, RACK, None)]
    bound = {"a-0": 101.0, "a-1": 102.0, "b-0": 103.0, "b-1": 104.0, "c-0": 110.0}
    nodes = {"a-0": "topo-r0-0", "a-1": "topo-r0-1", "b-0": "topo-r0-0", "b-1": "topo-r1-0",
             "c-0": "topo-r3-0"}
    figures = trace_figures(gangs, bound, nodes, started=100.0, fabric=FABRIC)
    assert (figures["gangs_placed"], figures["gangs_in_target_domain"]) == (2, 1)
    assert figures["share_in_target_domain"] == 0.333
    assert figures["by_kind"]["rack_preferred"] == {"gangs": 2, "placed": 2,
                                                   "in_target_domain": 1}
    assert (figures["pods_bound"], figures["wall_s"], figures["pods_per_s"]) == (5, 10.0, 0.5)
    assert figures["gang_wait_s"]["max"] == 3.0


def test_fragmentation_averages_the_arrivals_window_alone() -> None:
    samples = [{"t_s": t, "busy_gpus": 0, "rack_whole_free_nodes_max": r,
                "block_whole_free_nodes_max": b} for t, r, b in ((5, 2, 4), (10, 0, 2), (15, 9, 9))]
    figures = fragmentation(samples, window_s=10)
    assert (figures["samples"], figures["rack_whole_free_nodes_mean"],
            figures["block_whole_free_nodes_mean"]) == (2, 1.0, 3.0)
    assert len(figures["series"]) == 3


def test_gangsched_is_set_against_every_contender_that_ran() -> None:
    report = {"gangsched": {"share_in_target_domain": 0.9, "pods_per_s": 6.0},
              "native_gang": {"share_in_target_domain": 0.6, "pods_per_s": 12.0},
              "volcano": {"share_in_target_domain": 0.75, "pods_per_s": None}}
    assert ratios(report) == {
        "share_in_target_domain_gangsched_over_native_gang": 1.5,
        "pods_per_s_gangsched_over_native_gang": 0.5,
        "share_in_target_domain_gangsched_over_volcano": 1.2,
        "pods_per_s_gangsched_over_volcano": None}
    assert ratios({"volcano": report["volcano"]}) == {}
    patient = {**report, "gangsched_patient": {"share_in_target_domain": 0.99,
                                               "pods_per_s": 6.0}}
    assert ratios(patient)["share_in_target_domain_gangsched_patient_over_volcano"] == 1.32


def test_the_comparison_quotes_the_measured_run() -> None:
    root = Path(__file__).parents[2]
    report = json.loads((root / "bench" / "results" / "topology.json").read_text())
    table = (root / "docs" / "comparison.md").read_text().split(
        "## Topology in levels, measured")[1].split("\n\n")[2].splitlines()
    share = next(row for row in table if row.startswith("| gangs in their tightest"))
    rate = next(row for row in table if row.startswith("| pods bound per second"))
    contenders = CONTENDERS
    cells = zip(share.split("|")[2:8], rate.split("|")[2:8], contenders, strict=True)
    times = "\N{MULTIPLICATION SIGN}"
    for cell_share, cell_rate, contender in cells:
        figures = report[contender]
        assert cell_share.split()[0] == f"{figures['share_in_target_domain'] * 100:.1f}"
        assert cell_rate.split()[0] == str(figures["pods_per_s"])
        if contender.startswith("gangsched"):
            continue
        for cell, figure in ((cell_share, "share_in_target_domain"), (cell_rate, "pods_per_s")):
            said = [f"{report['ratios'][f'{figure}_{ours}_over_{contender}']:.2f}{times}"
                    for ours in CONTENDERS[:OURS]]
            assert (f"({said[0]} for gangsched, {said[1]} with the wait, {said[2]} tightest "
                    "required)") in cell, (cell, said)
