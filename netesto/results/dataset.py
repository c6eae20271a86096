"""Per-flow records -> the experiment :class:`xarray.Dataset` (schema in schema.py).

Every flow's samples are put on one time grid: the controller-clock time of a
sample is ``t_wall - clock_offset(host)``; the experiment starts at the
earliest such time ``t0``; the grid step is the smallest sampling interval.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
from array import array
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

import numpy as np
import xarray as xr

from netesto.errors import ResultsError
from netesto.results.hostfiles import HostSnapshot
from netesto.results.load import ExperimentRaw, FlowRecord, load_experiment, short_host
from netesto.results.schema import (
    FLOW_COORDS,
    FLOW_SUMMARIES,
    SCHEMA_VERSION,
    TIME_ATTRS,
    TIME_SERIES,
    var_attrs,
)
from netesto.raw.nflow import RawFlow
from netesto.vocab import RR_TESTS

_INFINITE_SSTHRESH = 0x7FFFFFFF
RATE_WINDOW = 1.0  # seconds: window of the per-flow rate_min / rate_max


def col(flow: RawFlow | None, name: str) -> np.ndarray:
    """A column of a raw flow as a numpy array (float64; empty if absent)."""
    if flow is None or name not in flow.columns:
        return np.empty(0)
    arr: array = flow.columns[name]
    return np.frombuffer(arr, dtype=np.dtype(arr.typecode)).astype(np.float64) if len(arr) else np.empty(0)


def _num(value: Any, default: float = math.nan) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return default
    return out


class _Grid:
    def __init__(self, t0: float, interval: float, n: int) -> None:
        self.t0, self.interval, self.n = t0, interval, n

    def index(self, t: np.ndarray) -> np.ndarray:
        return np.rint((t - self.t0) / self.interval).astype(np.int64)


def _times(raw: ExperimentRaw, flow: RawFlow | None, host: str) -> np.ndarray:
    t = col(flow, "t_wall")
    return t - raw.clock_offset(host) if t.size else t


def _host_of(rec: FlowRecord, side: RawFlow | None) -> str:
    if side is not None and side is rec.server:
        return str(rec.meta.get("server", side.header.get("host", "")))
    return str(rec.meta.get("host", side.header.get("host", "") if side else ""))


def _summary(flow: RawFlow | None) -> dict[str, Any]:
    return dict(flow.summary or {}) if flow is not None else {}


def _cpu(flow: RawFlow | None) -> float:
    s = _summary(flow)
    for key in ("cpu", "cpu_percent", "local_cpu"):
        if key in s:
            v = s[key]
            # The engine reports {"scope", "seconds", "percent"}.
            return _num(v.get("percent")) if isinstance(v, dict) else _num(v)
    return math.nan


def _sampling_cpu(flow: RawFlow | None) -> float:
    """The share of the worker's CPU its sampler took (built-in engine summaries only)."""
    cpu = _summary(flow).get("cpu")
    return _num(cpu.get("sampling_percent")) if isinstance(cpu, dict) else math.nan


def _latency(flow: RawFlow | None) -> dict[str, Any] | None:
    s = _summary(flow)
    for key in ("latency_us", "latency"):
        if isinstance(s.get(key), dict):
            return s[key]
    return None


def _place(out: np.ndarray, row: int, idx: np.ndarray, values: np.ndarray, n: int) -> None:
    ok = (idx >= 0) & (idx < n)
    out[row, idx[ok]] = values[ok]  # duplicate indices: the later sample wins


def _data_side(rec: FlowRecord) -> tuple[RawFlow | None, str]:
    """The end and counter that measure delivered bytes: the receiver's
    app_bytes_rx, or the sender's app_bytes_tx without a receiver file."""
    recv = rec.receiver
    if recv is not None and recv.rows:
        return recv, "app_bytes_rx"
    return rec.sender, "app_bytes_tx"


def _start_time(raw: ExperimentRaw, rec: FlowRecord, side: RawFlow | None) -> float:
    start = _num((side.header if side else {}).get("start_wall"))
    return start - raw.clock_offset(_host_of(rec, side)) if math.isfinite(start) else math.nan


def _goodput_series(rec: FlowRecord, raw: ExperimentRaw) -> tuple[np.ndarray, np.ndarray]:
    """(times, cumulative bytes) in the data direction, starting with
    (flow start, 0) when the header records the start."""
    side, name = _data_side(rec)
    t = _times(raw, side, _host_of(rec, side))
    b = col(side, name)
    if t.size == 0:
        return t, b
    start = _start_time(raw, rec, side)
    if math.isfinite(start) and start < t[0]:
        t = np.concatenate(([start], t))
        b = np.concatenate(([0.0], b))
    return t, b


def _goodput_on_grid(t: np.ndarray, b: np.ndarray, grid: "_Grid") -> tuple[np.ndarray, np.ndarray]:
    """Goodput (bit/s) per grid step: cumulative bytes interpolated at the
    grid times, differenced. Integrates exactly to the bytes delivered,
    whatever the sampling jitter."""
    if t.size < 2:
        return np.empty(0, dtype=np.int64), np.empty(0)
    # Grid points from just before the first sample to just after the last:
    # np.interp holds the end values outside, so nothing delivered is lost.
    k0 = max(0, int(math.floor((t[0] - grid.t0) / grid.interval + 1e-9)))
    k1 = min(grid.n - 1, int(math.ceil((t[-1] - grid.t0) / grid.interval - 1e-9)))
    if k1 <= k0:
        return np.empty(0, dtype=np.int64), np.empty(0)
    ks = np.arange(k0, k1 + 1)
    cum = np.interp(grid.t0 + ks * grid.interval, t, b)
    return ks[1:], np.diff(cum) * 8.0 / grid.interval


def _window_rates(t: np.ndarray, b: np.ndarray, window: float) -> np.ndarray:
    """Mbit/s over consecutive ``window``-second windows fully inside the samples."""
    if t.size < 2 or t[-1] - t[0] < window:
        return np.empty(0)
    edges = np.arange(t[0], t[-1] + 1e-9, window)
    cum = np.interp(edges, t, b)
    return np.diff(cum) * 8.0 / window / 1e6


def _flow_summary(rec: FlowRecord, raw: ExperimentRaw, gp: tuple[np.ndarray, np.ndarray]) -> dict[str, float]:
    t, b = gp
    snd = rec.sender
    client, server = rec.client, rec.server
    out: dict[str, float] = {}
    ssum = _summary(snd)
    elapsed = _num(ssum.get("elapsed", ssum.get("duration")))
    if not math.isfinite(elapsed) or elapsed <= 0:
        side = rec.receiver if rec.receiver is not None and rec.receiver.rows else snd
        tt = _times(raw, side, _host_of(rec, side))
        start = _num((side.header if side else {}).get("start_wall")) - raw.clock_offset(_host_of(rec, side))
        elapsed = (tt[-1] - start) if tt.size and math.isfinite(start) else (tt[-1] - tt[0] if tt.size > 1 else math.nan)
    total = b[-1] if b.size else math.nan
    out["duration"] = elapsed
    out["bytes"] = total
    out["rate"] = total * 8.0 / elapsed / 1e6 if elapsed and elapsed > 0 else math.nan
    wr = _window_rates(t, b, RATE_WINDOW)
    out["rate_min"] = float(wr.min()) if wr.size else out["rate"]
    out["rate_max"] = float(wr.max()) if wr.size else out["rate"]
    rtt = col(snd, "rtt")
    cwnd = col(snd, "snd_cwnd")
    live = rtt > 0
    out["mean_rtt"] = float(rtt[live].mean()) if live.any() else math.nan
    out["mean_cwnd"] = float(cwnd[live].mean()) if live.any() else math.nan
    last = lambda f, n: float(col(f, n)[-1]) if col(f, n).size else math.nan  # noqa: E731
    out["local_retrans"] = last(client, "total_retrans")
    out["remote_retrans"] = last(server, "total_retrans")
    out["retrans_total"] = last(snd, "total_retrans")
    lost = col(snd, "lost")
    out["lost_max"] = float(lost.max()) if lost.size else math.nan
    sent = last(snd, "bytes_sent")
    if not sent or not math.isfinite(sent):
        sent = last(snd, "app_bytes_tx")
    mss = col(snd, "snd_mss")
    mss_v = float(mss[mss > 0][-1]) if (mss > 0).any() else math.nan
    out["bytes_sent"] = sent
    packets = float(math.ceil(sent / mss_v)) if math.isfinite(mss_v) and math.isfinite(sent) else math.nan
    trans = last(client, "transactions")
    data_segs = last(snd, "data_segs_out")
    if math.isfinite(data_segs) and data_segs > 0:
        # The kernel's own count of data segments sent (retransmissions included).
        packets = data_segs
    elif rec.test in RR_TESTS and math.isfinite(trans) and math.isfinite(mss_v):
        # Older files have no data_segs_out: small messages travel in segments
        # shorter than the mss, so at least one segment per request.
        req = _num(rec.meta.get("req"), 1.0)
        packets = max(packets if math.isfinite(packets) else 0.0,
                      trans * max(1.0, math.ceil(req / mss_v)))
    out["packets_sent"] = packets
    out["transactions_total"] = last(client, "transactions")
    lat = _latency(client)
    names = ("count", "min", "mean", "max", "p50", "p90", "p99", "p999")
    if isinstance(lat, dict) and _num(lat.get("count"), 0) > 0:
        for n in names:
            key = "lat_count" if n == "count" else f"lat_{n}_total"
            out[key] = _num(lat.get(n))
    else:
        cnt = col(client, "lat_count")
        has = cnt > 0
        if has.any():
            w = cnt[has]
            out["lat_count"] = float(w.sum())
            out["lat_min_total"] = float(col(client, "lat_min")[has].min())
            out["lat_max_total"] = float(col(client, "lat_max")[has].max())
            for n in ("mean", "p50", "p90", "p99", "p999"):
                # Interval percentiles merged by count weighting: exact for the
                # mean, an approximation for the percentiles.
                out[f"lat_{n}_total"] = float((col(client, f"lat_{n}")[has] * w).sum() / w.sum())
        else:
            out["lat_count"] = 0.0
            for n in names[1:]:
                out[f"lat_{n}_total"] = math.nan
    out["local_cpu"] = _cpu(client)
    out["remote_cpu"] = _cpu(server)
    out["local_sampling_cpu"] = _sampling_cpu(client)
    out["remote_sampling_cpu"] = _sampling_cpu(server)
    return out


def _port(rec: FlowRecord, which: str) -> int:
    """Client-side (local) or server-side (remote) TCP port from the client's
    header (``local``/``remote`` = [address, port]), else the spec's port."""
    header = rec.client.header if rec.client is not None else {}
    key = "local" if which == "local_port" else "remote"
    addr = header.get(key)
    if isinstance(addr, (list, tuple)) and len(addr) >= 2:
        return int(_num(addr[1], 0))
    return int(_num(rec.meta.get("port"), 0)) if which == "remote_port" else 0


def _ping_key(rec: FlowRecord) -> str:
    return f"{short_host(rec.meta.get('host', ''))}-{short_host(rec.meta.get('server', ''))}"


def _ping_client(raw: ExperimentRaw, key: str) -> str:
    """The client host of ping file ``<client>-<server>``: host names may
    contain '-', so the flows' own pairs (then the known hosts) say where it splits."""
    for rec in raw.flows:
        if _ping_key(rec) == key:
            return str(rec.meta.get("host", ""))
    hosts = raw.meta.get("hosts") or {}
    known = [h for h in hosts if key.startswith(f"{short_host(h)}-")]
    return max(known, key=len) if known else key.split("-", 1)[0]


def _host_arrays(snaps: dict[str, HostSnapshot], nodes: list[str], counters: list[str]) -> np.ndarray:
    out = np.full((len(nodes), len(counters)), np.nan)
    pos = {c: i for i, c in enumerate(counters)}
    for r, node in enumerate(nodes):
        snap = snaps.get(node)
        if snap is None:
            continue
        for k, v in snap.counters.items():
            out[r, pos[k]] = v
    return out


def build_dataset(raw: ExperimentRaw) -> xr.Dataset:
    """The experiment Dataset of :mod:`netesto.results.schema` from raw records."""
    flows = raw.flows
    intervals = [
        _num(side.header.get("interval"))
        for rec in flows
        for side in (rec.client, rec.server)
        if side is not None
    ]
    intervals = [i for i in intervals if math.isfinite(i) and i > 0]
    interval = min(intervals) if intervals else 0.01
    starts = []
    ends = []
    for rec in flows:
        for side in (rec.client, rec.server):
            t = _times(raw, side, _host_of(rec, side))
            if t.size:
                starts.append(t[0])
                ends.append(t[-1])
                st = _start_time(raw, rec, side)
                if math.isfinite(st) and st < t[0]:
                    starts.append(st)
    t0 = min(starts) if starts else 0.0
    n = int(math.ceil((max(ends) - t0) / interval - 1e-9)) + 1 if ends else 0
    grid = _Grid(t0, interval, n)
    nf = len(flows)
    series = {v.name: np.full((nf, n), np.nan, dtype=v.dtype) for v in TIME_SERIES}
    summaries = {v.name: np.full(nf, np.nan) for v in FLOW_SUMMARIES}
    starts_rel = np.full(nf, np.nan)
    ping_grid: dict[str, np.ndarray] = {}
    ping_mean: dict[str, float] = {}
    for key, ping in raw.pings.items():
        host = _ping_client(raw, key)
        t = _times(raw, ping, host)
        r = col(ping, "rtt")
        line = np.full(n, np.nan)
        ok = np.isfinite(r)
        if n and ok.any():
            idx = np.clip(grid.index(t[ok]), 0, n - 1)
            line[idx] = r[ok]
            # Hold each probe's value until the next one (a step function).
            filled = np.where(np.isfinite(line), np.arange(n), -1)
            np.maximum.accumulate(filled, out=filled)
            line = np.where(filled >= 0, line[np.maximum(filled, 0)], np.nan)
        ping_grid[key] = line
        ping_mean[key] = float(np.nanmean(r)) if ok.any() else math.nan
    for i, rec in enumerate(flows):
        snd = rec.sender
        ts = _times(raw, snd, _host_of(rec, snd))
        idx = grid.index(ts)
        first = snd if ts.size else rec.receiver
        tf = ts if ts.size else _times(raw, first, _host_of(rec, first))
        if tf.size:
            st = _start_time(raw, rec, first)
            starts_rel[i] = (st if math.isfinite(st) and st < tf[0] else tf[0]) - t0
        gp = _goodput_series(rec, raw)
        ks, rate = _goodput_on_grid(gp[0], gp[1], grid)
        series["goodput"][i, ks] = rate
        _place(series["bytes_acked"], i, idx, col(snd, "bytes_acked"), n)
        _place(series["cwnd"], i, idx, col(snd, "snd_cwnd"), n)
        ss = col(snd, "snd_ssthresh")
        _place(series["ssthresh"], i, idx, np.where(ss >= _INFINITE_SSTHRESH, np.nan, ss), n)
        for name, src in (("rtt", "rtt"), ("rttvar", "rttvar"), ("min_rtt", "min_rtt"),
                          ("retransmits", "total_retrans"), ("lost", "lost"), ("unacked", "unacked")):
            _place(series[name], i, idx, col(snd, src), n)
        for name in ("delivery_rate", "pacing_rate"):
            v = col(snd, name)
            # ~0 (u64 max) means "no pacing limit".
            _place(series[name], i, idx, np.where(v >= 2.0**63, np.nan, v * 8.0), n)
        client = rec.client
        if client is not None and client.rows and rec.test in ("TCP_RR", "TCP_CRR", "UDP_RR"):
            tc = _times(raw, client, _host_of(rec, client))
            ic = grid.index(tc)
            tr = col(client, "transactions")
            with np.errstate(invalid="ignore", divide="ignore"):
                dt = np.diff(tc, prepend=np.nan)
                tps = np.diff(tr, prepend=np.nan) / dt
            _place(series["transactions"], i, ic, tps, n)
            has = col(client, "lat_count") > 0
            for name in ("lat_mean", "lat_p50", "lat_p90", "lat_p99", "lat_p999"):
                _place(series[name], i, ic, np.where(has, col(client, name), np.nan), n)
        key = _ping_key(rec)
        if key in ping_grid and ts.size:
            lo, hi = max(0, int(idx[0])), min(n, int(idx[-1]) + 1)
            series["ping_rtt"][i, lo:hi] = ping_grid[key][lo:hi]
        s = _flow_summary(rec, raw, gp)
        s["ping_rtt_mean"] = ping_mean.get(key, math.nan)
        for k, val in s.items():
            summaries[k][i] = val
    coords: dict[str, Any] = {
        "flow": ("flow", np.array([r.flow_id for r in flows], dtype=object)),
        "time": ("time", np.arange(n) * interval, TIME_ATTRS),
        "start": ("flow", starts_rel, var_attrs("start")),
    }
    for spec in FLOW_COORDS:
        if spec.name == "start":
            continue
        values: list[Any]
        if spec.name in ("local_port", "remote_port"):
            values = [_port(rec, spec.name) for rec in flows]
        else:
            values = [rec.meta.get(spec.name) for rec in flows]
        arr: np.ndarray
        if spec.dtype == "str":
            arr = np.array([short_host(str(v)) if spec.name in ("host", "server") else str(v or "")
                            for v in values], dtype=object)
        elif spec.dtype == "int64":
            arr = np.array([int(_num(v, 0)) for v in values], dtype=np.int64)
        else:
            arr = np.array([_num(v) for v in values])
        coords[spec.name] = ("flow", arr, var_attrs(spec.name))
    data_vars: dict[str, Any] = {}
    for spec in TIME_SERIES:
        data_vars[spec.name] = (("flow", "time"), series[spec.name], var_attrs(spec.name))
    for spec in FLOW_SUMMARIES:
        data_vars[spec.name] = ("flow", summaries[spec.name], var_attrs(spec.name))
    nodes = sorted(set(raw.before) | set(raw.after))
    if nodes:
        counters = sorted({k for s in list(raw.before.values()) + list(raw.after.values()) for k in s.counters})
        before = _host_arrays(raw.before, nodes, counters)
        after = _host_arrays(raw.after, nodes, counters)
        coords["node"] = ("node", np.array(nodes, dtype=object))
        coords["counter"] = ("counter", np.array(counters, dtype=object))
        data_vars["host_before"] = (("node", "counter"), before, var_attrs("host_before"))
        data_vars["host_after"] = (("node", "counter"), after, var_attrs("host_after"))
        data_vars["host_delta"] = (("node", "counter"), after - before, var_attrs("host_delta"))
    ds = xr.Dataset(data_vars, coords=coords, attrs=_attrs(raw, t0, interval))
    return ds


def _attrs(raw: ExperimentRaw, t0: float, interval: float) -> dict[str, Any]:
    meta = raw.meta
    skews = [_num(f.get("start_skew")) for f in meta.get("flows", []) if isinstance(f, dict)]
    skews = [abs(s) for s in skews if math.isfinite(s)]
    sysctls = {h: s.sysctl for h, s in raw.before.items() if s.sysctl}
    kernels = {h: s.info.get("kernel", "") for h, s in raw.before.items() if s.info}
    return {
        "schema_version": SCHEMA_VERSION,
        "exp": raw.exp,
        "exp_name": str(meta.get("exp_name", "")),
        "script": str(meta.get("script", "")),
        "desc": str(meta.get("desc", "")),
        "other": json.dumps(meta.get("other", [])),
        "netesto_version": str(meta.get("netesto_version", "")),
        "hosts": json.dumps(meta.get("hosts", {}), sort_keys=True, default=str),
        "kernels": json.dumps(kernels, sort_keys=True),
        "sysctls": json.dumps(sysctls, sort_keys=True),
        "offloads": json.dumps({h: s.offloads for h, s in raw.before.items() if s.offloads},
                               sort_keys=True, default=str),
        "qdiscs": json.dumps({h: s.qdiscs for h, s in raw.before.items() if s.qdiscs}, sort_keys=True),
        "tools": json.dumps({h: i.get("tools", {}) for h, i in (meta.get("hosts") or {}).items()
                             if isinstance(i, dict) and i.get("tools")}, sort_keys=True, default=str),
        "defines": json.dumps(meta.get("defines") or {}, sort_keys=True, default=str),
        "testbed": json.dumps(meta.get("testbed") or {}, sort_keys=True, default=str),
        "seed": int(meta["seed"]) if isinstance(meta.get("seed"), int) else -1,
        "flows_resolved": json.dumps(meta.get("flows", []), default=str),
        "start_wall": t0,
        "interval": interval,
        "start_skew_max": max(skews) if skews else 0.0,
        "errors": json.dumps(raw.errors),
        "run_errors": json.dumps(meta.get("errors", []), default=str),
        # 1: the run was stopped before its end (Ctrl-C, SIGTERM): the flows were cut short
        "interrupted": int(bool(meta.get("interrupted", False))),
        "warnings": json.dumps(raw.warnings),
        "source": str(raw.path),
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "Conventions": "CF-1.8",
    }


def write_netcdf(ds: xr.Dataset, path: str | os.PathLike[str]) -> Path:
    """Write ``ds`` to ``path`` (netCDF4) via a temporary file and a rename.

    Every variable is stored with HDF5's Fletcher-32 checksum, so damaged data
    is refused when read instead of read as other numbers. Text (flow ids,
    hosts, counter names) is stored as fixed-width characters, not as HDF5
    variable-length strings: those live in a heap no checksum covers, and a
    damaged heap made HDF5 loop for ever reading it. (Attributes carry none.)"""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    encoding: dict[str, dict[str, Any]] = {}
    for name, var in ds.variables.items():
        if not var.ndim or 0 in var.shape:
            continue
        if var.dtype.kind in "fiub":
            encoding[str(name)] = {"fletcher32": True}
        elif var.dtype.kind in "OUS":
            encoding[str(name)] = {"dtype": "S1", "fletcher32": True}
    try:
        ds.to_netcdf(tmp, engine="netcdf4", encoding=encoding)
        digest = _sha256(tmp)
        os.replace(tmp, path)
        _sidecar(path).write_text(f"{digest}  {path.name}\n")
    except Exception as exc:
        tmp.unlink(missing_ok=True)
        raise ResultsError(f"{path}: cannot write netCDF: {exc}") from exc
    return path


def _sidecar(path: Path) -> Path:
    """``exp.nc.sha256``: the file's digest in ``sha256sum`` form (``sha256sum -c`` checks it)."""
    return path.with_name(path.name + ".sha256")


def _sha256(path: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def check_digest(path: Path) -> None:
    """A ResultsError when ``path`` no longer matches the digest written with it. HDF5
    cannot be trusted with every damaged file (a damaged heap or index made it loop for
    ever), so a damaged exp.nc is refused before HDF5 reads it. Without the digest
    (an exp.nc copied alone) HDF5's own checksums are what is left."""
    side = _sidecar(path)
    try:
        want = side.read_text().split()[0]
    except (OSError, IndexError):
        return
    if _sha256(path) != want:
        raise ResultsError(f"{path}: damaged: its sha256 is not the one {side.name} recorded when it was written "
                           "(process the experiment again to rebuild it from the raw data)")


def open_experiment(path: str | os.PathLike[str]) -> xr.Dataset:
    """Open an experiment's dataset: ``exp.nc``, or an experiment directory.

    A directory with ``exp.nc`` opens that file; a directory of raw data
    without it is built on the fly (nothing is written).
    """
    p = Path(path)
    nc = p / "exp.nc" if p.is_dir() else p
    if nc.is_file():
        check_digest(nc)
        try:
            with xr.open_dataset(nc, engine="netcdf4") as ds:
                return ds.load()
        # A damaged file makes netCDF4/HDF5 raise RuntimeError, AttributeError,
        # KeyError, ... besides OSError: all of them mean "this file is unreadable".
        except Exception as exc:
            raise ResultsError(f"{nc}: cannot open dataset: {type(exc).__name__}: {exc}") from exc
    if p.is_dir():
        return build_dataset(load_experiment(p))
    raise ResultsError(f"{p}: no such experiment (expected a directory or an exp.nc file)")


def experiment_dirs(workdir: str | os.PathLike[str]) -> list[Path]:
    """Numbered experiment directories of a working directory, in numeric order."""
    root = Path(workdir)
    if not root.is_dir():
        raise ResultsError(f"{root}: no such working directory")
    dirs = [p for p in root.iterdir() if p.is_dir() and p.name.isdigit()]
    return sorted(dirs, key=lambda p: int(p.name))


class Experiments(Mapping[int, xr.Dataset]):
    """The processed experiments of a working directory, by number.

    A read-only mapping that opens each ``exp.nc`` on first access (and keeps
    it), so a workdir of thousands of experiments costs nothing until used.
    """

    def __init__(self, workdir: str | os.PathLike[str], exps: Iterable[int] | None = None) -> None:
        self.workdir = Path(workdir)
        wanted = set(exps) if exps is not None else None
        self._paths = {int(d.name): d / "exp.nc" for d in experiment_dirs(workdir)
                       if (wanted is None or int(d.name) in wanted) and (d / "exp.nc").is_file()}
        self._open: dict[int, xr.Dataset] = {}

    def __getitem__(self, exp: int) -> xr.Dataset:
        if exp not in self._paths:
            raise KeyError(exp)
        if exp not in self._open:
            self._open[exp] = open_experiment(self._paths[exp])
        return self._open[exp]

    def __iter__(self) -> Iterator[int]:
        return iter(self._paths)

    def __len__(self) -> int:
        return len(self._paths)

    def __repr__(self) -> str:
        return f"<Experiments {self.workdir}: {sorted(self._paths)}>"

    def summaries(self) -> Any:
        """One row per experiment (from each all.exp.out) as an analysis Table."""
        from netesto.results.analysis import Table

        return Table.from_workdir(self.workdir)

    def combine(self, params: Mapping[int, Mapping[str, Any]] | None = None) -> xr.Dataset:
        """Summaries along ``exp`` with the parameters as coordinates (see sweep.combine)."""
        from netesto.results.sweep import combine

        return combine(self, params)


def open_experiments(workdir: str | os.PathLike[str], exps: Iterable[int] | None = None) -> Experiments:
    """Every processed experiment (with ``exp.nc``) of ``workdir``, by number, opened lazily."""
    return Experiments(workdir, exps)


__all__ = [
    "Experiments",
    "build_dataset",
    "col",
    "experiment_dirs",
    "open_experiment",
    "open_experiments",
    "write_netcdf",
]
