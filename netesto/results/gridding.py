"""Rows of a flow end -> values on the experiment's grid, with no row left out and no step lost.

The grid's step ``k`` stands for the time ``t0 + k x interval``. A row belongs
to the step its time rounds to (:meth:`Grid.index`); with sampling jitter a
step may hold two rows and the next none. So:

* counts (bytes, transactions) become rates from their cumulative values,
  interpolated at the step boundaries: every row counts, and the rates add
  up to exactly what was counted (:func:`rate_on_grid`);
* state (cwnd, RTT, ...) takes the last row of each step, and a step with no
  row of its own the last row before it (:func:`last_in_step`);
* per-interval summaries (latency) merge the rows of a step weighted by their
  counts; a step with no row of its own takes the next row's, whose interval
  covers it (:func:`interval_stats`).

Inside the rows' span no step is NaN (but where the rows' own values are).
"""

from __future__ import annotations

import math

import numpy as np


class Grid:
    """The experiment's sampling grid: ``n`` steps of ``interval`` seconds from ``t0`` (controller clock)."""

    def __init__(self, t0: float, interval: float, n: int) -> None:
        self.t0, self.interval, self.n = t0, interval, n

    def index(self, t: np.ndarray) -> np.ndarray:
        """The step each time rounds to, never decreasing along the rows (a wall clock set back
        while a flow ran must not put a row before the one taken ahead of it), within the grid."""
        idx = np.rint((t - self.t0) / self.interval).astype(np.int64)
        if idx.size:
            np.maximum.accumulate(idx, out=idx)
        return np.clip(idx, 0, max(self.n - 1, 0))


def last_in_step(idx: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(steps from the first row's to the last row's, the value of each): the last row of each step,
    else the last row before it.

    >>> ks, v = last_in_step(np.array([3, 4, 4, 6]), np.array([1.0, 2.0, 3.0, 4.0]))
    >>> ks.tolist(), v.tolist()
    ([3, 4, 5, 6], [1.0, 3.0, 3.0, 4.0])
    """
    if not idx.size:
        return np.empty(0, dtype=np.int64), np.empty(0)
    ks = np.arange(idx[0], idx[-1] + 1)
    return ks, values[np.searchsorted(idx, ks, side="right") - 1]


def interval_stats(idx: np.ndarray, counts: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(steps, value of each) for rows that summarise the interval since the row before (latency):
    the count-weighted mean of the rows of a step that counted something (NaN if none did); a step
    with no row of its own, the next step's with one.

    >>> ks, v = interval_stats(np.array([1, 1, 3]), np.array([1.0, 3.0, 2.0]), np.array([10.0, 20.0, 40.0]))
    >>> ks.tolist(), v.tolist()
    ([1, 2, 3], [17.5, 40.0, 40.0])
    """
    if not idx.size:
        return np.empty(0, dtype=np.int64), np.empty(0)
    rel = idx - idx[0]
    size = int(rel[-1]) + 1
    ok = (counts > 0) & np.isfinite(values)
    w = np.where(ok, counts, 0.0)
    weight = np.bincount(rel, weights=w, minlength=size)
    total = np.bincount(rel, weights=np.where(ok, values, 0.0) * w, minlength=size)
    with np.errstate(invalid="ignore", divide="ignore"):
        per = np.where(weight > 0, total / weight, np.nan)
    rows = np.bincount(rel, minlength=size) > 0
    # a step without rows: the first step at or after it that has some (the last step always has)
    nxt = np.where(rows, np.arange(size), size)
    nxt = np.minimum.accumulate(nxt[::-1])[::-1]
    return np.arange(idx[0], idx[-1] + 1), per[nxt]


def rate_on_grid(t: np.ndarray, cum: np.ndarray, grid: Grid) -> tuple[np.ndarray, np.ndarray]:
    """(steps, count per second over the step ending at each): the cumulative count interpolated at
    the step times, differenced. Integrates exactly to what was counted, whatever the jitter.

    >>> g = Grid(0.0, 0.01, 10)
    >>> ks, r = rate_on_grid(np.array([0.0, 0.012, 0.019, 0.03]), np.array([0.0, 12.0, 19.0, 30.0]), g)
    >>> ks.tolist(), [round(x) for x in r]
    ([1, 2, 3], [1000, 1000, 1000])
    """
    if t.size < 2:
        return np.empty(0, dtype=np.int64), np.empty(0)
    # Grid points from just before the first row to just after the last: np.interp holds the end
    # values outside, so nothing counted is lost.
    k0 = max(0, int(math.floor((t[0] - grid.t0) / grid.interval + 1e-9)))
    k1 = min(grid.n - 1, int(math.ceil((t[-1] - grid.t0) / grid.interval - 1e-9)))
    if k1 <= k0:
        return np.empty(0, dtype=np.int64), np.empty(0)
    ks = np.arange(k0, k1 + 1)
    at = np.interp(grid.t0 + ks * grid.interval, t, cum)
    return ks[1:], np.diff(at) / grid.interval


__all__ = ["Grid", "interval_stats", "last_in_step", "rate_on_grid"]
