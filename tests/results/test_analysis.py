"""The analysis API, the exp.py script format, `netesto table`, sweeps and fairness."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from netesto.errors import ResultsError
from netesto.results import (
    Table,
    combine,
    convergence_time,
    fairness_by,
    figure8,
    grid,
    jain_index,
    max_min_ratio,
    open_experiments,
    process_experiment,
    window_goodput,
)
from netesto.report.table import render_page, run_script
from netesto.results.expcsv import aggregate, parse_fields
from netesto.results.safeexpr import evaluate

FIG8_COLUMNS = ["exp", "expName", "test", "instances", "ca", "cwnd", "pingRtt", "rate",
                "rateMin", "rateMax", "retransPkts%", "fairness"]


def test_figure8_table_from_experiments(processed: Path) -> None:
    t = figure8(Table.read(processed))
    df = t.to_pandas()
    assert list(df.columns) == FIG8_COLUMNS
    assert list(df["exp"]) == ["1.0", "2.0", "3.0"]
    datasets = open_experiments(processed)
    for _, row in df.iterrows():
        ds = datasets[int(float(row["exp"]))]
        assert row["rate"] == pytest.approx(float(ds.rate.sum()), abs=0.2)
        assert row["rateMin"] == pytest.approx(float(ds.rate.min()), abs=0.06)
        assert row["rateMax"] == pytest.approx(float(ds.rate.max()), abs=0.06)
        assert row["fairness"] == pytest.approx(row["rateMax"] / row["rateMin"])
        assert row["fairness"] == pytest.approx(max_min_ratio(ds.rate.values), rel=0.02)  # 0.1 rounding
        assert row["cwnd"] == pytest.approx(float(ds.mean_cwnd.mean()), abs=0.1)
        assert row["pingRtt"] == pytest.approx(round(float(ds.ping_rtt_mean.mean())), abs=1)
        expected = 100 * float(ds.retrans_total.sum()) / float(ds.packets_sent.sum())
        assert row["retransPkts%"] == pytest.approx(expected, abs=0.006)
    assert list(df["ca"]) == ["cubic/bbr", "cubic", "bbr"]
    assert list(df["instances"])[1:] == [2, 2]
    html = t.to_html()
    assert '<a href="2/exp.html">2.0</a>' in html and "fairness" in html


def test_select_cols_newcol_average(processed: Path) -> None:
    t = Table.read(processed)
    assert len(t) == 6  # 1.0 1.1 1.2 1.3 2.0 3.0
    streams = t.select('test == "TCP_STREAM" and rate > 0')
    assert set(streams.df["exp"]) == {"1.1", "1.2", "2.0", "3.0"}
    assert set(t.select('ca in ["bbr"]').df["exp"]) == {"1.2", "3.0"}
    assert set(t.select('has(exp, ".0") and not has(ca, "/")').df["exp"]) == {"2.0", "3.0"}
    t2 = t.new_col("Gbps", "rate / 1000").new_col("label", 'ca & "-" & instances')
    assert np.allclose(t2.df["Gbps"], t.df["rate"] / 1000)
    assert t2.df["label"].iloc[4] == "cubic-2"
    assert list(t2.cols("exp", "Gbps").df.columns) == ["exp", "Gbps"]
    avg = t.select('has(exp, ".0")').average(["testType"])
    assert list(avg.df["avgCnt"]) == [3]
    assert avg.df["rate"].iloc[0] == pytest.approx(t.select('has(exp, ".0")').df["rate"].mean())
    assert avg.df["exp"].iloc[0] == "..."
    by_int = t.average(["exp[int]"])
    assert list(by_int.df["avgCnt"]) == [4, 1, 1]
    assert isinstance(t.to_pandas(), pd.DataFrame)


@pytest.mark.parametrize("expr, msg", [
    ("__import__('os').system('true')", "only simple calls|unknown function"),
    ("rate.__class__", "Attribute is not allowed"),
    ("rate ** 99", "Pow is not allowed"),
    ("lambda: 1", "Lambda is not allowed"),
    ("nosuchcol > 1", "unknown column 'nosuchcol'"),
    ("rate >", "syntax error"),
])
def test_expressions_are_safe(processed: Path, expr: str, msg: str) -> None:
    with pytest.raises(ResultsError, match=msg):
        Table.read(processed).select(expr)


def test_safe_evaluator_values() -> None:
    cols = {"a": pd.Series([1.0, 2.0, 4.0]), "b": pd.Series(["0", "2", "0"]), "ca": pd.Series(["x", "y", "x"])}
    assert list(evaluate("a / b", cols).fillna(-1)) == [-1, 1.0, -1]
    assert list(evaluate('(a > 1) and ca == "x"', cols)) == [False, False, True]
    assert list(evaluate('col("a") * 2 + 1', cols)) == [3, 5, 9]


def test_exp_script_and_netesto_table(processed: Path, tmp_path: Path) -> None:
    script = Path(__file__).parent / "data" / "figure8.script"
    page = run_script(script, {"dir": str(processed)})
    assert page.count("<table") == 1 and page.count('<div id="plotRate"><div id="') == 1
    assert "Retransmissions and Fairness" in page and "Fairness = Fastest/Slowest BW" in page
    for col in FIG8_COLUMNS:
        assert f"<th>{col}</th>" in page
    assert ">1.3<" not in page and ">2.0</a>" in page
    out = tmp_path / "fig8.html"
    proc = subprocess.run([sys.executable, "-m", "netesto", "table", str(script), f"dir={processed}",
                           "-o", str(out)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    # the same page, but for the ids bokeh gives the plot's models and divs afresh on each render
    ids = re.compile(r"\b(p\d{4,}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\b")
    assert ids.sub("ID", out.read_text()) == ids.sub("ID", page)
    bad = tmp_path / "bad.script"
    bad.write_text(f"File={processed}/exp\nNewCol=x=rate ** 2\n")
    proc = subprocess.run([sys.executable, "-m", "netesto", "table", str(bad)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "bad.script:2: NewCol" in proc.stderr


def test_original_select_syntax(processed: Path, tmp_path: Path) -> None:
    s = tmp_path / "s.script"
    s.write_text(
        f"File={processed}/exp\n"
        "Select=ca==bbr;ca==cubic,instances>=2\n"
        "Cols=exp,ca,\\\ninstances\n"
        "doTable\n"
        "Select=all\nSelect=rate<>:1000\nCols=exp\ndoTable\n"
        "Select=all\nSelect=exp[has]^1.,ca[hasnot]bbr\ndoTable\nend\ndoTable\n"
    )
    page = run_script(s)
    tables = page.split("<table")[1:]
    assert len(tables) == 3
    assert all(e in tables[0] for e in (">1.2<", ">2.0<", ">3.0<")) and ">1.1<" not in tables[0]
    # Only the RR flow (about 100 Mbit/s) is below 1000 Mbit/s on loopback.
    assert ">1.3<" in tables[1] and tables[1].count("<tr") == 2
    # "1." prefix, and ca not containing bbr ("cubic/bbr" of 1.0 does).
    assert tables[2].count("<tr") == 3 and ">1.1<" in tables[2] and ">1.3<" in tables[2]


def test_plots(processed: Path) -> None:
    import holoviews as hv

    t = figure8(Table.read(processed))
    assert isinstance(t.plot("instances", "rate", y2="fairness", series="ca"), hv.Overlay)
    assert isinstance(t.plot("instances", "rate", y2="fairness", series="ca", kind="line"), hv.Overlay)
    with pytest.raises(ResultsError, match="unknown column 'nope'"):
        t.plot("instances", "nope")
    with pytest.raises(ResultsError, match="kind must be"):
        t.plot("instances", "rate", kind="pie")


def test_sweep_combine_and_grid(processed: Path) -> None:
    datasets = open_experiments(processed)
    bw = {1: {"bw": "10gbit"}, 2: {"bw": "10gbit"}, 3: {"bw": "1gbit"}}
    c = combine(datasets, params=bw)
    assert list(c.exp.values) == [1, 2, 3]
    assert list(c.ca.values) == ["cubic/bbr", "cubic", "bbr"]
    assert c.rate.attrs["units"] == "Mbit/s"
    assert float(c.rate.sel(exp=2)) == pytest.approx(float(datasets[2].rate.sum()))  # equal durations
    # flows of different durations: the experiment's rate is exp.csv's (sumRateDur), not the plain sum
    ds = datasets[1]
    durs = [20.0, 10.0] + [5.0] * (ds.sizes["flow"] - 2)
    uneven = ds.assign_coords(dur=("flow", durs))
    row = aggregate([kv for d, r in zip(durs, uneven.rate.values) for kv in (("dur", str(d)), ("rate", str(r)))],
                    parse_fields("dur:one\nrate:sumRateDur\n"))
    assert float(combine([uneven]).rate[0]) == pytest.approx(float(row["rate"]), abs=0.05)
    assert float(combine([uneven]).rate[0]) < float(uneven.rate.sum()) - 1
    assert list(c.testType.values) == ["3Stream1"] * 3
    g = grid(c, ["ca", "bw"])
    assert g.rate.dims == ("ca", "bw")
    assert float(g.rate.sel(ca="bbr", bw="1gbit")) == pytest.approx(float(c.rate.sel(exp=3)))
    assert math.isnan(float(g.rate.sel(ca="bbr", bw="10gbit")))
    assert int(g["count"].sel(ca="cubic", bw="10gbit")) == 1
    with pytest.raises(ResultsError, match="no parameter rtt"):
        grid(c, ["ca", "rtt"])


def test_fairness_metrics(processed: Path) -> None:
    assert jain_index([5, 5, 5, 5]) == 1.0
    assert jain_index([1, 0, 0, 0]) == pytest.approx(0.25)
    assert max_min_ratio([2, 1]) == 2.0 and max_min_ratio([2, 0]) == math.inf
    ds = open_experiments(processed)[2]
    f = fairness_by(ds, "group")
    assert float(f.jain.sel(group=1)) == pytest.approx(jain_index(ds.rate.values))
    # Goodput over the whole run equals the delivered bytes / run length.
    end = float(ds.time[-1]) + ds.attrs["interval"]
    w = window_goodput(ds, 0.0, end)
    assert np.allclose(w.values, ds.bytes.values * 8 / end, rtol=0.05)
    half = window_goodput(ds, 0.25, 0.75, flow="h1-h2-1-0")
    assert 0 < half < 2 * float(ds.rate.sel(flow="h1-h2-1-0")) * 1e6
    c = convergence_time(ds, "h1-h2-1-1", tolerance=0.5, hold=0.2)
    assert math.isnan(c) or 0 <= c <= 1.1


def test_convergence_after_a_join() -> None:
    """Flow b joins at 1 s; shares are equal from 1.5 s on: converges in 0.5 s."""
    t = np.arange(0, 3, 0.01)
    a = np.where(t < 1.5, 100.0, 50.0)
    b = np.where(t < 1.0, np.nan, np.where(t < 1.5, 10.0, 50.0))
    ds = xr.Dataset({"goodput": (("flow", "time"), np.vstack([a, b]))},
                    coords={"flow": ["a", "b"], "time": t, "start": ("flow", [0.0, 1.0])},
                    attrs={"interval": 0.01})
    assert convergence_time(ds, "b", tolerance=0.1, hold=0.3, smooth=0.01) == pytest.approx(0.5)
    ds2 = ds.copy()
    ds2["goodput"] = ds.goodput.where(ds.time < 1.5, 10.0).where(ds.flow == "b", 100.0)
    assert math.isnan(convergence_time(ds2, "b", tolerance=0.1, hold=0.3, smooth=0.01))
    # b leaves at 2 s without ever reaching its share: a alone afterwards is no convergence.
    a3 = np.full_like(t, 100.0)
    b3 = np.where((t >= 1.0) & (t < 2.0), 10.0, np.nan)
    ds3 = ds.copy()
    ds3["goodput"] = (("flow", "time"), np.vstack([a3, b3]))
    assert math.isnan(convergence_time(ds3, "b", tolerance=0.1, hold=0.3, smooth=0.01))


def test_summaries_of_many_experiments(processed: Path) -> None:
    t = Table.from_workdir(processed)
    assert list(t.df["exp"]) == ["1.0", "2.0", "3.0"]
    assert np.allclose(t.df["rate"], Table.read(processed).select('has(exp, ".0")').df["rate"])


def test_summaries_carry_desc_and_other_as_exp_csv(workdir: Path) -> None:
    """The summaries of the experiments equal exp.csv's N.0 rows, the DESC
    and OTHER pairs (testType, bw, ...) included."""
    for exp in (1, 2, 3):
        process_experiment(workdir, exp, desc=f"run {exp}", other="testType=3Stream1,bw=10mbit")
    csv_rows = Table.read(workdir).select('has(exp, ".0")').df.reset_index(drop=True)
    for t in (Table.from_workdir(workdir), open_experiments(workdir).summaries()):
        df = t.df.reset_index(drop=True)
        assert list(df.columns) == list(csv_rows.columns)
        for c in df.columns:
            assert list(df[c].astype(str)) == list(csv_rows[c].astype(str)), c
        assert list(df["desc"]) == ["run 1", "run 2", "run 3"] and set(df["testNote"]) == {"recorded"}
    # process_experiment noted them in experiment.json: no exp.nc is opened for them
    (workdir / "2" / "exp.nc").unlink()
    assert list(Table.from_workdir(workdir).df["testType"]) == ["3Stream1"] * 3
    # a directory processed before that note existed: exp.nc's; without either, the run's own
    import json

    for exp in (2, 3):  # 3 still has its exp.nc, 2 has not
        meta_path = workdir / str(exp) / "experiment.json"
        meta = json.loads(meta_path.read_text())
        del meta["processed"]
        meta_path.write_text(json.dumps(meta))
    df = Table.from_workdir(workdir).df
    assert list(df["testNote"]) == ["recorded"] * 3 and list(df["testType"]) == ["3Stream1", "", "3Stream1"]


def test_open_experiments_is_lazy(processed: Path) -> None:
    exps = open_experiments(processed)
    assert len(exps) == 3 and list(exps) == [1, 2, 3] and not exps._open
    assert exps[2].attrs["exp"] == 2 and list(exps._open) == [2]
    with pytest.raises(KeyError):
        exps[9]
    assert list(exps.combine().exp.values) == [1, 2, 3]
    assert list(exps.summaries().df["exp"]) == ["1.0", "2.0", "3.0"]


def test_has_matches_large_numbers_as_the_csv_writes_them(processed: Path, tmp_path: Path) -> None:
    """``[has]``/``has()`` look at a number's digits (33554432), never at a
    scientific form (3.35544e+07) or one cut to 6 digits."""
    t = Table.read(processed)
    text = (processed / "exp.csv").read_text()
    tcp_rmem = str(int(t.df["tcpRmem"].iloc[0]))
    assert len(tcp_rmem) > 6 and f",{tcp_rmem}.0," in text
    rows = len(t)
    assert len(t.select(f'has(tcpRmem, "{tcp_rmem}")')) == rows
    assert len(t.select('has(rate, ".")')) == rows  # no row's rate is a whole number
    assert len(t.select(f'startswith(tcpRmem, "{tcp_rmem[:4]}")')) == rows
    s = tmp_path / "s.script"
    s.write_text(f"File={processed}/exp\nSelect=tcpRmem[has]{tcp_rmem}\nCols=exp\ndoTable\n"
                 f"Select=all\nSelect=tcpRmem[hasnot]{tcp_rmem}\nCols=exp\ndoTable\n"
                 f"Select=all\nAverage=tcpRmem[has:{tcp_rmem}]\nCols=exp,avgCnt\ndoTable\n")
    tables = run_script(s).split("<table")[1:]
    assert tables[0].count("<tr") == rows + 1
    assert tables[1].count("<tr") == 1
    assert f">{rows}<" in tables[2]


def test_plot_axes_ignore_infinite_values() -> None:
    """A starved flow makes fairness = rateMax / 0 = inf: the axes still
    scale to the finite values, so every bar and diamond is inside the frame."""
    from bokeh.models import Scatter, VBar

    from netesto.plots.page import figures

    t = Table.from_records([
        {"exp": "1.0", "ca": "cubic", "instances": 1, "rate": 10.0, "fairness": math.inf},
        {"exp": "2.0", "ca": "bbr", "instances": 2, "rate": 30.0, "fairness": 2.0},
        {"exp": "3.0", "ca": "reno", "instances": 4, "rate": 20.0, "fairness": 1.5},
    ])
    for y1, y2 in (("fairness", None), ("rate", "fairness")):
        (fig,) = figures(t.plot("instances", y1, y2=y2, series="ca"))
        (bars,) = [r for r in fig.renderers if isinstance(r.glyph, VBar)]
        tops = list(bars.data_source.data[bars.glyph.top])
        assert sorted(tops) == ([1.5, 2.0] if y1 == "fairness" else [10.0, 20.0, 30.0])
        diamonds = [r for r in fig.renderers if isinstance(r.glyph, Scatter) and r.y_range_name == "y2"]
        if y2:
            (d,) = diamonds
            values = list(d.data_source.data["y2"])
            assert sorted(values) == [1.5, 2.0] and values[0] <= fig.extra_y_ranges["y2"].end
            # each diamond over its own bar: (category, series) as the bars' factors
            def at(values: object) -> set[tuple[str, ...]]:
                return {tuple(str(p) for p in v) for v in values}  # type: ignore[attr-defined]

            assert at(d.data_source.data["x"]) <= at(bars.data_source.data[bars.glyph.x])
            assert len(at(d.data_source.data["x"])) == 2
        else:
            assert diamonds == []


def test_y1units_scale_ignores_infinite_values(tmp_path: Path) -> None:
    """Y1Units picks the largest factor below the largest finite value (an inf
    would pick 'secs' and shrink every bar to nothing)."""
    (tmp_path / "t.csv").write_text("exp,x,lat\n1.0,a,inf\n2.0,b,2000\n3.0,c,3000\n")
    s = tmp_path / "s.script"
    s.write_text(f"File={tmp_path}/t\nplotX=x\nplotY1=lat\nY1Units=1=us,1000=ms,1000000=secs\ndoPlot\n")
    from netesto.results.expscript import ExpScript

    script = ExpScript(tmp_path)
    script.run(s.read_text())
    page = render_page(script)
    (bars,) = script.plots
    assert sorted(bars.dimension_values("lat")) == [2.0, 3.0] and 'id="plot1"' in page
