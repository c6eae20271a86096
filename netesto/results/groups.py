"""Who got what: per flow, per flow group and per congestion control, over each flow's steady window.

For every flow, over its steady window (:mod:`netesto.results.steady`): its rate,
its share of what all flows delivered, its retransmitted %, its mean smoothed
RTT and its queueing delay; then the same per DO_CLIENT group (dim ``grp``) and
per congestion control (dim ``cc``)::

    b = breakdown(ds, steady="5s")
    b.cc_share.sel(cc="bbr")            # the share bbr's flows took (0..1)
    b.grp_rate.sel(grp=2)                # group 2's flows together, Mbit/s

Jain's index says how equal the rates are, not who wins (0.57 when bbr takes
93 % of two flows, 0.95 when cubic takes 62 %); the share says who wins.

Definitions (each variable's attrs say them too):

* **share**: the flow's bytes over the steps where every flow is in its steady
  window, divided by all flows' bytes there; where the flows' windows never
  overlap, each flow's rate over its own window divided by the sum of those.
* **queueing delay** (``qdelay``): the mean smoothed RTT over the window minus the
  flow's own min_rtt (the least RTT its socket ever saw: the path without queue).
  ``base_rtt`` is the RTT the testbed was configured with for the flow's host pair,
  for comparison (NaN without a testbed).
* **retransmitted %**: packets retransmitted in the window over the packets sent in
  it (the flow's packets in proportion to the bytes of the window: tcp_info gives
  the count of packets sent only at the flow's end).
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import xarray as xr

from netesto.results.steady import FlowWindow, Steady, common_window, flow_windows, window_mean

# measure: (units, long name); a flow's, a group's and a congestion control's alike
MEASURES: dict[str, tuple[str, str]] = {
    "rate": ("Mbit/s", "goodput over the steady window (a group's or algorithm's flows summed)"),
    "share": ("1", "share of the bytes all flows delivered (0..1; summed over a group's or algorithm's flows)"),
    "retrans_pct": ("percent", "packets retransmitted in the steady window over the packets sent in it"),
    "rtt": ("ms", "mean smoothed RTT over the steady window (a group's or algorithm's flows averaged)"),
    "qdelay": ("ms", "queueing delay: mean smoothed RTT over the steady window minus the flow's own min_rtt"),
    "flows": ("1", "flows"),
}
DIMS = ("cc", "grp")  # per congestion control, per DO_CLIENT group


def base_rtts(ds: Any) -> np.ndarray:
    """The RTT (ms) the testbed was configured with for each flow's host pair: a host's own RTT where it
    has one (``host_rtt``), else the testbed's; ``r_client + r_server - rtt`` (see docs/testbed.md)."""
    try:
        shape = json.loads(ds.attrs.get("testbed", "{}") or "{}")
    except (TypeError, ValueError):
        shape = {}
    n = ds.sizes.get("flow", 0)
    if not isinstance(shape, dict) or not isinstance(shape.get("rtt"), (int, float)):
        return np.full(n, np.nan)
    base = float(shape["rtt"])
    own: dict[str, Any] = shape["host_rtt"] if isinstance(shape.get("host_rtt"), dict) else {}
    hosts, servers = [str(h) for h in ds["host"].values], [str(s) for s in ds["server"].values]
    return np.array([float(own.get(c, base)) + float(own.get(s, base)) - base for c, s in zip(hosts, servers)])


def _retrans_in(row: np.ndarray, w: FlowWindow, first: int) -> float:
    """Packets retransmitted within the window, from the cumulative count (0 before the flow's first step)."""
    part = row[w.lo:w.hi]
    ok = np.isfinite(part)
    if w.empty or not ok.any():
        return math.nan
    before = row[w.lo - 1] if w.lo > first and math.isfinite(row[w.lo - 1]) else 0.0
    return float(part[ok][-1] - before)


def flow_numbers(ds: Any, steady: Steady) -> tuple[dict[str, np.ndarray], list[FlowWindow], str]:
    """Per flow: rate, share, retrans_pct, rtt, min_rtt, qdelay, and the window's bytes, retransmits and
    packets (for sums over groups); the windows; how the share was taken."""
    n = ds.sizes.get("flow", 0)
    dt = float(ds.attrs.get("interval", 0.01)) or 0.01
    gp = np.asarray(ds["goodput"].values, dtype=float)
    windows = flow_windows(ds, steady)

    def series(name: str) -> np.ndarray:
        return np.asarray(ds[name].values, dtype=float) if name in ds else np.full(gp.shape, np.nan)

    def per_flow(name: str) -> np.ndarray:
        return np.asarray(ds[name].values, dtype=float) if name in ds else np.full(n, np.nan)

    rtt, min_rtt, retx = series("rtt"), series("min_rtt"), series("retransmits")
    total_bytes, packets = per_flow("bytes"), per_flow("packets_sent")
    out = {k: np.full(n, np.nan) for k in ("rate", "share", "retrans_pct", "rtt", "min_rtt", "qdelay", "wbytes",
                                          "wretrans", "wpackets", "from", "to")}
    for i, w in enumerate(windows):
        live = np.nonzero(np.isfinite(gp[i]))[0]
        if w.empty or not live.size:
            continue
        bps = window_mean(gp[i], w, zero_gaps=True)
        out["rate"][i] = bps / 1e6
        out["wbytes"][i] = bps * (w.hi - w.lo) * dt / 8.0
        out["from"][i], out["to"][i] = w.start, w.end
        out["wretrans"][i] = _retrans_in(retx[i], w, int(live[0]))
        if total_bytes[i] > 0 and math.isfinite(packets[i]):
            out["wpackets"][i] = packets[i] * out["wbytes"][i] / total_bytes[i]
        if out["wpackets"][i] > 0:
            out["retrans_pct"][i] = 100.0 * out["wretrans"][i] / out["wpackets"][i]
        out["rtt"][i] = window_mean(rtt[i], w) / 1e3
        life = min_rtt[i, live[0]:live[-1] + 1]
        out["min_rtt"][i] = float(np.nanmin(life)) / 1e3 if np.isfinite(life).any() else math.nan
        out["qdelay"][i] = max(0.0, out["rtt"][i] - out["min_rtt"][i])
    lo, hi = common_window(windows)
    if hi > lo:
        b = np.where(np.isfinite(gp[:, lo:hi]), gp[:, lo:hi], 0.0).sum(axis=1)
        b = np.where(np.isfinite(out["rate"]), b, np.nan)
        how = (f"bytes over {ds['time'].values[lo] - dt:.3f}-{ds['time'].values[hi - 1]:.3f} s, where every "
               "flow is in its steady window")
    else:
        b = out["rate"]
        how = "each flow's rate over its own steady window (the flows' windows never overlap)"
    total = np.nansum(b)
    if total > 0:
        out["share"] = b / total
    return out, windows, how


def _aggregate(numbers: dict[str, np.ndarray], members: np.ndarray) -> dict[str, float]:
    def nsum(v: np.ndarray) -> float:
        v = v[members]
        return float(np.nansum(v)) if np.isfinite(v).any() else math.nan

    def nmean(v: np.ndarray) -> float:
        v = v[members]
        return float(np.nanmean(v)) if np.isfinite(v).any() else math.nan

    packets = nsum(numbers["wpackets"])
    return {"rate": nsum(numbers["rate"]), "share": nsum(numbers["share"]),
            "retrans_pct": 100.0 * nsum(numbers["wretrans"]) / packets if packets > 0 else math.nan,
            "rtt": nmean(numbers["rtt"]), "qdelay": nmean(numbers["qdelay"]), "flows": float(members.sum())}


def _attrs(measure: str, steady: Steady, what: str) -> dict[str, str]:
    units, long_name = MEASURES[measure]
    return {"units": units, "long_name": f"{what}: {long_name}", "steady": steady.text,
            "steady_window": steady.describe()}


def breakdown(ds: Any, steady: "str | Steady | None" = None) -> xr.Dataset:
    """Per flow (``steady_<measure>``), per group (``grp_<measure>``, dim ``grp``) and per congestion control
    (``cc_<measure>``, dim ``cc``) over the steady window ``steady`` (``"5s"``, ``"10rtt"``; none: each
    flow's whole life). The window and how the share was taken are in the attrs."""
    sd = Steady.parse(steady)
    numbers, _windows, how = flow_numbers(ds, sd)
    cas = np.array([str(c) for c in ds["ca"].values], dtype=object)
    groups = np.asarray(ds["group"].values, dtype=np.int64)
    hosts = np.array([str(h) for h in ds["host"].values], dtype=object)
    base = base_rtts(ds)
    data: dict[str, Any] = {}
    for m in ("rate", "share", "retrans_pct", "rtt", "qdelay"):
        data[f"steady_{m}"] = ("flow", numbers[m], _attrs(m, sd, "the flow"))
    data["steady_min_rtt"] = ("flow", numbers["min_rtt"], {"units": "ms", "long_name": "the flow's min_rtt"})
    data["steady_from"] = ("flow", numbers["from"], {"units": "s", "long_name": "start of the flow's steady window"})
    data["steady_to"] = ("flow", numbers["to"], {"units": "s", "long_name": "end of the flow's steady window"})
    data["base_rtt"] = ("flow", base, {"units": "ms", "long_name": "RTT the testbed was configured with for the "
                                       "flow's host pair (NaN: no testbed)"})
    keys = {"cc": list(dict.fromkeys(cas.tolist())), "grp": sorted(set(groups.tolist()))}
    for dim, labels in keys.items():
        of = cas if dim == "cc" else groups
        rows = [_aggregate(numbers, of == k) for k in labels]
        what = "the congestion control's flows" if dim == "cc" else "the group's flows"
        for m in MEASURES:
            data[f"{dim}_{m}"] = (dim, np.array([r[m] for r in rows], dtype=float), _attrs(m, sd, what))
    data["grp_ca"] = ("grp", np.array(["/".join(dict.fromkeys(cas[groups == g])) for g in keys["grp"]],
                                      dtype=object), {"long_name": "congestion control of the group's flows"})
    data["grp_host"] = ("grp", np.array(["/".join(dict.fromkeys(hosts[groups == g])) for g in keys["grp"]],
                                        dtype=object), {"long_name": "client host of the group's flows"})
    data["grp_base_rtt"] = ("grp", np.array([float(np.nanmean(base[groups == g])) if np.isfinite(base[groups == g]).any()
                                             else math.nan for g in keys["grp"]]),
                            {"units": "ms", "long_name": "configured RTT of the group's host pairs"})
    coords = {"flow": ds["flow"].values, "cc": np.array(keys["cc"], dtype=object),
              "grp": np.array(keys["grp"], dtype=np.int64)}
    return xr.Dataset(data, coords=coords, attrs={"steady": sd.text, "steady_window": sd.describe(),
                                                  "share_window": how})


BREAKDOWN_PREFIXES = ("steady_", "cc_", "grp_")


def with_breakdown(ds: xr.Dataset, steady: "str | Steady | None" = None) -> xr.Dataset:
    """``ds`` with its breakdown over ``steady`` (an earlier one replaced); the window in its attrs."""
    old = [k for k in ds.data_vars if str(k).startswith(BREAKDOWN_PREFIXES) or k == "base_rtt"]
    b = breakdown(ds, steady)
    out = ds.drop_vars(old).drop_dims([d for d in DIMS if d in ds.dims]).merge(b.drop_vars("flow"))
    out.attrs.update(ds.attrs)
    out.attrs.update(b.attrs)
    return out


def parts(b: xr.Dataset) -> dict[str, Any]:
    """A breakdown's per-algorithm and per-group numbers as plain JSON-able dicts (a sweep point's record):
    ``{"cc": {"bbr": {"rate": ..}}, "grp": {"1": {..}}, "grp_ca": {"1": "bbr"}}``; NaN as None."""
    def clean(v: float) -> float | None:
        return float(v) if math.isfinite(v) else None

    out: dict[str, Any] = {}
    for dim in DIMS:
        out[dim] = {str(k): {m: clean(float(b[f"{dim}_{m}"].values[i])) for m in MEASURES}
                    for i, k in enumerate(b[dim].values)}
    out["grp_ca"] = {str(k): str(b["grp_ca"].values[i]) for i, k in enumerate(b["grp"].values)}
    return out


__all__ = ["BREAKDOWN_PREFIXES", "DIMS", "MEASURES", "base_rtts", "breakdown", "flow_numbers", "parts",
           "with_breakdown"]
