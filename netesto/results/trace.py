"""Kernel traces in the experiment Dataset: every ACK's congestion state on an event axis beside the grid.

A flow end with a ``.ntrace`` (docs/traces.md) gets its events on the
experiment clock, as the samples are (``t_wall`` - the host's clock offset - t0):

* ``probe`` (dim): one tcp_probe event, a segment the socket took in while
  established (an ACK at a sender). Variables on (flow, end, probe), NaN past an
  end's last event: ``probe_time`` (s), ``probe_cwnd``, ``probe_ssthresh``
  (packets; NaN while "infinite"), ``probe_srtt`` (us), ``probe_snd_una`` and
  ``probe_snd_nxt`` (bytes since the end's first event, the 32-bit sequence
  numbers unwrapped), ``probe_inflight`` (bytes sent and not acknowledged),
  ``probe_snd_wnd``, ``probe_rcv_wnd`` (bytes), ``probe_data_len`` (bytes of
  the segment), ``probe_send_rate`` and ``probe_ack_rate`` (bit/s: ``snd_nxt``
  and ``snd_una`` advanced over the last smoothed RTT before the event). The
  state is the socket's as the segment arrived, before the kernel handled it.
* ``retx`` (dim): each retransmission: ``retx_time``, ``retx_err`` (0: sent).
* ``ca_event`` (dim): each congestion-state change: ``ca_time``, ``ca_state``
  (0 open, 1 disorder, 2 cwr, 3 recovery, 4 loss).
* per (flow, end): ``trace_events``, ``trace_retransmits`` and
  ``trace_dropped``: events the tracing host's ring buffer refused while the
  trace ran (any connection's; 0 when nothing was lost).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from netesto.errors import RawDataError
from netesto.raw.ntrace import SUFFIX, RawTrace, read_trace
from netesto.results.load import ExperimentRaw
from netesto.results.schema import END_ATTRS, ENDS

INFINITE_SSTHRESH = 0x7FFFFFFF
CA_STATES = ("open", "disorder", "cwr", "recovery", "loss")
PROBE_VARS: dict[str, tuple[str, str]] = {
    "probe_time": ("s", "time of the segment's arrival, seconds after the experiment start"),
    "probe_cwnd": ("1", "congestion window (packets) as the segment arrived"),
    "probe_ssthresh": ("1", "slow-start threshold (packets; NaN while infinite)"),
    "probe_srtt": ("us", "smoothed round-trip time"),
    "probe_snd_una": ("bytes", "first unacknowledged byte, since the end's first event"),
    "probe_snd_nxt": ("bytes", "next byte to send, since the end's first event"),
    "probe_inflight": ("bytes", "bytes sent and not acknowledged (snd_nxt - snd_una)"),
    "probe_snd_wnd": ("bytes", "the peer's receive window"),
    "probe_rcv_wnd": ("bytes", "this end's receive window"),
    "probe_data_len": ("bytes", "payload of the segment that arrived (0: a pure ACK)"),
    "probe_send_rate": ("bit/s", "bytes sent (snd_nxt) over the last smoothed RTT"),
    "probe_ack_rate": ("bit/s", "bytes acknowledged (snd_una) over the last smoothed RTT"),
}


def _col(trace: RawTrace, table: str, name: str) -> np.ndarray:
    arr = trace.tables.get(table, {}).get(name)
    if arr is None or not len(arr):
        return np.empty(0)
    return np.frombuffer(arr, dtype=np.dtype(arr.typecode)).astype(np.float64)


def unwrap32(seq: np.ndarray) -> np.ndarray:
    """32-bit sequence numbers as bytes since the first (wraps and small reorderings undone).

    >>> unwrap32(np.array([4294967290.0, 4, 10])).tolist()
    [0.0, 10.0, 16.0]
    """
    if seq.size == 0:
        return seq
    step = np.diff(seq)
    step = (step + 2**31) % 2**32 - 2**31  # each step as a signed 32-bit difference
    return np.concatenate(([0.0], np.cumsum(step)))


def window_rate(t: np.ndarray, pos: np.ndarray, window: np.ndarray) -> np.ndarray:
    """Bit/s: how far ``pos`` moved over the ``window`` seconds before each event (NaN in the first window).

    >>> window_rate(np.array([0.0, 1.0, 2.0]), np.array([0.0, 100.0, 300.0]), np.array([1.0, 1.0, 1.0])).tolist()
    [nan, 800.0, 1600.0]
    """
    j = np.searchsorted(t, t - window, side="left")
    dt = t - t[j]
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = (pos - pos[j]) * 8.0 / dt
    rate[(dt <= 0) | (t - t[0] < window)] = np.nan
    return rate


def probe_columns(trace: RawTrace, offset: float) -> dict[str, np.ndarray]:
    """An end's probe events as the Dataset's variables (times: ``t_wall - offset``)."""
    t = _col(trace, "probe", "t_wall") - offset
    una, nxt = unwrap32(_col(trace, "probe", "snd_una")), _col(trace, "probe", "snd_nxt")
    if nxt.size:
        first = _col(trace, "probe", "snd_una")[0]
        nxt = unwrap32(np.concatenate(([first], nxt)))[1:]  # on snd_una's base
    ss = _col(trace, "probe", "ssthresh")
    srtt = _col(trace, "probe", "srtt")
    window = np.where(srtt > 0, srtt / 1e6, np.nan)
    return {
        "probe_time": t,
        "probe_cwnd": _col(trace, "probe", "snd_cwnd"),
        "probe_ssthresh": np.where(ss >= INFINITE_SSTHRESH, np.nan, ss),
        "probe_srtt": srtt,
        "probe_snd_una": una,
        "probe_snd_nxt": nxt,
        "probe_inflight": nxt - una,
        "probe_snd_wnd": _col(trace, "probe", "snd_wnd"),
        "probe_rcv_wnd": _col(trace, "probe", "rcv_wnd"),
        "probe_data_len": _col(trace, "probe", "data_len"),
        "probe_send_rate": window_rate(t, nxt, np.nan_to_num(window, nan=0.0)) if t.size else t,
        "probe_ack_rate": window_rate(t, una, np.nan_to_num(window, nan=0.0)) if t.size else t,
    }


def load_traces(raw: ExperimentRaw) -> dict[tuple[str, str], RawTrace]:
    """The ``.ntrace`` of each flow end that has one; a file that cannot be read is a warning."""
    out: dict[tuple[str, str], RawTrace] = {}
    for rec in raw.flows:
        for end in ENDS:
            path = Path(raw.path) / "flows" / f"{rec.flow_id}.{end}{SUFFIX}"
            if not path.exists():
                continue
            try:
                trace = read_trace(path)
            except RawDataError as exc:
                raw.warnings.append(str(exc))
                continue
            for damage in trace.damaged:
                raw.warnings.append(f"{path}: damaged: {damage}")
            if trace.truncated:
                raw.warnings.append(f"{path}: truncated (last block cut short)")
            out[(rec.flow_id, end)] = trace
    return out


def _padded(per_end: dict[tuple[int, int], np.ndarray], nf: int, n: int) -> np.ndarray:
    out = np.full((nf, len(ENDS), n), np.nan)
    for (i, k), values in per_end.items():
        out[i, k, : values.size] = values
    return out


def add_traces(ds: xr.Dataset, raw: ExperimentRaw) -> xr.Dataset:
    """``ds`` with the event axes of the flows' traces (the module docstring); unchanged without any."""
    traces = load_traces(raw)
    if not traces:
        return ds
    t0 = float(ds.attrs.get("start_wall", 0.0))
    index = {rec.flow_id: i for i, rec in enumerate(raw.flows)}
    hosts = {rec.flow_id: (str(rec.meta.get("host", "")), str(rec.meta.get("server", ""))) for rec in raw.flows}
    probe: dict[str, dict[tuple[int, int], np.ndarray]] = {name: {} for name in PROBE_VARS}
    retx: dict[str, dict[tuple[int, int], np.ndarray]] = {"retx_time": {}, "retx_err": {}}
    cstate: dict[str, dict[tuple[int, int], np.ndarray]] = {"ca_time": {}, "ca_state": {}}
    nf = ds.sizes["flow"]
    counts = {k: np.full((nf, len(ENDS)), np.nan) for k in ("trace_events", "trace_retransmits", "trace_dropped")}
    for (flow_id, end), trace in traces.items():
        i, k = index[flow_id], ENDS.index(end)
        offset = raw.clock_offset(hosts[flow_id][k]) + t0
        for name, values in probe_columns(trace, offset).items():
            probe[name][(i, k)] = values
        retx["retx_time"][(i, k)] = _col(trace, "retransmit", "t_wall") - offset
        retx["retx_err"][(i, k)] = _col(trace, "retransmit", "err")
        cstate["ca_time"][(i, k)] = _col(trace, "cong_state", "t_wall") - offset
        cstate["ca_state"][(i, k)] = _col(trace, "cong_state", "cong_state")
        summary = trace.summary or {}
        counts["trace_events"][i, k] = trace.rows("probe")
        counts["trace_retransmits"][i, k] = trace.rows("retransmit")
        counts["trace_dropped"][i, k] = float(summary.get("host_dropped", math.nan)) + float(
            summary.get("host_missed_in_pages", 0))
    data: dict[str, Any] = {}
    coords: dict[str, Any] = {"flow": ds.flow, "end": ds["end"] if "end" in ds.coords else
                              ("end", np.array(ENDS, dtype=object), END_ATTRS)}
    for dim, group in (("probe", probe), ("retx", retx), ("ca_event", cstate)):
        n = max((v.size for v in next(iter(group.values())).values()), default=0)
        coords[dim] = (dim, np.arange(n), {"long_name": _DIMS[dim]})
        for name, per_end in group.items():
            units, long_name = PROBE_VARS[name] if name in PROBE_VARS else _OTHER[name]
            data[name] = (("flow", "end", dim), _padded(per_end, nf, n), {"units": units, "long_name": long_name})
    for name, values in counts.items():
        data[name] = (("flow", "end"), values, {"units": "1", "long_name": _COUNTS[name]})
    extra = xr.Dataset(data, coords=coords)
    out = ds.merge(extra, join="left", compat="override")
    out.attrs.update(ds.attrs)
    return out


_OTHER = {
    "retx_time": ("s", "time of a retransmission, seconds after the experiment start"),
    "retx_err": ("1", "0: the retransmission went out; a negative errno: it failed"),
    "ca_time": ("s", "time of a congestion-state change, seconds after the experiment start"),
    "ca_state": ("1", "the new congestion state: 0 open, 1 disorder, 2 cwr, 3 recovery, 4 loss"),
}
_DIMS = {
    "probe": "tcp_probe event of the flow end (0 = its first)",
    "retx": "retransmission of the flow end (0 = its first)",
    "ca_event": "congestion-state change of the flow end (0 = its first)",
}
_COUNTS = {
    "trace_events": "tcp_probe events of this end",
    "trace_retransmits": "retransmissions of this end",
    "trace_dropped": "events the tracing host's ring buffer refused during the trace (any connection's)",
}

__all__ = ["CA_STATES", "PROBE_VARS", "add_traces", "load_traces", "probe_columns", "unwrap32", "window_rate"]
