"""exp.html: the key table plus per-flow goodput/cwnd/RTT plots (bokeh, inline), opened in Chromium."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from netesto.report.experiment import process_experiment
from tests.plots.browser import has_colour, painted, show
from tests.results.browser import render, tag_problems


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
                     "p99 transaction latency (RR)": {"h1-h2-3-0 cubic"},
                     "Transaction latency CDF (every transaction)": {"h1-h2-3-0 cubic"}}
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
    assert {urlparse(u).fragment for u in shown.links} >= {"goodput", "cwnd", "rtt", "lat_p99", "latency_cdf"}
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
