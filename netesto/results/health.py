"""What an experiment's flows say about the run itself: late or missing starts, host-limited flows,
how the sampler kept its schedule. For the run's output, the dataset's attrs and the page."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

from netesto.results.limits import HOST_LIMIT_PERCENT, SHARES, host_limited
from netesto.results.load import ExperimentRaw
from netesto.results.numerics import never_started, num


def late_starts(ds: Any) -> list[str]:
    """One line per flow of ``ds`` that began its data phase more than one sampling interval after
    its scheduled instant."""
    if "start_late" not in ds:
        return []
    limit = float(ds.attrs.get("interval", 0.01) or 0.01) * 1e3
    out = []
    for fid, late in zip(ds["flow"].values, np.asarray(ds["start_late"].values, dtype=float)):
        if late > limit:
            out.append(f"flow {fid} started {late:.0f} ms after its scheduled instant (more than one sampling "
                       f"interval, {limit:g} ms)")
    return out


def flow_warnings(ds: Any, raw: ExperimentRaw) -> list[str]:
    """Late starts, flows that never started, flows their hosts' buffers limited (one line each)."""
    out = late_starts(ds)
    for rec in raw.flows:
        if never_started(rec):
            why = (rec.client.summary or {}).get("error", "") if rec.client is not None else ""
            out.append(f"flow {rec.flow_id} never started" + (f": {why}" if why else ""))
    return out + host_limited(ds)


def _us(value: Any) -> str:
    v = num(value)
    return "" if not math.isfinite(v) else f"{v / 1e3:.2f}"


def page_context(ds: Any) -> dict[str, Any]:
    """What the experiment page's sampling, limits and warnings blocks show (report_templates/exp.html.j2)."""
    flows = [str(f) for f in ds["flow"].values] if "flow" in ds.coords else []
    sampling, limits = [], []
    for fid in flows:
        f = ds.sel(flow=fid)
        for end, where in (("client", "local"), ("server", "remote")):
            if f"{where}_tick_late_p50" not in ds:
                break
            missed = num(f[f"{where}_ticks_missed"])
            sampling.append({"flow": fid, "end": end, "p50": _us(f[f"{where}_tick_late_p50"]),
                             "p99": _us(f[f"{where}_tick_late_p99"]), "max": _us(f[f"{where}_tick_late_max"]),
                             "missed": "" if not math.isfinite(missed) else f"{missed:.0f}"})
        if SHARES[0] in ds:
            shares = [num(f[s]) for s in SHARES]
            if any(math.isfinite(v) for v in shares):
                limits.append({"flow": fid, "shares": ["" if not math.isfinite(v) else f"{v:.1f}" for v in shares],
                               "host": np.nansum(shares[:2]) >= HOST_LIMIT_PERCENT})
    try:
        warnings = json.loads(ds.attrs.get("flow_warnings", "[]") or "[]")
    except ValueError:
        warnings = []
    return {"sampling": sampling, "limits": limits, "flow_warnings": [str(w) for w in warnings],
            "interval_ms": float(ds.attrs.get("interval", 0.01) or 0.01) * 1e3,
            "host_limit_percent": HOST_LIMIT_PERCENT}


__all__ = ["flow_warnings", "late_starts", "page_context"]
