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
from netesto.results.stats import value_range
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


def test_stats_give_the_mean_an_interval_inside_the_measures_range_and_its_n(swept: Path) -> None:
    cube = open_sweep(swept).cube
    with pytest.warns(UserWarning, match="fewer than 3 repetitions"):
        st = stats(cube)
    cell = {"ca": "cubic", "bw": "10mbit"}
    both = cube.rate.sel(**cell).values
    half = t95(1) * both.std(ddof=1) / math.sqrt(2)
    assert float(st.rate.sel(**cell)) == pytest.approx(both.mean())
    assert float(st.rate_hi.sel(**cell)) == pytest.approx(both.mean() + half)
    assert float(st.rate_lo.sel(**cell)) == pytest.approx(max(0.0, both.mean() - half))  # a rate is never below 0
    assert int(st.rate_n.sel(**cell)) == 2 and "fewer than 3 repetitions" in st.attrs["warning"]
    # cubic's share: 0.73 beside bbr (experiment 1), 1.0 alone (experiment 2); t reaches past both ends of [0, 1]
    share = cube.cc_share.sel(**cell, cc="cubic").values
    reach = t95(1) * share.std(ddof=1) / math.sqrt(2)
    assert sorted(share.round(2)) == [0.73, 1.0] and share.mean() - reach < 0 and share.mean() + reach > 1
    lo, hi = st.cc_share_lo.sel(**cell, cc="cubic"), st.cc_share_hi.sel(**cell, cc="cubic")
    assert (float(lo), float(hi)) == (0.0, 1.0) and "clipped to [0, 1]" in lo.attrs["interval"]
    assert int(st.cc_share_n.sel(**cell, cc="cubic")) == 2
    for name in st.data_vars:  # every interval of every measure stays inside its range
        if str(name).endswith("_lo"):
            low, high = value_range(str(name)[:-3])
            for bound in (st[name], st[f"{str(name)[:-3]}_hi"]):
                v = bound.values[np.isfinite(bound.values)]
                assert ((v >= low) & (v <= high)).all(), name
    one = st.sel(ca="bbr", bw="10mbit")  # rep 1 of it failed: n 1, a mean and no interval
    assert int(one.n) == 1 and int(one.rate_n) == 1 and math.isnan(float(one.rate_lo)) and np.isfinite(float(one.rate))
    boot = stats(cube, method="bootstrap", warn=False)  # percentiles of resampled means: inside the values seen
    assert share.min() <= float(boot.cc_share_lo.sel(**cell, cc="cubic")) <= float(
        boot.cc_share_hi.sel(**cell, cc="cubic")) <= share.max()


def test_the_cube_has_each_algorithms_and_each_groups_numbers(swept: Path) -> None:
    from netesto.results.groups import breakdown

    sw = open_sweep(swept)
    cube = sw.cube
    assert cube.cc_share.dims == ("ca", "bw", "rep", "cc") and list(cube.cc.values) == ["cubic", "bbr"]
    assert cube.grp_rate.dims == ("ca", "bw", "rep", "grp") and list(cube.grp.values) == [1, 2, 3]
    for rec in sw.manifest:
        if rec.status != "ok":
            continue
        got = cube.sel(ca=rec.params["ca"], bw=rec.params["bw"], rep=rec.rep)
        ds = open_experiment(swept / rec.experiments[0])
        b = breakdown(ds)
        assert float(got.cc_share.sum()) == pytest.approx(1.0)  # the algorithms' shares add up
        for cc in dict.fromkeys(str(c) for c in ds.ca.values):  # each algorithm: its flows' rates together
            mine = [str(c) == cc for c in ds.ca.values]
            assert float(got.cc_rate.sel(cc=cc)) == pytest.approx(float(b.steady_rate[mine].sum()))
            assert int(got.cc_flows.sel(cc=cc)) == sum(mine)
        assert [str(v) for v in got.grp_ca.values if str(v)] == [
            "/".join(dict.fromkeys(str(c) for c, g in zip(ds.ca.values, ds.group.values) if g == k))
            for k in sorted(set(int(g) for g in ds.group.values))]
    table = sw.flow_table(ca="cubic", bw="10mbit")  # every flow of the chosen points, with its numbers
    assert len(table) == 3 + 2 and set(table.ca) == {"cubic", "bbr"} and (table.share <= 1).all()


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
    # by default: each algorithm's share, rate and queueing delay (a panel per ca swept), the flows' spread,
    # the paper's figures, and the summary (goodput, RTT, retransmits, Jain against bw, a line per ca)
    titles = [f["title"].split(" (")[0].split(" |")[0] for f in shown.figures]
    assert titles[:2] == ["share of the bottleneck per congestion control"] * 2
    assert titles[-4:] == ["goodput", "smoothed RTT", "retransmitted", "Jain fairness"]
    assert "goodput" in titles and "every flow's goodput" in titles
    assert all(f["renderers"] == ["ca=cubic", "ca=cubic", "ca=bbr", "ca=bbr"] for f in shown.figures[-4:])
    share = shown.figures[0]  # a line, its points and interval bars per algorithm
    assert [g["type"] for g in share["glyphs"]][:2] == ["Line", "Scatter"] and {"cubic", "bbr"} <= set(share["renderers"])
    assert painted(shown.png) > 0.02
    assert "n=2" in shown.text and "[0.000, 1.000] n=2" in shown.text  # n beside every interval, clipped to [0, 1]
    assert "share against its fair share" in shown.text  # who won, where algorithms shared a bottleneck


def test_the_reports_figures_are_chosen_by_name(swept: Path, tmp_path: Path) -> None:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "netesto", "report", "sweep", str(swept), "--figures",
                           "share:bw,paper"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    shown = show(swept / "sweep.html", tmp_path / "chosen.png")
    titles = [f["title"].split(" |")[0] for f in shown.figures]
    assert shown.errors == [] and titles == ["share of the bottleneck per congestion control"] * 2 + [
        "goodput (bars) and RTT (points) per algorithm", "retransmitted (%) vs number of flows",
        "Jain fairness vs number of flows"]
    assert Manifest.load(swept).figures == ["share:bw", "paper"]  # kept: the next report draws them too
    bad = subprocess.run([sys.executable, "-m", "netesto", "report", "sweep", str(swept), "--figures", "shares"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "did you mean 'share'" in bad.stderr and "Traceback" not in bad.stderr


def test_a_users_template_replaces_netestos(swept: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import holoviews

    from netesto.report.sweep import write_report

    drew: list[object] = []  # every figure holoviews renders, and renders still
    real = holoviews.render
    monkeypatch.setattr(holoviews, "render", lambda obj, *a, **k: drew.append(obj) or real(obj, *a, **k))
    mine = tmp_path / "templates"
    mine.mkdir()
    (mine / "sweep.html.j2").write_text("<p>{{ counts.ok }} ok of {{ total }}</p>")
    assert write_report(swept, templates=mine).read_text() == "<p>7 ok of 8</p>"
    assert drew == []  # a template that shows no figure has none drawn (about a second of CPU each)
    (mine / "sweep.html.j2").write_text("{% for f in figures %}{{ f.name }} {% endfor %}{{ bokeh.divs | length }}")
    names = write_report(swept, templates=mine).read_text().split()
    assert len(drew) == int(names[-1]) >= 1 and len(names) - 1 >= len(drew)  # one that asks has them drawn


def test_open_sweep_of_something_else_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(SweepError, match="not a sweep directory"):
        open_sweep(tmp_path)
