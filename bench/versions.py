"""gangsched on every Kubernetes release people run: ``python -m bench.versions``
(``make test-versions``) writes bench/results/versions.json.

For each release of ``KUBE_TEST_VERSIONS`` (cluster/versions.env) it builds or reuses
that release's kube-apiserver and kube-controller-manager (``cluster/build.sh kube
VERSION``), then runs the smoke subset of tests/versions on a control plane of it: the
CRDs, a gang of each PodGroup flavour, native PodGroups and DRA where the release serves
them, gangsched speaking as the chart's ServiceAccount. Each check is passed, failed, or
not applicable with why (the release does not serve the API); a release is not run when
its binaries could not be built (or, with ``--no-build``, are not built yet), and says
why. ``--readme`` writes the README's supported-versions table from the json; a unit
test fails while the two differ.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.harness import machine, write_report

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results" / "versions.json"
README = REPO / "README.md"
TABLE_START = "<!-- supported versions: python -m bench.versions --readme -->"
TABLE_END = "<!-- end of supported versions -->"
CHECKS = {
    "test_crds_apply_and_are_established": "CRDs",
    "test_a_podgroup_of_the_flavour_binds_whole[gangsched]": "gang",
    "test_a_podgroup_of_the_flavour_binds_whole[volcano]": "Volcano",
    "test_a_podgroup_of_the_flavour_binds_whole[coscheduling]": "scheduler-plugins",
    "test_a_native_podgroup_binds_whole": "native PodGroups",
    "test_a_gang_claiming_fake_gpus_binds_with_its_devices": "DRA",
    "test_gangsched_names_what_the_release_does_not_serve_once_and_stays_ready":
        "absent APIs named",
    "test_pods_with_claims_wait_saying_the_devices_api_is_off": "claims without DRA",
    "test_the_charts_rbac_was_enough": "chart RBAC",
}
"""Each smoke test by the name the results and the README give it."""
CELLS = {"passed": "yes", "failed": "**fails**", "not applicable": "n/a"}


def versions_env() -> dict[str, str]:
    """cluster/versions.env's assignments (quotes dropped)."""
    found = {}
    for line in (REPO / "cluster" / "versions.env").read_text().splitlines():
        name, sep, value = line.partition("=")
        if sep and not line.startswith("#"):
            found[name.strip()] = value.strip().strip('"')
    return found


def bin_dir_of(release: str, env: dict[str, str]) -> Path:
    """Where cluster/build.sh puts (or put) the release's binaries."""
    cache = Path(os.environ.get("GANGSCHED_CACHE")
                 or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gangsched")
    key = (f"k8s-{release}_etcd-{env['ETCD_VERSION']}_kwok-{env['KWOK_VERSION']}"
           f"_helm-{env['HELM_VERSION']}")
    return cache / key / "bin"


def built(bin_dir: Path) -> bool:
    return all((bin_dir / name).exists() for name in (
        "kube-apiserver", "kube-controller-manager", "kubectl", "etcd", "kwok", "helm"))


def build(requested: str) -> tuple[Path | None, str]:
    """The release's bin directory, built if need be; None and the log's tail on failure."""
    done = subprocess.run(["bash", str(REPO / "cluster" / "build.sh"), "kube", requested],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        # A module the proxy does not serve: named once, among the many lines it causes.
        unserved = [found.group(1) for line in lines
                    if (found := re.search(r"(\S+@\S+): reading https://\S+: 4\d\d", line))]
        if unserved:
            return None, f"the Go module proxy does not serve {unserved[0]}"
        return None, "\n".join(lines[-5:])
    return Path(done.stdout.strip().splitlines()[-1]), ""


def run_smoke(bin_dir: Path, pytest_args: list[str]) -> dict[str, Any]:
    """The smoke subset on a control plane of the binaries: each check's result, the APIs
    the release serves, and the run's own outcome."""
    with tempfile.TemporaryDirectory(prefix="versions-") as scratch:
        report, junit = Path(scratch) / "served.json", Path(scratch) / "junit.xml"
        env = {**os.environ, "GANGSCHED_BIN_DIR": str(bin_dir),
               "GANGSCHED_VERSIONS": str(report)}
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "tests/versions", "-p", "no:cacheprovider",
             "-q", f"--junitxml={junit}", *pytest_args],
            cwd=REPO, env=env, capture_output=True, text=True, check=False)
        served = json.loads(report.read_text()) if report.exists() else {}
        checks = checks_of(junit) if junit.exists() else {}
    outcome: dict[str, Any] = {"server": served.get("server"), "apis": served.get("apis", {}),
                               "checks": checks}
    if done.returncode != 0 and not any(c["result"] == "failed" for c in checks.values()):
        outcome["error"] = "\n".join(done.stdout.strip().splitlines()[-15:])
    return outcome


def checks_of(junit: Path) -> dict[str, dict[str, str]]:
    """Each smoke test's result from pytest's JUnit XML, with why when it is not a pass."""
    checks: dict[str, dict[str, str]] = {}
    for case in ElementTree.parse(junit).getroot().iter("testcase"):
        name = CHECKS.get(case.get("name", ""), case.get("name", ""))
        result: dict[str, str] = {"result": "passed"}
        for child in case:
            message = (child.get("message") or "").strip()
            if child.tag == "skipped":
                result = {"result": "not applicable",
                          "why": message.removeprefix("Skipped: ")}
            elif child.tag in ("failure", "error"):
                result = {"result": "failed", "why": message[:500]}
        checks[name] = result
    return checks


def run(releases: list[str], *, build_missing: bool, pytest_args: list[str]) -> dict[str, Any]:
    env = versions_env()
    rows = []
    log = ""
    for requested in releases:
        release = requested.split("@")[0]
        row: dict[str, Any] = {"release": release, "pinned": release == env["KUBE_VERSION"]}
        started = time.monotonic()
        bin_dir: Path | None = bin_dir_of(release, env)
        if build_missing:
            print(f"[versions] {release}: building or reusing its binaries", file=sys.stderr)
            bin_dir, log = build(requested)
        if bin_dir is None:
            rows.append({**row, "status": "not run", "why": f"build failed: {log}"})
            continue
        if not built(bin_dir):
            rows.append({**row, "status": "not run", "why": "binaries not built yet"})
            continue
        row["build_seconds"] = round(time.monotonic() - started, 1)
        print(f"[versions] {release}: smoke subset", file=sys.stderr)
        started = time.monotonic()
        outcome = run_smoke(bin_dir, pytest_args)
        row["test_seconds"] = round(time.monotonic() - started, 1)
        failed = [name for name, check in outcome["checks"].items()
                  if check["result"] == "failed"]
        status = "failed" if failed or "error" in outcome or not outcome["checks"] else "passed"
        rows.append({**row, "status": status, **outcome})
        print(f"[versions] {release}: {status} in {row['test_seconds']} s", file=sys.stderr)
    return {"measured": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": machine(), "releases": rows}


def readme_table(results: dict[str, Any]) -> str:
    """The README's supported-versions table, from the results."""
    columns = [name for name in CHECKS.values()]
    lines = ["| Kubernetes | result | not served | " + " | ".join(columns) + " |",
             "| --- | --- | --- | " + " | ".join("---" for _ in columns) + " |"]
    for row in results["releases"]:
        release = row["release"] + (" (pinned)" if row.get("pinned") else "")
        if row["status"] == "not run":
            lines.append(f"| {release} | not run: {row['why'].splitlines()[0]} | | "
                         + " | ".join("" for _ in columns) + " |")
            continue
        cells = [CELLS[row["checks"][name]["result"]] if name in row["checks"] else ""
                 for name in columns]
        absent = sorted({api.split()[0] for api, served in row["apis"].items() if not served})
        unknown = "?" if not row["apis"] else "-"
        lines.append(f"| {release} | {row['status']} | {', '.join(absent) or unknown} | "
                     + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_readme(results: dict[str, Any], readme: Path = README) -> None:
    text = readme.read_text()
    head, rest = text.split(TABLE_START, 1)
    _, tail = rest.split(TABLE_END, 1)
    readme.write_text(f"{head}{TABLE_START}\n{readme_table(results)}\n{TABLE_END}{tail}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--releases", help="space-separated releases (default: "
                        "KUBE_TEST_VERSIONS of cluster/versions.env)")
    parser.add_argument("--no-build", action="store_true",
                        help="run only the releases already built; report the others not run")
    parser.add_argument("--readme", action="store_true",
                        help="only write README's table from bench/results/versions.json")
    parser.add_argument("pytest_args", nargs="*", help="passed on to pytest")
    args = parser.parse_args()
    if args.readme:
        write_readme(json.loads(RESULTS.read_text()))
        return
    releases = (args.releases or versions_env()["KUBE_TEST_VERSIONS"]).split()
    results = run(releases, build_missing=not args.no_build, pytest_args=args.pytest_args)
    write_report(RESULTS, results)
    write_readme(results)
    failed = [row["release"] for row in results["releases"]
              if row["status"] == "failed" or "build failed" in row.get("why", "")]
    if failed:
        sys.exit(f"[versions] failed on {', '.join(failed)}")


if __name__ == "__main__":
    main()
