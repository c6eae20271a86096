"""Means over repetitions with 95 % intervals that stay inside each measure's range, and their n.

A share lies in [0, 1], Jain's index in (0, 1], a retransmitted % in [0, 100],
a rate or an RTT at or above 0. A Student t interval from two repetitions is
the mean +- 12.7 standard errors: it reaches Jain 2.0 and an RTT below 0. So
every interval here is clipped to its measure's range (:data:`RANGES`), and
says so in its attrs (``interval``); ``method="bootstrap"`` gives percentile
bootstrap intervals instead, which lie within the repetitions' own values and
so within the range, but are too narrow with few repetitions (they cannot
reach past the smallest and largest of them): t, clipped, is the default.
Every interval has its n beside it (``<var>_n``), and ``attrs["warning"]``
(also a :class:`UserWarning`) names the cells whose intervals rest on fewer than
3 repetitions.

>>> import numpy as np, xarray as xr
>>> cube = xr.Dataset({"jain": (("bw", "rep"), [[0.6, 0.9], [0.95, 0.97]])}, coords={"bw": [10, 100], "rep": [0, 1]})
>>> st = stats(cube, warn=False)
>>> st.jain_hi.values.round(3).tolist(), st.jain_lo.values.round(3).tolist(), st.jain_n.values.tolist()
([1.0, 1.0], [0.0, 0.833], [2, 2])
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import xarray as xr

# Two-sided 95 % Student t quantiles for 1..30 degrees of freedom (then ~normal).
_T95 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
        2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042]
INF = math.inf
# The range each measure can take (a name's part after cc_/grp_ is looked up too).
RANGES: dict[str, tuple[float, float]] = {
    "share": (0.0, 1.0), "jain": (0.0, 1.0), "retrans_pkts_pct": (0.0, 100.0), "retrans_pct": (0.0, 100.0),
    "max_min_ratio": (1.0, INF),
}
MIN_REPS = 3  # fewer repetitions than this: the interval is said to be unreliable
BOOTSTRAP_RESAMPLES = 2000


def t95(dof: int) -> float:
    """The 95 % two-sided t quantile for ``dof`` degrees of freedom (NaN for none).

    >>> t95(1), t95(4), round(t95(100), 2), math.isnan(t95(0))
    (12.706, 2.776, 1.96, True)
    """
    if dof < 1:
        return math.nan
    return _T95[dof - 1] if dof <= len(_T95) else 1.96


def value_range(name: str) -> tuple[float, float]:
    """The range of measure ``name``: its own, its part after ``cc_``/``grp_``, else [0, inf).

    >>> value_range("cc_share"), value_range("jain"), value_range("mean_rtt")
    ((0.0, 1.0), (0.0, 1.0), (0.0, inf))
    """
    for key in (name, name.split("_", 1)[-1]):
        if key in RANGES:
            return RANGES[key]
    return (0.0, INF)


def _t_bounds(v: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean, lower and upper t bound along the last axis (NaN-skipping)."""
    n = np.isfinite(v).sum(axis=-1)
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        mean = np.nanmean(v, axis=-1)
        sd = np.nanstd(v, axis=-1, ddof=1)
    t = np.vectorize(lambda m: t95(int(m) - 1))(n) if n.size else np.empty(n.shape)
    half = np.where(n > 1, t * sd / np.sqrt(np.maximum(n, 1)), np.nan)
    return mean, mean - half, mean + half


def _bootstrap_bounds(v: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bootstrap 95 % bounds of the mean along the last axis (NaN where fewer than 2 values)."""
    rng = np.random.default_rng(seed)
    flat = v.reshape(-1, v.shape[-1])
    lo, hi = np.full(flat.shape[0], np.nan), np.full(flat.shape[0], np.nan)
    for i, row in enumerate(flat):
        x = row[np.isfinite(row)]
        if x.size < 2:
            continue
        means = x[rng.integers(0, x.size, size=(BOOTSTRAP_RESAMPLES, x.size))].mean(axis=1)
        lo[i], hi[i] = np.percentile(means, [2.5, 97.5])
    return lo.reshape(v.shape[:-1]), hi.reshape(v.shape[:-1])


def interval(v: xr.DataArray, name: str, method: str = "t", seed: int = 0) -> dict[str, xr.DataArray]:
    """``{name: mean, name_lo, name_hi, name_n}`` of ``v`` over ``rep``, the bounds inside ``name``'s range."""
    if method not in ("t", "bootstrap"):
        raise ValueError(f"stats: method {method!r}: 't' (clipped to the range) or 'bootstrap'")
    arr = np.asarray(v.transpose(..., "rep").values, dtype=float)
    dims = [d for d in v.transpose(..., "rep").dims if d != "rep"]
    coords = {d: v.coords[d] for d in dims if d in v.coords}
    low, high = value_range(name)
    mean, lo, hi = _t_bounds(arr)
    how = "95 % Student t"
    if method == "bootstrap":
        lo, hi = _bootstrap_bounds(arr, seed)
        how = f"95 % percentile bootstrap of the mean ({BOOTSTRAP_RESAMPLES} resamples)"
    rng = f"[{low:g}, {high:g}]"
    attrs = {"units": v.attrs.get("units", ""), "interval": f"{how}, clipped to {rng}: the measure's range",
             "range": rng}
    n = np.isfinite(arr).sum(axis=-1)

    def wrap(a: Any, at: dict[str, Any]) -> xr.DataArray:
        return xr.DataArray(a, dims=dims, coords=coords, attrs=at)

    return {name: wrap(mean, dict(v.attrs)),
            f"{name}_lo": wrap(np.clip(lo, low, high), {**attrs, "long_name": f"lower bound of {name}'s interval"}),
            f"{name}_hi": wrap(np.clip(hi, low, high), {**attrs, "long_name": f"upper bound of {name}'s interval"}),
            f"{name}_n": wrap(n, {"units": "1", "long_name": f"repetitions with a value of {name}"})}


def stats(cube: xr.Dataset, *, method: str = "t", names: list[str] | None = None, warn: bool = True,
          seed: int = 0) -> xr.Dataset:
    """Mean over ``rep`` of every numeric variable of ``cube`` (or ``names``) with its interval
    (``<v>_lo``, ``<v>_hi``: see the module) and n (``<v>_n``); ``n`` counts the repetitions that ran."""
    chosen = names if names is not None else [
        str(k) for k, v in cube.data_vars.items() if "rep" in v.dims and v.dtype.kind in "fiu"]
    out: dict[str, xr.DataArray] = {}
    for k in chosen:
        if k in cube:
            out.update(interval(cube[k], k, method, seed))
    if "status" in cube:
        out["n"] = (cube["status"] == "ok").sum("rep").assign_attrs(long_name="repetitions that ran")
    st = xr.Dataset(out, attrs=dict(cube.attrs))
    few = [k for k in chosen if f"{k}_n" in st and bool(((st[f"{k}_n"] > 0) & (st[f"{k}_n"] < MIN_REPS)).any())]
    if few:
        cells = int(((st[f"{few[0]}_n"] > 0) & (st[f"{few[0]}_n"] < MIN_REPS)).sum())
        st.attrs["warning"] = (f"{cells} point(s) rest on fewer than {MIN_REPS} repetitions: their intervals say "
                               f"little (t with 1 degree of freedom is 12.7 standard errors wide); run --reps "
                               f"{MIN_REPS} or more")
        if warn:
            warnings.warn(st.attrs["warning"], UserWarning, stacklevel=2)
    st.attrs["interval"] = next((st[f"{k}_lo"].attrs["interval"].split(", clipped")[0] for k in chosen
                                 if f"{k}_lo" in st), "")
    return st


def fair_share(st: xr.Dataset, dim: str = "cc") -> xr.DataArray | None:
    """Each algorithm's (``dim="grp"``: each group's) fair share at each point of a :func:`stats` dataset:
    its flows over all the point's flows, NaN where it did not run or fewer than two ran (no one to share
    with); None without ``<dim>_flows``. 0.5 for two alike, 2/3 for ``bbr:2+cubic:1``'s bbr.

    >>> st = xr.Dataset({"cc_flows": (("ca", "cc"), [[2.0, 1.0], [math.nan, 1.0]])}, coords={"cc": ["bbr", "cubic"]})
    >>> fair_share(st).round(3).values.tolist()
    [[0.667, 0.333], [nan, nan]]
    """
    if f"{dim}_flows" not in st or dim not in st.dims:
        return None
    flows = st[f"{dim}_flows"]
    ran = flows.notnull() & (flows > 0)
    if f"{dim}_share" in st:
        ran = ran & st[f"{dim}_share"].notnull()
    n = flows.where(ran, 0.0)
    total = n.sum(dim)
    return (n / total).where(ran & (ran.sum(dim) >= 2))


__all__ = ["BOOTSTRAP_RESAMPLES", "MIN_REPS", "RANGES", "fair_share", "interval", "stats", "t95", "value_range"]
