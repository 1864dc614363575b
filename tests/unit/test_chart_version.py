"""One version names a release everywhere: the package, the image built from it and the
chart that deploys that image.

The image is tagged with the package's version (image/build.sh) and the chart
pulls the tag its ``appVersion`` names unless told otherwise, so a chart whose
``appVersion`` lags the package installs the previous release's scheduler.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import yaml

import gangsched

ROOT = Path(__file__).resolve().parents[2]


def test_the_chart_deploys_the_image_of_the_package_it_ships_with() -> None:
    package = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    chart = yaml.safe_load((ROOT / "helm" / "gangsched" / "Chart.yaml").read_text())
    assert gangsched.__version__ == package
    assert chart["appVersion"] == package
    assert chart["version"] == package
