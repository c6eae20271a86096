"""Numbers beside a sweep's parameter labels, so every swept quantity can be an x axis.

A parameter keeps its values as given (``buffer="0.5bdp"``, ``bw="10mbit"``) and
gets numeric companion coordinates: ``bw_bps``, ``rtt_ms``, ``jitter_ms``,
``loss_pct``, ``buffer_bdp`` and ``buffer_bytes`` (against the bandwidth and RTT of
each cell: swept, fixed or the notebook's default, so over those dims too when they
are swept), ``host_rtt_<host>_ms``, and for any other text parameter whose values all
read as times, rates or sizes, ``<name>_ms``, ``<name>_bps`` or ``<name>_bytes``.
These are the values asked for; what the testbed made of them (its smallest queue
is 3000 bytes) is in each experiment's ``testbed`` attrs.

>>> float(bdp_bytes(100e6, 20.0)), buffer_factor("0.5bdp"), buffer_factor("256k")
(250000.0, 0.5, None)
"""

from __future__ import annotations

import re
from typing import Any, Callable, Mapping

import numpy as np

from netesto.vocab import parse_host_times, parse_rate, parse_size, parse_time_ms

_BDP = re.compile(r"^\s*(\d+(?:\.\d+)?|\.\d+)?\s*bdp\s*$", re.IGNORECASE)
_UNIT = re.compile(r"[A-Za-z]")


def bdp_bytes(bw_bps: Any, rtt_ms: Any) -> Any:
    """Bytes of one bandwidth-delay product (a zero RTT counts as 1 ms, as the testbed's queue does)."""
    return bw_bps * np.where(np.asarray(rtt_ms) > 0, rtt_ms, 1.0) / 1000.0 / 8.0


def buffer_factor(text: str) -> float | None:
    """BDPs of a buffer written in BDPs (``1bdp``, ``bdp``), else None."""
    m = _BDP.match(str(text))
    return float(m.group(1) or 1) if m else None


def _loss_pct(text: str) -> float:
    return float(str(text).strip().rstrip("%"))


def _setting(name: str, manifest: Any) -> Any:
    """The value every point shares: fixed with --set, else the notebook's default (None: unknown)."""
    if name in manifest.fixed:
        return manifest.fixed[name]
    return getattr(manifest, "defaults", {}).get(name)


def _each(values: np.ndarray, parse: Callable[[str], float]) -> np.ndarray | None:
    try:
        return np.array([float(parse(str(v))) for v in values])
    except (TypeError, ValueError):
        return None


def _buffer(manifest: Any, coords: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """``buffer_bdp`` and ``buffer_bytes`` over (buffer[, bw][, rtt]): the other form needs each cell's BDP."""
    axes = {"bw": parse_rate, "rtt": parse_time_ms}
    dims, grids = ["buffer"], []
    for name, parse in axes.items():
        if name in coords:
            dims.append(name)
            grids.append(_each(coords[name], parse))
        else:
            v = _setting(name, manifest)
            grids.append(None if v is None else _each(np.array([v]), parse))
    out: dict[str, Any] = {}
    labels = [str(v) for v in coords["buffer"]]
    factors = [buffer_factor(v) for v in labels]
    sizes = [None if f is not None else _each(np.array([v]), parse_size) for v, f in zip(labels, factors)]
    if all(f is not None for f in factors):
        out["buffer_bdp"] = ("buffer", np.array(factors, dtype=float), {"units": "1", "long_name": "buffer in BDPs"})
    elif all(s is not None for s in sizes):
        out["buffer_bytes"] = ("buffer", np.array([s[0] for s in sizes if s is not None]),
                               {"units": "bytes", "long_name": "buffer in bytes"})
    bw, rtt = grids
    if bw is None or rtt is None:  # a bandwidth or an RTT nobody can tell: the form given only
        return out
    bdp = bdp_bytes(bw[:, None], rtt[None, :])  # (bw, rtt)
    per = np.array([f if f is not None else (s[0] if s is not None else np.nan) for f, s in zip(factors, sizes)])
    is_bdp = np.array([f is not None for f in factors])
    cube = np.where(is_bdp[:, None, None], per[:, None, None] * bdp[None], per[:, None, None])  # bytes
    bdps = cube / bdp[None]
    keep = [0] + [1 + i for i, n in enumerate(("bw", "rtt")) if n in coords]
    squeeze = tuple(i for i in range(3) if i not in keep)
    if "buffer_bytes" not in out:
        out["buffer_bytes"] = (dims, cube.squeeze(axis=squeeze), {"units": "bytes", "long_name": "buffer in bytes"})
    if "buffer_bdp" not in out:
        out["buffer_bdp"] = (dims, bdps.squeeze(axis=squeeze), {"units": "1", "long_name": "buffer in BDPs"})
    return out


def companions(manifest: Any, coords: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """Companion coordinates of the cube's parameter labels ``coords`` (see the module)."""
    out: dict[str, Any] = {}
    simple = {"bw": ("bw_bps", parse_rate, "bit/s"), "rtt": ("rtt_ms", parse_time_ms, "ms"),
              "jitter": ("jitter_ms", parse_time_ms, "ms"), "loss": ("loss_pct", _loss_pct, "percent")}
    for name in manifest.grid:
        labels = coords[name]
        if labels.dtype != object and name != "loss":
            continue  # numbers already
        if name in simple:
            key, parse, units = simple[name]
            values = _each(labels, parse)
            if values is not None:
                out[key] = (name, values, {"units": units})
        elif name == "buffer":
            out.update(_buffer(manifest, coords))
        elif name == "host_rtt":
            try:
                per = [parse_host_times(str(v)) for v in labels]
            except ValueError:
                continue
            for host in sorted({h for p in per for h in p}):
                out[f"host_rtt_{host}_ms"] = (name, np.array([p.get(host, np.nan) for p in per]), {"units": "ms"})
        elif all(_UNIT.search(str(v)) for v in labels):
            for suffix, parse, units in (("ms", parse_time_ms, "ms"), ("bps", parse_rate, "bit/s"),
                                         ("bytes", parse_size, "bytes")):
                values = _each(labels, parse)
                if values is not None:
                    out[f"{name}_{suffix}"] = (name, values, {"units": units})
                    break
    return out


__all__ = ["bdp_bytes", "buffer_factor", "companions"]
