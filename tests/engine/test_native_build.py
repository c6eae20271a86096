"""The C extensions' build: each from its own folder of netesto/engine/native/; without them, the Python loops."""

from __future__ import annotations

import runpy
import subprocess
import sys
from pathlib import Path
from typing import Any

import setuptools

ROOT = Path(__file__).resolve().parents[2]
NATIVE = ROOT / "netesto" / "engine" / "native"


def _extensions(monkeypatch) -> list[Any]:
    """setup.py's Extensions, read by running it with setuptools.setup taking its arguments."""
    got: dict[str, Any] = {}
    monkeypatch.setattr(setuptools, "setup", lambda **kw: got.update(kw))
    monkeypatch.chdir(ROOT)
    runpy.run_path(str(ROOT / "setup.py"))
    return got["ext_modules"]


def test_setup_builds_each_extension_from_its_own_folder(monkeypatch):
    """Every C file of native/ is built by the extension its folder names, with the headers as its depends
    (the build is optional: a source left out or misnamed would build nothing and leave the Python loops)."""
    exts = _extensions(monkeypatch)
    folders = sorted(p for p in NATIVE.iterdir() if p.is_dir() and any(p.glob("*.c")))
    assert sorted(e.name for e in exts) == [f"netesto.engine.native._{f.name}" for f in folders]
    for ext in exts:
        folder = NATIVE / ext.name.rpartition("._")[2]
        assert sorted(ROOT / s for s in ext.sources) == sorted(folder.glob("*.c")), ext.name
        assert sorted(ROOT / d for d in ext.depends) == sorted([*folder.glob("*.h"), *NATIVE.glob("*.h")]), ext.name
        # a folder named as the extension would import as an empty namespace package where it is not built
        assert not (NATIVE / ext.name.rpartition(".")[2]).is_dir(), ext.name


def test_without_the_extensions_the_engine_takes_its_python_loops():
    """What an install without a C compiler gives (the extensions do not import): every C path is off."""
    code = """import sys
for ext in ("_fastloop", "_crrloop", "_rrloop"):
    sys.modules["netesto.engine.native." + ext] = None  # its import fails, as a module never built
from netesto.engine.native import crrfast, fastloop
from netesto.engine.sampling import histogram, records, sampler
print(fastloop.PATH, crrfast.PATH, fastloop.rrloop, fastloop.hist_record, records.sample_tick,
      records.sample_row is records.sample_row_py, histogram._fast_record, sampler.fastloop.sweep)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["python", "python", "None", "None", "None", "True", "None", "None"], out.stderr
