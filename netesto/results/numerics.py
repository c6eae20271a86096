"""The numbers of one flow: raw columns as arrays, controller-clock times, goodput, per-flow summaries.

A sample's controller-clock time is ``t_wall - clock_offset(host)``; the grid
(:class:`~netesto.results.gridding.Grid`) starts at the experiment's earliest
such time with the smallest sampling interval as its step.
"""

from __future__ import annotations

import math
from array import array
from typing import Any

import numpy as np

from netesto.vocab import RR_TESTS
from netesto.raw.nflow import RawFlow
from netesto.results.limits import limit_shares
from netesto.results.load import ExperimentRaw, FlowRecord
from netesto.results.ticks import tick_stats

INFINITE_SSTHRESH = 0x7FFFFFFF
RATE_WINDOW = 1.0  # seconds: window of the per-flow rate_window_min / rate_window_max


def col(flow: RawFlow | None, name: str) -> np.ndarray:
    """A column of a raw flow as a numpy array (float64; empty if absent)."""
    if flow is None or name not in flow.columns:
        return np.empty(0)
    arr: array = flow.columns[name]
    return np.frombuffer(arr, dtype=np.dtype(arr.typecode)).astype(np.float64) if len(arr) else np.empty(0)


def num(value: Any, default: float = math.nan) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return default
    return out


def times(raw: ExperimentRaw, flow: RawFlow | None, host: str) -> np.ndarray:
    t = col(flow, "t_wall")
    return t - raw.clock_offset(host) if t.size else t


def host_of(rec: FlowRecord, side: RawFlow | None) -> str:
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
            return num(v.get("percent")) if isinstance(v, dict) else num(v)
    return math.nan


def _sampling_cpu(flow: RawFlow | None) -> float:
    """The share of the worker's CPU its sampler took (built-in engine summaries only)."""
    cpu = _summary(flow).get("cpu")
    return num(cpu.get("sampling_percent")) if isinstance(cpu, dict) else math.nan


def _latency(flow: RawFlow | None) -> dict[str, Any] | None:
    s = _summary(flow)
    for key in ("latency_us", "latency"):
        if isinstance(s.get(key), dict):
            return s[key]
    return None


def _data_side(rec: FlowRecord) -> tuple[RawFlow | None, str]:
    """The end and counter that measure delivered bytes: the receiver's
    app_bytes_rx, or the sender's app_bytes_tx without a receiver file."""
    recv = rec.receiver
    if recv is not None and recv.rows:
        return recv, "app_bytes_rx"
    return rec.sender, "app_bytes_tx"


def start_time(raw: ExperimentRaw, rec: FlowRecord, side: RawFlow | None) -> float:
    start = num((side.header if side else {}).get("start_wall"))
    return start - raw.clock_offset(host_of(rec, side)) if math.isfinite(start) else math.nan


def goodput_series(rec: FlowRecord, raw: ExperimentRaw) -> tuple[np.ndarray, np.ndarray]:
    """(times, cumulative bytes) in the data direction, starting with
    (flow start, 0) when the header records the start."""
    side, name = _data_side(rec)
    return _from_start(rec, raw, side, col(side, name))


def _from_start(rec: FlowRecord, raw: ExperimentRaw, side: RawFlow | None,
                b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(times, ``b``) of ``side``'s rows, with (its start, 0) first when its header records a start before them."""
    t = times(raw, side, host_of(rec, side))
    if t.size == 0:
        return t, b
    start = start_time(raw, rec, side)
    if math.isfinite(start) and start < t[0]:
        t = np.concatenate(([start], t))
        b = np.concatenate(([0.0], b))
    return t, b


def delivered_series(rec: FlowRecord, raw: ExperimentRaw) -> tuple[np.ndarray, np.ndarray]:
    """(times, cumulative bytes) the receiving TCP got in order (its socket's tcp_info ``bytes_received``,
    from its first row), starting with (flow start, 0) as :func:`goodput_series`: what the network
    delivered, whenever the application read it. The application's own count (:func:`goodput_series`)
    where the receiver's file has no such column (drivers, UDP)."""
    side = rec.receiver
    b = col(side, "bytes_received")
    if side is None or b.size < 2 or not b[-1] > b[0]:
        return goodput_series(rec, raw)
    return _from_start(rec, raw, side, b - b[0])


def _window_rates(t: np.ndarray, b: np.ndarray, window: float) -> np.ndarray:
    """Mbit/s over consecutive ``window``-second windows fully inside the samples."""
    if t.size < 2 or t[-1] - t[0] < window:
        return np.empty(0)
    edges = np.arange(t[0], t[-1] + 1e-9, window)
    cum = np.interp(edges, t, b)
    return np.diff(cum) * 8.0 / window / 1e6


def flow_summary(rec: FlowRecord, raw: ExperimentRaw, gp: tuple[np.ndarray, np.ndarray]) -> dict[str, float]:
    t, b = gp
    snd = rec.sender
    client, server = rec.client, rec.server
    out: dict[str, float] = {}
    ssum = _summary(snd)
    elapsed = num(ssum.get("elapsed", ssum.get("duration")))
    if not math.isfinite(elapsed) or elapsed <= 0:
        side = rec.receiver if rec.receiver is not None and rec.receiver.rows else snd
        tt = times(raw, side, host_of(rec, side))
        start = num((side.header if side else {}).get("start_wall")) - raw.clock_offset(host_of(rec, side))
        elapsed = (tt[-1] - start) if tt.size and math.isfinite(start) else (tt[-1] - tt[0] if tt.size > 1 else math.nan)
    total = b[-1] if b.size else math.nan
    out["duration"] = elapsed
    out["bytes"] = total
    out["rate"] = total * 8.0 / elapsed / 1e6 if elapsed and elapsed > 0 else math.nan
    wr = _window_rates(t, b, RATE_WINDOW)
    out["rate_window_min"] = float(wr.min()) if wr.size else out["rate"]
    out["rate_window_max"] = float(wr.max()) if wr.size else out["rate"]
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
    out["bytes_accepted"] = last(snd, "app_bytes_tx")
    packets = float(math.ceil(sent / mss_v)) if math.isfinite(mss_v) and math.isfinite(sent) else math.nan
    trans = last(client, "transactions")
    data_segs = last(snd, "data_segs_out")
    if math.isfinite(data_segs) and data_segs > 0:
        # The kernel's own count of data segments sent (retransmissions included).
        packets = data_segs
    elif rec.test in RR_TESTS and math.isfinite(trans) and math.isfinite(mss_v):
        # Older files have no data_segs_out: small messages travel in segments
        # shorter than the mss, so at least one segment per request.
        req = num(rec.meta.get("req"), 1.0)
        packets = max(packets if math.isfinite(packets) else 0.0,
                      trans * max(1.0, math.ceil(req / mss_v)))
    out["packets_sent"] = packets
    out["transactions_total"] = last(client, "transactions")
    lat = _latency(client)
    names = ("count", "min", "mean", "max", "p50", "p90", "p99", "p999")
    if isinstance(lat, dict) and num(lat.get("count"), 0) > 0:
        for n in names:
            key = "lat_count" if n == "count" else f"lat_{n}_total"
            out[key] = num(lat.get(n))
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
    for where, end in (("local", client), ("remote", server)):
        ticks = tick_stats(end)
        out[f"{where}_tick_late_p50"], out[f"{where}_tick_late_p99"] = ticks.p50, ticks.p99
        out[f"{where}_tick_late_max"], out[f"{where}_ticks_missed"] = ticks.max, ticks.missed
    out["start_late"] = start_late(rec)
    out.update(limit_shares(snd, rec.test))
    return out


def start_late(rec: FlowRecord) -> float:
    """ms from the flow's scheduled instant (its spec's ``start_at``) to the start of its client's
    data phase (``start_wall``; both in the client agent's clock); NaN without a scheduled instant or
    when the client never began (its file says ``started: false``).

    >>> from netesto.raw.nflow import RawFlow
    >>> end = RawFlow("f.nflow", {"start_wall": 100.062, "flow": {"start_at": 100.0}})
    >>> round(start_late(FlowRecord("f", {}, end)), 3)
    62.0
    """
    header = rec.client.header if rec.client is not None else {}
    if header.get("started") is False:
        return math.nan
    at = num((header.get("flow") or {}).get("start_at"))
    wall = num(header.get("start_wall"))
    if not (at > 0 and wall > 0):
        return math.nan
    return (wall - at) * 1e3


def never_started(rec: FlowRecord) -> bool:
    """Whether the flow's client never began its data phase (its file says so: see docs/raw-format.md)."""
    return rec.client is not None and rec.client.header.get("started") is False


__all__ = ["INFINITE_SSTHRESH", "RATE_WINDOW", "col", "delivered_series", "flow_summary", "goodput_series", "host_of",
           "never_started",
           "num", "start_late", "start_time", "times"]
