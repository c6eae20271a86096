"""Sweeps of small notebooks in real kernels: points, failures, resume, bad input (no lab needed)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from netesto.errors import SweepError
from netesto.sweep.run import sweep

from .nbfiles import write
from .pages import broken_links

BODY = '''import os, pathlib, shutil
pathlib.Path(f"ran-{x}-{name}.txt").write_text(str(seed))
if os.path.exists(fail_if) and x == 3:
    raise ValueError(f"x is {x}")
if src:  # a recorded experiment stands for the point's own (no lab here)
    shutil.copytree(src, "results/1")
print("point", x, name)'''


@pytest.fixture
def notebook(tmp_path: Path) -> Path:
    return write(tmp_path / "point.ipynb", 'x = 1\nname = "a"\nfail_if = ""\nsrc = ""\nseed = 0', BODY)


@pytest.fixture
def src(processed: Path) -> str:
    return str(processed / "1")


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "netesto", "sweep", *args], capture_output=True, text=True, timeout=300)


def test_points_run_a_failed_one_is_kept_and_resume_runs_only_it(notebook: Path, src: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    flag = tmp_path / "fail"
    flag.write_text("")
    first = cli(str(notebook), "-p", "x=1,2,3", "--set", "name=b", "--set", f"fail_if={flag}", "--set", f"src={src}",
                "--out", str(out), "-q", "--no-report")  # the resumed run's report is the one read
    assert first.returncode == 1, first.stdout + first.stderr
    assert "2 of 3 points ok" in first.stdout and "failed x=3,rep=0: In [3]: ValueError: x is 3" in first.stdout
    m = json.loads((out / "manifest.json").read_text())
    recs = sorted(m["points"].values(), key=lambda r: r["index"])
    assert [r["status"] for r in recs] == ["ok", "ok", "failed"]
    for r in recs:  # each point ran in its own directory, with its values and seed; notebook and HTML kept
        d = out / r["dir"]
        assert (d / f"ran-{r['params']['x']}-b.txt").read_text() == str(r["seed"])
        assert (out / r["notebook"]).is_file() and (out / r["html"]).is_file() and r["seconds"] > 0
    ok_html = out / recs[0]["html"]
    before = {r["dir"]: (out / r["notebook"]).stat().st_mtime_ns for r in recs}
    assert "point 1 b" in ok_html.read_text()
    flag.unlink()
    again = cli(str(notebook), "-p", "x=1,2,3", "--set", "name=b", "--set", f"fail_if={flag}", "--set", f"src={src}",
                "--out", str(out), "-q", "--resume")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "3 of 3 points ok (1 run now)" in again.stdout
    after = {r["dir"]: (out / r["notebook"]).stat().st_mtime_ns for r in json.loads((out / "manifest.json").read_text())["points"].values()}
    assert [d for d in after if after[d] != before[d]] == [recs[2]["dir"]]
    assert broken_links(out / "sweep.html") == []
    # a finished sweep resumed with a check: nothing runs, and the check is evaluated on every point
    checked = cli(str(notebook), "-p", "x=1,2,3", "--set", "name=b", "--set", f"fail_if={flag}", "--set", f"src={src}",
                  "--out", str(out), "-q", "--resume", "--check", "jain > 2", "--check", "cc_share_cubic <= 1",
                  "--no-report")
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert "3 of 3 points ok (0 run now), 0 failed, 3 failing a check" in checked.stdout
    assert checked.stdout.count("check failed") == 3 and "jain > 2" in checked.stdout
    m = json.loads((out / "manifest.json").read_text())
    assert all(r["checks"] == {"jain > 2": False, "cc_share_cubic <= 1": True} for r in m["points"].values())
    assert strict_json_files(out) >= 1 + 3 + 3  # the manifest, each point's notebook and experiment.json


def strict_json_files(root: Path) -> int:
    """Every JSON file under ``root`` (notebooks too) parsed by a strict parser: NaN and Infinity, which
    Python's json writes by default and JSON.parse refuses, fail the test. How many there were."""
    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} is not JSON")

    files = [p for p in root.rglob("*") if p.suffix in (".json", ".ipynb") and p.is_file()]
    for path in files:
        try:
            json.loads(path.read_text(), parse_constant=refuse)
        except ValueError as exc:
            raise AssertionError(f"{path}: not strict JSON: {exc}") from None
    return len(files)


def test_the_api_returns_the_result_and_a_point_without_an_experiment_fails(notebook: Path, src: str,
                                                                           tmp_path: Path) -> None:
    res = sweep(notebook, {"x": [1]}, fixed={"src": src}, out=tmp_path / "o", checks=["rate > 0"], progress=False,
                report=False)
    assert res.ran == ["x=1,rep=0"] and res.ok and res.open().cube.status.sel(x=1, rep=0).item() == "ok"
    # a notebook that ran without making an experiment: failed, not ok (and no check can pass it)
    res = sweep(notebook, {"x": [1, 2]}, out=tmp_path / "none", checks=["rate > 0"], progress=False,
                report=False)
    assert [r.status for r in res.manifest] == ["failed", "failed"] and not res.ok
    assert all("without an experiment" in r.error for r in res.manifest)
    assert list(res.open().cube.status.sel(rep=0).values) == ["failed", "failed"]


@pytest.mark.parametrize(("args", "message"), [
    (["-p", "y=1,2"], "no parameter 'y'"),
    (["-p", "nme=c"], "did you mean 'name'"),
    ([], "the grid is empty"),
    (["-p", "x=one"], "x='one'"),
    (["-p", "x=1", "--set", "x=2"], "both swept and fixed"),
    (["-p", "x=1", "--check", "jian > 1"], "did you mean 'jain'"),
    # the wait as it really was: 3 s, or a little more on a loaded machine ("3.01 s")
    (["-p", "x=1", "--lab", "{lab}"], r"h1: no answer to hello in 3(\.\d+)? s from 127\.0\.0\.1:9"),
])
def test_bad_input_is_refused_before_anything_runs(notebook: Path, tmp_path: Path, args: list[str], message: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """``netesto sweep``'s own main, in this process (no interpreter to start per case; an
    exception escaping it fails the test as a traceback would): exit status and message.
    The command as a subprocess refuses input in test_a_notebook_without_parameters_..."""
    from netesto.cli import main

    lab = tmp_path / "lab.toml"
    lab.write_text('[lab]\nname = "x"\ninsecure = true\n[hosts.h1]\ncontrol = "127.0.0.1"\nport = 9\n')
    out = tmp_path / "never"
    try:
        rc = main(["sweep", str(notebook), *[a.replace("{lab}", str(lab)) for a in args], "--out", str(out), "-q"])
    except SystemExit as exc:  # argparse's usage errors
        rc = exc.code
    done = capsys.readouterr()
    assert rc not in (0, None) and re.search(message, done.err), done.out + done.err  # (a pattern)
    assert "Traceback" not in done.err
    assert not out.exists()


def test_a_notebook_without_parameters_and_a_sweep_dir_in_use(notebook: Path, tmp_path: Path) -> None:
    bare = write(tmp_path / "bare.ipynb", None, "print(1)")
    done = cli(str(bare), "-p", "x=1", "--out", str(tmp_path / "o1"))
    assert done.returncode == 2 and "no cell tagged 'parameters'" in done.stderr and "Traceback" not in done.stderr
    sweep(notebook, ["x=1"], out=tmp_path / "o2", progress=False, report=False)
    with pytest.raises(SweepError, match="holds a sweep already: --resume"):
        sweep(notebook, ["x=1"], out=tmp_path / "o2", progress=False)
    with pytest.raises(SweepError, match="another grid"):
        sweep(notebook, ["x=1,2"], out=tmp_path / "o2", progress=False, resume=True)
    (tmp_path / "o3").mkdir()
    (tmp_path / "o3" / "mine.txt").write_text("")
    with pytest.raises(SweepError, match="not a sweep directory"):
        sweep(notebook, ["x=1"], out=tmp_path / "o3", progress=False)


def test_ctrl_c_lets_the_running_point_finish_and_records_it_finished(src: str, tmp_path: Path) -> None:
    import os
    import signal
    import time

    nb = write(tmp_path / "slow.ipynb", 'x = 1\nsrc = ""', 'import shutil, time\ntime.sleep(4)\nshutil.copytree(src, "results/1")')
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "netesto", "sweep", str(nb), "-p", "x=1,2", "--set", f"src={src}",
                             "--out", str(out), "-q"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and '"running"' not in ((out / "manifest.json").read_text()
                                                                   if (out / "manifest.json").exists() else ""):
            time.sleep(0.1)
        time.sleep(1.0)  # inside the point's sleep
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C as a terminal sends it
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, err
    recs = sorted(json.loads((out / "manifest.json").read_text())["points"].values(), key=lambda r: r["index"])
    # the point that was running when Ctrl-C came ran to its end and is recorded so, with its summary and pages
    assert recs[0]["status"] == "ok" and recs[0]["summary"]["rate"] > 0 and (out / recs[0]["html"]).is_file(), recs[0]
    assert recs[1]["status"] == "pending"
