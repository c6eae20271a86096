"""Per-flow records -> the experiment :class:`xarray.Dataset` (schema in schema.py; the numbers in numerics.py).

Every row of every flow end is kept as it was taken (samples.py), and put on
one time grid (gridding.py): the controller-clock time of a row is ``t_wall -
clock_offset(host)``; the experiment starts at the earliest such time ``t0``;
the grid step is the smallest sampling interval.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
from typing import Any

import numpy as np
import xarray as xr

from netesto.raw.experiment import short_host
from netesto.results.fct import add_transactions
from netesto.results.changes import with_changes
from netesto.results.hostfiles import HostSnapshot
from netesto.results.load import ExperimentRaw, FlowRecord
from netesto.results.groups import with_breakdown
from netesto.results.gridding import Grid, interval_stats, last_in_step, rate_on_grid
from netesto.results.numerics import (
    col,
    delivered_series,
    flow_summary,
    goodput_series,
    host_of,
    num,
    start_time,
    times,
)
from netesto.results.samples import ends, sample_layout
from netesto.results.trace import add_traces
from netesto.results.schema import (
    END_ATTRS,
    ENDS,
    FLOW_COORDS,
    FLOW_SUMMARIES,
    SAMPLE_ATTRS,
    SAMPLE_VARS,
    SCHEMA_VERSION,
    TIME_ATTRS,
    TIME_SERIES,
    var_attrs,
)
from netesto.results.smoothing import smooth_attrs, smoothed_goodput
from netesto.results.health import flow_warnings
from netesto.vocab import RR_TESTS

def _port(rec: FlowRecord, which: str) -> int:
    """Client-side (local) or server-side (remote) TCP port from the client's
    header (``local``/``remote`` = [address, port]), else the spec's port."""
    header = rec.client.header if rec.client is not None else {}
    key = "local" if which == "local_port" else "remote"
    addr = header.get(key)
    if isinstance(addr, (list, tuple)) and len(addr) >= 2:
        return int(num(addr[1], 0))
    return int(num(rec.meta.get("port"), 0)) if which == "remote_port" else 0


def _ping_key(rec: FlowRecord) -> str:
    return f"{short_host(rec.meta.get('host', ''))}-{short_host(rec.meta.get('server', ''))}"


def _ping_client(raw: ExperimentRaw, key: str) -> str:
    """The client host of ping file ``<client>-<server>``: host names may
    contain '-', so the flows' own pairs (then the known hosts) say where it splits."""
    for rec in raw.flows:
        if _ping_key(rec) == key:
            return str(rec.meta.get("host", ""))
    known = [h for h in raw.record.hosts if key.startswith(f"{short_host(h)}-")]
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


def _grid(raw: ExperimentRaw) -> Grid:
    """The experiment's grid: from the earliest row (or start) of any end, the smallest interval."""
    intervals = [num(side.header.get("interval")) for rec in raw.flows for side in ends(rec) if side is not None]
    intervals = [i for i in intervals if math.isfinite(i) and i > 0]
    interval = min(intervals) if intervals else 0.01
    starts, last = [], []
    for rec in raw.flows:
        for side in ends(rec):
            t = times(raw, side, host_of(rec, side))
            if t.size:
                starts.append(t[0])
                last.append(t[-1])
                st = start_time(raw, rec, side)
                if math.isfinite(st) and st < t[0]:
                    starts.append(st)
    t0 = min(starts) if starts else 0.0
    n = int(math.ceil((max(last) - t0) / interval - 1e-9)) + 1 if last else 0
    return Grid(t0, interval, n)


def _ping_lines(raw: ExperimentRaw, grid: Grid) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """Each ping pair's RTT on the grid (each probe held until the next) and its mean."""
    lines: dict[str, np.ndarray] = {}
    means: dict[str, float] = {}
    n = grid.n
    for key, ping in raw.pings.items():
        t = times(raw, ping, _ping_client(raw, key))
        r = col(ping, "rtt")
        ok = np.isfinite(r)
        line = np.full(n, np.nan)
        if n and ok.any():
            ks, held = last_in_step(grid.index(t[ok]), r[ok])
            line[ks] = held
            line[ks[-1]:] = held[-1]
        lines[key] = line
        means[key] = float(np.nanmean(r)) if ok.any() else math.nan
    return lines, means


STATE = ("bytes_acked", "cwnd", "ssthresh", "rtt", "rttvar", "min_rtt", "retransmits", "lost", "unacked",
         "delivery_rate", "pacing_rate")  # from the sender's rows: sample_<name>
LATENCY = ("lat_mean", "lat_p50", "lat_p90", "lat_p99", "lat_p999")


def _grid_flow(rec: FlowRecord, raw: ExperimentRaw, grid: Grid, samples: dict[str, np.ndarray],
               series: dict[str, np.ndarray], delivered: np.ndarray, i: int) -> None:
    """Flow ``rec``'s row ``i`` of every (flow, time) series, from all of its rows (the sample layout's;
    see gridding.py)."""
    gp = goodput_series(rec, raw)
    ks, rate = rate_on_grid(gp[0], gp[1], grid)
    series["goodput"][i, ks] = rate * 8.0
    tcp = delivered_series(rec, raw)  # what goodput_smooth smooths (see smoothing.py)
    ks, rate = rate_on_grid(tcp[0], tcp[1], grid)
    delivered[i, ks] = rate * 8.0
    j = ENDS.index("server" if rec.test == "TCP_MAERTS" else "client")
    sent = np.isfinite(samples["sample_time"][i, j])
    if rec.sender is not None and sent.any():
        idx = grid.index(samples["sample_time"][i, j, sent] + grid.t0)
        for name in STATE:
            ks, held = last_in_step(idx, samples[f"sample_{name}"][i, j, sent])
            series[name][i, ks] = held
    client = rec.client
    if client is not None and client.rows and rec.test in RR_TESTS:
        tc = samples["sample_time"][i, 0, :client.rows] + grid.t0
        ks, tps = rate_on_grid(tc, samples["sample_transactions"][i, 0, :client.rows], grid)
        series["transactions"][i, ks] = tps
        ic = grid.index(tc)
        counts = samples["sample_lat_count"][i, 0, :client.rows]
        for name in LATENCY:
            ks, merged = interval_stats(ic, counts, samples[f"sample_{name}"][i, 0, :client.rows])
            series[name][i, ks] = merged


def build_dataset(raw: ExperimentRaw, *, steady: str | None = None) -> xr.Dataset:
    """The experiment Dataset of :mod:`netesto.results.schema` from raw records, with each flow's,
    group's and congestion control's numbers over the steady window ``steady`` (see
    :mod:`netesto.results.groups`; none: each flow's whole life)."""
    flows = raw.flows
    grid = _grid(raw)
    t0, interval, n = grid.t0, grid.interval, grid.n
    nf = len(flows)
    series = {v.name: np.full((nf, n), np.nan, dtype=v.dtype) for v in TIME_SERIES}
    summaries = {v.name: np.full(nf, np.nan) for v in FLOW_SUMMARIES}
    starts_rel = np.full(nf, np.nan)
    delivered = np.full((nf, n), np.nan)
    ping_grid, ping_mean = _ping_lines(raw, grid)
    samples = sample_layout(raw, t0)
    for i, rec in enumerate(flows):
        snd = rec.sender
        ts = times(raw, snd, host_of(rec, snd))
        first = snd if ts.size else rec.receiver
        tf = ts if ts.size else times(raw, first, host_of(rec, first))
        if tf.size:
            st = start_time(raw, rec, first)
            starts_rel[i] = (st if math.isfinite(st) and st < tf[0] else tf[0]) - t0
        _grid_flow(rec, raw, grid, samples, series, delivered, i)
        key = _ping_key(rec)
        if key in ping_grid and ts.size:
            idx = grid.index(ts)
            lo, hi = int(idx[0]), int(idx[-1]) + 1
            series["ping_rtt"][i, lo:hi] = ping_grid[key][lo:hi]
        s = flow_summary(rec, raw, goodput_series(rec, raw))
        s["ping_rtt_mean"] = ping_mean.get(key, math.nan)
        for k, val in s.items():
            summaries[k][i] = val
    coords: dict[str, Any] = {
        "flow": ("flow", np.array([r.flow_id for r in flows], dtype=object)),
        "time": ("time", np.arange(n) * interval, TIME_ATTRS),
        "end": ("end", np.array(ENDS, dtype=object), END_ATTRS),
        "start": ("flow", starts_rel, var_attrs("start")),
        "data_sender": ("flow", np.array(["server" if r.test == "TCP_MAERTS" else "client" for r in flows],
                                         dtype=object), var_attrs("data_sender")),
    }
    for spec in FLOW_COORDS:
        if spec.name in ("start", "data_sender"):
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
            arr = np.array([int(num(v, 0)) for v in values], dtype=np.int64)
        else:
            arr = np.array([num(v) for v in values])
        coords[spec.name] = ("flow", arr, var_attrs(spec.name))
    data_vars: dict[str, Any] = {}
    for spec in TIME_SERIES:
        data_vars[spec.name] = (("flow", "time"), series[spec.name], var_attrs(spec.name))
    per, total = smoothed_goodput(delivered, interval)
    window = smooth_attrs(interval)
    data_vars["goodput_smooth"] = (("flow", "time"), per, {**var_attrs("goodput_smooth"), **window})
    data_vars["goodput_sum_smooth"] = (("time",), total, {**var_attrs("goodput_sum_smooth"), **window})
    coords["sample"] = ("sample", np.arange(samples["sample_time"].shape[-1]), SAMPLE_ATTRS)
    for spec in SAMPLE_VARS:
        data_vars[spec.name] = (("flow", "end", "sample"), samples[spec.name], var_attrs(spec.name))
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
    ds = add_transactions(ds, raw)  # drawn workloads' transactions (dim txn), their completion times
    ds.attrs["flow_warnings"] = json.dumps(flow_warnings(ds, raw))
    ds = add_traces(ds, raw)  # the flows' kernel traces, if any: event axes beside the samples and the grid
    offsets = {h: raw.clock_offset(h) for h in raw.record.hosts}
    ds = with_changes(ds, raw.path, offsets)  # SET_LINK's changes, when a router recorded some
    return with_breakdown(ds, steady)


def _attrs(raw: ExperimentRaw, t0: float, interval: float) -> dict[str, Any]:
    rec = raw.record
    skews = [num(f.params.get("start_skew")) for f in rec.flows]
    skews = [abs(s) for s in skews if math.isfinite(s)]
    sysctls = {h: s.sysctl for h, s in raw.before.items() if s.sysctl}
    kernels = {h: s.info.get("kernel", "") for h, s in raw.before.items() if s.info}
    return {
        "schema_version": SCHEMA_VERSION,
        "exp": raw.exp,
        "exp_name": rec.exp_name,
        "script": rec.script,
        "desc": rec.desc,
        "other": json.dumps([list(p) for p in raw.other]),
        "netesto_version": rec.netesto_version,
        "hosts": json.dumps({h: dict(i) for h, i in rec.hosts.items()}, sort_keys=True, default=str),
        "kernels": json.dumps(kernels, sort_keys=True),
        "sysctls": json.dumps(sysctls, sort_keys=True),
        "offloads": json.dumps({h: s.offloads for h, s in raw.before.items() if s.offloads},
                               sort_keys=True, default=str),
        "qdiscs": json.dumps({h: s.qdiscs for h, s in raw.before.items() if s.qdiscs}, sort_keys=True),
        "tools": json.dumps({h: i.get("tools", {}) for h, i in rec.hosts.items() if i.get("tools")},
                            sort_keys=True, default=str),
        "defines": json.dumps(dict(rec.defines), sort_keys=True, default=str),
        "testbed": json.dumps(dict(rec.testbed), sort_keys=True, default=str),
        "seed": rec.seed if rec.seed is not None else -1,
        "flows_resolved": json.dumps([f.to_json() for f in rec.flows], default=str),
        "start_wall": t0,
        "start_time": _dt.datetime.fromtimestamp(t0, _dt.timezone.utc).isoformat(timespec="microseconds"),
        "interval": interval,
        "start_skew_max": max(skews) if skews else 0.0,
        "errors": json.dumps(raw.errors),
        "run_errors": json.dumps(list(rec.errors), default=str),
        # 1: the run was stopped before its end (Ctrl-C, SIGTERM): the flows were cut short
        "interrupted": int(rec.interrupted),
        "warnings": json.dumps(raw.warnings),
        "source": str(raw.path),
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "Conventions": "CF-1.8",
    }


__all__ = ["build_dataset"]
