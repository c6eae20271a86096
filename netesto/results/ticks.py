"""How late each sampler tick came, against the engine's own schedule (the header's ``tick_epoch``).

The built-in engine samples a flow end on a grid of its worker's monotonic
clock: its first row after the baseline is due at the grid point recorded in
the file's header as ``tick_epoch`` (the sweep the flow end joined), and each
later row at the first grid point past the row before it (a sweep, or an RR
end's own row, that comes late is followed by the next point still ahead: the
points it passed are skipped, not caught up). So every tick row has a
scheduled instant, and its lateness is its ``t_mono`` minus that instant;
a row more than one interval late means ``floor(lateness / interval)`` grid
points without a row (missed ticks). The first row (the flow end joining) and
the last (its end) are not ticks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from netesto.raw.nflow import RawFlow

EPSILON = 1e-9  # s: two float stamps of one instant differ by less


@dataclass(frozen=True)
class TickStats:
    """One flow end's tick lateness (us) and missed ticks; NaN where its file cannot tell."""

    p50: float = math.nan
    p99: float = math.nan
    max: float = math.nan
    missed: float = math.nan
    ticks: int = 0


def scheduled(t_mono: np.ndarray, epoch: float, interval: float) -> np.ndarray:
    """The scheduled instant of each row after the first (rows 1..n-1): ``epoch`` for row 1, then
    the first grid point (``epoch + k * interval``) after the row before.

    >>> scheduled(np.array([0.003, 0.0101, 0.0235, 0.0301]), 0.01, 0.01).round(4).tolist()
    [0.01, 0.02, 0.03]
    """
    if t_mono.size < 2:
        return np.empty(0)
    prev = t_mono[1:-1]
    after = epoch + (np.floor((prev - epoch) / interval + EPSILON) + 1.0) * interval
    # a row that came before the epoch (none should): the epoch is still ahead of it
    after = np.maximum(after, epoch + interval)
    return np.concatenate(([epoch], after))


def row_lateness(flow: RawFlow | None) -> np.ndarray:
    """Each row's lateness in us against its scheduled instant (NaN for the first row, the last,
    and every row of a file without ``tick_epoch``: drivers, files written before it existed)."""
    if flow is None or not flow.rows:
        return np.empty(0)
    out = np.full(flow.rows, np.nan)
    epoch, interval = _grid(flow)
    if math.isnan(epoch) or flow.rows < 3:
        return out
    t = np.asarray(flow.columns["t_mono"], dtype=float)
    late = (t[1:] - scheduled(t, epoch, interval)) * 1e6
    out[1:-1] = late[:-1]  # the last row is the flow end's end, not a tick
    return out


def tick_stats(flow: RawFlow | None) -> TickStats:
    """p50/p99/max lateness (us) of one flow end's ticks and the grid points it missed.

    >>> from array import array
    >>> t = array("d", [0.001, 0.0102, 0.0205, 0.0451, 0.0503, 0.052])  # the third tick 15 ms late
    >>> f = RawFlow("f.nflow", {"interval": 0.01, "tick_epoch": 0.01}, {"t_mono": t})
    >>> s = tick_stats(f)
    >>> round(s.max), s.missed, s.ticks
    (15100, 1.0, 4)
    """
    late = row_lateness(flow)
    late = late[np.isfinite(late)]
    if flow is None or not late.size:
        return TickStats()
    interval = float(flow.header["interval"])
    p50, p99 = np.percentile(late, [50, 99])
    missed = float(np.floor(late / (interval * 1e6) + EPSILON).clip(min=0).sum())
    return TickStats(float(p50), float(p99), float(late.max()), missed, int(late.size))


def _grid(flow: RawFlow) -> tuple[float, float]:
    """The header's (tick_epoch, interval), NaN when it has no usable pair."""
    try:
        epoch, interval = float(flow.header["tick_epoch"]), float(flow.header["interval"])
    except (KeyError, TypeError, ValueError):
        return math.nan, math.nan
    if not (math.isfinite(epoch) and interval > 0):
        return math.nan, math.nan
    return epoch, interval


__all__ = ["TickStats", "row_lateness", "scheduled", "tick_stats"]
