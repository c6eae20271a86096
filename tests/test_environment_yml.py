"""environment.yml is written from pyproject.toml: the same packages and floors, under conda-forge's names.

``python -m tests.test_environment_yml`` rewrites it after pyproject.toml changed;
the test fails while the two disagree.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

from netesto.extras import CORE, parse_requirement, provides, requirements

ROOT = Path(__file__).resolve().parents[1]
ENV_YML = ROOT / "environment.yml"
# The extras the environment installs: everything a controller, a notebook user and the tests use.
EXTRAS = ("all", "test")
# PyPI name -> conda-forge name, where they differ (conda-forge's feedstocks chose these).
CONDA_NAMES = {"msgpack": "msgpack-python", "netCDF4": "netcdf4", "playwright": "playwright-python"}
# conda-forge packages with no PyPI counterpart in pyproject.toml -> why they are in the environment.
CONDA_ONLY = {"iperf": "iperf3 for driver=iperf3 (conda-forge's name for iperf 3.x)"}


def generate() -> str:
    """The environment.yml text for pyproject.toml as it is now."""
    python = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    lines = [
        "# Generated from pyproject.toml by tests/test_environment_yml.py: edit pyproject.toml, then",
        "# `python -m tests.test_environment_yml` rewrites this file (the test fails while they disagree).",
        f"# Everything netesto's extras {' and '.join(repr(e) for e in EXTRAS)} install, with pyproject's floors.",
        "#   conda env create -f environment.yml && conda activate netesto",
        "# (a lab host's agent needs only pyzmq and msgpack: docs/agents.md)",
        "name: netesto",
        "channels:",
        "  - conda-forge",
        "dependencies:",
        f"  - python{python}",
        "  - pip",
    ]
    listed: set[str] = set()
    wanted = set().union(*(provides(e) for e in EXTRAS))
    for extra in requirements():
        own = [(d, s) for d, s in provides(extra).items() if d in wanted and d not in listed]
        if own:
            lines.append(f"  # {extra or 'core'}")
        for dist, spec in own:
            listed.add(dist)
            lines.append(f"  - {CONDA_NAMES.get(dist, dist)}{spec}")
    for name, why in CONDA_ONLY.items():
        lines.append(f"  - {name}  # {why}")
    lines += ["  - pip:", f"      - -e .[{','.join(EXTRAS)}]"]
    return "\n".join(lines) + "\n"


def test_environment_yml_is_pyprojects_requirements() -> None:
    assert ENV_YML.read_text() == generate(), "environment.yml is stale: python -m tests.test_environment_yml"


def test_every_requirement_is_in_the_environment_with_its_floor() -> None:
    # Read back from the file, not from generate(): what conda would install.
    listed = dict(re.findall(r"^  - ([A-Za-z0-9_.-]+)([<>=!~][^\s#]*)?", ENV_YML.read_text(), re.M))
    for extra in (CORE, *EXTRAS):
        for dist, spec in provides(extra).items():
            assert listed.get(CONDA_NAMES.get(dist, dist)) == spec, (extra, dist, spec)
    assert "jupyterlab" in listed and "tqdm" in listed and "pillow" in listed and "pytest-xdist" in listed
    assert "iperf" in listed and "iperf3" not in listed and "msgpack" not in listed


def test_the_conda_names_name_requirements_that_exist() -> None:
    every = {parse_requirement(r)[0] for reqs in requirements().values() for r in reqs}
    assert set(CONDA_NAMES) <= every
    assert not set(CONDA_ONLY) & every


if __name__ == "__main__":
    ENV_YML.write_text(generate())
    print(f"wrote {ENV_YML}", file=sys.stderr)
