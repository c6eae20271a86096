"""Sweeps that cannot be steered from outside: hostile parameters, tampered manifests, huge grids, HTML reprs.

Each case is refused at its boundary with a message naming what and where, and
nothing is written outside the sweep directory (netesto issue 32).
"""

from __future__ import annotations

import json
import shutil
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest

from netesto.errors import SweepError
from netesto.results.cube import open_sweep, write_cube
from netesto.results.manifest import Manifest, PointRecord
from netesto.sweep.grid import parse_grid, points
from netesto.sweep.run import sweep

from .nbfiles import write

NOTEBOOKS = Path(__file__).parents[2] / "notebooks"
BODY = '''import shutil
if src:
    shutil.copytree(src, "results/1")'''


def cli_main(*args: str) -> tuple[int, str]:
    """``netesto sweep`` in this process: exit status and stderr."""
    import contextlib
    import io

    from netesto.cli import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            rc = main(["sweep", *args])
        except SystemExit as exc:
            rc = int(exc.code or 0)
    return rc, err.getvalue()


@pytest.fixture
def dead_lab(tmp_path: Path) -> Path:
    """A lab no agent answers: a sweep that got past its checks would stop there, having run nothing."""
    lab = tmp_path / "lab.toml"
    lab.write_text('[lab]\nname = "x"\ninsecure = true\n[hosts.h1]\ncontrol = "127.0.0.1"\nport = 9\n')
    return lab


@pytest.mark.parametrize("value", [
    "cubic --workdir /tmp/elsewhere", "--workdir=/tmp/x", "-x", "cu'bic", 'cu"bic', "cubic\n%%bash",
    "$HOME", "cubic;id", "{lab}", "a b",
])
def test_an_option_like_or_quoted_parameter_is_refused(value: str, dead_lab: Path, tmp_path: Path) -> None:
    out = tmp_path / "sw"
    rc, err = cli_main(str(NOTEBOOKS / "sweep.ipynb"), "-p", f"ca={value}", "--lab", str(dead_lab), "--out", str(out),
                       "-q")
    # ca is a flow mix (netesto.sweep.mix), a kind of word: letters, digits, _ . - and + : between them
    assert rc == 2 and "parameter ca=" in err and "not congestion controls" in err, err
    assert "Traceback" not in err and not out.exists()
    # the fixed values and the typed kinds too: a rate that is not one, a time that is not one
    for args, said in ((["-p", "dur=2", "--set", f"ca={value}"], "parameter ca="),
                       (["-p", "bw=10mbit --x"], "not a rate"),
                       (["-p", "rtt=20ms;id"], "not a time"), (["-p", "lab=/tmp/x"], "set by the sweep itself")):
        rc, err = cli_main(str(NOTEBOOKS / "sweep.ipynb"), *args, "--lab", str(dead_lab), "--out", str(out), "-q")
        assert rc == 2 and said in err and not out.exists(), (args, err)


def test_a_huge_grid_is_refused_in_under_a_second(dead_lab: Path, tmp_path: Path) -> None:
    nb = write(tmp_path / "p.ipynb", "a = 0\nb = 0\nc = 0", "print(a)")
    hundred = ",".join(str(i) for i in range(100))
    t0 = time.monotonic()
    rc, err = cli_main(str(nb), "-p", f"a={hundred}", "-p", f"b={hundred}", "-p", f"c={hundred}",
                       "--lab", str(dead_lab), "--out", str(tmp_path / "sw"), "-q")
    took = time.monotonic() - t0
    assert rc == 2 and "100 x 100 x 100 cells x 1 repetition(s): more than 10000 points" in err, err
    assert took < 1.0, took
    for args, said in ((["-p", "a=1,2", "--reps", "5001"], "more than 10000 points"),
                       (["-p", "a=" + ",".join(map(str, range(1001)))], "1001 values (at most 1000)"),
                       (["-p", "c=" + "x" * 300], "a value of 300 characters")):
        t0 = time.monotonic()
        rc, err = cli_main(str(nb), *args, "--lab", str(dead_lab), "--out", str(tmp_path / "sw"), "-q")
        assert rc == 2 and said in err and time.monotonic() - t0 < 1.0, (args, err)
    assert not (tmp_path / "sw").exists()


@pytest.fixture(scope="module")
def finished_once(processed: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished two-point sweep of a small notebook whose points copy a recorded experiment, run once
    for the module (a kernel: 3 s of CPU; no report, which the tests write themselves when they need one)."""
    base = tmp_path_factory.mktemp("finished")
    nb = write(base / "p.ipynb", 'x = 1\nsrc = ""', BODY)
    res = sweep(nb, {"x": [1, 2]}, fixed={"src": str(processed / "1")}, out=base / "sw", progress=False,
                report=False)
    assert res.ok, [r.error for r in res.manifest]
    return res.directory


@pytest.fixture
def finished(finished_once: Path, tmp_path: Path) -> Path:
    """A copy of :func:`finished_once` (its notebook beside it) for the test to damage."""
    shutil.copy2(finished_once.parent / "p.ipynb", tmp_path / "p.ipynb")
    return Path(shutil.copytree(finished_once, tmp_path / "sw", symlinks=True))


def tamper(directory: Path, key: str, **fields: object) -> None:
    path = directory / "manifest.json"
    data = json.loads(path.read_text())
    data["points"][key].update(fields)
    path.write_text(json.dumps(data))


@pytest.mark.parametrize(("fields", "said"), [
    ({"dir": "../outside", "status": "failed"}, "dir '../outside': not a path inside the sweep directory"),
    ({"dir": "{abs}", "status": "failed"}, "dir '{abs}'"),
    ({"html": "javascript:alert(1)"}, "html 'javascript:alert(1)'"),
    ({"experiments": ["p000-x_1-r0/../../outside/1"]}, "experiment 'p000-x_1-r0/../../outside/1'"),
    ({"params": {"x": "1 --workdir /tmp"}}, "not a cell of the grid"),
])
def test_a_tampered_manifest_is_refused_naming_the_entry(finished: Path, fields: dict[str, object], said: str) -> None:
    src = json.loads((finished / "manifest.json").read_text())["fixed"]["src"]
    elsewhere = finished.parent / "abs-outside"  # an absolute path out of the sweep
    fields = {k: (str(elsewhere) if v == "{abs}" else v) for k, v in fields.items()}
    said = said.replace("{abs}", str(elsewhere))
    tamper(finished, "x=1,rep=0", **fields)
    nb = finished.parent / "p.ipynb"
    with pytest.raises(SweepError, match="point 'x=1,rep=0'") as refused:
        sweep(nb, {"x": [1, 2]}, fixed={"src": src}, out=finished, resume=True, progress=False)
    assert said in refused.value.message
    with pytest.raises(SweepError, match="point 'x=1,rep=0'"):
        open_sweep(finished)  # the report and notebooks read it the same way
    from netesto.report.sweep import write_report

    with pytest.raises(SweepError, match="point 'x=1,rep=0'"):
        write_report(finished)
    assert not (finished.parent / "outside").exists() and not elsewhere.exists()
    # the command line says it in one line, no traceback
    rc, err = cli_main(str(nb), "-p", "x=1,2", "--set", f"src={src}", "--out", str(finished), "--resume", "-q")
    assert rc == 2 and "point 'x=1,rep=0'" in err and "Traceback" not in err, err


def test_a_manifest_past_its_size_is_not_read(finished: Path) -> None:
    from netesto.results import manifest

    path = finished / "manifest.json"
    with path.open("a") as f:
        f.write(" " * (manifest.MAX_BYTES + 1 - path.stat().st_size))
    t0 = time.monotonic()
    with pytest.raises(SweepError, match="more than a sweep's manifest has"):
        open_sweep(finished)
    assert time.monotonic() - t0 < 1.0


class _Tags(HTMLParser):
    """The start tags of a piece of HTML, and every attribute that could run script."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.handlers: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.handlers += [f"{tag} {k}" for k, v in attrs if k.startswith("on") or (v or "").startswith("javascript:")]


def tags(text: str) -> _Tags:
    parser = _Tags()
    parser.feed(text)
    return parser


def test_html_reprs_escape_script_in_values_and_names(processed: Path, tmp_path: Path) -> None:
    from netesto.results import Table
    from netesto.sweep.result import SweepResult

    evil = "<script>alert(1)</script>"
    out = tmp_path / "<img src=x onerror=alert(2)>"
    grid = parse_grid({"ca": [evil, "cubic"]})
    m = Manifest("nb.ipynb", grid, 1)
    for p in points(grid, 1):
        rec = PointRecord(p.key, p.index, p.rep, p.as_dict(), p.dirname, p.seed, status="failed", error=evil)
        m.points[p.key] = rec
    shutil.copytree(processed / "1", out / m.points["ca=cubic,rep=0"].dir / "results" / "1")
    m.points["ca=cubic,rep=0"].status = "ok"
    m.points["ca=cubic,rep=0"].experiments = [f"{m.points['ca=cubic,rep=0'].dir}/results/1"]
    m.save(out)
    write_cube(out, m)
    result = SweepResult(out, Manifest.load(out), report=out / "sweep.html")
    for shown in (open_sweep(out)._repr_html_(), result._repr_html_(),
                  Table.from_workdir(out / m.points["ca=cubic,rep=0"].dir / "results")._repr_html_()):
        found = tags(shown)
        assert "script" not in found.tags and "img" not in found.tags and found.handlers == [], shown[:2000]
    assert "&lt;script&gt;" in open_sweep(out)._repr_html_()
