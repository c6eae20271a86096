"""The package's shape: listed packages, the export list, light imports."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import netesto

ROOT = Path(__file__).resolve().parent.parent


def test_every_package_directory_is_listed_in_pyproject():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {
        ".".join(p.parent.relative_to(ROOT).parts)
        for p in (ROOT / "netesto").rglob("__init__.py")
    }
    found |= {"netesto.inlib", "netesto.report_templates"}
    assert found == listed


def test_export_list_is_sorted_and_resolvable():
    assert netesto.__all__ == sorted(netesto.__all__)
    assert set(netesto.__all__) == {
        "AgentError", "AgentUnreachable", "Lab", "NetestoError", "ProtocolError", "ResultsError",
        "ScriptError", "Table", "UsageError", "__version__", "combine", "load_ipython_extension",
        "open_experiment", "open_experiments", "plan", "process_experiment", "run",
    }
    for name in netesto.__all__:
        if name != "load_ipython_extension":
            assert getattr(netesto, name) is not None, name


def _imported_after(stmt: str) -> set[str]:
    code = f"import sys; {stmt}; print('\\n'.join(sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def test_importing_netesto_is_light():
    mods = _imported_after("import netesto, netesto.errors, netesto.traffic.rawformat")
    for heavy in ("xarray", "IPython", "bokeh", "holoviews", "pandas", "numpy", "zmq"):
        assert heavy not in mods, heavy
