"""The sampler's grid: which grid point a flow end's next row serves.

Every row after a flow end's baseline serves one point of its worker's grid
(``epoch + k x interval``; the first is the header's ``tick_epoch``). A row
that serves ``point`` and is taken at ``now`` is followed by the row for
``point + interval``, even when that point is already past: a tick that came
late still owes the rows of the points it passed, and the loop takes them
as soon as it can, each with its own true stamp (a CPU hog that holds the
engine for a few intervals costs lateness, not rows). Only a flow end more
than its backlog behind (:func:`backlog`: :data:`TICK_BACKLOG` intervals or
:data:`BACKLOG_SECONDS`, whichever is longer) gives up the points it passed
and goes on from the first one ahead (a stopped process, a sampler that
cannot keep up at all): those are the missed ticks.

The C loops follow the same rule (``next_point`` in
``netesto/engine/native/_loops.h``, with the same backlog, whose constants
each module exports as ``TICK_BACKLOG`` and ``BACKLOG_MS``), and the results recompute each row's point from
the file (:mod:`netesto.results.ticks`, with the header's ``tick_backlog``).
"""

from __future__ import annotations

import math

TICK_BACKLOG = 64  # grid points a flow end may owe rows for before it skips them, at least ...
BACKLOG_SECONDS = 1.0  # ... and as many as this many seconds hold (a 1 ms grid: 1000)


def backlog(interval: float) -> int:
    """How many grid points a flow end sampled every ``interval`` s may owe rows for (its file's
    ``tick_backlog``): :data:`TICK_BACKLOG`, or as many as :data:`BACKLOG_SECONDS` hold if more, so that
    a host holding the engine off its CPU for up to a second costs no row at any interval.

    >>> backlog(0.01), backlog(0.001), backlog(1.0)
    (100, 1000, 64)
    """
    return max(TICK_BACKLOG, math.ceil(BACKLOG_SECONDS / interval - 1e-9)) if interval > 0 else TICK_BACKLOG


def next_point(point: float, now: float, interval: float, owe: int | None = None) -> float:
    """The point the row after one for ``point``, taken at ``now``, serves (``owe``: the backlog in grid
    points, :func:`backlog` of the interval unless given).

    >>> next_point(0.02, 0.0201, 0.01)   # on time: the next point
    0.03
    >>> next_point(0.02, 0.0551, 0.01)   # 35 ms late: the next point still, already past
    0.03
    >>> round(next_point(0.02, 0.0551, 0.01, owe=0), 6)   # no backlog: the first point ahead
    0.06
    """
    when = point + interval
    if now - when >= (backlog(interval) if owe is None else owe) * interval:
        when += ((now - when) // interval + 1) * interval
        if when <= now:  # (rounding)
            when += interval
    return when


__all__ = ["BACKLOG_SECONDS", "TICK_BACKLOG", "backlog", "next_point"]
