"""netesto.extras: the extras read from pyproject.toml (or the installed metadata), import names, pip commands."""

from __future__ import annotations

import sys
import tomllib
from importlib import metadata
from pathlib import Path

from netesto.extras import CORE, extra_for, from_metadata, import_name, install_hint, provides, requirements

ROOT = Path(__file__).resolve().parents[1]


def test_requirements_are_pyprojects() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert requirements()[CORE] == tuple(project["dependencies"])
    assert {k: list(v) for k, v in requirements().items() if k} == project["optional-dependencies"]


def test_an_installed_netestos_metadata_reads_the_same() -> None:
    # What setuptools writes as Requires-Dist for each extra, read back as pyproject has it.
    lines = list(requirements()[CORE])
    for extra, reqs in requirements().items():
        lines += [f'{r}; extra == "{extra}"' for r in reqs] if extra else []
    assert from_metadata(lines) == requirements()


def test_every_import_name_is_the_module_its_distribution_installs() -> None:
    # pyzmq installs zmq, pillow PIL, ...: checked against what is installed here (all but the lab extra).
    owners = metadata.packages_distributions()
    checked = 0
    for dist in provides("all") | provides("test"):
        try:
            metadata.distribution(dist)
        except metadata.PackageNotFoundError:
            continue
        names = {d.lower().replace("_", "-") for d in owners.get(import_name(dist), [])}
        assert dist.lower().replace("_", "-") in names, (dist, import_name(dist), owners.get(import_name(dist)))
        checked += 1
    assert checked >= 20


def test_an_extra_provides_what_the_extras_it_names_provide() -> None:
    assert list(provides("plots"))[:6] == ["pyzmq", "msgpack", "numpy", "pandas", "xarray", "netCDF4"]
    # the tests open the quickstart in a real JupyterLab (tests/magics/test_jupyterlab.py)
    assert "jupyterlab" in provides("all") and "jupyterlab" in provides("test")
    assert "pytest-xdist" in provides("test") and provides("test")["pytest-xdist"] == ">=3.5"


def test_the_extra_named_is_the_smallest_unless_the_command_needs_a_larger_one() -> None:
    assert extra_for("numpy") == "results" and extra_for("xarray.core") == "results"
    assert extra_for("holoviews") == "plots" and extra_for("jinja2") == "report"
    assert extra_for("papermill") == "sweep" and extra_for("jupyterlab") == "lab" and extra_for("PIL") == "test"
    assert extra_for("numpy", "sweep") == "sweep"  # netesto sweep: one install gives it all
    assert extra_for("papermill", "report") == "sweep"  # the report extra has no papermill
    assert extra_for("zmq") == CORE and extra_for("requests") is None


def test_the_hint_installs_from_this_source_tree() -> None:
    assert install_hint("bokeh") == f"the 'plots' extra has it: {sys.executable} -m pip install -e '{ROOT}[plots]'"
    assert install_hint("tomato") is None
