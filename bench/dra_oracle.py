"""kube-scheduler as the oracle of device claims, at benchmark size:
``python -m bench.dra_oracle`` writes bench/results/dra_oracle.json.

Runs the generator of ``tests/e2e/dra_oracle.py`` on its own local control
plane (kube-scheduler, kube-controller-manager) for at least 500 (claim,
node) pairs: the seed (``--seed`` or ``GANGSCHED_ORACLE_SEED`` replays it),
the pairs, how many kube-scheduler accepted, and every pair where gangsched's
allocator disagrees. Exits 1 when any pair disagrees.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench.harness import run_oracle
from devcluster.controlplane import ClusterOptions
from tests.e2e import dra_oracle

RESULTS = Path(__file__).parent / "results" / "dra_oracle.json"
NAMESPACE = "dra-oracle"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--nodes", type=int, default=5)
    parser.add_argument("--claims", type=int, default=100)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    return run_oracle(
        RESULTS, NAMESPACE, "make bench-dra-oracle",
        {"nodes": args.nodes, "claims": args.claims},
        ClusterOptions(nodes=0, with_kube_scheduler=True, with_controller_manager=True),
        lambda cluster, rng: dra_oracle.run(cluster, NAMESPACE, rng, nodes=args.nodes,
                                            claims=args.claims),
        seed=args.seed, workdir=args.workdir)


if __name__ == "__main__":
    sys.exit(main())
