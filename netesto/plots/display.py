"""Thinning long per-flow series for display only (numpy, no holoviews): the dataset keeps every sample.

A screen is ~1000 pixels wide; a 60 s flow sampled every 10 ms has 6000 points. Each line is cut
into equal bins and keeps, per bin, its lowest and highest sample in time order (an envelope:
peaks and dips stay visible, unlike a mean or a stride). Bins with no finite sample stay NaN, which
bokeh draws as a gap.
"""

from __future__ import annotations

import numpy as np


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


def first_per_bin(mask: np.ndarray, bins: int) -> tuple[np.ndarray, np.ndarray]:
    """(row, column) of the True cells of ``mask`` (flows x samples), keeping only the first of each
    row in each of ``bins`` equal bins when there are more than ``2 * bins`` columns (what a
    screen can tell apart). Marks such as retransmissions stay one per flow and pixel column.

    >>> m = np.zeros((2, 10), bool); m[0, [1, 2, 7]] = True; m[1, 9] = True
    >>> [a.tolist() for a in first_per_bin(m, 2)]
    [[0, 0, 1], [1, 7, 9]]
    >>> [a.tolist() for a in first_per_bin(m, 5)]
    [[0, 0, 0, 1], [1, 2, 7, 9]]
    """
    rows, cols = np.nonzero(mask)
    if mask.shape[1] <= 2 * bins or not len(cols):
        return rows, cols
    width = -(-mask.shape[1] // bins)
    _, keep = np.unique(rows * (bins + 1) + cols // width, return_index=True)
    return rows[keep], cols[keep]


__all__ = ["envelope", "first_per_bin"]
