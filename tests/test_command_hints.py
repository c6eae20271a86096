"""Each command run where a module it needs is hidden names the extra that really installs it.

A light install (``pip install .``: pyzmq and msgpack only) is made here by a meta
path finder that refuses every module of the extras, in a real ``netesto``
subprocess; the hint must name the extra that gives the command all it needs
(``netesto sweep`` named 'results', then, once that was installed, 'sweep').
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest

from netesto.cli import COMMANDS
from netesto.extras import CORE, import_name, provides

REPO = Path(__file__).resolve().parents[1]
CORE_MODULES = {import_name(d) for d in provides(CORE)}
LIGHT = sorted({import_name(d) for d in provides("all")} - CORE_MODULES)  # what a core install lacks


def netesto(hidden: list[str], *args: str, tmp: Path, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    """``netesto ARGS`` in a subprocess where the top-level modules ``hidden`` cannot be imported."""
    code = ("import sys\n"
            f"HIDDEN = {set(hidden)!r}\n"
            "class Hide:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.split('.')[0] in HIDDEN:\n"
            "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
            "sys.meta_path.insert(0, Hide())\n"
            "import netesto.cli\n"
            "sys.exit(netesto.cli.main(sys.argv[1:]))\n")
    env = {**os.environ, "NETESTO_STATE_DIR": str(tmp / "state")}
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout,
                          cwd=tmp, env=env)


def names_extra(done: subprocess.CompletedProcess[str], extra: str, module: str) -> None:
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    target = f"{REPO}[{extra}]" if extra else str(REPO)
    assert f"needs {module}, which this install lacks" in done.stderr, done.stderr
    assert f"pip install -e '{target}'" in done.stderr, done.stderr


def refused_port() -> int:
    """A loopback port nothing listens on (bound, never listening: a connect is refused)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port: int = s.getsockname()[1]
    s.close()
    return port


def case_demo(tmp: Path) -> None:
    # The demo runs on a core install (agents need only pyzmq and msgpack) and says what it could not write.
    done = netesto(LIGHT, "demo", "--loopback", "--dur", "3", "--dir", str(tmp / "d"), tmp=tmp)
    assert "Traceback" not in done.stderr, done.stderr
    assert "MISSING: not written" in done.stdout and "this install lacks numpy" in done.stdout, done.stdout
    assert f"the 'report' extra has it: {sys.executable} -m pip install -e '{REPO}[report]'" in done.stdout
    assert list((tmp / "d" / "1").glob("flows/*.nflow")), "the raw data is kept"


def case_plan(tmp: Path) -> None:
    done = netesto(LIGHT, "plan", str(REPO / "examples" / "readme_one_flow.nts"), tmp=tmp)
    assert done.returncode == 0 and "DO_SERVER" in done.stdout, done.stderr


def case_run(tmp: Path) -> None:
    (tmp / "lab.toml").write_text("")
    done = netesto(["msgpack"], "run", str(REPO / "examples" / "readme_one_flow.nts"), "--lab", "lab.toml", tmp=tmp)
    names_extra(done, CORE, "msgpack")
    assert "netesto's own requirements have it" in done.stderr


def case_testbed(tmp: Path) -> None:
    done = netesto(LIGHT, "testbed", "status", tmp=tmp)
    assert done.returncode == 0 and "no testbeds are up" in done.stdout, done.stderr


def case_flow(tmp: Path) -> None:
    done = netesto(["msgpack"], "flow", "client", "-H", "127.0.0.1", tmp=tmp)
    names_extra(done, CORE, "msgpack")
    # The engine runs on a core install: a refused flow says so, and shows no CPU share (item 8)
    done = netesto(LIGHT, "flow", "client", "-H", "127.0.0.1", "-p", str(refused_port()), "-l", "1", tmp=tmp)
    assert done.returncode == 1 and "connection refused" in done.stdout, done.stdout + done.stderr
    assert "% of a core" not in done.stdout and "cpu " in done.stdout


def case_keys(tmp: Path) -> None:
    names_extra(netesto(["zmq"], "keys", str(tmp / "k"), "--name", "h1", tmp=tmp), CORE, "zmq")


EXP_CSV = "exp,expName,test,ca,rate\n1.0,x,TCP_STREAM,cubic,10.5\n1.1,x,TCP_STREAM,cubic,10.5\n"


def case_table(tmp: Path) -> None:
    (tmp / "exp.csv").write_text(EXP_CSV)
    (tmp / "t.script").write_text("File=exp\ndoTable\nplotX=exp\nplotY1=rate\ndoPlot=p\n")
    names_extra(netesto(LIGHT, "table", "t.script", tmp=tmp), "report", "numpy")
    done = netesto(["holoviews"], "table", "t.script", tmp=tmp)  # only doPlot needs it: Table.plot's own hint
    assert done.returncode == 1 and f"the 'plots' extra has it: {sys.executable} -m pip install -e '{REPO}[plots]'" \
        in done.stderr, done.stderr
    assert netesto([], "table", "t.script", "-o", "t.html", tmp=tmp).returncode == 0  # what was hidden was all


def case_sweep(tmp: Path) -> None:
    nb = str(REPO / "notebooks" / "sweep.ipynb")
    # The report: a light install was told 'results' first, then 'sweep'.
    names_extra(netesto(LIGHT, "sweep", nb, "-p", "ca=cubic", "--out", "s", tmp=tmp), "sweep", "numpy")
    names_extra(netesto(["papermill"], "sweep", nb, "-p", "ca=cubic", "--out", "s", tmp=tmp), "sweep", "papermill")


def case_report(tmp: Path) -> None:
    (tmp / "w" / "1").mkdir(parents=True)
    (tmp / "w" / "1" / "all.exp.out").write_text("exp:1.0\nexpName:x\ntest:TCP_STREAM\nca:cubic\nrate:10.5\n")
    names_extra(netesto(LIGHT, "report", "index", "w", tmp=tmp), "report", "numpy")
    names_extra(netesto(["jinja2"], "report", "index", "w", tmp=tmp), "report", "jinja2")
    assert netesto([], "report", "index", "w", tmp=tmp).returncode == 0


CASES: dict[str, Callable[[Path], None]] = {name.removeprefix("case_"): f for name, f in globals().items()
                                             if name.startswith("case_")}


def test_every_command_has_a_case() -> None:
    assert set(CASES) == set(COMMANDS)


@pytest.mark.parametrize("command", sorted(CASES))
def test_a_command_missing_a_module_names_the_extra_that_has_it(command: str, tmp_path: Path) -> None:
    CASES[command](tmp_path)
