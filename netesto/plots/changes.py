"""Marks of an experiment's link changes (SET_LINK) on its time-series panels: a line per change, a band per ramp.

Each change of the dataset's ``change`` dimension (:mod:`netesto.results.changes`)
is a dotted vertical line at the instant it was in force, labelled with the
parameter and its new value (``rate 10mbit``); a run of changes of one
parameter of one link closer than :data:`RAMP_GAP` apart (a ramp, a square
wave at a short period) is one shaded band labelled with its first and last
values; the link's return to its shape at the schedule's end is a grey line.
On the goodput panel, a trace link's offered rate is a dashed grey line.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from netesto.linkshape import text_of

RAMP_GAP = 0.25  # s: changes closer than this are drawn as one band
COLOUR = "#7b3294"


def _runs(ds: Any) -> list[tuple[float, float, str, str, list[float]]]:
    """``(first, last, param, link, values)`` per run of close changes; a run's values start with the one
    before it (a ramp is labelled from where it started)."""
    times = np.asarray(ds["change_time"].values, dtype=float)
    params = [str(p) for p in ds["change_param"].values]
    links = [str(x) for x in ds["change_link"].values]
    kinds = [str(k) for k in ds["change_kind"].values]
    values = np.asarray(ds["change_value"].values, dtype=float)
    runs: list[tuple[float, float, str, str, list[float]]] = []
    by_key: dict[tuple[str, str, str], int] = {}
    last: dict[tuple[str, str], float] = {}  # each link's parameter's latest value
    before: dict[tuple[str, str], float] = {}  # ... and the one before the run that starts now
    for i in np.argsort(times, kind="stable"):
        if not np.isfinite(times[i]):
            continue
        key = (params[i], links[i], kinds[i])
        at = by_key.get(key)
        if at is not None and kinds[i] == "step" and times[i] - runs[at][1] < RAMP_GAP:
            first, _, p, link, vals = runs[at]
            if len(vals) == 1 and (params[i], links[i]) in before:
                vals = [before[(params[i], links[i])], *vals]
            runs[at] = (first, float(times[i]), p, link, vals + [float(values[i])])
        else:
            by_key[key] = len(runs)
            runs.append((float(times[i]), float(times[i]), params[i] if kinds[i] == "step" else f"{params[i]} back",
                         links[i], [float(values[i])]))
            if (params[i], links[i]) in last:
                before[(params[i], links[i])] = last[(params[i], links[i])]
        last[(params[i], links[i])] = float(values[i])
    return runs


def change_marks(ds: Any, top: float, right: float = np.inf) -> list[Any]:
    """The holoviews elements marking ``ds``'s link changes on a panel whose data reaches ``top`` (the
    labels stand there) and whose time axis ends at ``right``; [] without a ``change`` dimension."""
    if "change_time" not in ds:
        return []
    import holoviews as hv

    several = len({str(x) for x in ds["change_link"].values}) > 1
    out: list[Any] = []
    for k, (first, last, param, link, values) in enumerate(_runs(ds)):
        name = param.removesuffix(" back")
        text = " \u2192 ".join(dict.fromkeys(text_of(name, v) for v in (values[0], values[-1])))
        label = f"{link} " * several + f"{param} {text}"
        colour = "grey" if param.endswith(" back") else COLOUR
        if last > first:
            out.append(hv.VSpan(first, last).opts(color=colour, alpha=0.15))
        else:
            out.append(hv.VLine(first).opts(color=colour, line_dash="dotted", line_width=1.5))
        # labels stagger down the panel so that close ones do not overwrite each other
        y = top * (0.97 - 0.08 * (k % 4)) if np.isfinite(top) and top > 0 else 0.0
        near_end = first > 0.8 * right if np.isfinite(right) and right > 0 else False
        out.append(hv.Text(first, y, f" {label} " if near_end else f" {label}", halign="right" if near_end else "left",
                           valign="top").opts(text_color=colour, text_font_size="8pt"))
    return out


def trace_lines(ds: Any, factor: float, tdim: Any = "time", vdim: Any = "goodput") -> list[Any]:
    """The rate each trace link's trace offered (``trace_rate``, divided by ``factor``), a dashed grey line a
    link, for the goodput panel (its dimensions ``tdim`` and ``vdim``: the flows' axes); [] without one."""
    if "trace_rate" not in ds:
        return []
    import holoviews as hv

    time = np.asarray(ds["time"].values, dtype=float)
    out = []
    for link in ds["link"].values:
        rate = np.asarray(ds["trace_rate"].sel(link=link).values, dtype=float) / factor
        out.append(hv.Curve((time, rate), tdim, vdim, label=f"trace {link} (offered)").opts(
            color="grey", line_dash="dashed", line_width=1))
    return out


__all__ = ["RAMP_GAP", "change_marks", "trace_lines"]
