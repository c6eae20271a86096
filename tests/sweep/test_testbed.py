"""A sweep of notebooks/sweep.ipynb on a real testbed, end to end: two repetitions of a point that
mixes two congestion controls at two RTTs (bbr from h2 at 10 ms, reno from h3 at 30 ms), and two
of a point whose congestion control does not exist.

Interrupted after its first point and resumed, it runs only the rest; the testbed is reshaped
to the points' bw and host RTTs; the points of an unknown ca fail and are recorded while the
others complete; the cube holds each algorithm's share and rate with n and intervals inside
their range; every JSON file it wrote is strict JSON; the reports open in chromium, the share
figure drawn; notebooks/analysis.ipynb reads the result. (One sweep for all of it: each point
costs a kernel and an experiment.)
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest


from ..testbed import tbutil
from ..plots.browser import DOCUMENTS
from .pages import broken_links, links
from .test_run import strict_json_files

pytestmark = [pytest.mark.netns, pytest.mark.slow]
NOTEBOOKS = Path(__file__).parents[2] / "notebooks"


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    with tbutil.testbed_up(tmp_path_factory, hosts=3, bw="100mbit", rtt="10ms") as up:
        yield up


def sweep_cmd(bed, out: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "netesto", "sweep", str(NOTEBOOKS / "sweep.ipynb"), "--testbed", bed.name,
            "--set", "dur=2", "--set", "rtt=10ms", "--out", str(out), "-q", *args]


def manifest(out: Path) -> list[dict]:
    try:
        data = json.loads((out / "manifest.json").read_text())
    except (OSError, ValueError):
        return []
    return sorted(data["points"].values(), key=lambda r: (r["index"], r["rep"]))


# In every frame with bokeh documents: how many, and each figure's title with its number of glyph renderers.
_FIGURES = """() => { const docs = """ + DOCUMENTS + """; return docs.length ? {docs: docs.length,
  figures: Object.fromEntries(docs.flatMap(d => [...d.all_models])
  .filter(m => m.constructor.__name__ === 'Figure')
  .map(f => [f.title ? f.title.text : '', f.renderers.filter(r => r.constructor.__name__ === 'GlyphRenderer').length]))}
  : null }"""

# An element and its ancestors as "tag.class display visibility WxH", to say why it has no area.
_ANCESTRY = """e => { const out = []; for (let n = e; n && n.nodeType === 1; n = n.parentElement) {
  const s = getComputedStyle(n), r = n.getBoundingClientRect();
  out.push(`${n.tagName.toLowerCase()}.${n.className} ${s.display} ${s.visibility} ${r.width}x${r.height}`) }
  return out.join(' < ') }"""


def _shown(pg, element) -> dict | None:
    """``element`` scrolled into the viewport and its box there once painted, or None when in 30 s it
    never has an area (an element's screenshot would wait for it, then fail saying only "not visible")."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        element.evaluate("e => e.scrollIntoView({block: 'center'})")
        box = element.bounding_box()
        if box and box["width"] > 0 and box["height"] > 0:
            pg.wait_for_timeout(1000)  # bokeh paints a canvas once it is scrolled to
            return element.bounding_box()
        pg.wait_for_timeout(250)
    return None


def _built(frame) -> bool:
    """Whether bokeh built every document ``frame`` embeds (outputs draw one after another); a frame
    detached meanwhile, as a notebook's loaders make them: yes."""
    from playwright.sync_api import Error

    from ..plots.browser import ALL_EMBEDDED

    try:
        return bool(frame.evaluate(ALL_EMBEDDED))
    except Error:
        return frame.is_detached()


def frames_drawn(page: Path) -> tuple[list[str], int, dict[str, int]]:
    """Console errors of ``page`` opened offline, how many bokeh documents its frames
    hold, and their figures' glyph renderers by title; each frame with a document must
    be painted (not blank)."""
    from ..plots.browser import fresh_page, in_chromium, painted

    def look(browser) -> tuple[list[str], int, dict[str, int]]:
        errors: list[str] = []
        with fresh_page(browser, errors, viewport={"width": 1200, "height": 900}) as pg:
            pg.goto(page.resolve().as_uri())  # waits for the load event, the srcdoc frames' too
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not all(_built(f) for f in pg.frames):
                pg.wait_for_timeout(100)
            pg.wait_for_timeout(1000)  # bokeh paints its canvases after the document is built
            figures: dict[str, int] = {}
            drawn = 0
            for n, frame in enumerate(pg.frames):
                found = frame.evaluate(_FIGURES)
                if found is None:
                    continue
                drawn += found["docs"]
                figures.update(found["figures"])
                png = page.with_suffix(f".frame{n}.png")
                if frame.parent_frame:  # a frame off screen is painted once scrolled to
                    element = frame.frame_element()
                    box = _shown(pg, element)
                    assert box, f"{page}: frame {n} has no area on the page: {element.evaluate(_ANCESTRY)}"
                    pg.screenshot(path=str(png), clip=box)
                else:
                    pg.screenshot(path=str(png))
                assert painted(png) > 0.02, f"{page}: frame {n} is blank"
        return errors, drawn, figures

    return in_chromium(look)


def test_a_sweep_of_mixes_interrupted_resumed_reshaped_with_failing_points_and_reported(bed, tmp_path: Path) -> None:
    from ..plots.browser import painted, show

    out = tmp_path / "sw"
    # the nosuchcc points come last: the interrupted run ends before them, the resumed one runs them
    args = ["-p", "ca=bbr+reno,nosuchcc", "--reps", "2", "--set", "bw=20mbit", "--set", "host_rtt=h3:30ms",
            "--steady", "0.5s", "--check", "rate > 1"]
    proc = subprocess.Popen(sweep_cmd(bed, out, *args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    with tbutil.group_killed_after(proc):
        deadline = time.monotonic() + 240
        while sum(r["status"] == "ok" for r in manifest(out)) < 1 and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.3)
        _, err = tbutil.interrupt_group(proc, 120)
    assert proc.returncode == 130, err
    assert "interrupted" in err and "--resume" in err and "Traceback" not in err
    done = {r["key"]: (out / r["notebook"]).stat().st_mtime_ns for r in manifest(out) if r["status"] == "ok"}
    assert 1 <= len(done) <= 2 and not any(r["status"] == "failed" for r in manifest(out)), manifest(out)

    # a point that fails is recorded, the others complete, the sweep exits 1
    again = subprocess.run(sweep_cmd(bed, out, *args, "--resume"), capture_output=True, text=True, timeout=300)
    assert again.returncode == 1, again.stdout + again.stderr
    assert f"2 of 4 points ok ({4 - len(done)} run now)" in again.stdout, again.stdout
    assert "failed ca=nosuchcc,rep=0" in again.stdout and "failed ca=nosuchcc,rep=1" in again.stdout
    recs = manifest(out)
    bad = [r for r in recs if r["params"]["ca"] == "nosuchcc"]
    assert [r["status"] for r in bad] == ["failed", "failed"] and all("nosuchcc" in r["error"] for r in bad), bad
    recs = [r for r in recs if r not in bad]
    assert all(r["status"] == "ok" and r["experiments"] for r in recs), recs
    assert all((out / r["notebook"]).stat().st_mtime_ns == done[r["key"]] for r in recs if r["key"] in done)
    assert all(r["checks"] == {"rate > 1": True} for r in recs)
    assert strict_json_files(out) >= 1 + 4 + 2  # the manifest, the notebooks, the experiments' experiment.json

    import netesto

    sw = netesto.open_sweep(out)
    cube = sw.cube.sel(ca="bbr+reno")
    assert sw.cube.rate.dims == ("ca", "rep") and sw.cube.attrs["steady"] == "500ms"
    # the testbed was reshaped for the points: 20 Mbit/s (it is up at 100), shared by the two algorithms
    assert all(10 < float(v) <= 20.5 for v in cube.rate.values)
    assert sorted(map(str, sw.cube.cc.values)) == ["bbr", "reno"] and list(cube.grp_ca.values[0]) == ["bbr", "reno"]
    for rep in (0, 1):  # each point's algorithms: shares that add up to 1, both delivering
        shares = cube.cc_share.sel(rep=rep)
        assert float(shares.sum()) == pytest.approx(1.0) and (shares > 0).all() and (cube.cc_rate.sel(rep=rep) > 0).all()
        assert 10 < float(cube.cc_rate.sel(rep=rep).sum()) <= 20.5  # together, the bottleneck's 20 Mbit/s
    st = sw.stats(warn=False).sel(ca="bbr+reno")
    for cc in ("bbr", "reno"):  # n beside each interval, and the interval inside the measure's range
        one = st.sel(cc=cc)
        assert int(one.cc_share_n) == 2 and int(one.cc_rate_n) == 2
        assert 0 <= float(one.cc_share_lo) <= float(one.cc_share) <= float(one.cc_share_hi) <= 1
        assert 0 <= float(one.cc_rate_lo) <= float(one.cc_rate) <= float(one.cc_rate_hi)
    assert "fewer than 3 repetitions" in sw.stats(warn=False).attrs["warning"]

    # what shaped each point is in its dataset: the bottleneck, each host's RTT, the mix, the seed, tools, qdiscs
    ds = netesto.open_experiment(out / recs[0]["experiments"][0])
    shape = json.loads(ds.attrs["testbed"])
    assert shape["bw"] == 20_000_000 and shape["rtt"] == 10.0 and shape["host_rtt"] == {"h3": 30.0}
    assert json.loads(ds.attrs["defines"])["ca2"] == "reno" and ds.attrs["seed"] >= 0 and ds.attrs["steady"] == "500ms"
    assert "python" in json.loads(ds.attrs["tools"])["h1"] and "qdisc" in json.loads(ds.attrs["qdiscs"])["h1"]
    assert float(netesto.combine([ds]).bw.values[0]) == 20e6
    # each group at its own RTT: bbr from h2 at 10 ms, reno from h3 at 30 ms (data and ACK paths both delayed)
    assert ds.base_rtt.values.tolist() == [10.0, 30.0] and list(ds.grp_host.values) == ["h2", "h3"]
    assert 9.5 <= float(ds.steady_min_rtt.values[0]) <= 13 and 29.5 <= float(ds.steady_min_rtt.values[1]) <= 34

    report = out / "sweep.html"
    assert broken_links(report) == []
    page = report.read_text()
    assert "<th>kernel</th>" in page and "python 3." in page and "congestion_control=" in page  # the hosts' facts
    assert "nosuchcc" in page  # the failed points and why
    hrefs = links(report)  # every point's executed notebook and experiment (a failed point's partial one too)
    assert sum(h.endswith("notebook.html") for h in hrefs) == 4 and len([e for r in recs for e in r["experiments"]]) == 2
    assert sum(h.endswith("exp.html") for h in hrefs) == len([e for r in manifest(out) for e in r["experiments"]])
    shown = show(report, tmp_path / "report.png")
    assert shown.errors == [] and painted(shown.png) > 0.02  # no console error, no CDN request
    share = next(f for f in shown.figures if f["title"].startswith("share of the bottleneck"))
    assert {"bbr", "reno"} <= set(share["renderers"])  # a line per algorithm, drawn
    assert all(g["n"] >= 1 for g in share["glyphs"]) and "n=2" in shown.text
    ok = [r for r in recs if r["status"] == "ok"]
    assert len(ok) == 2
    for rec in ok:  # each point's executed notebook stands alone, though its kernel ran the point before it
        errors, drawn, figures = frames_drawn(out / rec["html"])
        assert errors == [] and drawn == 1  # the executed notebook's plot, drawn offline
        assert figures["Congestion window"] == 2  # a line per flow

    # the analysis notebook reads this sweep
    import papermill

    done_nb = tmp_path / "analysis.ipynb"
    papermill.execute_notebook(str(NOTEBOOKS / "analysis.ipynb"), str(done_nb), parameters={"sweep_dir": str(out)},
                               cwd=str(tmp_path), progress_bar=False, kernel_name="python3")
    from netesto.report.notebook import export_html

    errors, drawn, figures = frames_drawn(export_html(done_nb))
    assert errors == [] and drawn == 1 and len(figures) == 5  # each algorithm's share, and the summary's four


def test_the_study_notebook_runs_short_end_to_end(bed, tmp_path: Path) -> None:
    """notebooks/study_bbr_buffer.ipynb with full=False: a 2-point sweep of bbr against cubic (1 and 8 BDP),
    its table, its figure and its stated outcome (the full run is by hand: docs/sweeps.md)."""
    import papermill

    import netesto
    from netesto.report.notebook import export_html

    done = tmp_path / "study.ipynb"
    papermill.execute_notebook(str(NOTEBOOKS / "study_bbr_buffer.ipynb"), str(done), cwd=str(tmp_path),
                               parameters={"testbed": bed.name, "out": str(tmp_path / "study"),
                                           "point_notebook": str(NOTEBOOKS / "sweep.ipynb")},
                               progress_bar=False, kernel_name="python3")
    sw = netesto.open_sweep(tmp_path / "study")
    assert list(sw.cube.buffer_bdp.values) == [1.0, 8.0] and sorted(map(str, sw.cube.cc.values)) == ["bbr", "cubic"]
    assert (sw.cube.status == "ok").all() and sw.cube.attrs["steady"] == "1s"
    text = done.read_text()
    assert "bbr's share " in text and " at 1 BDP to " in text and "published (Hock et al. 2017)" in text
    errors, drawn, figures = frames_drawn(export_html(done))
    assert errors == [] and drawn == 1
    assert sum(t.startswith("share of the bottleneck") for t in figures) == 1  # and the queueing delay's
    assert sum(t.startswith("goodput against queueing delay") for t in figures) == 1  # the tradeoff's
    assert strict_json_files(tmp_path / "study") >= 1 + 2 + 2
