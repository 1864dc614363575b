"""kube-scheduler as the oracle, at benchmark size: ``python -m bench.fit_oracle``.

Runs the generator of ``tests/e2e/oracle.py`` on its own local control plane
for at least 2,000 (pod, node) pairs and writes bench/results/fit_oracle.json:
the seed (``--seed`` or ``GANGSCHED_ORACLE_SEED`` replays it), the pairs, how
many kube-scheduler accepted, and every pair where gangsched's filter
disagrees. Exits 1 when any pair disagrees.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench.harness import run_oracle
from devcluster.controlplane import ClusterOptions
from tests.e2e import oracle

RESULTS = Path(__file__).parent / "results" / "fit_oracle.json"
NAMESPACE = "oracle"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--nodes", type=int, default=10)
    parser.add_argument("--pods", type=int, default=200)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    return run_oracle(
        RESULTS, NAMESPACE, "make bench-oracle", {"nodes": args.nodes, "pods": args.pods},
        ClusterOptions(nodes=0, with_kube_scheduler=True),
        lambda cluster, rng: oracle.run(cluster, NAMESPACE, rng, nodes=args.nodes, pods=args.pods),
        seed=args.seed, workdir=args.workdir)


if __name__ == "__main__":
    sys.exit(main())
