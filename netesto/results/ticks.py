"""How late each sampler tick came, against the engine's own schedule (the header's ``tick_epoch``).

The built-in engine samples a flow end on a grid of its worker's monotonic
clock: its first row after the baseline serves the grid point recorded in
the file's header as ``tick_epoch`` (the sweep the flow end joined), and each
later row the next grid point, even one the row before already passed: a
tick that came late owes the rows of the points it passed, and they follow
as soon as the loop can take them. Only a row ``tick_backlog`` (a header
field) or more intervals behind gives up the points it passed: the next row
serves the first point ahead (netesto.engine.sampling.grid). Files written
before ``tick_backlog`` existed skipped at once (a backlog of 0: each row
served the first point past the row before). So every tick row has a
scheduled instant, and its lateness is its ``t_mono`` minus that instant;
the points given up are the missed ticks. The first row (the flow end
joining) and the last (its end) are not ticks.
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


def scheduled(t_mono: np.ndarray, epoch: float, interval: float, backlog: int = 0) -> np.ndarray:
    """The scheduled instant of each row after the first (rows 1..n-1): ``epoch`` for row 1, then for
    each the next grid point after the row before's (``epoch + k * interval``), or the first point past
    that row's stamp when it came ``backlog`` or more intervals behind (0: always the first point past).

    >>> t = np.array([0.003, 0.0101, 0.0235, 0.0301])
    >>> scheduled(t, 0.01, 0.01).round(4).tolist()
    [0.01, 0.02, 0.03]
    >>> t = np.array([0.003, 0.0101, 0.0551, 0.0552, 0.0553, 0.0601])   # a tick 35 ms late, the rows it owes
    >>> scheduled(t, 0.01, 0.01, backlog=64).round(4).tolist()
    [0.01, 0.02, 0.03, 0.04, 0.05]
    >>> scheduled(t, 0.01, 0.01, backlog=2).round(4).tolist()   # 3 points behind: it gives them up
    [0.01, 0.02, 0.06, 0.07, 0.08]
    """
    if t_mono.size < 2:
        return np.empty(0)
    prev = t_mono[1:-1]
    if backlog <= 0:  # each point depends on the row before only: at once
        after = epoch + (np.floor((prev - epoch) / interval + EPSILON) + 1.0) * interval
        # a row that came before the epoch (none should): the epoch is still ahead of it
        after = np.maximum(after, epoch + interval)
        return np.concatenate(([epoch], after))
    out = np.empty(prev.size + 1)
    out[0], start = epoch, 0
    while True:  # consecutive points from row `start` on, up to the first row that came backlog behind
        out[start:] = out[start] + np.arange(out.size - start) * interval
        behind = np.flatnonzero(prev[start:] - out[start + 1:] >= backlog * interval - EPSILON)
        if not behind.size:
            return out
        at = start + 1 + int(behind[0])
        when = out[at]
        out[at] = when + (np.floor((prev[at - 1] - when) / interval + EPSILON) + 1.0) * interval
        start = at


def row_lateness(flow: RawFlow | None) -> np.ndarray:
    """Each row's lateness in us against its scheduled instant (NaN for the first row, the last,
    and every row of a file without ``tick_epoch``: drivers, files written before it existed)."""
    if flow is None or not flow.rows:
        return np.empty(0)
    out = np.full(flow.rows, np.nan)
    points = _schedule(flow)
    if points is not None:
        t = np.asarray(flow.columns["t_mono"], dtype=float)
        out[1:-1] = (t[1:-1] - points[:-1]) * 1e6  # the last row is the flow end's end, not a tick
    return out


def _schedule(flow: RawFlow) -> np.ndarray | None:
    """The scheduled instants of ``flow``'s rows 1..n-1 (see :func:`scheduled`); None where it cannot tell."""
    epoch, interval = _grid(flow)
    if math.isnan(epoch) or flow.rows < 3:
        return None
    try:
        backlog = int(flow.header.get("tick_backlog", 0))
    except (TypeError, ValueError):
        return None
    return scheduled(np.asarray(flow.columns["t_mono"], dtype=float), epoch, interval, backlog)


def tick_stats(flow: RawFlow | None) -> TickStats:
    """p50/p99/max lateness (us) of one flow end's ticks and the grid points it missed (gave up).

    >>> from array import array
    >>> t = array("d", [0.001, 0.0102, 0.0205, 0.0451, 0.0503, 0.052])  # the third tick 15 ms late
    >>> s = tick_stats(RawFlow("f.nflow", {"interval": 0.01, "tick_epoch": 0.01}, {"t_mono": t}))
    >>> round(s.max), s.missed, s.ticks   # (a file from before tick_backlog: the late tick skipped a point)
    (15100, 1.0, 4)
    >>> t = array("d", [0.001, 0.0102, 0.0205, 0.0451, 0.0452, 0.0503, 0.052])  # its owed row follows
    >>> s = tick_stats(RawFlow("f.nflow", {"interval": 0.01, "tick_epoch": 0.01, "tick_backlog": 64}, {"t_mono": t}))
    >>> round(s.max), s.missed, s.ticks
    (15100, 0.0, 5)
    """
    late = row_lateness(flow)
    late = late[np.isfinite(late)]
    if flow is None or not late.size:
        return TickStats()
    interval = float(flow.header["interval"])
    p50, p99 = np.percentile(late, [50, 99])
    points = _schedule(flow)
    assert points is not None  # (it gave the lateness)
    # a step of more than one interval between two rows' points: the points between were given up
    missed = float(np.round(np.diff(points[:-1]) / interval - 1.0).clip(min=0).sum())
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
