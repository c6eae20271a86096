"""The sampler's own timing jitter, per flow end in the experiment Dataset: from real ticks and recorded flows."""

from __future__ import annotations

import math
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from netesto.raw.nflow import read_flow
from netesto.results import build_dataset, load_experiment
from netesto.results.numerics import sampling_jitter
from netesto.results.schema import ALL_VARS
from tests.engine.test_sampling import _file, _loopback_ends

RECORDED = Path(__file__).resolve().parents[1] / "results" / "data"
VARS = [f"{side}_sampling_jitter_{what}" for side in ("local", "remote") for what in ("mean", "max")]


def test_a_late_tick_shows_in_the_jitter(tmp_path):
    """A timer that holds the loop 35 ms makes one tick late (and skips grid points): the largest
    gap minus the interval shows it; the mean is the gaps' mean minus the interval."""
    with _loopback_ends(tmp_path, 3) as (worker, ends):
        for end in ends:
            end.begin()
        worker.loop.call_later(0.2, lambda: time.sleep(0.035))
        worker.loop.run(lambda: ends[0].elapsed() >= 0.5)
    for end in ends:
        flow = _file(tmp_path, end)
        mean, high = sampling_jitter(flow)
        gaps = np.diff(np.array(flow.columns["t_mono"][:-1]))
        assert high == pytest.approx((gaps.max() - 0.01) * 1e6) and high >= 25_000
        assert mean == pytest.approx((gaps.mean() - 0.01) * 1e6) and mean > 0
        # the engine's own running gap statistics (records.GAPS, every row) saw the same late tick
        assert flow.summary["sample_spacing_us"]["max"] == pytest.approx(high + 10_000, abs=1)


def test_every_engine_flow_end_has_its_jitter_in_the_dataset(tmp_path):
    shutil.copytree(RECORDED / "1", tmp_path / "1")
    raw = load_experiment(tmp_path / "1")
    ds = build_dataset(raw)
    for name in VARS:
        assert ds[name].dims == ("flow",) and ds[name].attrs["units"] == "us" == ALL_VARS[name].units
    for rec in raw.flows:
        f = ds.sel(flow=rec.flow_id)
        for side, end in (("local", rec.client), ("remote", rec.server)):
            mean, high = sampling_jitter(end)
            assert float(f[f"{side}_sampling_jitter_mean"]) == mean
            assert float(f[f"{side}_sampling_jitter_max"]) == high
            # ticks come late, not early: the mean gap is the interval or a bit more
            assert 0 <= mean < high < 100_000 and math.isfinite(mean)


def test_files_the_engine_did_not_write_have_no_jitter(tmp_path):
    flow = read_flow(next((RECORDED / "1" / "flows").glob("*.client.nflow")))
    assert not math.isnan(sampling_jitter(flow)[0])
    flow.header["engine"] = "iperf3"
    assert all(math.isnan(v) for v in sampling_jitter(flow))
    assert all(math.isnan(v) for v in sampling_jitter(None))
