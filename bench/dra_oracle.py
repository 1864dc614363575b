"""kube-scheduler as the oracle of device claims, at benchmark size:
``python -m bench.dra_oracle`` writes bench/results/dra_oracle.json.

Runs the generator of ``tests/e2e/dra_oracle.py`` on its own local control
plane (kube-scheduler, kube-controller-manager) for at least 500 (claim,
node) pairs: the seed (``--seed`` or ``GANGSCHED_ORACLE_SEED`` replays it),
the pairs, how many kube-scheduler accepted, and every pair where gangsched's
allocator and the running pods' anti-affinity (for pods with rules beside their
claim, its whole placement) disagree. Exits 1 when any pair disagrees.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench.harness import run_oracle, say
from devcluster.controlplane import ClusterOptions
from tests.e2e import dra_oracle, oracle

RESULTS = Path(__file__).parent / "results" / "dra_oracle.json"
NAMESPACE = "dra-oracle"


def _counted(verdicts: list[oracle.Verdict]) -> list[oracle.Verdict]:
    """The verdicts, once their kinds are said: with rules, shared, admin access."""
    ruled = [v for v in verdicts if v.why.startswith(dra_oracle.RULED)]
    admin = sum("'adminAccess': True" in v.why for v in verdicts)
    say(f"{len(ruled)} pairs of pods with rules ({sum(v.kube for v in ruled)} accepted), "
        f"{sum('existing-' in v.why for v in ruled)} of them sharing a running pod's claim; "
        f"{admin} asking admin access")
    return verdicts


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
        lambda cluster, rng: _counted(dra_oracle.run(cluster, NAMESPACE, rng,
                                                     nodes=args.nodes, claims=args.claims)),
        seed=args.seed, workdir=args.workdir)


if __name__ == "__main__":
    sys.exit(main())
