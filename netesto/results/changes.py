"""The link changes of an experiment (SET_LINK): the ``change`` dimension, on the dataset's clock.

The router agent records what each link's schedule did in
``<exp>/links/<dev>.json`` (:mod:`netesto.agent.links`), in its own clock.
Here every applied step becomes one entry of the ``change`` dimension, and
so does the link's return to its shape when the schedule ended (kind
``end``), with times in seconds from the experiment start like ``time``
(``t_agent - clock_offset(agent) - start_wall``):

``change_time``       s   when the change was in force (the agent read the clock once the tc
                          call or the delay line's answer returned)
``change_scheduled``  s   the instant the schedule asked for
``change_value``          the value asked for, in ``change_unit``
``change_readback``       the value the link reported after the change (tc, the delay line)

and the coordinates ``change_param`` (rate, delay, jitter, loss, buffer),
``change_unit`` (bit/s, ms, percent, bytes), ``change_link`` (the router's
device) and ``change_kind`` (``step`` or ``end``). A link that followed a
trace says so in the attribute ``links`` (JSON: per link its shape before,
its trace's name, sha256, opportunities and mean rate, and why it ended),
and ``trace_rate`` (link, time) is what its trace offered, in bit/s over the
:data:`TRACE_WINDOW` before each instant, while it was on (NaN elsewhere).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from netesto.linkshape import PARAMS
from netesto.linktrace import bytes_between, read_trace

TRACE_WINDOW = 0.1  # s
UDUNITS = {"%": "percent"}  # the dataset's spelling of a parameter's unit (bit/s, ms and bytes are already)

CHANGE_VARS = {
    "change_time": ("s", "instant the change was in force, seconds after the experiment start"),
    "change_scheduled": ("s", "instant the schedule asked for, seconds after the experiment start"),
    "change_value": ("", "value asked for, in change_unit"),
    "change_readback": ("", "value the link reported after the change, in change_unit"),
}


def read_links(exp_dir: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """The link records of an experiment directory, and a warning for each that cannot be read."""
    docs, warnings = [], []
    for path in sorted((exp_dir / "links").glob("*.json")):
        try:
            doc = json.loads(path.read_text())
            if not isinstance(doc, dict) or not isinstance(doc.get("steps"), list):
                raise ValueError("not a link record")
        except (OSError, ValueError) as exc:
            warnings.append(f"{path}: {exc}")
            continue
        doc["_file"] = path.name
        docs.append(doc)
    return docs, warnings


def _num(value: Any) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return math.nan
    return out


def change_rows(docs: list[dict[str, Any]], offsets: dict[str, float], t0: float) -> list[dict[str, Any]]:
    """One row per change, times in seconds after ``t0`` (controller clock), ordered by time."""
    rows: list[dict[str, Any]] = []
    for doc in docs:
        shift = offsets.get(str(doc.get("host", "")), 0.0) + t0
        start = _num(doc.get("t0"))
        link = str(doc.get("dev", doc["_file"]))
        changed = []
        for step in doc["steps"]:
            if not isinstance(step, dict) or step.get("param") not in PARAMS or "skipped" in step:
                continue
            param = str(step["param"])
            changed.append(param)
            rows.append({"time": _num(step.get("applied")) - shift, "scheduled": start + _num(step.get("at")) - shift,
                         "value": _num(step.get("value")), "readback": _num(step.get("readback")),
                         "param": param, "link": link, "kind": "step"})
        ended = doc.get("ended") or {}
        base = doc.get("base") or {}
        for param in dict.fromkeys(changed):
            rows.append({"time": _num(ended.get("restored_at")) - shift, "scheduled": _num(doc.get("until")) - shift,
                         "value": _num(base.get(param)), "readback": _num((ended.get("shape") or {}).get(param)),
                         "param": param, "link": link, "kind": "end"})
    rows.sort(key=lambda r: (math.isnan(r["time"]), r["time"]))
    return rows


def with_changes(ds: xr.Dataset, exp_dir: Path, offsets: dict[str, float]) -> xr.Dataset:
    """``ds`` with the ``change`` dimension of ``exp_dir``'s link records (``ds`` itself without any);
    ``offsets``: agent clock minus controller clock per host."""
    docs, warnings = read_links(Path(exp_dir))
    if warnings:
        ds.attrs["warnings"] = json.dumps([*json.loads(ds.attrs.get("warnings", "[]") or "[]"), *warnings])
    if not docs:
        return ds
    rows = change_rows(docs, offsets, float(ds.attrs.get("start_wall", 0.0)))
    coords = {
        "change": ("change", np.arange(len(rows))),
        "change_param": ("change", np.array([r["param"] for r in rows], dtype=object), {"long_name": "link parameter"}),
        "change_unit": ("change", np.array([UDUNITS.get(PARAMS[r["param"]].unit, PARAMS[r["param"]].unit)
                                            for r in rows], dtype=object),
                        {"long_name": "unit of change_value and change_readback"}),
        "change_link": ("change", np.array([r["link"] for r in rows], dtype=object), {"long_name": "router device"}),
        "change_kind": ("change", np.array([r["kind"] for r in rows], dtype=object),
                        {"long_name": "step of the schedule, or the link's shape back at its end"}),
    }
    data = {name: ("change", np.array([r[name.removeprefix("change_")] for r in rows], dtype=float),
                   {"units": units, "long_name": long} if units else {"long_name": long})
            for name, (units, long) in CHANGE_VARS.items()}
    out = ds.assign_coords(coords).assign(data) if rows else ds
    offered = trace_rates(docs, Path(exp_dir), offsets, float(ds.attrs.get("start_wall", 0.0)),
                          np.asarray(ds["time"].values, dtype=float) if "time" in ds else np.array([]))
    if offered:
        out = out.assign_coords(link=("link", np.array(list(offered), dtype=object))).assign(
            trace_rate=(("link", "time"), np.array(list(offered.values())),
                        {"units": "bit/s", "long_name": f"rate the link's trace offered over the "
                                                        f"{TRACE_WINDOW * 1000:g} ms before"}))
    out.attrs["links"] = json.dumps([{k: doc.get(k) for k in ("host", "dev", "base", "trace", "ended")} for doc in docs],
                                    default=str)
    return out


def trace_rates(docs: list[dict[str, Any]], exp_dir: Path, offsets: dict[str, float], t0: float,
                times: np.ndarray) -> dict[str, np.ndarray]:
    """Per trace link, what its trace offered at each of ``times`` (s after ``t0``) while it was on."""
    out = {}
    for doc in docs:
        info = doc.get("trace") or {}
        path = exp_dir / str(info.get("file", ""))
        if not info or not path.is_file():
            continue
        try:
            trace = read_trace(path)
        except ValueError:
            continue
        shift = offsets.get(str(doc.get("host", "")), 0.0) + t0
        epoch = _num(doc.get("t0")) - shift
        on, off = _num(info.get("set")) - shift, _num((doc.get("ended") or {}).get("restored_at")) - shift
        rate = np.full(times.size, np.nan)
        for i, t in enumerate(times):
            if on + TRACE_WINDOW <= t <= (off if math.isfinite(off) else math.inf):
                ms = (t - epoch) * 1000
                rate[i] = bytes_between(trace, ms - TRACE_WINDOW * 1000, ms) * 8 / TRACE_WINDOW
        out[str(doc.get("dev", doc["_file"]))] = rate
    return out


__all__ = ["CHANGE_VARS", "TRACE_WINDOW", "change_rows", "read_links", "trace_rates", "with_changes"]
