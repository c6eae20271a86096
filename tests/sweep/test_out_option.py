"""``netesto sweep --out`` naming a file (or a path below one) is a usage error, not a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_sweep_out_naming_a_file_is_an_error_that_names_it(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("")
    for out in (afile, afile / "sub"):
        done = subprocess.run([sys.executable, "-m", "netesto", "sweep", str(ROOT / "notebooks" / "sweep.ipynb"),
                               "-p", "ca=cubic", "--out", str(out)], capture_output=True, text=True, timeout=120)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert f"--out {out}: {afile} is a file, not a directory" in done.stderr, done.stderr
    assert afile.read_text() == ""
