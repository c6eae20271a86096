"""exp.html: the key table plus per-flow goodput/cwnd/RTT SVG plots, rendered by Chromium."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from netesto.results import process_experiment
from netesto.results.plotting import nice_step, nice_top
from netesto.results.timeplot import downsample, experiment_plots, line_svg
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
    process_experiment(workdir, 1)
    ds = xr.open_dataset(workdir / "1" / "exp.nc")
    flows = [str(f) for f in ds.flow.values]
    page = workdir / "1" / "exp.html"
    assert page.read_text().startswith("<!DOCTYPE html>") and tag_problems(page.read_text()) == []
    shown = render(page, tmp_path / "exp1.png")
    svgs = re.findall(r'<svg[^>]*class="timeplot".*?</svg>', shown.dom, re.S)
    assert [re.search(r"font-size=\"14\">([^<]*)<", s).group(1) for s in svgs] == [
        "Goodput per flow (200 ms mean)", "Goodput per flow (each sample)", "Congestion window per flow",
        "Smoothed RTT per flow", "p99 transaction latency per flow (RR tests)"]
    for svg in svgs[:4]:
        assert {f for f in flows if _points(svg, f)} == set(flows)
    # Only the RR flow has latencies: the stream flows are not even in the legend.
    assert {f for f in flows if _points(svgs[4], f)} == {"h1-h2-3-0"} and "h1-h2-1-0" not in svgs[4]
    # The 10 ms samples spiked above the link rate and read as a measurement error: the page
    # shows the 200 ms mean first, says what each line is, and keeps each sample one click away.
    dom = shown.dom
    assert dom.index("(200 ms mean)") < dom.index('<details id="goodput_raw">') < dom.index("(each sample)")
    assert "averaged over 200 ms" in dom and "single samples can exceed the link rate" in dom.replace("\n", " ")
    # The goodput axis is in Gbit/s (loopback) and the highest point is the dataset's peak.
    goodput = svgs[1]
    assert "goodput (Gbit/s)" in goodput
    top_px = min(y for f in flows for _, y in _points(goodput, f))
    ticks = [float(v) for v in re.findall(r'text-anchor="end">([\d.]+)<', goodput)]
    peak = float(ds.goodput.max()) / 1e9
    assert 30 + 245 * (1 - peak / max(ticks)) == pytest.approx(top_px, abs=1.5)
    assert "could not be read" not in shown.dom and "Warnings" not in shown.dom
    # No experiment 0, and no experiment 2 page yet: no links to pages that do not exist
    assert ">Prev<" not in shown.dom and ">Next<" not in shown.dom
    process_experiment(workdir, 2)
    assert 'href="../1/exp.html">Prev<' in (workdir / "2" / "exp.html").read_text()
    assert 'href="../2/exp.html">Next<' in (workdir / "1" / "exp.html").read_text()  # added now that it exists
    # stream flows have no latencies: no cells of " / / " for them (the RR group keeps its own)
    page1 = (workdir / "1" / "exp.html").read_text()
    assert "Latencies" in page1 and not re.search(r"<td>\s*/\s*/\s*</td>", page1)
    # The screenshot really shows the lines: the first flow's colour is painted.
    image = pytest.importorskip("PIL.Image", reason="Pillow is needed to read the screenshot")
    pixels = np.asarray(image.open(shown.png).convert("RGB")).reshape(-1, 3)
    for colour in ((0x1F, 0x77, 0xB4), (0xFF, 0x7F, 0x0E)):
        assert (pixels == colour).all(axis=1).any(), colour


def test_plots_skip_missing_variables(workdir: Path) -> None:
    process_experiment(workdir, 2)
    ds = xr.open_dataset(workdir / "2" / "exp.nc").load()
    ds["cwnd"][:] = np.nan
    assert [p.id for p in experiment_plots(ds.drop_vars("rtt"))] == ["goodput", "goodput_raw"]


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
