"""netesto.report.display: the HTML rich reprs show (flow table, main plots), opened in chromium."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import xarray as xr

from tests.plots.browser import painted, show

DATA = Path(__file__).resolve().parents[1] / "results" / "data"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from netesto.results import process_experiment

    work = tmp_path_factory.mktemp("reprs")
    for exp in (1, 2):
        shutil.copytree(DATA / str(exp), work / str(exp))
        process_experiment(work, exp)
    return work


def _result(workdir: Path, exps: tuple[int, ...], errors: tuple[str, ...] = ()) -> object:
    from netesto.controller.result import ExperimentResult, RunResult

    experiments = tuple(ExperimentResult(exp=e, exp_name=f"name{e}", path=workdir / str(e), hosts=(), flows=())
                        for e in exps)
    return RunResult(workdir=workdir, experiments=experiments, errors=errors, elapsed=3.25)


def test_the_flow_table_has_a_row_per_flow_and_only_columns_with_values(workdir: Path) -> None:
    from netesto.report.display import flow_table

    ds = xr.open_dataset(workdir / "2" / "exp.nc")
    table = flow_table(ds)
    assert table.count("<tr>") == ds.sizes["flow"] + 1
    assert "rate (Mbit/s)" in table and "p99 latency" not in table  # experiment 2: streams only
    assert "p99 latency (ms)" in flow_table(xr.open_dataset(workdir / "1" / "exp.nc"))


def test_a_run_and_an_experiment_show_in_a_browser(workdir: Path, tmp_path: Path) -> None:
    """Both reprs on one page, as in a notebook with two outputs: the first brings bokeh inline and
    the second draws with it, nothing loads from the network, every plot draws, the run's broken
    experiment is a row."""
    from netesto.report.display import experiment_html, run_html

    result = _result(workdir, (1, 2, 9), errors=("h3: agent <h3> unreachable",))  # no 9/ at all
    run = run_html(result)
    assert "3.2 s, failed" in result._repr_html_()  # what a notebook shows for a run's result
    assert result.experiments[1]._repr_html_().startswith('<div class="netesto-result">')
    assert "agent &lt;h3&gt; unreachable" in run and "no data" in run and "3.2 s, failed" in run
    one = experiment_html(xr.open_dataset(workdir / "2" / "exp.nc"))
    assert run.count("BEGIN bokeh.min.js") == 1 and "BEGIN bokeh.min.js" not in one
    page = tmp_path / "reprs.html"
    page.write_text(f"<!DOCTYPE html><html><head><meta charset='utf-8'></head><body>{run}{one}</body></html>")
    shown = show(page, tmp_path / "reprs.png")
    assert shown.errors == []
    titles = [f["title"] for f in shown.figures]
    # experiments 1 and 2 of the run, then experiment 2 alone: goodput, cwnd, rtt each
    assert sorted(titles) == sorted(["Goodput (200 ms mean)", "Congestion window", "Smoothed RTT"] * 3)
    assert all(f["renderers"] for f in shown.figures)
    assert "Experiment 2 name2" in shown.text and painted(shown.png) > 0.02
