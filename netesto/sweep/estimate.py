"""Time estimates of a sweep's points, before they run: the point's own run planned, plus the overhead."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from netesto.results.manifest import PointRecord

# Seconds a point costs beyond its notebook's run (kernel reset, parameters, writing and exporting
# the notebook, the summary), and the first point's kernel start and imports on top: measured with
# bench/bench_sweep_overhead.py (see docs/sweeps.md); replaced by what the sweep's own points took.
WARM_OVERHEAD = 1.0
COLD_EXTRA = 4.0


_PLANNED: dict[tuple[Any, ...], float | None] = {}  # a point's run estimate by what it depends on: planned once


def run_seconds(params: Mapping[str, Any], declared: Mapping[str, Any]) -> float | None:
    """The point's run as ``netesto plan`` estimates it, when the notebook is the shipped one's shape
    (a flow mix of ``ca``, ``dur``, ``delay``, ``flows``); else None (unknown). Each mix is planned once
    (re-estimating the points left after each point ends asks again)."""
    if "ca" not in declared or "dur" not in declared:
        return None
    v = {**declared, **params}
    key = tuple(repr(v.get(name)) for name in ("ca", "dur", "delay", "flows"))
    if key not in _PLANNED:
        _PLANNED[key] = _planned(v)
    return _PLANNED[key]


def _planned(v: Mapping[str, Any]) -> float | None:
    from netesto.controller.plan import make_plan
    from netesto.errors import NetestoError
    from netesto.sweep.mix import Mix

    try:
        mix = Mix.parse(str(v["ca"]), dur=v["dur"], delay=v.get("delay", 0), flows=int(v.get("flows", 1)))
        plan = make_plan(mix.script("sweep"), defines=mix.defines(), counter=0)
        return plan.run_estimate(imported=True, seasoned=True)  # a kept kernel's: imports done, leads learned
    except (NetestoError, ValueError, TypeError):
        return None


def overhead(done: Iterable[PointRecord], declared: Mapping[str, Any], fixed: Mapping[str, Any]) -> float:
    """Seconds a point takes beyond its run: the median of what the finished points took beyond theirs,
    else :data:`WARM_OVERHEAD`."""
    import statistics

    extra = []
    for rec in done:
        if rec.status != "ok" or not rec.seconds:
            continue
        own = run_seconds({**fixed, **rec.params}, declared)
        if own is not None:
            extra.append(rec.seconds - own)
    return max(0.0, statistics.median(extra)) if extra else WARM_OVERHEAD


def estimates(nb: Any, declared: Mapping[str, Any], fixed: Mapping[str, Any], todo: list[PointRecord],
              manifest: Any, workers: int = 1) -> dict[str, float]:
    """Seconds each point of ``todo`` is expected to take (points whose run is unknown are left out);
    the first point of each worker pays a kernel's start and imports."""
    extra = overhead(manifest.points.values(), declared, fixed)
    out: dict[str, float] = {}
    for i, rec in enumerate(todo):
        own = run_seconds({**fixed, **rec.params}, declared)
        if own is not None:
            out[rec.key] = own + extra + (COLD_EXTRA if i < workers else 0.0)
    return out


__all__ = ["COLD_EXTRA", "WARM_OVERHEAD", "estimates", "overhead", "run_seconds"]
