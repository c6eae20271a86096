"""Who got what: per flow, per group and per algorithm over a steady window, on recorded experiments."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from netesto.errors import ResultsError
from netesto.results import open_experiment
from netesto.results.groups import base_rtts, breakdown, flow_numbers
from netesto.results.steady import Steady, flow_windows
from netesto.results.sweep import experiment_summary

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def mixed():
    """Experiment 1: a cubic, a bbr and another cubic flow in groups 1, 2, 3."""
    return open_experiment(DATA / "1")


def test_each_algorithms_and_groups_numbers_are_its_flows_together(mixed) -> None:
    b = breakdown(mixed)
    assert list(b.cc.values) == ["cubic", "bbr"] and list(b.grp.values) == [1, 2, 3]
    assert float(b.steady_share.sum()) == pytest.approx(1.0) and float(b.cc_share.sum()) == pytest.approx(1.0)
    cubic = np.array([str(c) == "cubic" for c in mixed.ca.values])
    assert float(b.cc_rate.sel(cc="cubic")) == pytest.approx(float(b.steady_rate[cubic].sum()))
    assert float(b.cc_share.sel(cc="cubic")) == pytest.approx(float(b.steady_share[cubic].sum()))
    assert float(b.cc_flows.sel(cc="cubic")) == 2 and list(b.grp_ca.values) == ["cubic", "bbr", "cubic"]
    assert float(b.cc_rtt.sel(cc="cubic")) == pytest.approx(float(b.steady_rtt[cubic].mean()))
    # the whole life: the rate over the grid is the flow's bytes over its life (within a step of it)
    assert np.allclose(b.steady_rate.values, mixed.rate.values, rtol=0.03)
    # queueing delay: the smoothed RTT above the flow's own min_rtt, in ms
    assert np.allclose(b.steady_qdelay.values, b.steady_rtt.values - b.steady_min_rtt.values, atol=1e-9)
    assert b.cc_rtt.attrs["units"] == "ms" and b.attrs["steady"] == "0s"
    # Jain cannot tell who wins; the share can
    assert float(b.cc_share.sel(cc="cubic")) > 0.7


def test_a_steady_window_leaves_each_flows_warm_up_out_and_says_so(mixed) -> None:
    dt = float(mixed.attrs["interval"])
    whole, _, _ = flow_numbers(mixed, Steady())
    later, windows, how = flow_numbers(mixed, Steady.parse("0.3s"))
    for i, w in enumerate(windows):
        life = np.nonzero(np.isfinite(mixed.goodput.values[i]))[0]
        assert w.start == pytest.approx(float(mixed.time.values[life[0]]) - dt + 0.3)
        assert float(mixed.time.values[w.lo]) - dt >= w.start - 1e-9 > float(mixed.time.values[w.lo - 1]) - dt - 1e-9
        gp = np.nan_to_num(mixed.goodput.values[i, w.lo:w.hi])
        assert later["rate"][i] == pytest.approx(gp.mean() / 1e6)  # the mean over the window's steps only
    assert not np.allclose(later["rate"], whole["rate"])
    b = breakdown(mixed, "0.3s")
    assert b.attrs["steady"] == "300ms" and "first 300ms" in b.attrs["steady_window"]
    assert b.cc_share.attrs["steady"] == "300ms" and "every flow is in its steady window" in b.attrs["share_window"]
    # in round trips: of each flow's own median smoothed RTT
    rtt_win = flow_windows(mixed, Steady.parse("10rtt"))
    for i, w in enumerate(rtt_win):
        life = np.nonzero(np.isfinite(mixed.goodput.values[i]))[0]
        srtt = float(np.nanmedian(mixed.rtt.values[i, life[0]:life[-1] + 1])) / 1e6
        assert w.start - w.life_start == pytest.approx(10 * srtt)
    # a warm-up longer than the flows: no number rather than one of nothing
    gone = breakdown(mixed, "5s")
    assert np.isnan(gone.steady_rate.values).all() and np.isnan(gone.cc_share.values).all()


@pytest.mark.parametrize("text", ["2", "fast", "-1s", "3 rtts please"])
def test_a_window_that_is_not_one_is_refused(text: str) -> None:
    with pytest.raises(ResultsError, match="a warm-up such as 2s, 500ms or 10rtt"):
        Steady.parse(text)


def test_the_summary_of_an_experiment_is_over_the_window_and_in_ms(mixed) -> None:
    whole = experiment_summary(mixed)
    later = experiment_summary(mixed, "0.3s")
    assert whole["values"]["mean_rtt"] == pytest.approx(float(np.nanmean(mixed.mean_rtt.values)) / 1e3)
    assert later["steady"] == "300ms" and later["values"]["rate"] != whole["values"]["rate"]
    assert later["parts"]["cc"]["cubic"]["share"] == pytest.approx(float(breakdown(mixed, "0.3s").cc_share.sel(cc="cubic")))
    assert json.loads(json.dumps(later["parts"], allow_nan=False))  # parts are strict JSON: NaN as None


def test_each_flows_configured_rtt_comes_from_the_testbeds_hosts(mixed) -> None:
    assert np.isnan(base_rtts(mixed)).all()  # no testbed: no configured RTT
    shaped = mixed.assign_attrs(testbed=json.dumps({"rtt": 20.0, "host_rtt": {"h2": 40.0}}))
    # every flow runs between h1 and h2: h2's own 40 ms, h1 the base's
    assert base_rtts(shaped).tolist() == [40.0, 40.0, 40.0]
    both = mixed.assign_attrs(testbed=json.dumps({"rtt": 20.0, "host_rtt": {"h1": 30.0, "h2": 40.0}}))
    assert base_rtts(both).tolist() == [50.0] * 3  # r_i + r_j - rtt


def test_processing_with_a_window_records_it_in_the_dataset(tmp_path: Path) -> None:
    import shutil

    from netesto.results import process_experiment

    shutil.copytree(DATA / "1", tmp_path / "1")
    shutil.copy(DATA / "figure8.script", tmp_path / "figure8.script")
    process_experiment(tmp_path, 1, steady="0.2s")
    ds = open_experiment(tmp_path / "1")
    assert ds.attrs["steady"] == "200ms" and ds.cc_share.attrs["steady_window"].endswith("first 200ms")
    assert float(ds.cc_share.sum()) == pytest.approx(1.0) and not math.isnan(float(ds.grp_rate.sel(grp=2)))
