"""Fairness and derived metrics: Jain's index, fastest/slowest ratio, windowed
goodput, and the time to converge to the fair share after a flow joins."""

from __future__ import annotations

import math
from typing import Iterable

import numpy as np
import xarray as xr


def _finite(values: Iterable[float] | np.ndarray) -> np.ndarray:
    v = np.asarray(list(values) if not isinstance(values, np.ndarray) else values, dtype=float)
    return v[np.isfinite(v)]


def jain_index(rates: Iterable[float] | np.ndarray) -> float:
    """Jain's fairness index (sum x)^2 / (n sum x^2): 1 = equal shares, 1/n = one flow takes all.

    >>> jain_index([10, 10, 10]), round(jain_index([30, 0, 0]), 3)
    (1.0, 0.333)
    """
    v = _finite(rates)
    if v.size == 0 or not (v**2).sum() > 0:
        return math.nan
    return float(v.sum() ** 2 / (v.size * (v**2).sum()))


def max_min_ratio(rates: Iterable[float] | np.ndarray) -> float:
    """Fastest / slowest rate (the paper's "fairness" column; inf if a flow got 0).

    >>> round(max_min_ratio([44.6, 24.9]), 3)
    1.791
    """
    v = _finite(rates)
    if v.size == 0:
        return math.nan
    lo = v.min()
    return float(v.max() / lo) if lo > 0 else math.inf


def fairness_by(ds: xr.Dataset, by: str | None = None) -> xr.Dataset:
    """Jain's index and fastest/slowest ratio of ``ds.rate`` over the whole
    experiment (``by=None``) or per value of a flow coordinate (e.g. "group")."""
    if by is None:
        return xr.Dataset({"jain": jain_index(ds.rate.values),
                           "max_min_ratio": max_min_ratio(ds.rate.values)})
    keys = list(dict.fromkeys(ds[by].values.tolist()))
    jain, ratio = [], []
    for k in keys:
        r = ds.rate.values[ds[by].values == k]
        jain.append(jain_index(r))
        ratio.append(max_min_ratio(r))
    return xr.Dataset({"jain": (by, jain), "max_min_ratio": (by, ratio)}, coords={by: keys})


def window_goodput(ds: xr.Dataset, start: float, end: float, flow: str | None = None) -> xr.DataArray | float:
    """Mean goodput (bit/s) of each flow (or one ``flow``) over [start, end) seconds.

    Samples with no data (the flow was not running) count as zero: the result
    is what the flow delivered in the window divided by the window length.
    """
    if end <= start:
        raise ValueError(f"window end {end} must be after start {start}")
    w = ds.goodput.sel(time=slice(start, end - 1e-9))
    dt = float(ds.attrs.get("interval", 0.01))
    out = w.fillna(0.0).sum("time") * dt / (end - start)
    out.attrs = {"units": "bit/s", "long_name": f"goodput over [{start}, {end}) s"}
    return float(out.sel(flow=flow)) if flow is not None else out


def convergence_time(
    ds: xr.Dataset,
    flow: str,
    *,
    tolerance: float = 0.2,
    hold: float = 0.5,
    smooth: float = 0.1,
) -> float:
    """Seconds from ``flow``'s first sample until every running flow is within
    ``tolerance`` (relative) of the fair share for at least ``hold`` seconds.

    Goodput is smoothed over ``smooth`` seconds first (per-sample goodput of
    TCP is bursty). The fair share is the sum of the running flows' goodput
    divided by their number. NaN if it never converges while ``flow`` runs.
    """
    dt = float(ds.attrs.get("interval", 0.01))
    gp = ds.goodput
    win = max(1, int(round(smooth / dt)))
    sm = gp.rolling(time=win, min_periods=1).mean()
    t_join = float(ds.start.sel(flow=flow))
    running = gp.notnull()
    vals = sm.where(running).values
    n_run = running.values.sum(axis=0)
    total = np.nansum(vals, axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = total / n_run
        dev = np.abs(vals - share) / share
    ok = np.all((dev <= tolerance) | ~running.values, axis=0) & (n_run > 0)
    times = ds.time.values
    # Only while the joining flow runs: once it has ended the others are
    # trivially "fair" among themselves.
    alive = np.nonzero(gp.sel(flow=flow).notnull().values)[0]
    t_last = float(times[alive[-1]]) if alive.size else -math.inf
    need = max(1, int(round(hold / dt)))
    run = 0
    for i in np.nonzero((times >= t_join) & (times <= t_last))[0]:
        run = run + 1 if ok[i] else 0
        if run >= need:
            return float(times[i - need + 1] - t_join)
    return math.nan


__all__ = ["convergence_time", "fairness_by", "jain_index", "max_min_ratio", "window_goodput"]
