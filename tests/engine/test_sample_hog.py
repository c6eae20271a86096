"""The sampler keeps every row when a CPU hog shares the engine's CPU: late ticks cost lateness, not rows.

Two busy loops pinned to the CPU the engine's client and server run on hold
its loop for tens of ms at a time. Before the rows owed were taken (a late
sweep skipped the grid points it passed) such a run kept 111-155 of ~200
rows per flow end here; now every grid point of a flow's life has its row,
each stamped when it was taken, and the lateness says how late.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from netesto.engine.native import fastloop
from netesto.engine.sampling.grid import TICK_BACKLOG
from netesto.raw.nflow import read_flow
from netesto.results.ticks import tick_stats

ENGINE = [sys.executable, "-m", "netesto.engine"]
INTERVAL = 0.01
DUR = 1.5


def _on(cpu: int):
    return lambda: os.sched_setaffinity(0, {cpu})


def test_the_c_loops_owe_rows_as_the_python_twin_does() -> None:
    if fastloop.ext is None:
        pytest.skip("the engine's C loops are not built here")
    assert fastloop.ext.TICK_BACKLOG == TICK_BACKLOG
    assert fastloop.rrloop is None or fastloop.rrloop.TICK_BACKLOG == TICK_BACKLOG


@pytest.mark.parametrize("loops", ["c", "python"])
def test_every_row_of_every_flow_end_is_kept_with_two_busy_loops_on_its_cpu(tmp_path: Path, monkeypatch,
                                                                            loops: str) -> None:
    if loops == "python":
        monkeypatch.setenv("NETESTO_PURE_PYTHON", "1")  # (the engine's processes: the Python twin's sweep)
    cpu = min(os.sched_getaffinity(0))
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"], preexec_fn=_on(cpu)) for _ in range(2)]
    server = None
    try:
        server = subprocess.Popen([*ENGINE, "server", "--bind", "127.0.0.1", "--port", "0", "--datadir",
                                   str(tmp_path / "srv")], stdout=subprocess.PIPE, text=True, preexec_fn=_on(cpu))
        port = json.loads(server.stdout.readline())["port"]  # type: ignore[union-attr]
        # two RR flows (the C loop of RR flow ends, rows at their idle points) and a stream (the sweep's)
        specs = [dict(flow_id=f"a-b-0-{i}", test=test, server="127.0.0.1", port=port, dur=DUR, interval=INTERVAL)
                 for i, test in enumerate(("TCP_RR", "TCP_STREAM", "TCP_RR"))]
        (tmp_path / "specs.json").write_text(json.dumps(specs))
        client = subprocess.run([*ENGINE, "client", "--specs", str(tmp_path / "specs.json"), "--datadir",
                                 str(tmp_path / "cli"), "--workers", "1"], capture_output=True, text=True,
                                timeout=90, preexec_fn=_on(cpu))
        assert client.returncode == 0, client.stderr[-2000:]
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
    late_max = 0.0
    for spec in specs:
        for side, where in (("client", "cli"), ("server", "srv")):
            flow = read_flow(tmp_path / where / "0" / "flows" / f"{spec['flow_id']}.{side}.nflow")
            assert flow.header["tick_backlog"] == TICK_BACKLOG
            stats = tick_stats(flow)
            t = np.asarray(flow.columns["t_mono"])
            where_ = f"{spec['test']} {side}: {flow.rows} rows over {t[-1] - t[0]:.2f} s, {stats}"
            # a row for every grid point from the first tick's on (the baseline and the end's row are not
            # ticks; rows still owed when the flow ended are not missed: the flow's life ended first)
            assert stats.missed == 0, where_
            assert stats.ticks >= 0.95 * DUR / INTERVAL, where_
            # each row stamped when taken: never before its grid point, the owed ones in order
            assert stats.p50 >= -1.0 and np.all(np.diff(t) >= 0), where_
            late_max = max(late_max, stats.max)
    print(f"latest tick: {late_max / 1000:.1f} ms")
