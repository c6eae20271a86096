"""The sweep cube, its statistics, lazy flows, and the sweep report in a browser."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from netesto.errors import SweepError
from netesto.results import combine, open_experiment, open_experiments
from netesto.results.cube import open_sweep, stats, t95, write_cube
from netesto.results.manifest import Manifest, PointRecord
from netesto.results.sweep import experiment_summary
from netesto.sweep.grid import parse_grid, points

from ..plots.browser import painted, show
from .pages import broken_links, links


def make_sweep(processed: Path, out: Path, fail: int | None = 5, shift: int = 0) -> Path:
    """A finished 2 x 2 x 2-rep sweep directory made of the recorded experiments (point
    ``i`` gets experiment 1 + (i + shift) % 3); point ``fail`` failed."""
    grid = parse_grid(["ca=cubic,bbr", "bw=10mbit,100mbit"])
    m = Manifest("sweep.ipynb", grid, 2)
    for i, p in enumerate(points(grid, 2)):
        rec = PointRecord(p.key, p.index, p.rep, p.as_dict(), p.dirname, p.seed)
        if i == fail:
            rec.status, rec.error = "failed", "In [4]: AgentError: h2: no congestion control 'bbr'"
        else:
            exp = 1 + (i + shift) % 3
            dest = out / p.dirname / "results" / str(exp)
            shutil.copytree(processed / str(exp), dest)
            rec.status, rec.experiments = "ok", [dest.relative_to(out).as_posix()]
        m.points[p.key] = rec
    out.mkdir(exist_ok=True)
    m.save(out)
    write_cube(out, m)
    return out


@pytest.fixture
def swept(processed: Path, tmp_path: Path) -> Path:
    return make_sweep(processed, tmp_path / "sw")


def test_the_cube_has_the_sweep_dims_and_each_points_numbers(swept: Path) -> None:
    sw = open_sweep(swept)
    cube = sw.cube
    assert cube.rate.dims == ("ca", "bw", "rep") and list(cube.ca.values) == ["cubic", "bbr"]
    assert list(cube.bw.values) == ["10mbit", "100mbit"] and list(cube.bw_bps.values) == [1e7, 1e8]
    for rec in sw.manifest:
        got = cube.sel(ca=rec.params["ca"], bw=rec.params["bw"], rep=rec.rep)
        assert str(got.status.values) == rec.status
        if rec.status == "ok":
            want = experiment_summary(open_experiment(swept / rec.experiments[0]))["values"]
            assert float(got.rate) == pytest.approx(want["rate"]) and float(got.jain) == pytest.approx(want["jain"])
        else:
            assert math.isnan(float(got.rate)) and "no congestion control" in str(got.error.values)


def test_stats_give_the_mean_and_a_95_percent_interval(swept: Path) -> None:
    cube = open_sweep(swept).cube
    st = stats(cube)
    both = cube.rate.sel(ca="cubic", bw="10mbit").values
    assert float(st.rate.sel(ca="cubic", bw="10mbit")) == pytest.approx(both.mean())
    assert float(st.rate_ci95.sel(ca="cubic", bw="10mbit")) == pytest.approx(t95(1) * both.std(ddof=1) / math.sqrt(2))
    one = st.sel(ca="bbr", bw="10mbit")  # rep 1 of it failed
    assert int(one.n) == 1 and math.isnan(float(one.rate_ci95)) and np.isfinite(float(one.rate))


def test_flows_of_points_open_lazily(swept: Path) -> None:
    sw = open_sweep(swept)
    flows = sw.flows(ca="cubic")
    assert flows.goodput.chunks is not None  # dask: nothing read yet
    assert flows.sizes["point"] == 4 and float(flows.goodput.sum().compute()) > 0
    with pytest.raises(SweepError, match="no experiments"):
        sw.flows(ca="bbr", bw="10mbit", rep=1)


def test_a_parameter_never_hides_a_measurement(processed: Path) -> None:
    ds = open_experiments(processed)
    c = combine(ds, params={e: {"rtt": "10ms", "rate": "fast"} for e in (1, 2, 3)})
    assert list(c.rtt.values) == ["10ms"] * 3 and "mean_rtt" in c.data_vars
    assert list(c.rate.values) == ["fast"] * 3 and "measured_rate" in c.data_vars


def test_the_sweep_report_opens_offline_with_plots_and_links(swept: Path) -> None:
    from netesto.report.sweep import write_report

    page = write_report(swept)
    text = page.read_text()
    assert "no congestion control" in text and "1 failed" in text
    assert broken_links(page) == []
    assert sum(h.endswith("/exp.html") for h in links(page)) == 7
    shown = show(page, swept / "report.png")
    assert shown.errors == []
    # goodput, RTT, retransmits and Jain against bw; per ca a line and its points (CI bars are annotations)
    assert [f["title"].split(" (")[0] for f in shown.figures] == ["goodput", "smoothed RTT", "retransmitted", "Jain fairness"]
    assert all(f["renderers"] == ["ca=cubic", "ca=cubic", "ca=bbr", "ca=bbr"] for f in shown.figures)
    assert painted(shown.png) > 0.02


def test_a_users_template_replaces_netestos(swept: Path, tmp_path: Path) -> None:
    from netesto.report.sweep import write_report

    mine = tmp_path / "templates"
    mine.mkdir()
    (mine / "sweep.html.j2").write_text("<p>{{ counts.ok }} ok of {{ total }}</p>")
    assert write_report(swept, templates=mine).read_text() == "<p>7 ok of 8</p>"


def test_open_sweep_of_something_else_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(SweepError, match="not a sweep directory"):
        open_sweep(tmp_path)
