"""Combine experiments along ``exp`` with their parameters as coordinates, and
reshape the per-experiment summaries into a grid (e.g. ca x bw x rtt)::

    combined = combine(open_experiments(workdir))         # dim exp
    g = grid(combined, ["ca", "bw", "rtt"])                # dims ca, bw, rtt
    g.rate.sel(ca="bbr", bw="100mbit")
"""

from __future__ import annotations

import json
import math
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
import xarray as xr

from netesto.errors import ResultsError
from netesto.results.fairness import jain_index, max_min_ratio
from netesto.results.groups import breakdown, flow_numbers, parts
from netesto.results.schema import ALL_VARS
from netesto.results.steady import Steady, window_mean

# Per-experiment summary variables and their units.
# Named so that no sweep parameter is likely to take a measurement's name
# (a sweep over ``rtt`` or ``flows`` must keep both the parameter and the
# measurement); :func:`combine` renames any measurement a parameter still takes.
SUMMARY_UNITS = {
    "rate": "Mbit/s", "rate_min": "Mbit/s", "rate_max": "Mbit/s", "mean_cwnd": "1",
    "mean_rtt": "ms", "qdelay": "ms", "ping_rtt": "ms", "retrans_pkts_pct": "percent", "jain": "1",
    "max_min_ratio": "1", "n_flows": "1", "local_cpu": "percent", "remote_cpu": "percent",
    "lat_p50": "ms", "lat_p99": "ms",
}
MEASURED_PREFIX = "measured_"


def _nan(fn: Any, v: np.ndarray) -> float:
    v = np.asarray(v, dtype=float)
    v = v[np.isfinite(v)]
    return float(fn(v)) if v.size else math.nan


def total_rate(ds: xr.Dataset) -> float:
    """The experiment's goodput as exp.csv's aggregate row has it (fields.txt's
    ``sumRateDur``): sum(rate x dur) / (max(delay + dur) - min(delay)), the bits of
    every flow over the time the flows spanned. A plain sum of rates would count a
    short flow's rate for the whole experiment (cubic 10 s at 46 + bbr 4 s at 77
    Mbit/s is not 123), and dividing by the longest dur counts flows 5 s apart twice."""
    rate = np.asarray(ds.rate.values, dtype=float)
    dur = np.asarray(ds.dur.values, dtype=float) if "dur" in ds.coords else np.full(rate.shape, np.nan)
    delay = np.asarray(ds.delay.values, dtype=float) if "delay" in ds.coords else np.zeros(rate.shape)
    delay = np.where(np.isfinite(delay) & (delay >= 0), delay, 0.0)
    ok = np.isfinite(rate)
    if not ok.any():
        return math.nan
    timed = ok & np.isfinite(dur) & (dur > 0)
    if not timed.all() or not timed.any():  # durations unknown: every flow counts for the same time
        return float(rate[ok].sum())
    span = (delay[timed] + dur[timed]).max() - delay[timed].min()
    return float((rate[timed] * dur[timed]).sum() / span)


def experiment_summary(ds: xr.Dataset, steady: "str | Steady | None" = None) -> dict[str, Any]:
    """One experiment's headline numbers (the all.exp.out ones), its parameters and its per-algorithm
    and per-group numbers (``parts``, :func:`netesto.results.groups.parts`).

    With a ``steady`` window (``"5s"``, ``"10rtt"``) every number that the flows' time series give is
    taken over each flow's steady window (:mod:`netesto.results.steady`): rates, RTTs, cwnd, retransmits,
    Jain; without one they are the whole-flow numbers of all.exp.out. Times are in ms."""
    sd = Steady.parse(steady)
    b = breakdown(ds, sd)
    if sd.amount:
        numbers, windows, _how = flow_numbers(ds, sd)
        rates = numbers["rate"]
        lengths = np.array([w.end - w.start if not w.empty else math.nan for w in windows])
        ok = np.isfinite(rates) & np.isfinite(lengths) & (lengths > 0)
        rate = float((rates[ok] * lengths[ok]).sum() / lengths[ok].max()) if ok.any() else math.nan
        packets = _nan(np.sum, numbers["wpackets"])
        retrans = _nan(np.sum, numbers["wretrans"])
        rtt_ms = _nan(np.mean, numbers["rtt"])
        cwnd = np.asarray(ds["cwnd"].values, dtype=float)
        mean_cwnd = _nan(np.mean, np.array([window_mean(cwnd[i], w) for i, w in enumerate(windows)]))
    else:
        rates = np.asarray(ds.rate.values, dtype=float)
        rate = total_rate(ds)
        packets = _nan(np.sum, ds.packets_sent.values)
        retrans = _nan(np.sum, ds.retrans_total.values)
        rtt_ms = _nan(np.mean, ds.mean_rtt.values) / 1e3
        mean_cwnd = _nan(np.mean, ds.mean_cwnd.values)
    out: dict[str, Any] = {
        "rate": rate,
        "rate_min": _nan(np.min, rates),
        "rate_max": _nan(np.max, rates),
        "mean_cwnd": mean_cwnd,
        "mean_rtt": rtt_ms,
        "qdelay": _nan(np.mean, b.steady_qdelay.values),
        "ping_rtt": _nan(np.mean, ds.ping_rtt_mean.values) / 1e3,
        "retrans_pkts_pct": 100.0 * retrans / packets if packets > 0 else math.nan,
        "jain": jain_index(rates),
        "max_min_ratio": max_min_ratio(rates),
        "n_flows": int(ds.sizes.get("flow", 0)),
        "local_cpu": _nan(np.mean, ds.local_cpu.values),
        "remote_cpu": _nan(np.mean, ds.remote_cpu.values),
        "lat_p50": _nan(np.mean, ds.lat_p50_total.values) / 1e3,
        "lat_p99": _nan(np.mean, ds.lat_p99_total.values) / 1e3,
    }
    params: dict[str, Any] = {
        "ca": "/".join(dict.fromkeys(str(c) for c in ds.ca.values)),
        "test": "/".join(dict.fromkeys(str(c) for c in ds.test.values)),
        "exp_name": str(ds.attrs.get("exp_name", "")),
        "instances": int(ds.sizes.get("flow", 0)),
    }
    # What shaped the experiment is a parameter of it: the testbed's bottleneck
    # (bw in bit/s, rtt in ms, buffer in bytes, loss 0..1), the -D values, OTHER.
    for key, prefix in (("testbed", ""), ("defines", "")):
        try:
            extra = json.loads(ds.attrs.get(key, "{}") or "{}")
        except (ValueError, TypeError):
            continue
        if isinstance(extra, dict):
            for k, v in extra.items():
                if key == "testbed" and k in ("name", "mode"):
                    continue
                params[f"{prefix}{k}"] = v
    try:
        for k, v in json.loads(ds.attrs.get("other", "[]") or "[]"):
            params[str(k)] = v
    except (ValueError, TypeError):
        pass
    return {"values": out, "params": params, "parts": parts(b), "steady": sd.text}


def combine(
    datasets: Mapping[int, xr.Dataset] | Iterable[xr.Dataset],
    params: Mapping[int, Mapping[str, Any]] | None = None,
) -> xr.Dataset:
    """A Dataset with dim ``exp``: each experiment's summary numbers as data
    variables and its parameters (ca, test, exp_name, instances, the
    ``other`` pairs such as bw/netem, plus ``params[exp]``) as coordinates.

    A parameter never hides a measurement: were one named like a summary
    variable, the variable is kept as ``measured_<name>``."""
    items = list(datasets.items()) if isinstance(datasets, Mapping) else [
        (int(ds.attrs.get("exp", i)), ds) for i, ds in enumerate(datasets)]
    if not items:
        raise ResultsError("combine: no experiments")
    rows, prow = [], []
    for exp, ds in items:
        s = experiment_summary(ds)
        rows.append(s["values"])
        p = dict(s["params"])
        p.update((params or {}).get(exp, {}))
        prow.append(p)
    exps = [e for e, _ in items]
    keys = list(dict.fromkeys(k for p in prow for k in p))
    data = {(MEASURED_PREFIX + k if k in keys else k):
            ("exp", np.array([r[k] for r in rows], dtype=float), {"units": SUMMARY_UNITS.get(k, "1")})
            for k in rows[0]}
    coords: dict[str, Any] = {"exp": ("exp", np.array(exps))}
    for k in keys:
        vals = [p.get(k, "") for p in prow]
        try:
            arr = np.array([float(v) for v in vals])
        except (TypeError, ValueError):
            arr = np.array([str(v) for v in vals], dtype=object)
        coords[k] = ("exp", arr)
    return xr.Dataset(data, coords=coords, attrs={"combined_experiments": len(exps)})


def grid(combined: xr.Dataset, dims: Sequence[str], *, reduce: str = "mean") -> xr.Dataset:
    """Reshape ``combined`` (dim exp) to dims ``dims`` (parameter coordinates).

    Experiments that share all ``dims`` values (repeats) are reduced with
    ``reduce`` ("mean", "median", "min", "max"); grid cells with no
    experiment are NaN. Adds ``count`` (experiments per cell).
    """
    missing = [d for d in dims if d not in combined.coords]
    if missing:
        raise ResultsError(f"grid: no parameter {', '.join(missing)}; have {', '.join(str(k) for k in combined.coords if k != 'exp')}")
    if reduce not in ("mean", "median", "min", "max"):
        raise ResultsError(f"grid: reduce must be mean, median, min or max, not {reduce!r}")
    df = pd.DataFrame({d: combined[d].values for d in dims})
    for v in combined.data_vars:
        df[v] = combined[v].values
    grouped = df.groupby(list(dims))
    out = getattr(grouped, reduce)()
    out["count"] = grouped.size()
    ds = xr.Dataset.from_dataframe(out)
    for v in combined.data_vars:
        ds[v].attrs = dict(combined[v].attrs)
    ds["count"].attrs = {"units": "1", "long_name": "experiments in the cell"}
    return ds


def concat_flows(datasets: Mapping[int, xr.Dataset], variables: Sequence[str] | None = None) -> xr.Dataset:
    """Per-flow summaries of many experiments along one ``flow`` dim with an
    ``exp`` coordinate (time series are left out: their grids differ)."""
    names = list(variables) if variables else [v for v in ALL_VARS if ALL_VARS[v].dtype != "str"
                                                 and v in next(iter(datasets.values())).data_vars
                                                 and next(iter(datasets.values()))[v].dims == ("flow",)]
    parts = []
    for exp, ds in datasets.items():
        part = ds[names]
        part = part.drop_vars([c for c in part.coords if part[c].dims != ("flow",)])
        part = part.assign_coords(exp=("flow", np.full(part.sizes["flow"], exp)))
        part = part.assign_coords(flow=[f"{exp}/{f}" for f in part.flow.values])
        parts.append(part)
    return xr.concat(parts, dim="flow")


__all__ = ["MEASURED_PREFIX", "SUMMARY_UNITS", "combine", "concat_flows", "experiment_summary", "grid"]
