"""``kubectl apply -f crds/`` installs the API on a fresh cluster in one command.

kubectl maps every object of a folder before the API server has established
the CRDs it just created, so an object of a kind those CRDs define (the
``default`` Queue) fails the command; such objects live in examples/.
"""

from __future__ import annotations

from pathlib import Path

import yaml

CRDS = Path(__file__).resolve().parents[2] / "crds"


def test_the_crds_folder_holds_only_definitions() -> None:
    kinds = {(path.name, doc["kind"]) for path in CRDS.glob("*.yaml")
             for doc in yaml.safe_load_all(path.read_text()) if doc}
    assert kinds and {kind for _, kind in kinds} == {"CustomResourceDefinition"}, kinds
