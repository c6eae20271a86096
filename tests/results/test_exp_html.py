"""exp.html: the key table plus per-flow goodput/cwnd/RTT plots (bokeh, inline), opened in Chromium."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from netesto.results import process_experiment
from netesto.results.plotting import nice_step, nice_top
from netesto.results.timeplot import downsample, experiment_plots, line_svg
from tests.plots.browser import has_colour, painted, show
from tests.results.browser import render, tag_problems


def _points(svg: str, flow: str) -> list[tuple[float, float]]:
    out = []
    for pts in re.findall(rf'data-flow="{re.escape(flow)}" points="([^"]*)"', svg):
        out += [tuple(map(float, p.split(","))) for p in pts.split()]
    return out


def test_line_svg_places_points_on_the_axes() -> None:
    # Plot area: x 70..770 (960-70-190 wide), y 30..275 (320-30-45 high); y axis 0..100.
    svg = line_svg(np.array([0.0, 1.0, 2.0, 3.0]), [("f", np.array([0.0, 50.0, np.nan, 100.0]))],
                   title="t", y_label="y")
    assert _points(svg, "f") == [(70.0, 275.0), (303.3, 152.5), (770.0, 30.0)]
    assert svg.count("<polyline") == 2  # the NaN sample is a gap, not a zero
    assert '<circle cx="770.0" cy="30.0"' in svg  # the lone last sample is still visible
    assert ">100<" in svg and ">50<" not in svg.split("</text>")[0]


def test_long_legends_say_how_many_flows_are_not_listed() -> None:
    t = np.arange(5.0)
    names = lambda n: re.findall(r'>(f\d+|\+\d+ more flows)<', line_svg(  # noqa: E731
        t, [(f"f{i}", t) for i in range(n)], title="t", y_label="y"))
    assert names(15) == [f"f{i}" for i in range(15)]
    assert names(40) == [f"f{i}" for i in range(14)] + ["+26 more flows"]


def test_nice_steps_and_downsampling() -> None:
    assert [nice_step(s) for s in (1, 7, 30, 0.9, 0)] == [0.2, 2, 10, 0.2, 1.0]
    assert [nice_top(p) for p in (0.03, 1.504, 100, 0)] == [(0.03, 0.01), (2.0, 0.5), (100, 20), (1.0, 0.2)]
    t = np.arange(10_000) * 0.01
    v = np.where(np.arange(10_000) < 5_000, 1.0, np.nan)
    ts, vs = downsample(t, v, 100)
    assert len(ts) == len(vs) == 100 and np.all(vs[:50] == 1.0) and np.isnan(vs[50:]).all()
    assert ts[0] == pytest.approx(t[:100].mean())


def test_experiment_page_has_the_time_series(workdir: Path, tmp_path: Path) -> None:
    from urllib.parse import urlparse

    process_experiment(workdir, 1)
    ds = xr.open_dataset(workdir / "1" / "exp.nc")
    flows = {f"{f} {ca}" for f, ca in zip(ds.flow.values, ds.ca.values)}
    page = workdir / "1" / "exp.html"
    text = page.read_text()
    assert text.startswith("<!DOCTYPE html>") and tag_problems(text) == []
    # offline: no script or stylesheet from elsewhere; the browser also fails on any network request
    assert not re.search(r'<(script|link)[^>]+(src|href)="(https?:|//|static/)', text)
    shown = show(page, tmp_path / "exp1.png", open_details=True)
    assert shown.errors == []
    drawn = {f["title"]: set(f["renderers"]) for f in shown.figures}
    assert drawn == {"Goodput (200 ms mean)": {*flows, "sum", "retransmits"}, "Goodput (each sample)": flows,
                     "Congestion window": flows, "Smoothed RTT": flows,
                     # only the RR flow has latencies: the stream flows are not even in the legend
                     "p99 transaction latency (RR)": {"h1-h2-3-0 cubic"}}
    assert all(f["hover"] for f in shown.figures)
    # The 10 ms samples spiked above the link rate and read as a measurement error: the page
    # shows the 200 ms mean first, says what each line is, and keeps each sample one click away.
    assert text.index("(200 ms mean)") < text.index('<details id="goodput_raw">') < text.index("(each sample)")
    assert "averaged over 200 ms" in shown.text and "single samples can exceed the link rate" in shown.text
    assert "could not be read" not in shown.text and "Warnings" not in shown.text
    # every link goes to a file that exists, or to a plot on this page
    for link in shown.links:
        url = urlparse(link)
        assert Path(url.path).exists(), link
        assert not url.fragment or f'id="{url.fragment}"' in text, link
    assert {urlparse(u).fragment for u in shown.links} >= {"goodput", "cwnd", "rtt", "lat_p99"}
    # No experiment 0, and no experiment 2 page yet: no links to pages that do not exist
    assert "Prev" not in shown.text and "Next" not in shown.text
    process_experiment(workdir, 2)
    assert 'href="../1/exp.html">Prev<' in (workdir / "2" / "exp.html").read_text()
    assert 'href="../2/exp.html">Next<' in (workdir / "1" / "exp.html").read_text()  # added now that it exists
    # stream flows have no latencies: no cells of " / / " for them (the RR group keeps its own)
    page1 = (workdir / "1" / "exp.html").read_text()
    assert "Latencies" in page1 and not re.search(r"<td>\s*/\s*/\s*</td>", page1)
    # The screenshot really shows the lines: the first flows' colours are painted.
    assert painted(shown.png) > 0.02
    for rgb in ((0x30, 0xA2, 0xDA), (0xFC, 0x4F, 0x30)):
        assert has_colour(shown.png, rgb), rgb


def test_plots_skip_missing_variables(workdir: Path) -> None:
    from netesto.report.experiment import page_plots

    process_experiment(workdir, 2)
    ds = xr.open_dataset(workdir / "2" / "exp.nc").load()
    ds["cwnd"][:] = np.nan
    assert [p["id"] for p in page_plots(ds.drop_vars("rtt")).plots] == ["goodput", "goodput_raw"]


def test_the_page_shows_the_runs_errors_missing_data_and_warnings(workdir: Path, tmp_path: Path) -> None:
    """What went wrong is on the page, not only in errors.txt: the run's own errors (experiment.json),
    raw data missing, and the warnings that say the numbers shown rest on part of the data."""
    import json

    meta_path = workdir / "1" / "experiment.json"
    meta = json.loads(meta_path.read_text())
    meta["errors"] = ["h3: agent <h3> unreachable & dropped"]
    meta_path.write_text(json.dumps(meta))
    (workdir / "1" / "flows" / "h1-h2-2-0.server.nflow").unlink()
    client = workdir / "1" / "flows" / "h1-h2-1-0.client.nflow"
    data = bytearray(client.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one block lost
    client.write_bytes(bytes(data))
    res = process_experiment(workdir, 1)
    page = workdir / "1" / "exp.html"
    assert tag_problems(page.read_text()) == []
    assert "agent &lt;h3&gt; unreachable &amp; dropped" in page.read_text()  # escaped
    text = re.sub(r"<[^>]+>", " ", render(page, tmp_path / "exp1.png").dom)
    assert "The run reported:" in text and "agent &lt;h3&gt; unreachable" in text
    assert "Raw data that could not be read or is missing:" in text
    assert "h1-h2-2-0.server.nflow" in text and any("h1-h2-2-0.server.nflow" in e for e in res.errors)
    assert "Warnings (the data shown is what was kept):" in text
    assert f"{client}: damaged: block at byte" in text
