"""Datasets built from the recorded real flows: dims, units, values vs what was sent."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from netesto.results import build_dataset, load_experiment, open_experiment, open_experiments
from netesto.results.storage import write_netcdf
from netesto.results.schema import FLOW_SUMMARIES, SCHEMA_VERSION, TIME_SERIES
from netesto.raw.columns import FLOW_COLUMNS
from netesto.raw.nflow import FlowWriter, read_flow


def _ds(workdir: Path, exp: int = 1) -> xr.Dataset:
    return build_dataset(load_experiment(workdir / str(exp)))


def test_dims_coords_units(workdir: Path) -> None:
    ds = _ds(workdir)
    assert ds.sizes["flow"] == 3
    assert list(ds.flow.values) == ["h1-h2-1-0", "h1-h2-2-0", "h1-h2-3-0"]
    assert list(ds.ca.values) == ["cubic", "bbr", "cubic"]
    assert list(ds.test.values) == ["TCP_STREAM", "TCP_STREAM", "TCP_RR"]
    assert list(ds.group.values) == [1, 2, 3]
    # 1 s flows sampled every 10 ms: about 100 grid points, evenly spaced.
    assert 95 <= ds.sizes["time"] <= 130
    assert np.allclose(np.diff(ds.time.values), 0.01)
    assert ds.time.attrs["units"] == "s"
    for spec in TIME_SERIES:
        assert ds[spec.name].dims == ("flow", "time")
        assert ds[spec.name].attrs["units"] == spec.units
    for spec in FLOW_SUMMARIES:
        assert ds[spec.name].dims == ("flow",)
        assert ds[spec.name].attrs["units"] == spec.units
    assert ds.attrs["schema_version"] == SCHEMA_VERSION
    assert ds.attrs["exp"] == 1
    assert "record_fixtures" in ds.attrs["script"]
    assert json.loads(ds.attrs["hosts"])["h1"]["clock_offset"] == 0.0
    # Flows all started within the first 100 ms of the experiment.
    assert 0.0 <= float(ds.start.min()) and float(ds.start.max()) < 0.1


def test_values_match_what_was_sent(workdir: Path) -> None:
    raw = load_experiment(workdir / "1")
    ds = build_dataset(raw)
    for rec in raw.flows:
        f = ds.sel(flow=rec.flow_id)
        sent = rec.client.summary["bytes_tx"]
        got = rec.server.summary["bytes_rx"]
        assert got == sent > 0
        # goodput counts what the receiver read; what the sender's socket accepted is its own variable
        assert float(f.bytes) == got and float(f.bytes_accepted) == sent
        assert float(f.duration) == pytest.approx(1.0, abs=0.1)
        assert float(f.rate) == pytest.approx(got * 8 / float(f.duration) / 1e6)
        # Integrating the goodput series gives back the delivered bits.
        bits = float(f.goodput.fillna(0).sum()) * ds.attrs["interval"]
        assert bits == pytest.approx(got * 8, rel=1e-6)
        assert float(f.mean_cwnd) >= 1 and float(f.mean_rtt) > 0
        assert float(f.packets_sent) >= got / 65536
    rr = ds.sel(flow="h1-h2-3-0")
    client = raw.flows[2].client
    assert float(rr.transactions_total) == client.summary["transactions"]
    assert raw.flows[2].server.summary["bytes_rx"] == 1000 * client.summary["transactions"]
    assert float(rr.lat_count) == client.summary["latency_us"]["count"]
    assert 0 < float(rr.lat_min_total) <= float(rr.lat_p50_total) <= float(rr.lat_p99_total) <= float(rr.lat_max_total)
    tps = float(rr.transactions.mean())
    assert tps == pytest.approx(client.summary["transactions"] / float(rr.duration), rel=0.15)
    # Stream flows have no latency samples.
    assert np.isnan(ds.lat_p50.sel(flow="h1-h2-1-0")).all()
    # These recordings predate the sampler's CPU in the summaries: NaN, not 0.
    assert np.isnan(ds.local_sampling_cpu.values).all() and np.isnan(ds.remote_sampling_cpu.values).all()
    # bbr's pacing rate is finite and positive; ping RTT of the pair is there.
    assert float(ds.pacing_rate.sel(flow="h1-h2-2-0").max()) > 0
    assert float(ds.ping_rtt_mean[0]) > 0
    assert ds.host_delta.sel(node="h1", counter="Tcp.OutSegs") > 0


def test_netcdf_round_trip(workdir: Path) -> None:
    ds = _ds(workdir)
    path = write_netcdf(ds, workdir / "1" / "exp.nc")
    back = open_experiment(path)
    xr.testing.assert_identical(ds, back)
    assert back.goodput.attrs["units"] == "bit/s"
    assert back.rtt.dtype == np.float32
    # An experiment directory opens its exp.nc; open_experiments finds it.
    assert open_experiment(workdir / "1").attrs["exp"] == 1
    assert list(open_experiments(workdir)) == [1]


def _rewrite(path: Path, *, shift: float = 0.0, extra: dict[str, int] | None = None) -> None:
    """Rewrite a recorded .nflow with its times shifted and/or columns added
    (constant values) - the file keeps its own columns otherwise."""
    flow = read_flow(path)
    extra = extra or {}
    cols = [c for c in FLOW_COLUMNS if c.name in flow.columns or c.name in extra]
    header = {k: v for k, v in flow.header.items() if k not in ("type", "format", "columns", "byteorder")}
    header["start_wall"] = header["start_wall"] + shift
    with FlowWriter(path, cols, header) as w:
        for i in range(flow.rows):
            row = [flow.columns[c.name][i] if c.name in flow.columns else extra[c.name] for c in cols]
            row[0] += shift
            w.append(row)
        w.close(flow.summary)


def test_clock_offsets_are_applied(workdir: Path) -> None:
    """A server agent whose clock runs 3 s ahead gives the same dataset once
    experiment.json records its offset."""
    before = _ds(workdir)
    for p in (workdir / "1" / "flows").glob("*.server.nflow"):
        _rewrite(p, shift=3.0)
    meta_path = workdir / "1" / "experiment.json"
    meta = json.loads(meta_path.read_text())
    meta["hosts"]["h2"]["clock_offset"] = 3.0
    meta_path.write_text(json.dumps(meta))
    after = _ds(workdir)
    assert after.sizes == before.sizes
    np.testing.assert_allclose(after.goodput.values, before.goodput.values, rtol=1e-6)
    np.testing.assert_allclose(after.rate.values, before.rate.values, rtol=1e-9)
    # Without the offset the grid would stretch by 3 s.
    meta["hosts"]["h2"]["clock_offset"] = 0.0
    meta_path.write_text(json.dumps(meta))
    assert _ds(workdir).sizes["time"] > before.sizes["time"] + 250


def test_rr_packets_count_each_request(workdir: Path) -> None:
    """1000-byte requests on loopback (mss ~65 KB) are one segment each."""
    raw = load_experiment(workdir / "1")
    ds = build_dataset(raw)
    rr = ds.sel(flow="h1-h2-3-0")
    trans = raw.flows[2].client.summary["transactions"]
    assert float(rr.packets_sent) >= trans
    assert float(rr.packets_sent) == pytest.approx(trans, rel=0.01)


def test_packets_from_data_segs_out_when_recorded(workdir: Path) -> None:
    """Files with tcp_info data_segs_out give the kernel's count; older ones the estimate."""
    if "data_segs_out" not in {c.name for c in FLOW_COLUMNS}:
        pytest.skip("the column contract has no data_segs_out")
    old = _ds(workdir)
    assert "data_segs_out" not in read_flow(workdir / "1" / "flows" / "h1-h2-1-0.client.nflow").columns
    _rewrite(workdir / "1" / "flows" / "h1-h2-1-0.client.nflow", extra={"data_segs_out": 4321})
    new = _ds(workdir)
    assert float(new.packets_sent.sel(flow="h1-h2-1-0")) == 4321
    for f in ("h1-h2-2-0", "h1-h2-3-0"):
        assert float(new.packets_sent.sel(flow=f)) == float(old.packets_sent.sel(flow=f))


def _renamed(src: Path, dest: Path, names: dict[str, str], clock_offset: float) -> Path:
    """A copy of an experiment with its hosts renamed (file names, flow ids,
    experiment.json) and every host's clock ``clock_offset`` s ahead."""
    import shutil

    def rename(text: str) -> str:
        for a, b in names.items():
            text = text.replace(a, b)
        return text

    shutil.copytree(src, dest)
    for p in sorted(dest.rglob("*")):
        if p.is_file() and rename(p.name) != p.name:
            p.rename(p.with_name(rename(p.name)))
    meta = json.loads(rename((dest / "experiment.json").read_text()))
    for h in meta["hosts"].values():
        h["clock_offset"] = clock_offset
    (dest / "experiment.json").write_text(json.dumps(meta))
    return dest


@pytest.mark.parametrize("names", [{"h1": "h1", "h2": "h2"}, {"h1": "lab-a", "h2": "lab-b"}])
def test_ping_follows_its_hosts_clock_offset(workdir: Path, tmp_path: Path, names: dict[str, str]) -> None:
    """Every host's clock 0.3 s ahead: flows and pings move together, so the
    ping line of each flow is the same as without the offset - also for host
    names with '-' (the ping file <client>-<server>.nflow is not split at it)."""
    base = build_dataset(load_experiment(_renamed(workdir / "2", tmp_path / "a" / "2", names, 0.0)))
    ahead = build_dataset(load_experiment(_renamed(workdir / "2", tmp_path / "b" / "2", names, 0.3)))
    assert list(base.host.values) == [names["h1"]] * 2
    assert np.isfinite(base.ping_rtt.values).sum() > 50
    assert np.array_equal(base.goodput.values, ahead.goodput.values, equal_nan=True)
    assert np.array_equal(base.ping_rtt.values, ahead.ping_rtt.values, equal_nan=True)
