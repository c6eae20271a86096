"""The steady-state window of each flow: its life less a warm-up given in seconds or in round trips.

Slow start and the first probing cycles are no part of the equilibrium a study
measures: a 30 s flow through 16 BDPs of buffer (RTT ~680 ms) lives under 60
round trips, and its whole-life mean is mostly warm-up. A :class:`Steady` names
how much of each flow's life to leave out, from the flow's own first step:

>>> Steady.parse("2s").warmup(srtt_s=0.04), Steady.parse("10rtt").warmup(srtt_s=0.04)
(2.0, 0.4)
>>> Steady.parse(None).text, Steady.parse("500ms").text, Steady.parse("10rtts").text
('0s', '500ms', '10rtt')

A round trip is the flow's own median smoothed RTT over its life (what one of
its round trips took, queueing included), not its min_rtt: at 16 BDP the two
differ seventeen-fold. The window ends with the flow's last step.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from netesto.errors import ResultsError

_FORM = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(s|ms|us|rtts?)\s*$", re.IGNORECASE)
_SECONDS = {"s": 1.0, "ms": 1e-3, "us": 1e-6}


@dataclass(frozen=True)
class Steady:
    """A warm-up to leave out of every flow: ``amount`` seconds (``unit`` "s") or round trips ("rtt")."""

    amount: float = 0.0
    unit: str = "s"

    @classmethod
    def parse(cls, text: "str | float | Steady | None") -> "Steady":
        """``"2s"``, ``"500ms"``, ``"10rtt"``; ``None``, ``""``, ``0`` and ``"0"``: no warm-up left out."""
        if isinstance(text, Steady):
            return text
        if text is None or (isinstance(text, (int, float)) and not isinstance(text, bool) and text == 0):
            return cls()
        raw = str(text).strip()
        if raw in ("", "0", "0.0", "none"):
            return cls()
        m = _FORM.match(raw)
        if not m:
            raise ResultsError(f"steady window {text!r}: a warm-up such as 2s, 500ms or 10rtt (round trips of "
                               "each flow's own median smoothed RTT); 0 keeps every flow's whole life")
        amount, unit = float(m.group(1)), m.group(2).lower()
        if unit.startswith("rtt"):
            return cls(amount, "rtt")
        return cls(amount * _SECONDS[unit], "s")

    @property
    def text(self) -> str:
        if self.unit == "rtt":
            return f"{self.amount:g}rtt"
        if self.amount and self.amount < 1:
            return f"{self.amount * 1e3:g}ms"
        return f"{self.amount:g}s"

    def warmup(self, srtt_s: float) -> float:
        """Seconds left out of a flow whose median smoothed RTT is ``srtt_s`` (NaN: a window in round
        trips of a flow with no RTT sample)."""
        return self.amount * srtt_s if self.unit == "rtt" else self.amount

    def describe(self) -> str:
        """What the window is, in words (it goes into the attrs of every number taken over it)."""
        if not self.amount:
            return "each flow's whole life (no warm-up left out)"
        what = (f"{self.amount:g} round trips (the flow's median smoothed RTT)" if self.unit == "rtt"
                else f"{self.text}")
        return f"each flow's life less its first {what}"


@dataclass(frozen=True)
class FlowWindow:
    """One flow's steady window on the experiment's grid: steps ``lo`` to ``hi`` (exclusive), times in s."""

    lo: int
    hi: int
    start: float  # the window's start: the flow's start plus its warm-up
    end: float  # the flow's last step
    life_start: float

    @property
    def empty(self) -> bool:
        return self.hi <= self.lo


def flow_windows(ds: Any, steady: Steady) -> list[FlowWindow]:
    """Each flow's steady window: from its first goodput step plus the warm-up to its last step.

    A step's goodput counts the bytes of the interval ending at its time, so the
    window takes the steps whose interval starts at or after the warm-up's end.
    A warm-up as long as the flow leaves an empty window (its numbers are NaN)."""
    gp = np.asarray(ds["goodput"].values, dtype=float)
    t = np.asarray(ds["time"].values, dtype=float)
    dt = float(ds.attrs.get("interval", 0.01)) or 0.01
    rtt = np.asarray(ds["rtt"].values, dtype=float) if "rtt" in ds else np.full(gp.shape, np.nan)
    out = []
    for i in range(gp.shape[0]):
        live = np.nonzero(np.isfinite(gp[i]))[0]
        if not live.size:
            out.append(FlowWindow(0, 0, math.nan, math.nan, math.nan))
            continue
        a, b = int(live[0]), int(live[-1]) + 1
        life_start = float(t[a]) - dt
        r = rtt[i, a:b]
        srtt = float(np.nanmedian(r)) / 1e6 if np.isfinite(r).any() else math.nan
        start = life_start + steady.warmup(srtt)
        if not math.isfinite(start):
            out.append(FlowWindow(b, b, start, float(t[b - 1]), life_start))
            continue
        lo = a + int(np.searchsorted(t[a:b] - dt, start - 1e-9))  # 1 ns: the grid's own rounding
        out.append(FlowWindow(min(lo, b), b, start, float(t[b - 1]), life_start))
    return out


def window_mean(values: np.ndarray, w: FlowWindow, *, zero_gaps: bool = False) -> float:
    """The mean of one flow's row over its window (NaN steps as 0 for rates, left out for states)."""
    part = np.asarray(values[w.lo:w.hi], dtype=float)
    if w.empty or not part.size:
        return math.nan
    if zero_gaps:
        return float(np.where(np.isfinite(part), part, 0.0).mean())
    return float(np.nanmean(part)) if np.isfinite(part).any() else math.nan


def common_window(windows: list[FlowWindow]) -> tuple[int, int]:
    """The steps where every flow is in its steady window ([lo, hi); hi <= lo when they never overlap)."""
    live = [w for w in windows if not w.empty]
    if not live:
        return 0, 0
    lo = max(w.lo for w in live)
    hi = min(w.hi for w in live)
    return lo, hi


__all__ = ["FlowWindow", "Steady", "common_window", "flow_windows", "window_mean"]
