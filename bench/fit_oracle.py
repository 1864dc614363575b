"""kube-scheduler as the oracle, at benchmark size: ``python -m bench.fit_oracle``.

Runs the generator of ``tests/e2e/oracle.py`` on its own local control plane
for at least 2,000 (pod, node) pairs and writes bench/results/fit_oracle.json:
the seed (``--seed`` or ``GANGSCHED_ORACLE_SEED`` replays it), the pairs, how
many kube-scheduler accepted, and every pair where gangsched's filter
disagrees. Exits 1 when any pair disagrees.
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
    seed = args.seed if args.seed is not None else oracle.seed()
    say(f"{oracle.SEED_VARIABLE}={seed}: {args.nodes} nodes by {args.pods} pods")
    started = time.monotonic()
    options = ClusterOptions(nodes=0, with_kube_scheduler=True)
    with work_directory(args.workdir, "gangsched-oracle-") as workdir, \
            running_cluster(workdir / "cluster", options) as cluster:
        pykube.Namespace(cluster.client, {"apiVersion": "v1", "kind": "Namespace",
                                          "metadata": {"name": NAMESPACE}}).create()
        verdicts = oracle.run(cluster, NAMESPACE, random.Random(seed),
                              nodes=args.nodes, pods=args.pods)
    return report_verdicts(RESULTS, seed, "make bench-oracle",
                           {"nodes": args.nodes, "pods": args.pods}, verdicts, started)


if __name__ == "__main__":
    sys.exit(main())
