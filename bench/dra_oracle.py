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
import random
import sys
import time
from pathlib import Path

import pykube

from bench.harness import report_verdicts, say, work_directory
from devcluster.controlplane import ClusterOptions, running_cluster
from tests.e2e import dra_oracle, oracle

RESULTS = Path(__file__).parent / "results" / "dra_oracle.json"
NAMESPACE = "dra-oracle"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--nodes", type=int, default=5)
    parser.add_argument("--claims", type=int, default=100)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else oracle.seed()
    say(f"{oracle.SEED_VARIABLE}={seed}: {args.nodes} nodes by {args.claims} claims")
    started = time.monotonic()
    options = ClusterOptions(nodes=0, with_kube_scheduler=True, with_controller_manager=True)
    with work_directory(args.workdir, "gangsched-dra-oracle-") as workdir, \
            running_cluster(workdir / "cluster", options) as cluster:
        pykube.Namespace(cluster.client, {"apiVersion": "v1", "kind": "Namespace",
                                          "metadata": {"name": NAMESPACE}}).create()
        verdicts = dra_oracle.run(cluster, NAMESPACE, random.Random(seed),
                                  nodes=args.nodes, claims=args.claims)
    return report_verdicts(RESULTS, seed, "make bench-dra-oracle",
                           {"nodes": args.nodes, "claims": args.claims}, verdicts, started)


if __name__ == "__main__":
    sys.exit(main())
