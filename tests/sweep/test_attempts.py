"""A sweep killed mid-point and resumed: one attempt per point in the results, the killed one kept apart.

On a loopback testbed (agents as processes of their own), with the shipped
notebooks/sweep.ipynb in a real kernel: the sweep is SIGKILLed while its first
point's flows run; ``--resume`` at once waits out the dead run's lease (saying so)
rather than failing points "lab busy", moves the killed attempt aside, and the
summary and the cube hold one attempt per point (netesto issue 32).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ..testbed import tbutil

pytestmark = [pytest.mark.slow]
NOTEBOOK = Path(__file__).parents[2] / "notebooks" / "sweep.ipynb"


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory):
    with tbutil.testbed_up(tmp_path_factory, hosts=2, loopback=True) as up:
        yield str(up.lab)


def children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return out


def gone(pids: list[int], within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not any(Path(f"/proc/{p}").exists() for p in pids):
            return True
        time.sleep(0.2)
    return False


def test_a_killed_point_is_resumed_without_mixing_attempts(lab: str, tmp_path: Path) -> None:
    import netesto
    from netesto.results.sweep import experiment_summary

    out = tmp_path / "sw"
    cmd = [sys.executable, "-m", "netesto", "sweep", str(NOTEBOOK), "-p", "ca=reno,cubic", "--set", "dur=3",
           "--lab", lab, "--out", str(out), "-q", "--no-report"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    kernels: list[int] = []
    try:
        with tbutil.group_killed_after(proc):
            deadline = time.monotonic() + 180
            while not list(out.glob("p000-*/results/1/flows/*")) and time.monotonic() < deadline:
                assert proc.poll() is None, proc.communicate()
                time.sleep(0.2)
            time.sleep(1.0)  # the flows run
            kernels = children(proc.pid)
            os.kill(proc.pid, signal.SIGKILL)  # the sweep alone: its kernel sees its parent go and ends
            proc.communicate(timeout=30)
        assert gone(kernels, 15), kernels

        again = subprocess.run([*cmd, "--resume"], capture_output=True, text=True, timeout=600)
    finally:
        for pid in kernels:  # started by this test (as the sweep's kernel): never left behind
            if Path(f"/proc/{pid}").exists():
                os.kill(pid, signal.SIGKILL)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "2 of 2 points ok (2 run now)" in again.stdout
    # --no-report: the cube, read below, and no HTML report, with the command that writes it
    assert f"report not written (--no-report): `netesto report sweep {out}` writes it" in again.stdout
    assert (out / "sweep.nc").is_file() and not (out / "sweep.html").exists()
    assert "lab busy" in again.stderr and "waiting for it" in again.stderr  # the dead run's lease, waited out

    recs = {r["key"]: r for r in json.loads((out / "manifest.json").read_text())["points"].values()}
    killed = recs["ca=reno,rep=0"]
    assert killed["attempt"] == 2 and len(killed["attempts"]) == 1
    first = killed["attempts"][0]
    assert first["status"] == "killed" and first["dir"] == f"attempts/{killed['dir']}-a1"
    assert list((out / first["dir"]).glob("results/1/flows/*.nflow"))  # the killed attempt's data, kept apart
    assert recs["ca=cubic,rep=0"]["attempts"] == []
    for rec in recs.values():  # one attempt, one experiment, inside the point's own directory
        assert rec["status"] == "ok" and rec["experiments"] == [f"{rec['dir']}/results/1"], rec

    sw = netesto.open_sweep(out)
    assert sw.paths(ca="reno") == [out / killed["dir"] / "results" / "1" / "exp.nc"]
    want = experiment_summary(netesto.open_experiment(out / killed["experiments"][0]))["values"]["rate"]
    assert float(sw.cube.rate.sel(ca="reno", rep=0)) == pytest.approx(want)
    assert killed["summary"]["rate"] == pytest.approx(want)


def test_data_an_agent_still_holds_is_fetched_apart_and_the_points_run(lab: str, tmp_path: Path) -> None:
    """Agents that hold an experiment nobody fetched (a controller killed mid-flow; an agent restarted
    mid-point is the same to a sweep): its number would clash with every point's first experiment."""
    script = tmp_path / "stale.nts"
    # paced: on loopback an unpaced flow would take both CPUs from the sweep's points for its 6 s
    script.write_text("DO_SERVER host=h1 exp=COUNTER start=1\n"
                      "DO_CLIENT host=h2 server=h1 test=TCP_STREAM pacing=20m dur=$dur exp=PREV ca=$ca\n"
                      "WAIT $dur\nGET_DATA host=h1\nGET_DATA host=h2\n")
    ctl = subprocess.Popen([sys.executable, "-m", "netesto", "run", str(script), "--lab", lab, "--workdir",
                            str(tmp_path / "w"), "-D", "dur=6", "-D", "ca=reno"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    with tbutil.group_killed_after(ctl):
        assert ctl.stdout is not None
        said = []
        for line in ctl.stdout:  # killed once its flow runs: the agents keep experiment 1
            said.append(line)
            if "flow(s) of" in line:
                break
        assert "flow(s) of" in said[-1], "".join(said)
        time.sleep(1.0)
        os.killpg(ctl.pid, signal.SIGKILL)
        ctl.wait()
    out = tmp_path / "sw"
    done = subprocess.run([sys.executable, "-m", "netesto", "sweep", str(NOTEBOOK), "-p", "flows=1,2", "--set", "dur=2",
                           "--lab", lab, "--out", str(out), "-q", "--no-report"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 of 2 points ok" in done.stdout and "still hold(s) data of an earlier run" in done.stderr
    m = json.loads((out / "manifest.json").read_text())
    assert len(m["leftover"]) == 1 and m["leftover"][0].startswith("leftover/")
    assert (out / m["leftover"][0] / "exp.nc").is_file()  # fetched, processed, named: not lost
    for rec in m["points"].values():  # and in no point's result
        assert rec["status"] == "ok" and rec["experiments"] == [f"{rec['dir']}/results/1"], rec
