"""A lab's points share one kernel kept warm and reset between them; each point's lines reach the sweep's
progress one line per update off a terminal; ``--dry-run`` prints the grid and its estimates, running nothing."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from netesto.results.manifest import PointRecord
from netesto.sweep.progress import SweepProgress
from netesto.sweep.run import sweep

from .nbfiles import write

NOTEBOOKS = Path(__file__).parents[2] / "notebooks"
BODY = '''import os, pathlib, shutil
seen = "leak" in dir()
leak = x
pathlib.Path("kernel.json").write_text(__import__("json").dumps({"pid": os.getpid(), "seen": seen, "cwd": os.getcwd()}))
if src:
    shutil.copytree(src, "results/1")
import holoviews as hv
from IPython.display import display
from netesto.plots.notebook import show
display(show(hv.Curve([(0, 1), (1, x)])))
print(f"step one of {x}")
print(f"step two of {x}")
if x == fail:
    raise ValueError("boom")'''


def _kernels(out: Path) -> list[dict]:
    m = json.loads((out / "manifest.json").read_text())
    recs = sorted(m["points"].values(), key=lambda r: r["index"])
    return [{**json.loads((out / r["dir"] / "kernel.json").read_text()), "dir": str(out / r["dir"]),
             "status": r["status"], "nb": out / r["notebook"]} for r in recs]


def test_points_share_a_warm_kernel_reset_between_them_and_a_failed_one_ends_it(
        tmp_path: Path, processed: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nb = write(tmp_path / "p.ipynb", 'x = 1\nsrc = ""\nfail = 0', BODY)
    res = sweep(nb, {"x": [1, 2, 3, 4]}, fixed={"src": str(processed / "1"), "fail": 2}, out=tmp_path / "out",
                report=False, progress=True)
    ks = _kernels(tmp_path / "out")
    assert [k["status"] for k in ks] == ["ok", "failed", "ok", "ok"]
    # 1 and 2 in one kernel; 2 failed, so 3 got a new one, kept for 4
    assert ks[0]["pid"] == ks[1]["pid"] != ks[2]["pid"] == ks[3]["pid"]
    assert not any(k["seen"] for k in ks)  # nothing of the last point's namespace
    assert [k["cwd"] for k in ks] == [k["dir"] for k in ks]  # each in its own directory
    for k in ks:  # every point's notebook counts its cells from 1, as in a kernel of its own
        counts = [c["execution_count"] for c in json.loads(k["nb"].read_text())["cells"] if c["cell_type"] == "code"]
        assert counts[0] == 1, counts
        # and its plot carries BokehJS (the kernel's earlier point carried it in a notebook of its own)
        assert k["nb"].read_text().count("BEGIN bokeh.min.js") == 1, k["dir"]
    assert set(res.timings) == {r for r in res.manifest.points} and all(t["total"] > 0 for t in res.timings.values())
    err = capsys.readouterr().err
    assert "\r" not in err  # not a terminal: one line per update, none piled on another
    lines = err.splitlines()
    i = lines.index("sweep [3/4] x=3,rep=0: step one of 3")  # the point's own lines, as they came
    assert lines[i + 1] == "sweep [3/4] x=3,rep=0: step two of 3"
    assert any(ln.startswith("sweep [3/4] x=3,rep=0: ok in ") for ln in lines[i:])


def test_fresh_kernels_start_one_per_point(tmp_path: Path, processed: Path) -> None:
    nb = write(tmp_path / "p.ipynb", 'x = 1\nsrc = ""\nfail = 0', BODY)
    sweep(nb, {"x": [1, 2]}, fixed={"src": str(processed / "1")}, out=tmp_path / "out", report=False,
          progress=False, fresh_kernels=True)
    ks = _kernels(tmp_path / "out")
    assert ks[0]["pid"] != ks[1]["pid"]


def test_progress_moves_inside_a_point_on_a_bar() -> None:
    out = io.StringIO()
    show = SweepProgress(2, 0, estimates={"x=1": 2.0}, stream=out, bar=True)
    rec = PointRecord("x=1", 0, 0, {"x": 1}, "p000", 0)
    show.started(rec)
    show._running["x=1"] = (show._running["x=1"][0] - 1.0, 1)  # one of its two estimated seconds gone
    show.line(rec, "[   1.00] WAIT seconds=2.0")
    assert 0.45 <= show._bar.n <= 0.6 and "x=1: [   1.00] WAIT" in out.getvalue()
    show._running["x=1"] = (show._running["x=1"][0] - 10.0, 1)  # far past its estimate: never the whole point
    show.line(rec, "later")
    assert show._bar.n == pytest.approx(0.95)
    show.ended(rec)
    show.close()


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "netesto", "sweep", *args], capture_output=True, text=True,
                          timeout=120, cwd=cwd)


def test_dry_run_prints_each_point_and_its_estimate_and_runs_nothing(tmp_path: Path) -> None:
    res = cli(str(NOTEBOOKS / "sweep.ipynb"), "-p", "ca=cubic,bbr+cubic", "-p", "dur=2,30", "--reps", "2",
              "--out", "o", "--dry-run", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    rows = [ln.split() for ln in res.stdout.splitlines()[1:-1]]
    assert [r[1] for r in rows][:3] == ["ca=cubic,dur=2,rep=0", "ca=cubic,dur=2,rep=1", "ca=cubic,dur=30,rep=0"]
    assert len(rows) == 8
    secs = {r[1]: float(r[0]) for r in rows}
    assert secs["ca=cubic,dur=30,rep=1"] - secs["ca=cubic,dur=2,rep=1"] == pytest.approx(28, abs=1.5)
    assert secs["ca=cubic,dur=2,rep=0"] > secs["ca=cubic,dur=2,rep=1"]  # the first point starts the kernel
    total = sum(secs.values())
    assert f"# 8 point(s) to run, estimated" in res.stdout and f"({total:.0f} s)" in res.stdout
    assert list(tmp_path.iterdir()) == []  # nothing written
    other = write(tmp_path / "p.ipynb", "x = 1", "print(x)")
    res = cli(str(other), "-p", "x=1,2", "--dry-run", cwd=tmp_path)
    assert res.returncode == 0 and "       ?  x=1,rep=0" in res.stdout and "2 point(s) without an estimate" in res.stdout
    bad = cli(str(other), "-p", "y=1", "--dry-run", cwd=tmp_path)
    assert bad.returncode == 2 and "no parameter 'y'" in bad.stderr
