"""Two sweeps compared, and a working directory's index page."""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from netesto.errors import SweepError
from netesto.report.compare import compare
from netesto.results import open_experiment
from netesto.results.cube import open_sweep, t95

from ..plots.browser import show
from .pages import broken_links, links
from .test_cube import make_sweep


def test_compare_gives_welch_intervals_and_flags_changes(processed: Path, tmp_path: Path) -> None:
    a = open_sweep(make_sweep(processed, tmp_path / "a", fail=None)).cube
    b = open_sweep(make_sweep(processed, tmp_path / "b", fail=None, shift=1)).cube
    d = compare(a, b)
    cell = {"ca": "cubic", "bw": "10mbit"}
    ra, rb = a.rate.sel(**cell).values, b.rate.sel(**cell).values
    assert float(d.rate.sel(**cell)) == pytest.approx(rb.mean() - ra.mean())
    se2 = ra.var(ddof=1) / 2 + rb.var(ddof=1) / 2
    dof = se2 ** 2 / ((ra.var(ddof=1) / 2) ** 2 + (rb.var(ddof=1) / 2) ** 2)
    assert float(d.rate_ci95.sel(**cell)) == pytest.approx(t95(int(dof)) * math.sqrt(se2))
    assert float(d.rate_changed.sel(**cell)) == float(abs(rb.mean() - ra.mean()) > t95(int(dof)) * math.sqrt(se2))
    same = compare(a, a)
    assert float(abs(same.rate).max()) == 0 and float(same.rate_changed.max()) == 0


def test_sweeps_of_other_grids_cannot_be_compared(processed: Path, tmp_path: Path) -> None:
    a = open_sweep(make_sweep(processed, tmp_path / "a")).cube
    with pytest.raises(SweepError, match="different parameters"):
        compare(a, a.rename(bw="rtt"))
    with pytest.raises(SweepError, match="share no grid point"):
        compare(a, a.assign_coords(bw=["1gbit", "10gbit"]))


def test_sweeps_of_one_grid_at_another_fixed_rtt_compare_without_their_differing_companions(
        processed: Path, tmp_path: Path) -> None:
    # The same grid at another fixed RTT has other bytes per BDP for the same buffer: `netesto report compare`
    # died in xarray ("conflicting values for variable 'buffer_bytes'") instead of writing the page.
    cube = open_sweep(make_sweep(processed, tmp_path / "a", fail=None)).cube
    per_bw = ("bw", [125_000.0, 1_250_000.0])
    a = cube.assign_coords(buffer_bytes=per_bw)
    b = cube.assign_coords(buffer_bytes=("bw", [250_000.0, 2_500_000.0]))
    d = compare(a, b)
    assert "buffer_bytes" not in d.coords and float(abs(d.rate).max()) == 0
    assert d.rate.dims == ("ca", "bw") and int(d.rate.count()) == 4


def test_compare_says_per_algorithm_who_got_what_in_each_sweep(processed: Path, tmp_path: Path) -> None:
    # "did the patch change bbr's share?": the page's per-algorithm table, each row checked against the cubes
    import re

    from netesto.report.compare import CC_MEASURES, write_compare

    a_dir, b_dir = make_sweep(processed, tmp_path / "a", fail=None), make_sweep(processed, tmp_path / "b", fail=None,
                                                                                shift=1)
    a, b = open_sweep(a_dir).cube, open_sweep(b_dir).cube
    html = write_compare(a_dir, b_dir).read_text()
    assert "<h2>Per congestion control</h2>" in html
    table = html.split("<h2>Per congestion control</h2>", 1)[1].split("</table>", 1)[0]
    rows = [re.findall(r"<td[^>]*>([^<]*)</td>", r) for r in table.split("<tr>")[3:]]
    want = [(ca, bw, cc) for ca in a.ca.values for bw in a.bw.values for cc in a.cc.values
            if np.isfinite(a.cc_share.sel(ca=ca, bw=bw, cc=cc).values).any()
            or np.isfinite(b.cc_share.sel(ca=ca, bw=bw, cc=cc).values).any()]
    assert [tuple(r[:3]) for r in rows] == [tuple(map(str, w)) for w in want] and len(want) >= 2
    for (ca, bw, cc), r in zip(want, rows):
        share_a = float(a.cc_share.sel(ca=ca, bw=bw, cc=cc).mean("rep"))
        share_b = float(b.cc_share.sel(ca=ca, bw=bw, cc=cc).mean("rep"))
        if np.isfinite(share_a) and np.isfinite(share_b):
            assert float(r[3]) == pytest.approx(share_a, rel=2e-3) and float(r[4]) == pytest.approx(share_b, rel=2e-3)
            assert float(r[5]) == pytest.approx(share_b - share_a, abs=1e-3 + 2e-3 * abs(share_b - share_a))
    assert len(rows[0]) == 3 + 4 * len(CC_MEASURES)


def test_a_compare_page_without_a_common_point_says_why_and_shows_no_empty_table() -> None:
    from netesto.report.render import render

    side = {"dir": "x", "report": "x/sweep.html", "provenance": {}}
    html = render("compare.html.j2", {
        "title": "t", "a": side, "b": side, "dims": [], "measures": [], "rows": [], "changed": 0, "cc_measures": [],
        "cc_dims": [], "cc_rows": [], "bokeh": {"resources": "", "divs": {}, "script": ""},
        "differences": [{"what": "swept buffer", "a": "1bdp", "b": "(none)"}],
        "unmatched": "the sweeps have different parameters: ca, buffer against ca, flows"})
    assert "No point to compare:</strong> the sweeps have different parameters" in html
    assert "<h2>Points</h2>" not in html and "Each cell:" not in html and "<td class=\"text\">swept buffer</td>" in html


def test_the_compare_page_opens_offline_and_links_both_sweeps(processed: Path, tmp_path: Path) -> None:
    a, b = make_sweep(processed, tmp_path / "a"), make_sweep(processed, tmp_path / "b", shift=1)
    from netesto.report.sweep import write_report

    # the summary figures only: the default's others are drawn (and timed) in test_cube
    made = subprocess.run([sys.executable, "-m", "netesto", "report", "sweep", str(a), "--figures", "summary"],
                          capture_output=True, text=True)
    assert made.returncode == 0 and made.stdout.strip() == str(a / "sweep.html"), made.stdout + made.stderr
    write_report(b, figures="summary")  # the same, without a second interpreter loading bokeh
    done = subprocess.run([sys.executable, "-m", "netesto", "report", "compare", str(a), str(b)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    page = Path(done.stdout.strip())
    assert page == b / "compare.html" and broken_links(page) == []
    assert sorted(links(page)) == ["../a/sweep.html", "sweep.html"]
    shown = show(page, tmp_path / "compare.png")
    assert shown.errors == [] and len(shown.figures) == 4


def test_compare_names_every_difference_between_the_sweeps(processed: Path, tmp_path: Path) -> None:
    import json

    from netesto.report.compare import differences, write_compare
    from netesto.results.manifest import Manifest
    from netesto.results.storage import write_netcdf

    a, b = make_sweep(processed, tmp_path / "a"), make_sweep(processed, tmp_path / "b", shift=1)
    assert differences(open_sweep(a), open_sweep(a)) == []
    m = Manifest.load(b)  # B: a fixed buffer, a patched controller, a host with another kernel and sysctl
    m.fixed = {"buffer": "0.5bdp"}
    m.steady = "2s"
    m.provenance = {"netesto": "0.2.0", "packages": {"numpy": "9.9"}}
    m.save(b)
    first = b / next(r for r in m if r.status == "ok").experiments[0] / "exp.nc"
    ds = open_experiment(first)
    kernels, sysctls = json.loads(ds.attrs["kernels"]), json.loads(ds.attrs["sysctls"])
    kernels["h1"] = "6.99-patched"
    sysctls["h1"]["net.ipv4.tcp_ecn"] = "1" if sysctls["h1"].get("net.ipv4.tcp_ecn") != "1" else "2"
    write_netcdf(ds.assign_attrs(kernels=json.dumps(kernels), sysctls=json.dumps(sysctls)), first)
    found = {d["what"]: (d["a"], d["b"]) for d in differences(open_sweep(a), open_sweep(b))}
    assert found["--set buffer"] == ("(none)", "0.5bdp") and found["steady window"] == ("0s", "2s")
    assert found["controller netesto"][1] == "0.2.0" and found["package numpy"][1] == "9.9"
    assert found["h1 kernel"][1] == "6.99-patched" and "h1 sysctl net.ipv4.tcp_ecn" in found
    assert "h2 kernel" not in found  # only what differs
    page = write_compare(a, b)
    text = show(page, tmp_path / "diff.png").text
    for what in ("--set buffer", "0.5bdp", "h1 kernel", "6.99-patched", "h1 sysctl net.ipv4.tcp_ecn", "package numpy"):
        assert what in text, what


def test_the_index_of_a_workdir_links_every_experiment(processed: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    shutil.copytree(processed, work)
    done = subprocess.run([sys.executable, "-m", "netesto", "report", "index", str(work)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    page = work / "index.html"
    assert sorted(links(page)) == ["1/exp.html", "2/exp.html", "3/exp.html"] and broken_links(page) == []


def test_the_index_marks_an_interrupted_experiment_and_leaves_out_columns_empty_everywhere(
        processed: Path, tmp_path: Path) -> None:
    import json
    import re

    from netesto.report.index import write_index
    from netesto.results import Table

    work = tmp_path / "work"
    shutil.copytree(processed, work)
    record = json.loads((work / "2" / "experiment.json").read_text())
    (work / "2" / "experiment.json").write_text(json.dumps({**record, "interrupted": True}))
    html = write_index(work).read_text()
    head = re.findall(r"<th>([^<]*)</th>", html)
    rows = [re.findall(r"<td[^>]*>(?:<a [^>]*>)?([^<]*)", r) for r in html.split("<tr")[2:]]
    assert head[:2] == ["exp", "status"] and [r[1] for r in rows] == ["", "interrupted", ""]
    full = Table.from_workdir(work).df
    empty = [c for c in full.columns if not any(str(v).strip() for v in full[c])]
    assert empty and not set(empty) & set(head) and f"(exp.csv has them): {', '.join(empty)}." in html
    assert [c for c in head if c != "status"] == [c for c in full.columns if c not in empty]
    for i, column in enumerate(head):  # each column shown has a value somewhere
        assert any(r[i].strip() for r in rows), column


def test_the_papers_summary_figures_from_a_combined_set(processed: Path, tmp_path: Path) -> None:
    import holoviews as hv

    import netesto
    from netesto.plots import save
    from netesto.plots.summary import paper_figures

    c = netesto.combine(netesto.open_experiments(processed))
    cas = list(dict.fromkeys(str(v) for v in c.ca.values))
    layout = paper_figures(c)
    bars, retrans, jain = [hv.render(p, backend="bokeh") for p in layout]
    glyphs = [type(r.glyph).__name__ for r in bars.renderers]
    assert glyphs == ["VBar", "Scatter"] and "rtt_ms" in bars.extra_y_ranges  # RTT on its own axis
    assert list(bars.renderers[0].data_source.data["ca"]) == cas
    for fig in (retrans, jain):  # a line and its points per ca
        assert sorted(r.name for r in fig.renderers if type(r.glyph).__name__ == "Line") == sorted(f"ca={v}" for v in cas)
    shown = show(save(layout, tmp_path / "paper.html"), tmp_path / "paper.png")
    assert shown.errors == [] and len(shown.figures) == 3
    with pytest.raises(netesto.ResultsError, match="no parameter 'cc'"):
        paper_figures(c, by="cc")
