"""Goodput smoothed inside each flow's life: ``goodput_smooth`` per flow and ``goodput_sum_smooth``.

A 10 ms ``goodput`` sample counts the bytes the receiving application read in
that step; reads come in bursts (a receiver that waited for a CPU reads at
once what waited in its socket buffer: 0, 0, 0, then 331 Mbit/s on a 100
Mbit/s link), and a 200 ms mean of them still went 17 % over the link. So the
smoothed series counts what the network delivered: the receiving socket's
in-order bytes (tcp_info ``bytes_received``; the application's count where a
file has none: drivers, UDP), whose total is the same bytes. It is the mean
over :data:`SMOOTH_SECONDS` around each step, the window kept whole and
inside the flow's life: centred where it fits, slid inward at the flow's
first and last steps (so it never reaches past them, and never shrinks to a
few samples there), the flow's whole life when it is shorter. Centred, it
does not lag behind what cwnd and RTT show at the same time. Outside a flow's
life its smoothed goodput is NaN, and the sum counts only the flows running.
"""

from __future__ import annotations

from typing import Any

import numpy as np

SMOOTH_SECONDS = 0.2


def window_steps(interval: float, seconds: float = SMOOTH_SECONDS) -> int:
    """Grid steps in a window of ``seconds`` (at least one).

    >>> window_steps(0.01)
    20
    """
    return max(1, round(seconds / interval)) if interval > 0 else 1


def smooth_inside(values: np.ndarray, window: int) -> np.ndarray:
    """Mean over ``window`` steps along the last axis, each window inside its row's finite span (see
    the module): NaN outside the span, NaN steps inside it left out of the means.

    >>> smooth_inside(np.array([np.nan, 10.0, 0.0, 20.0, 30.0, np.nan]), 2).tolist()
    [nan, 5.0, 5.0, 10.0, 25.0, nan]
    >>> smooth_inside(np.array([np.nan, 4.0, 8.0, np.nan]), 5).tolist()
    [nan, 6.0, 6.0, nan]
    """
    flat = np.atleast_2d(np.asarray(values, dtype=float))
    out = np.full(flat.shape, np.nan)
    for row, res in zip(flat, out):
        live = np.nonzero(np.isfinite(row))[0]
        if not live.size:
            continue
        a, b = int(live[0]), int(live[-1]) + 1  # the span [a, b)
        ok = np.isfinite(row[a:b])
        sums = np.concatenate(([0.0], np.cumsum(np.where(ok, row[a:b], 0.0))))
        counts = np.concatenate(([0], np.cumsum(ok)))
        w = min(window, b - a)
        # each step's window [lo, lo + w) within the span: centred, slid inward at the ends
        lo = np.clip(np.arange(b - a) - w // 2, 0, b - a - w)
        total, count = sums[lo + w] - sums[lo], counts[lo + w] - counts[lo]
        with np.errstate(invalid="ignore", divide="ignore"):
            res[a:b] = np.where(count > 0, total / np.maximum(count, 1), np.nan)
    return out.reshape(np.shape(values))


def smoothed_goodput(goodput: np.ndarray, interval: float,
                     seconds: float = SMOOTH_SECONDS) -> tuple[np.ndarray, np.ndarray]:
    """(per flow, sum of the flows) of a (flow, time) goodput array: see the module."""
    per = smooth_inside(goodput, window_steps(interval, seconds))
    running = np.isfinite(per).any(axis=0)
    total = np.where(running, np.nansum(per, axis=0), np.nan) if per.size else np.empty(per.shape[-1:])
    return per, total


def smooth_attrs(interval: float, seconds: float = SMOOTH_SECONDS) -> dict[str, Any]:
    """The attrs that say what window a smoothed variable used."""
    steps = window_steps(interval, seconds)
    return {"window_seconds": steps * interval, "window_steps": steps,
            "window": "centred, kept whole inside the flow's life (slid inward at its ends)"}


def goodput_smooth(ds: Any) -> tuple[Any, Any]:
    """(``goodput_smooth``, ``goodput_sum_smooth``) of an experiment dataset as DataArrays: its own
    variables, or, for a dataset written before they existed (schema 1), the same smoothing of its
    ``goodput`` (the application's reads: a schema 1 file has nothing else on its grid)."""
    import xarray as xr

    if "goodput_smooth" in ds and "goodput_sum_smooth" in ds:
        return ds["goodput_smooth"], ds["goodput_sum_smooth"]
    from netesto.results.schema import var_attrs
    from netesto.results.series import sample_interval

    interval = sample_interval(ds)
    gp = ds["goodput"].transpose("flow", "time")
    per, total = smoothed_goodput(np.asarray(gp.values, dtype=float), interval)
    attrs = smooth_attrs(interval)
    return (xr.DataArray(per, coords=gp.coords, dims=gp.dims, attrs={**var_attrs("goodput_smooth"), **attrs}),
            xr.DataArray(total, coords={"time": ds["time"]}, dims=("time",),
                         attrs={**var_attrs("goodput_sum_smooth"), **attrs}))


__all__ = ["SMOOTH_SECONDS", "goodput_smooth", "smooth_attrs", "smooth_inside", "smoothed_goodput",
           "window_steps"]
