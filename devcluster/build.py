"""What ``cluster/build.sh`` builds from the Go module proxy, built or reused from the cache."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def built(*what: str, override: str | None = None) -> Path:
    """Build or reuse what ``cluster/build.sh WHAT...`` names (the control plane when
    nothing), pinned and cached outside the repository; returns its bin directory (the
    CRDs a build copies are in ``../crds`` beside it). ``override``: an environment
    variable that, when set, names another bin directory to use instead.

    Progress of a cold build goes to stderr, so a user sees minutes of work explained
    rather than a silent hang.
    """
    given = os.environ.get(override) if override else None
    if given:
        return Path(given)
    out = subprocess.run(["bash", str(REPO / "cluster" / "build.sh"), *what],
                         check=True, stdout=subprocess.PIPE, text=True)
    return Path(out.stdout.strip().splitlines()[-1])
