"""Thinning long per-flow series for display only: the dataset and the plot objects keep every sample.

A screen is ~1000 pixels wide; a 60 s flow sampled every 10 ms has 6000 points. Each line is cut
into equal bins and keeps, per bin, its lowest and highest sample in time order (an envelope:
peaks and dips stay visible, unlike a mean or a stride). Bins with no finite sample stay NaN, which
bokeh draws as a gap. :func:`netesto.plots.screen.thin` applies it to the curves of a holoviews object
as it is drawn (pages, netesto's notebook display): the object and the dataset keep every sample.
"""

from __future__ import annotations

from typing import Any

import numpy as np

BINS = 1000  # display bins per line (each keeps its min and max): about one per pixel column
PAGE_BINS = 20_000  # per panel: many flows get fewer bins each, so a page stays small and quick


def envelope(time: np.ndarray, data: np.ndarray, bins: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row of ``data`` (flows x samples on the ``time`` axis), at most ``2 * bins`` points: the
    minimum and the maximum of each of ``bins`` equal bins, in time order. Returns (times, values),
    both float32 of shape (flows, points); short series come back whole.

    >>> t = np.arange(8.0)
    >>> ts, vs = envelope(t, np.array([[1.0, 5.0, 2.0, 2.0, np.nan, np.nan, 7.0, 0.0]]), 2)
    >>> ts.tolist(), vs.tolist()
    ([[0.0, 1.0, 6.0, 7.0]], [[1.0, 5.0, 7.0, 0.0]])
    >>> envelope(t, np.ones((1, 8)), 4)[1].shape
    (1, 8)
    """
    data = np.atleast_2d(np.asarray(data, dtype=float))
    time = np.asarray(time, dtype=float)
    n = data.shape[1]
    if n <= 2 * bins:
        return np.broadcast_to(time, data.shape).astype(np.float32), data.astype(np.float32)
    width = -(-n // bins)
    bins = -(-n // width)
    pad = bins * width - n
    padded = np.pad(data, ((0, 0), (0, pad)), constant_values=np.nan).reshape(len(data), bins, width)
    times = np.pad(time, (0, pad), mode="edge").reshape(bins, width)
    ok = np.isfinite(padded)
    lo = np.where(ok, padded, np.inf).argmin(axis=2)
    hi = np.where(ok, padded, -np.inf).argmax(axis=2)
    first, second = np.minimum(lo, hi), np.maximum(lo, hi)
    idx = np.stack([first, second], axis=2)  # (flows, bins, 2): positions inside each bin
    values = np.take_along_axis(padded, idx, axis=2)
    at = times[np.arange(bins)[:, None], idx]
    return at.reshape(len(data), -1).astype(np.float32), values.reshape(len(data), -1).astype(np.float32)


def first_per_bin(times: np.ndarray, groups: np.ndarray, bins: int) -> np.ndarray:
    """Which of the points at ``times`` (each of a group, e.g. its flow) to draw: all when there are
    at most ``2 * bins``, else the first of each group in each of ``bins`` equal bins of their time
    span (what a screen can tell apart). Marks such as retransmissions stay one per flow and pixel
    column. Returns their indices, in order.

    >>> t = np.array([1.0, 2.0, 7.0, 9.0, 0.0, 9.5])
    >>> first_per_bin(t, np.array(["a", "a", "a", "b", "a", "a"]), 2).tolist()
    [2, 3, 4]
    >>> first_per_bin(t, np.zeros(6), 3).tolist()
    [0, 1, 2, 3, 4, 5]
    """
    t = np.asarray(times, dtype=float)
    if len(t) <= 2 * bins:
        return np.arange(len(t))
    lo, hi = float(np.nanmin(t)), float(np.nanmax(t))
    at = np.minimum(((t - lo) / ((hi - lo) / bins or 1.0)).astype(int), bins - 1)
    _, group = np.unique(np.asarray(groups), return_inverse=True)
    order = np.argsort(t, kind="stable")  # np.unique keeps the first of each (group, bin) in this order
    _, keep = np.unique((group * bins + at)[order], return_index=True)
    return np.sort(order[keep])


def columns(curve: Any) -> tuple[np.ndarray, np.ndarray]:
    """A curve's time values and its values as one row (what :func:`envelope` takes), read from its
    data interface: ``dimension_values`` runs holoviews' pipeline per call (0.6 of 0.8 s for 192 curves)."""
    values = curve.interface.values
    return (np.asarray(values(curve, curve.kdims[0]), dtype=float),
            np.asarray(values(curve, curve.vdims[0]), dtype=float)[None])


__all__ = ["BINS", "PAGE_BINS", "columns", "envelope", "first_per_bin"]
