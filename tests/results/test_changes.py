"""The dataset's ``change`` dimension from a router's link records: the agent's clock onto the dataset's."""

from __future__ import annotations

import json

import numpy as np
import xarray as xr

from netesto.results.changes import with_changes
from netesto.results.storage import open_experiment, write_netcdf

T0 = 1_800_000_000.0  # the dataset's start_wall (controller clock)
OFFSET = 0.25  # the router's clock is 250 ms ahead of the controller's


def record(**extra) -> dict:
    t0 = T0 + OFFSET + 0.002  # the flows' start in the router's clock
    return {"dev": "r-h1", "exp": "1", "host": "router", "t0": t0, "until": t0 + 4.5,
            "base": {"rate": 100e6, "delay": 10.0},
            "steps": [{"at": 0.0, "param": "rate", "value": 50e6, "start": t0 + 0.0001, "applied": t0 + 0.001,
                       "readback": 50e6},
                      {"at": 2.0, "param": "rate", "value": 10e6, "start": t0 + 2.0001, "applied": t0 + 2.0012,
                       "readback": 10e6},
                      {"at": 9.0, "param": "delay", "value": 30.0, "skipped": "after the flows' end"}],
            "trace": None,
            "ended": {"at": t0 + 4.5, "why": "until", "restored_at": t0 + 4.52, "shape": {"rate": 100e6}}, **extra}


def dataset(times: list[float] | np.ndarray = (0.0, 0.01, 0.02)) -> xr.Dataset:
    return xr.Dataset({"goodput": (("flow", "time"), np.zeros((1, len(times))))},
                      coords={"flow": ["h2-h1-1-0"], "time": list(times)},
                      attrs={"start_wall": T0, "warnings": "[]"})


def test_changes_on_the_dataset_clock_with_the_links_return(tmp_path) -> None:
    (tmp_path / "links").mkdir()
    (tmp_path / "links" / "r-h1.json").write_text(json.dumps(record()))
    ds = with_changes(dataset(), tmp_path, {"router": OFFSET, "h1": 0.0})
    assert list(ds.change_kind.values) == ["step", "step", "end"]  # the skipped step is not a change
    assert np.allclose(ds.change_time.values, [0.003, 2.0032, 4.522], atol=1e-6)  # us: the clocks are ~1e9 s
    assert np.allclose(ds.change_scheduled.values, [0.002, 2.002, 4.502], atol=1e-6)
    assert list(ds.change_value.values) == [50e6, 10e6, 100e6] and list(ds.change_readback.values) == [50e6, 10e6, 100e6]
    assert list(ds.change_param.values) == ["rate"] * 3 and list(ds.change_unit.values) == ["bit/s"] * 3
    assert ds.change_time.attrs["units"] == "s" and json.loads(ds.attrs["links"])[0]["ended"]["why"] == "until"
    write_netcdf(ds, tmp_path / "exp.nc")
    back = open_experiment(tmp_path)
    assert list(back.change_link.values) == ["r-h1"] * 3 and np.allclose(back.change_time, ds.change_time)


def test_no_records_no_dimension_and_a_broken_one_is_a_warning(tmp_path) -> None:
    assert "change" not in with_changes(dataset(), tmp_path, {}).dims
    (tmp_path / "links").mkdir()
    (tmp_path / "links" / "r-h2.json").write_text("{not json")
    ds = with_changes(dataset(), tmp_path, {})
    assert "change" not in ds.dims and "r-h2.json" in json.loads(ds.attrs["warnings"])[0]


def test_a_trace_links_offered_rate_on_the_time_grid(tmp_path) -> None:
    """``trace_rate``: what the trace offered over the 100 ms before each instant, from its epoch (the
    flows' start), while it was on."""
    (tmp_path / "links").mkdir()
    (tmp_path / "links" / "r-h1.trace").write_text("".join(f"{ms}\n" for ms in range(1, 1001) for _ in range(2)))
    t0 = T0 + OFFSET  # the trace's epoch: the dataset's 0
    doc = record(steps=[], trace={"name": "x", "file": "links/r-h1.trace", "set": t0 - 1.0},
                 ended={"restored_at": t0 + 0.5, "why": "until"})
    doc["t0"] = t0
    (tmp_path / "links" / "r-h1.json").write_text(json.dumps(doc))
    ds = with_changes(dataset(np.arange(0, 1.0, 0.05)), tmp_path, {"router": OFFSET})
    assert "change" not in ds.dims and list(ds.link.values) == ["r-h1"]
    rate = ds.trace_rate.sel(link="r-h1").values
    assert np.allclose(rate[:11], 24e6) and np.isnan(rate[11:]).all()  # 2 x 1500 B a ms; off after 0.5 s
