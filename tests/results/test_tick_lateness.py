"""How late the sampler's ticks came, against the engine's own schedule (the header's tick_epoch): real ticks
of a worker's loop, a held loop, flow ends that join later, recorded files that cannot tell."""

from __future__ import annotations

import math
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from netesto.raw.nflow import read_flow
from netesto.results import build_dataset, load_experiment
from netesto.results.schema import ALL_VARS
from netesto.results.ticks import row_lateness, scheduled, tick_stats
from tests.engine.test_sampling import _file, _loopback_ends

RECORDED = Path(__file__).resolve().parent / "data"
VARS = [f"{side}_{what}" for side in ("local", "remote")
        for what in ("tick_late_p50", "tick_late_p99", "tick_late_max", "ticks_missed")]


def test_every_tick_is_at_or_after_its_scheduled_point_and_a_held_loop_shows(tmp_path):
    """Three flow ends, two joining 0.15 s after the first, a timer that holds the loop 35 ms at 0.3 s:
    every tick row comes at or after the grid point the engine scheduled it for (the header's
    tick_epoch, then the next point), the late ones by the hold, and the rows the late sweep owes for the
    points it passed follow at once: none is missed."""
    with _loopback_ends(tmp_path, 3) as (worker, ends):
        ends[0].begin()
        worker.loop.call_later(0.15, lambda: [end.begin() for end in ends[1:]])
        worker.loop.call_later(0.3, lambda: time.sleep(0.035))
        # (a loaded machine may hold the loop past 0.8 s with few rows: their count too)
        worker.loop.run(lambda: ends[0].elapsed() >= 0.8 and ends[0].samples + ends[0].nrows >= 45)
    flows = [_file(tmp_path, end) for end in ends]
    interval = 0.01
    first = flows[0].header["tick_epoch"]
    for flow in flows:
        epoch = flow.header["tick_epoch"]
        # one grid for the worker: a flow end that joins later joins it
        assert (epoch - first) / interval == pytest.approx(round((epoch - first) / interval), abs=1e-6)
        # its first tick at or after its start; or, joining while a held sweep still owed rows for points
        # already past, at the point that sweep serves next (a loaded machine's: within its backlog)
        assert flow.header["start_mono"] - flow.header["tick_backlog"] * interval <= epoch, (flow.header, epoch)
        late = row_lateness(flow)
        assert math.isnan(late[0]) and math.isnan(late[-1])
        ticks = late[1:-1]
        assert len(ticks) >= 40 and (ticks >= -1.0).all(), ticks.min()  # (us: float stamps)
        stats = tick_stats(flow)
        assert stats.ticks == len(ticks)
        assert stats.max >= 25_000 and stats.missed == 0 and flow.header["tick_backlog"] > 3
        assert 0 <= stats.p50 <= stats.p99 <= stats.max
        # the hold's gap, then the owed rows close behind (each stamped when taken)
        t = np.asarray(flow.columns["t_mono"])[1:-1]
        gaps = np.diff(t)
        hold = int(np.argmax(gaps))
        assert gaps[hold] >= 0.03 and gaps[hold + 1:hold + 3].max() < interval / 2, gaps[hold:hold + 4]


def test_a_file_from_before_the_backlog_skipped_points_and_they_are_counted():
    # rows at their points, then one 25 ms late: the next was due at the first point past it
    t = np.array([0.0005, 0.0101, 0.0201, 0.0551, 0.0602, 0.0701, 0.0712])
    assert scheduled(t, 0.01, 0.01).round(6).tolist() == [0.01, 0.02, 0.03, 0.06, 0.07, 0.08]
    from netesto.raw.nflow import RawFlow

    stats = tick_stats(RawFlow("f.nflow", {"interval": 0.01, "tick_epoch": 0.01}, {"t_mono": t}))
    assert stats.missed == 2 and stats.max == pytest.approx(25_100) and stats.ticks == 5


def test_rows_owed_follow_a_late_one_and_only_a_row_backlog_behind_gives_points_up():
    from netesto.raw.nflow import RawFlow

    # one 25 ms late, then the two it owes at once, then on time again: none missed
    t = np.array([0.0005, 0.0101, 0.0201, 0.0551, 0.0552, 0.0553, 0.0602, 0.0701, 0.0712])
    header = {"interval": 0.01, "tick_epoch": 0.01, "tick_backlog": 64}
    assert scheduled(t, 0.01, 0.01, 64).round(6).tolist() == [0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.08]
    stats = tick_stats(RawFlow("f.nflow", header, {"t_mono": t}))
    assert stats.missed == 0 and stats.max == pytest.approx(25_100) and stats.ticks == 7
    # a backlog of 1: the late row is 1.5 intervals behind the next point, so the next row serves the
    # first point past it, and the two between are given up
    t = np.array([0.0005, 0.0101, 0.0201, 0.0551, 0.0602, 0.0701, 0.0712])
    assert scheduled(t, 0.01, 0.01, 1).round(6).tolist() == [0.01, 0.02, 0.03, 0.06, 0.07, 0.08]
    stats = tick_stats(RawFlow("f.nflow", {**header, "tick_backlog": 1}, {"t_mono": t}))
    assert stats.missed == 2 and stats.ticks == 5


def test_every_flow_end_has_its_tick_lateness_in_the_dataset(tmp_path):
    with _loopback_ends(tmp_path, 2) as (worker, ends):
        for end in ends:
            end.begin()
        worker.loop.run(lambda: ends[0].elapsed() >= 0.3 and ends[0].samples + ends[0].nrows >= 10)
    raw = load_experiment(tmp_path / "1")
    ds = build_dataset(raw)
    for name in VARS:
        assert ds[name].dims == ("flow",) and ds[name].attrs["units"] == ALL_VARS[name].units
    for rec in raw.flows:
        f = ds.sel(flow=rec.flow_id)
        s = tick_stats(rec.client)
        assert float(f["local_tick_late_p50"]) == s.p50 and float(f["local_tick_late_max"]) == s.max
        assert float(f["local_ticks_missed"]) == s.missed and 0 <= s.p50 < 100_000
        # and each row's own, in the sample layout
        late = ds["sample_late"].sel(flow=rec.flow_id, end="client").values[:rec.client.rows]
        np.testing.assert_allclose(late, row_lateness(rec.client), rtol=1e-6, equal_nan=True)


def test_files_that_do_not_record_the_schedule_have_no_lateness(tmp_path):
    """Files written before tick_epoch existed (the recorded ones), and drivers' files: NaN, not a guess."""
    shutil.copytree(RECORDED / "1", tmp_path / "1")
    flow = read_flow(next((tmp_path / "1" / "flows").glob("*.client.nflow")))
    assert "tick_epoch" not in flow.header
    assert all(math.isnan(v) for v in (tick_stats(flow).p50, tick_stats(flow).missed))
    assert np.isnan(row_lateness(flow)).all()
    ds = build_dataset(load_experiment(tmp_path / "1"))
    assert all(np.isnan(ds[name].values).all() for name in VARS)
    assert math.isnan(tick_stats(None).max)
