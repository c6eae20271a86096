"""Time-series helpers over an experiment Dataset: sampling interval, trailing mean, display units."""

from __future__ import annotations

from typing import Any

import numpy as np

SMOOTH_SECONDS = 0.2  # the goodput shown first: a 10 ms sample of application bytes is bursty


def rolling_mean(values: np.ndarray, window: int) -> np.ndarray:
    """Trailing mean over ``window`` samples along the last axis, ignoring NaN (all-NaN -> NaN).

    >>> rolling_mean(np.array([1.0, 3.0, np.nan, 5.0]), 2).tolist()
    [1.0, 2.0, 3.0, 5.0]
    """
    if window <= 1:
        return values
    ok = np.isfinite(values)
    pad = [(0, 0)] * (values.ndim - 1) + [(1, 0)]
    sums = np.cumsum(np.pad(np.where(ok, values, 0.0), pad), axis=-1)
    counts = np.cumsum(np.pad(ok.astype(float), pad), axis=-1)
    n = values.shape[-1]
    lo = np.maximum(np.arange(1, n + 1) - window, 0)
    total = sums[..., 1:] - sums[..., lo]
    count = counts[..., 1:] - counts[..., lo]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def pick_unit(peak: float, choices: tuple[tuple[float, str], ...]) -> tuple[float, str]:
    """The largest (factor, label) of ``choices`` not above ``peak`` (the first if none).

    >>> pick_unit(2.5e9, ((1.0, "bit/s"), (1e6, "Mbit/s"), (1e9, "Gbit/s")))
    (1000000000.0, 'Gbit/s')
    """
    best = choices[0]
    for factor, label in choices:
        if peak >= factor:
            best = (factor, label)
    return best


def sample_interval(ds: Any) -> float:
    """The dataset's sampling interval in seconds (its attr, else the spacing of its time axis)."""
    time = ds["time"].values
    return float(ds.attrs.get("interval", 0.0) or 0.0) or (float(np.median(np.diff(time))) if len(time) > 1 else 1.0)


__all__ = ["SMOOTH_SECONDS", "pick_unit", "rolling_mean", "sample_interval"]
