"""gangsched's "may this pod go on this node" agrees with kube-scheduler's, pair by pair,
for node rules, room (pod-level huge pages too), inter-pod affinity and anti-affinity,
host ports on nodes without or sharing a hostname label, topology spread, declared node
features, nodes not Ready that nothing taints, and CSI volume limits on inline disks.

The generator is seeded; the seed is printed and ``GANGSCHED_ORACLE_SEED``
replays a run (see ``tests/e2e/oracle.py``).
"""

from __future__ import annotations

import random
from collections import Counter

from devcluster.controlplane import LocalCluster
from tests.e2e import oracle
from tests.e2e.workspace import Workspace

NODES = 8
PODS = 40


def test_our_filter_agrees_with_kube_scheduler_on_every_pair(
    cluster: LocalCluster, ws: Workspace
) -> None:
    seed = oracle.seed()
    print(f"{oracle.SEED_VARIABLE}={seed}")
    verdicts = oracle.run(cluster, ws.name, random.Random(seed), nodes=NODES, pods=PODS)
    disagreements = [v for v in verdicts if v.kube != v.ours]
    print(f"{len(verdicts)} pairs, {sum(v.kube for v in verdicts)} accepted by kube-scheduler")
    print(Counter(v.why for v in verdicts).most_common())
    assert len(verdicts) == NODES * (PODS + 1)
    assert {v.kube for v in verdicts} == {True, False}, "every pair had the same verdict"
    assert not disagreements, (
        f"{len(disagreements)} of {len(verdicts)} pairs disagree "
        f"({oracle.SEED_VARIABLE}={seed}):\n{oracle.table(disagreements)}")
    inter_pod = [v for v in verdicts if v.why.startswith(("pod ", "anti-affinity", "topology"))]
    assert inter_pod, "no pair was refused by an inter-pod rule: the generator lost them"
    # Node features refuse a pair only when no earlier filter does: some seeds make none
    # (62104158), so the count is printed, not asserted; make bench-oracle's 2,000 pairs
    # and the unit tests of NodeDeclaredFeatures cover the rule.
    print("refused for a node feature:",
          sum(v.why.startswith("missing node feature") for v in verdicts))
    # The last pod asks for nothing a node not Ready lacks: only the anti-affinity of a
    # pod already there (in its zone, say) may keep it off, and then both sides said so.
    not_ready = {oracle.node_name(i) for i in oracle.NOT_READY}
    plain_there = [v for v in verdicts if v.pod == PODS and v.node in not_ready]
    assert plain_there and all(
        v.kube or v.why.startswith("anti-affinity of a pod already there")
        for v in plain_there), f"the plain pod was refused on the node not Ready: {plain_there}"
