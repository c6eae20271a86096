"""Transactions of drawn workloads: their rows in the Dataset (dim ``txn``), flow completion times, slowdowns.

A drawn flow's client writes one row per transaction (``<flow_id>.txn.nflow``,
docs/workloads.md). :func:`add_transactions` puts every row of every flow on one
dim ``txn``, with the flow it belongs to (``txn_flow``; a flow's in the order they were drawn): when it started, its sizes,
its completion time (``txn_fct``: the request's first byte handed to the kernel to the
reply's last byte read) and its **slowdown**, ``txn_fct / txn_ideal``, where the ideal
is what the bottleneck allows an exchange on an empty path::

    ideal = base_rtt + max(0, req - burst) x 8 / rate + max(0, reply - burst) x 8 / rate

``rate`` is the bottleneck's (the DO_CLIENT's ``bottleneck=``, else the testbed's
``bw``), ``base_rtt`` the path's round trip with no queue (the testbed's ``rtt`` less
its ``jitter``; on a lab without a testbed, the smallest ``min_rtt`` any of the
experiment's transaction connections saw), ``burst`` the bytes the bottleneck's
shaper lets through at once (the testbed's htb ``burst``, :data:`TESTBED_BURST`; 0
elsewhere). Headers, the connection's handshake (``txn_connect``, kept apart) and
slow start are not in it: a transaction's slowdown is 1 at best. Without a rate or a
base RTT the slowdown is NaN; :func:`recompute` takes them as arguments.
:func:`fct_table` summarises by size bucket, :func:`fct_compare` across experiments
(the sweep reports' hook).
"""

from __future__ import annotations

import json
import math
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
import xarray as xr

from netesto.results.load import ExperimentRaw, FlowRecord, _try_read
from netesto.results.numerics import num
from netesto.workload import SIZE, TIME, DistError
from netesto.workload import parse as parse_dist

# The netesto testbed's htb burst and cburst, "15k" to tc (netesto/testbed/shaping.py BURST; tests/results/
# test_fct.py holds the two equal): bytes that pass the shaper at once when its bucket is full.
TESTBED_BURST = 15 * 1024
STATUS = ("ok", "failed", "unfinished", "refused")  # the engine's codes (netesto.engine.kinds.workload)
# default size buckets (bytes): decades, as FCT figures of datacenter papers group flows
EDGES = (0, 1e3, 1e4, 1e5, 1e6, 1e7, math.inf)
VARS: dict[str, tuple[str, str]] = {
    "txn_start": ("s", "when the transaction began (connect, or its request's first byte), seconds since the "
                       "experiment start"),
    "txn_late": ("s", "how long after its arrival (open loop) or the end of its gap it began"),
    "txn_connect": ("s", "connect() to connected (TCP_CRR; 0 on a flow's one connection)"),
    "txn_fct": ("s", "completion time: the request's first byte to the kernel to the reply's last byte read "
                     "(NaN unless ok)"),
    "txn_req": ("bytes", "request payload, as drawn"),
    "txn_reply": ("bytes", "reply asked for, as drawn"),
    "txn_size": ("bytes", "request and reply together: the transaction's size"),
    "txn_min_rtt": ("us", "tcp_info min_rtt of its connection at its end (TCP_CRR; NaN unknown)"),
    "txn_ideal": ("s", "what the bottleneck allows it on an empty path: base RTT + the bytes past the shaper's "
                       "burst at its rate, each way (attrs fct_ideal)"),
    "txn_slowdown": ("1", "txn_fct / txn_ideal (1 at best; NaN without a rate and base RTT)"),
    "txn_rate": ("bit/s", "the bottleneck's rate its ideal takes (0: unknown)"),
}


def _txn_file(raw: ExperimentRaw, rec: FlowRecord) -> Any:
    """The flow's transaction log (None without one); what cannot be read is said as for its other files."""
    return _try_read(raw.path / "flows" / f"{rec.flow_id}.txn.nflow", raw)


def ideal_params(testbed: Mapping[str, Any], min_rtt_us: np.ndarray) -> dict[str, Any]:
    """The base RTT (s), burst (bytes) and where they come from, for an experiment on ``testbed``
    (its record's table: bw bit/s, rtt and jitter ms; empty off a testbed)."""
    rtt = num(testbed.get("rtt"))
    if math.isfinite(rtt) and rtt > 0:
        jitter = num(testbed.get("jitter"), 0.0)
        return {"base_rtt": max(0.0, rtt - (jitter if math.isfinite(jitter) else 0.0)) / 1e3,
                "burst": TESTBED_BURST, "source": "testbed rtt less its jitter; testbed htb burst"}
    seen = min_rtt_us[np.isfinite(min_rtt_us) & (min_rtt_us > 0)]
    return {"base_rtt": float(seen.min()) / 1e6 if seen.size else math.nan, "burst": 0,
            "source": "smallest min_rtt of the transactions' connections; no shaper burst"}


def ideal(req: np.ndarray, reply: np.ndarray, rate_bps: np.ndarray | float, base_rtt: float,
          burst: float) -> np.ndarray:
    """The ideal completion time (s) of transactions (see the module doc).

    >>> ideal(np.array([15360 + 125000.0]), np.array([1.0]), 1e6, 0.02, 15360).tolist()
    [1.02]
    """
    beyond = np.maximum(0.0, req - burst) + np.maximum(0.0, reply - burst)
    with np.errstate(divide="ignore", invalid="ignore"):
        return base_rtt + beyond * 8.0 / np.where(np.asarray(rate_bps) > 0, rate_bps, np.nan)


def add_transactions(ds: xr.Dataset, raw: ExperimentRaw) -> xr.Dataset:
    """``ds`` with the transactions of its drawn flows on dim ``txn`` (unchanged when it has none)."""
    cols: dict[str, list[np.ndarray]] = {k: [] for k in ("flow", "seq", "start", "due", "connect", "fct", "req",
                                                          "reply", "status", "min_rtt", "rate")}
    workloads: dict[str, Any] = {}
    t0 = float(ds.attrs.get("start_wall", 0.0))
    for rec in raw.flows:
        flow = _txn_file(raw, rec)
        if flow is None:
            continue
        spec = flow.header.get("flow") if isinstance(flow.header.get("flow"), dict) else {}
        workloads[rec.flow_id] = {k: spec.get(k) for k in ("seed", "stream", "req_dist", "reply_dist", "gap",
                                                           "open_loop", "load", "link_bps")}
        n = flow.rows
        offset = raw.clock_offset(str(rec.meta.get("host", "")))
        order = np.argsort(np.asarray(flow.columns["seq"]), kind="stable")  # written as they end: in draw order
        c = {k: np.asarray(v)[order] for k, v in flow.columns.items()}
        cols["flow"].append(np.full(n, rec.flow_id, dtype=object))
        cols["seq"].append(np.asarray(c["seq"], dtype=np.int64))
        for key in ("start", "due"):
            cols[key].append(np.asarray(c[f"t_{key}"], dtype=float) - offset - t0)
        for key in ("connect", "fct", "req", "reply", "min_rtt"):
            cols[key].append(np.asarray(c[key], dtype=float))
        codes = np.asarray(c["status"], dtype=int)
        cols["status"].append(np.array([STATUS[s] if 0 <= s < len(STATUS) else "?" for s in codes], dtype=object))
        cols["rate"].append(np.full(n, num(spec.get("link_bps"), 0.0) or num(raw.record.testbed.get("bw"), 0.0)))
    if not workloads:
        return ds
    v = {k: np.concatenate(parts) for k, parts in cols.items()}
    v["min_rtt"] = np.where(v["min_rtt"] > 0, v["min_rtt"], np.nan)
    params = ideal_params(raw.record.testbed, v["min_rtt"][v["status"] == "ok"])
    rate_bps = v.pop("rate")
    out = ds.assign_coords(txn=("txn", np.arange(v["seq"].size), {"long_name": "transaction (all drawn flows')"}),
                           txn_flow=("txn", v["flow"], {"long_name": "the flow the transaction belongs to"}),
                           txn_seq=("txn", v["seq"], {"units": "1", "long_name": "its draw in the flow's sequence"}),
                           txn_status=("txn", v["status"], {"long_name": "how it ended: " + ", ".join(STATUS)}))
    data = {"txn_start": v["start"], "txn_late": v["start"] - v["due"], "txn_connect": v["connect"],
            "txn_fct": v["fct"], "txn_req": v["req"], "txn_reply": v["reply"], "txn_size": v["req"] + v["reply"],
            "txn_min_rtt": v["min_rtt"], "txn_rate": rate_bps}
    for name, values in data.items():
        units, long_name = VARS[name]
        out[name] = ("txn", values, {"units": units, "long_name": long_name})
    out.attrs["workloads"] = json.dumps(workloads, sort_keys=True, default=str)
    return recompute(out, base_rtt=params["base_rtt"], burst=params["burst"], source=params["source"])


def recompute(ds: xr.Dataset, *, rate: float | None = None, base_rtt: float | None = None,
              burst: float | None = None, source: str = "given") -> xr.Dataset:
    """``ds`` with ``txn_ideal`` and ``txn_slowdown`` from ``rate`` (bit/s; default each transaction's
    ``txn_rate``), ``base_rtt`` (s) and ``burst`` (bytes) (defaults: what ``ds`` used before)."""
    before = json.loads(ds.attrs.get("fct_ideal", "{}") or "{}")
    rtt = base_rtt if base_rtt is not None else num(before.get("base_rtt_s"))
    b = burst if burst is not None else num(before.get("burst_bytes"), 0.0)
    r: Any = ds["txn_rate"].values if rate is None else float(rate)
    ide = ideal(ds["txn_req"].values, ds["txn_reply"].values, r, rtt, b)
    out = ds.copy()
    if rate is not None:
        out["txn_rate"] = ("txn", np.full(ds.sizes["txn"], float(rate)), dict(ds["txn_rate"].attrs))
    for name, values in (("txn_ideal", ide), ("txn_slowdown", ds["txn_fct"].values / ide)):
        units, long_name = VARS[name]
        out[name] = ("txn", values, {"units": units, "long_name": long_name})
    out.attrs["fct_ideal"] = json.dumps({"base_rtt_s": rtt, "burst_bytes": b,
                                         "rate": "given" if rate is not None else "txn_rate",
                                         "source": source, "formula": "base_rtt + max(0, req - burst) * 8 / rate "
                                                                      "+ max(0, reply - burst) * 8 / rate"})
    return out


def _bucket_label(lo: float, hi: float) -> str:
    def size(x: float) -> str:
        for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
            if x >= scale:
                return f"{x / scale:g} {unit}"
        return f"{x:g} B"
    return f"< {size(hi)}" if lo <= 0 else f">= {size(lo)}" if hi == math.inf else f"{size(lo)}-{size(hi)}"


def fct_table(ds: xr.Dataset, *, edges: Sequence[float] = EDGES) -> pd.DataFrame:
    """Per size bucket (``txn_size`` in [edge, next edge)): transactions, how many completed, and the
    p50/p99 completion time (ms) and slowdown of the completed ones; buckets with none left out."""
    if "txn" not in ds.dims:
        raise ValueError("the experiment has no transactions of a drawn workload (docs/workloads.md)")
    size = ds["txn_size"].values
    ok = ds["txn_status"].values == "ok"
    fct, slow = ds["txn_fct"].values * 1e3, ds["txn_slowdown"].values
    rows = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        inside = (size >= lo) & (size < hi)
        if not inside.any():
            continue
        done = inside & ok
        f, s = fct[done], slow[done & np.isfinite(slow)]
        rows.append({"bucket": _bucket_label(lo, hi), "size_lo": lo, "size_hi": hi, "count": int(inside.sum()),
                     "completed": int(done.sum()), "size_median": float(np.median(size[inside])),
                     "fct_p50_ms": _pct(f, 50), "fct_p99_ms": _pct(f, 99),
                     "slowdown_p50": _pct(s, 50), "slowdown_p99": _pct(s, 99),
                     "slowdown_mean": float(s.mean()) if s.size else math.nan})
    return pd.DataFrame(rows)


def _pct(values: np.ndarray, q: float) -> float:
    return float(np.percentile(values, q)) if values.size else math.nan


def fct_compare(datasets: Mapping[Any, xr.Dataset], *, edges: Sequence[float] = EDGES,
                label: str = "label") -> pd.DataFrame:
    """:func:`fct_table` of each experiment, one table with a ``label`` column (the mapping's keys: a
    congestion control, a sweep point): what a per-algorithm sweep report draws or tabulates.
    Experiments without transactions are left out."""
    parts = []
    for key, ds in datasets.items():
        if "txn" in ds.dims:
            t = fct_table(ds, edges=edges)
            t.insert(0, label, key)
            parts.append(t)
    if not parts:
        raise ValueError("no experiment has transactions of a drawn workload")
    return pd.concat(parts, ignore_index=True)


def describe(workload: Mapping[str, Any]) -> str:
    """A flow's draws in a few words: ``req exp(mean=2000), gap exp(mean=1ms) open loop, seed 5``."""
    parts = []
    for key, kind in (("req_dist", SIZE), ("reply_dist", SIZE), ("gap", TIME)):
        text = workload.get(key) or ""
        if text:
            try:
                text = parse_dist(str(text), kind).short
            except DistError:
                pass
            parts.append(f"{key.split('_')[0]} {text}")
    if workload.get("open_loop"):
        parts.append("open loop" + (f" at load {num(workload.get('load')):g}" if num(workload.get("load"), 0) else ""))
    if workload.get("seed") is not None:
        parts.append(f"seed {workload['seed']}")
    return ", ".join(parts)


def page_rows(ds: xr.Dataset) -> dict[str, Any]:
    """What the experiment page's flow-completion block shows: ``fct_counts`` (per drawn flow: arrivals,
    started, completed, failed, of which unfinished, refused), ``fct_buckets`` (:func:`fct_table`,
    formatted) and ``fct_ideal`` (how the ideal was taken); empty without transactions."""
    if "txn" not in ds.dims:
        return {"fct_counts": [], "fct_buckets": [], "fct_ideal": {}}
    flows, status = ds["txn_flow"].values, ds["txn_status"].values
    workloads = json.loads(ds.attrs.get("workloads", "{}") or "{}")
    counts = []
    for flow in dict.fromkeys(flows):
        mine = status[flows == flow]
        n = {s: int((mine == s).sum()) for s in STATUS}
        started = n["ok"] + n["failed"] + n["unfinished"]
        counts.append({"flow": str(flow), "draws": describe(workloads.get(str(flow), {})),
                       "arrivals": started + n["refused"], "started": started,
                       "completed": n["ok"], "failed": n["failed"] + n["unfinished"],
                       "unfinished": n["unfinished"], "refused": n["refused"]})
    buckets = [{k: (f"{v:.3g}" if isinstance(v, float) and math.isfinite(v) else "" if isinstance(v, float) else v)
                for k, v in row.items()} for row in fct_table(ds).to_dict("records")]
    ideal_doc = json.loads(ds.attrs.get("fct_ideal", "{}") or "{}")
    rtt = num(ideal_doc.get("base_rtt_s"))
    rates = ds["txn_rate"].values
    rate = float(np.nanmax(rates)) if rates.size and np.isfinite(rates).any() else math.nan
    return {"fct_counts": counts, "fct_buckets": buckets,
            "fct_ideal": {"rtt_ms": f"{rtt * 1e3:.3g}" if math.isfinite(rtt) else "unknown",
                          "rate_mbit": f"{rate / 1e6:g}" if math.isfinite(rate) and rate > 0 else "unknown",
                          "burst": int(num(ideal_doc.get("burst_bytes"), 0.0)), "source": ideal_doc.get("source", "")}}


__all__ = ["EDGES", "STATUS", "TESTBED_BURST", "VARS", "add_transactions", "fct_compare", "fct_table", "ideal",
           "describe", "ideal_params", "page_rows", "recompute"]
