"""Time-series helpers over an experiment Dataset: sampling interval, display units (smoothing: smoothing.py)."""

from __future__ import annotations

from typing import Any

import numpy as np


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


__all__ = ["pick_unit", "sample_interval"]
