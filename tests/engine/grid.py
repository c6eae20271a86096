"""What a flow end's rows say of its sampler's schedule, checked the same way under any load.

A loaded machine makes ticks late (a late tick's owed rows follow it, each
late too); it never moves a row before its grid point nor changes which
points the schedule has. So the checks here hold rows to the engine's own
grid (the header's ``tick_epoch``, netesto.results.ticks) instead of to a
wall-clock spacing: a schedule of another step drifts away from it, and its
lateness grows row after row.
"""

from __future__ import annotations

import numpy as np

from netesto.raw.nflow import RawFlow
from netesto.results.ticks import row_lateness, tick_stats


def assert_on_grid(flow: RawFlow, *, interval: float = 0.01, within: float = 3.0) -> np.ndarray:
    """Every tick row of ``flow`` at or after its grid point, the grid the asked interval's, and half of its
    ticks less than ``within`` intervals late (a schedule of another step, or ticks held to some other
    event, drifts: 10 % off, 150 rows end 15 intervals late); the lateness (us) of each tick."""
    assert float(flow.header["interval"]) == interval and "tick_epoch" in flow.header, flow.header
    late = row_lateness(flow)
    late = late[np.isfinite(late)]
    assert late.size >= 10, (flow.path, late.size)
    assert late.min() >= -1.0, (flow.path, late.min())  # (us: float stamps of one instant)
    assert np.median(late) < interval * 1e6 * within, (flow.path, np.percentile(late, [25, 50, 99]))
    stats = tick_stats(flow)
    assert stats.ticks == late.size and stats.missed >= 0
    return late
