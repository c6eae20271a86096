"""The top-level ``netesto`` command: no command, a typo'd command, a missing extra."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def netesto(*args: str, code: str = "") -> subprocess.CompletedProcess[str]:
    prog = code + "import sys, netesto.cli; sys.exit(netesto.cli.main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", prog, *args], capture_output=True, text=True, timeout=60, cwd=REPO)


def test_no_command_prints_the_help_and_exits_2() -> None:
    done = netesto()
    assert done.returncode == 2 and "commands:" in done.stderr and "testbed" in done.stderr


def test_a_typo_gets_a_suggestion_and_exit_2() -> None:
    done = netesto("tesbed", "up")
    assert done.returncode == 2
    assert "unknown command 'tesbed'; did you mean 'testbed'?" in done.stderr and "Traceback" not in done.stderr


def test_help_and_version_still_exit_0() -> None:
    assert netesto("--help").returncode == 0 and netesto("--version").stdout.startswith("netesto ")


def test_a_command_whose_extra_is_missing_names_the_extra(tmp_path: Path) -> None:
    # With the light core install (pip install netesto), heavier commands died with a bare
    # ModuleNotFoundError: here the results extra's packages are hidden from the interpreter.
    hide = ("import sys\n"
            "class Hide:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.split('.')[0] in ('numpy', 'pandas', 'xarray', 'netCDF4'):\n"
            "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
            "sys.meta_path.insert(0, Hide())\n")
    script = tmp_path / "t.py"
    script.write_text("Select exp\n")
    done = netesto("table", str(script), "-C", str(tmp_path), code=hide)
    assert done.returncode == 1, done.stdout + done.stderr
    # table needs the report extra whole (its plots too): one install, not results then plots then report
    assert "which this install lacks; the 'report' extra has it:" in done.stderr and "Traceback" not in done.stderr
    assert f"-m pip install -e '{REPO}[report]'" in done.stderr
