"""Time estimates of a sweep's points, before they run: the point's own run planned, plus the overhead."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from netesto.results.manifest import PointRecord

# Seconds a point costs beyond its notebook's run (kernel reset, parameters, writing and exporting
# the notebook, the summary), and the first point's kernel start and imports on top: measured with
# bench/bench_sweep_overhead.py (see docs/sweeps.md); replaced by what the sweep's own points took.
WARM_OVERHEAD = 2.5
COLD_EXTRA = 6.0


def run_seconds(params: Mapping[str, Any], declared: Mapping[str, Any]) -> float | None:
    """The point's run as ``netesto plan`` estimates it, when the notebook is the shipped one's shape
    (a flow mix of ``ca``, ``dur``, ``delay``, ``flows``); else None (unknown)."""
    if "ca" not in declared or "dur" not in declared:
        return None
    from netesto.controller.plan import make_plan
    from netesto.errors import NetestoError
    from netesto.sweep.mix import Mix

    v = {**declared, **params}
    try:
        mix = Mix.parse(str(v["ca"]), dur=v["dur"], delay=v.get("delay", 0), flows=int(v.get("flows", 1)))
        return make_plan(mix.script("sweep"), defines=mix.defines(), counter=0).run_estimate(imported=True)
    except (NetestoError, ValueError, TypeError):
        return None


def overhead(done: Iterable[PointRecord], declared: Mapping[str, Any], fixed: Mapping[str, Any]) -> float:
    """Seconds a point takes beyond its run: the median of what the finished points took beyond theirs,
    else :data:`WARM_OVERHEAD`."""
    import statistics

    extra = []
    for rec in done:
        own = run_seconds({**fixed, **rec.params}, declared)
        if rec.status == "ok" and rec.seconds and own is not None:
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
