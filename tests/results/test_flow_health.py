"""What the flows say about the run: late and missing starts, host-limited flows, in the dataset, all.exp.out,
the rate table and the page (the live runs are in test_wire_truth.py)."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from netesto.raw.nflow import read_flow
from netesto.results import build_dataset, load_experiment
from netesto.results.expcsv import rate_table
from netesto.results.health import flow_warnings, page_context
from netesto.results.limits import HOST_LIMIT_PERCENT, limit_shares
from netesto.results.summaries import all_summary, group_summaries

DATA = Path(__file__).parent / "data"


def _copy(tmp_path: Path, exp: int = 2) -> Path:
    shutil.copytree(DATA / str(exp), tmp_path / str(exp))
    return tmp_path / str(exp)


def _rewrite_header(path: Path, **changes: object) -> None:
    """The file again with its header changed (the writer's own format: a new file, same rows)."""
    from netesto.raw.nflow import FlowWriter
    from netesto.raw.nflow_format import Column

    flow = read_flow(path)
    header = {k: v for k, v in flow.header.items() if k not in ("type", "format", "columns", "byteorder", "record")}
    header.update(changes)
    columns = [Column(name, typecode, flow.units.get(name, "")) for name, typecode, *_ in flow.header["columns"]]
    writer = FlowWriter(path, columns, header, flush_rows=1 << 20)
    writer.write_columns(flow.rows, {c.name: flow.columns[c.name].tobytes() for c in columns})
    writer.close(flow.summary or {})


def test_a_late_start_is_in_the_dataset_and_named(tmp_path: Path) -> None:
    exp = _copy(tmp_path)
    path = exp / "flows" / "h1-h2-1-0.client.nflow"
    header = read_flow(path).header
    _rewrite_header(path, flow={**header["flow"], "start_at": header["start_wall"] - 0.062})
    raw = load_experiment(exp)
    ds = build_dataset(raw)
    assert float(ds.start_late.sel(flow="h1-h2-1-0")) == pytest.approx(62.0, abs=0.01)
    assert ds.start_late.attrs["units"] == "ms"
    lines = json.loads(ds.attrs["flow_warnings"])
    assert any(line.startswith("flow h1-h2-1-0 started 62 ms after its scheduled instant") for line in lines)
    # the other flow began at its instant (its spec has none here: NaN, not named)
    assert not any("h1-h2-1-1 started" in line for line in lines)
    assert any("h1-h2-1-0 started 62 ms" in w for w in page_context(ds)["flow_warnings"])


def test_a_flow_that_never_started_is_named(tmp_path: Path) -> None:
    exp = _copy(tmp_path)
    _rewrite_header(exp / "flows" / "h1-h2-1-1.client.nflow", started=False)
    raw = load_experiment(exp)
    ds = build_dataset(raw)
    assert math.isnan(float(ds.start_late.sel(flow="h1-h2-1-1")))
    assert any(line.startswith("flow h1-h2-1-1 never started") for line in flow_warnings(ds, raw))


def test_limit_shares_add_up_and_reach_the_summaries(tmp_path: Path) -> None:
    raw = load_experiment(_copy(tmp_path))
    ds = build_dataset(raw)
    for rec in raw.flows:
        shares = limit_shares(rec.sender)
        assert sum(shares.values()) == pytest.approx(100, abs=0.01)
        assert float(ds.rwnd_limited_share.sel(flow=rec.flow_id)) == shares["rwnd_limited_share"]
    # unshaped veth: the receiving application is the limit (rwnd), named as its hosts' doing
    assert all(float(v) > HOST_LIMIT_PERCENT for v in ds.rwnd_limited_share.values)
    assert len([w for w in json.loads(ds.attrs["flow_warnings"]) if "limited by its hosts" in w]) == 2
    items = dict(all_summary(ds, 2, group_summaries(ds, raw)))
    assert float(items["rwndLimited%"]) == pytest.approx(float(ds.rwnd_limited_share.mean()), abs=0.06)
    assert float(items["sndbufLimited%"]) == pytest.approx(float(ds.sndbuf_limited_share.mean()), abs=0.06)
    table = rate_table([{"exp": "2.0", "ca": "cubic", "rate": "60000", "rwndLimited%": items["rwndLimited%"],
                         "sndbufLimited%": items["sndbufLimited%"]}])
    assert table[0].endswith("host-limited") and f"rwnd {float(items['rwndLimited%']):.0f}%" in table[1]
    ctx = page_context(ds)
    assert [row["host"] for row in ctx["limits"]] == [True, True]
    assert ctx["limits"][0]["shares"][0] == f"{float(ds.rwnd_limited_share.isel(flow=0)):.1f}"


def test_files_without_the_chrono_counters_have_no_shares(tmp_path: Path) -> None:
    raw = load_experiment(_copy(tmp_path))
    end = raw.flows[0].sender
    del end.columns["sndbuf_limited"]
    assert all(math.isnan(v) for v in limit_shares(end).values())
    assert all(math.isnan(v) for v in limit_shares(raw.flows[0].sender, "UDP_STREAM").values())
