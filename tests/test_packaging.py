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
    assert netesto.__all__ == sorted(netesto.__all__, key=str.lower) or netesto.__all__ == sorted(netesto.__all__)
    for name in ("NetestoError", "ScriptError", "__version__"):
        assert hasattr(netesto, name)


def _imported_after(stmt: str) -> set[str]:
    code = f"import sys; {stmt}; print('\\n'.join(sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def test_importing_netesto_is_light():
    mods = _imported_after("import netesto, netesto.errors, netesto.traffic.rawformat")
    for heavy in ("xarray", "IPython", "bokeh", "holoviews", "pandas", "numpy", "zmq"):
        assert heavy not in mods, heavy
