"""Per-flow time-series plots of an experiment as inline SVG (no JavaScript)."""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from netesto.results.plotting import PALETTE, nice_step

SMOOTH_SECONDS = 0.2  # the goodput shown first: a 10 ms sample of application bytes is bursty
_RATE = ((1.0, "bit/s"), (1e3, "kbit/s"), (1e6, "Mbit/s"), (1e9, "Gbit/s"))
_TIME = ((1.0, "us"), (1e3, "ms"), (1e6, "s"))

# (id, variable, title, unit choices as (factor, label) from small to large, what the lines are)
PLOTS: tuple[tuple[str, str, str, tuple[tuple[float, str], ...], str], ...] = (
    ("goodput", "goodput", f"Goodput per flow ({SMOOTH_SECONDS * 1000:g} ms mean)", _RATE,
     f"Bytes the receiver got, per second, averaged over {SMOOTH_SECONDS * 1000:g} ms: one line per flow."),
    ("goodput_raw", "goodput", "Goodput per flow (each sample)", _RATE,
     "The same, one point per sampling interval: a few ms of application bytes arrive in bursts, so single "
     "samples can exceed the link rate while the mean above does not."),
    ("cwnd", "cwnd", "Congestion window per flow", ((1.0, "packets"),),
     "The sender's congestion window (TCP_INFO tcpi_snd_cwnd), in packets."),
    ("rtt", "rtt", "Smoothed RTT per flow", _TIME, "The sender's smoothed round-trip time (tcpi_rtt)."),
    ("lat_p99", "lat_p99", "p99 transaction latency per flow (RR tests)", _TIME,
     "The 99th percentile of request/response times in each interval (RR and CRR flows only)."),
)
FOLDED = frozenset({"goodput_raw"})  # shown one click away (a <details> on the page)


@dataclass(frozen=True)
class TimePlot:
    """One rendered plot: an anchor id, its title and the SVG text."""

    id: str
    title: str
    svg: str
    caption: str = ""
    folded: bool = False


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


def downsample(time: np.ndarray, values: np.ndarray, max_points: int) -> tuple[np.ndarray, np.ndarray]:
    """Mean of equal bins (along the last axis) so a line has at most
    ``max_points`` points; bins without a finite sample stay NaN (gaps)."""
    n = len(time)
    if n <= max_points:
        return time, values
    starts = np.linspace(0, n, max_points + 1).astype(int)[:-1]
    t = np.add.reduceat(time, starts) / np.diff(np.append(starts, n))
    ok = np.isfinite(values)
    sums = np.add.reduceat(np.where(ok, values, 0.0), starts, axis=-1)
    counts = np.add.reduceat(ok, starts, axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return t, np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def _segments(xs: np.ndarray, ys: np.ndarray) -> list[list[tuple[float, float]]]:
    """Runs of finite points (NaN = the flow had no sample there: a gap)."""
    out: list[list[tuple[float, float]]] = []
    cur: list[tuple[float, float]] = []
    for x, y in zip(xs, ys):
        if math.isfinite(y):
            cur.append((float(x), float(y)))
        elif cur:
            out.append(cur)
            cur = []
    if cur:
        out.append(cur)
    return out


def line_svg(time: np.ndarray, lines: Sequence[tuple[str, np.ndarray]], *, title: str, y_label: str,
             width: int = 960, height: int = 320, max_points: int = 600) -> str:
    """A line chart of several series over a shared time axis, with a legend."""
    left, right, top, bottom = 70, 190, 30, 45
    pw, ph = width - left - right, height - top - bottom
    t = np.asarray(time, dtype=float)
    t_max = float(t.max()) if t.size else 1.0
    finite = [v[np.isfinite(v)] for _, v in lines]
    y_max = max([float(f.max()) for f in finite if f.size] or [1.0])
    y_step = nice_step(y_max if y_max > 0 else 1.0)
    y_top = y_step * max(1, math.ceil(y_max / y_step)) if y_max > 0 else y_step * 5
    x_step = nice_step(t_max if t_max > 0 else 1.0, 8)
    x_top = t_max if t_max > 0 else 1.0

    def px(x: float) -> float:
        return left + pw * x / x_top

    def py(y: float) -> float:
        return top + ph - ph * y / y_top

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="timeplot" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="12">',
           f'<text x="{left + pw / 2}" y="18" text-anchor="middle" font-size="14">{html.escape(title)}</text>']
    for i in range(round(y_top / y_step) + 1):
        y = round(i * y_step, 12)
        out.append(f'<line x1="{left}" x2="{left + pw}" y1="{py(y):.1f}" y2="{py(y):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 5}" y="{py(y) + 4:.1f}" text-anchor="end">{y:g}</text>')
    for i in range(int(x_top / x_step + 1e-9) + 1):
        x = round(i * x_step, 12)
        out.append(f'<text x="{px(x):.1f}" y="{top + ph + 15}" text-anchor="middle">{x:g}</text>')
    out.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#000"/>')
    for i, (label, values) in enumerate(lines):
        color = PALETTE[i % len(PALETTE)]
        ts, vs = downsample(t, np.asarray(values, dtype=float), max_points)
        for seg in _segments(ts, vs):
            pts = " ".join(f"{px(a):.1f},{py(b):.1f}" for a, b in seg)
            out.append(f'<polyline class="series" data-flow="{html.escape(label)}" points="{pts}" '
                       f'fill="none" stroke="{color}" stroke-width="1.5"/>')
            if len(seg) == 1:  # a lone sample between gaps: a line of one point is invisible
                out.append(f'<circle cx="{px(seg[0][0]):.1f}" cy="{py(seg[0][1]):.1f}" r="2.5" fill="{color}"/>')
        ly = top + 12 + 16 * i
        if ly + 16 >= top + ph and i < len(lines) - 1:
            if ly < top + ph:  # the last legend row says how many are not listed
                out.append(f'<text x="{left + pw + 10}" y="{ly}">+{len(lines) - i} more flows</text>')
        elif ly < top + ph:
            out.append(f'<line x1="{left + pw + 10}" x2="{left + pw + 28}" y1="{ly - 4}" y2="{ly - 4}" '
                       f'stroke="{color}" stroke-width="3"/>')
            out.append(f'<text x="{left + pw + 32}" y="{ly}">{html.escape(label)}</text>')
    out.append(f'<text x="{left + pw / 2}" y="{height - 8}" text-anchor="middle">time (s)</text>')
    out.append(f'<text x="15" y="{top + ph / 2}" transform="rotate(-90 15 {top + ph / 2})" '
               f'text-anchor="middle">{html.escape(y_label)}</text>')
    out.append("</svg>")
    return "\n".join(out)


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


def experiment_plots(ds: Any, **kw: Any) -> list[TimePlot]:
    """Goodput, cwnd, RTT and (RR tests) p99 latency of every flow of an
    experiment Dataset over time (variables that are missing or all NaN are left out)."""
    out: list[TimePlot] = []
    if "time" not in ds.coords or ds.sizes.get("time", 0) == 0:
        return out
    time = ds["time"].values
    interval = sample_interval(ds)
    for plot_id, name, title, units, caption in PLOTS:
        if name not in ds:
            continue
        data = np.asarray(ds[name].transpose("flow", "time").values, dtype=float)
        if not np.isfinite(data).any():
            continue
        if plot_id == "goodput":
            data = rolling_mean(data, max(1, round(SMOOTH_SECONDS / interval)))
        factor, unit = pick_unit(float(np.nanmax(np.abs(data))), units)
        # Flows without a finite value (e.g. streams in a latency plot) are left out.
        lines = [(str(f), data[i] / factor) for i, f in enumerate(ds["flow"].values)
                 if np.isfinite(data[i]).any()]
        svg = line_svg(time, lines, title=title, y_label=f"{name} ({unit})", **kw)
        out.append(TimePlot(plot_id, title, svg, caption, plot_id in FOLDED))
    return out


__all__ = ["PLOTS", "SMOOTH_SECONDS", "TimePlot", "downsample", "experiment_plots", "line_svg", "pick_unit",
           "rolling_mean", "sample_interval"]
