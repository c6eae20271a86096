"""``netesto sweep ... --dry-run``: the grid, each point's parameters and time estimate, and nothing run."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from netesto.results.manifest import DONE, Manifest, PointRecord
from netesto.script.estimate import clock


@dataclass(frozen=True)
class Row:
    """One point the sweep would run: its key, parameters and estimated seconds (None: unknown)."""

    key: str
    params: dict[str, Any]
    seconds: float | None


def dry_run(notebook: str | Path, params: Mapping[str, Any] | Sequence[str], *, reps: int = 1,
            fixed: Mapping[str, Any] | None = None, checks: Sequence[str] = (), out: str | Path | None = None,
            resume: bool = False, workers: int = 1) -> list[Row]:
    """The points a sweep would run, checked as the sweep checks them (a SweepError otherwise), each with
    its estimate; with ``resume``, only those ``out``'s manifest has not finished, the estimate learning from
    how long its finished points took. Nothing is run, written or contacted."""
    from netesto.sweep.estimate import estimates
    from netesto.sweep.grid import parse_grid
    from netesto.sweep.run import open_manifest, plan

    nb = Path(notebook).resolve()
    declared, pts = plan(nb, params, reps=reps, fixed=fixed, checks=checks)
    fixed = dict(fixed or {})
    if out is None:
        manifest = Manifest(str(nb), {}, reps, fixed, list(checks))
    else:  # what the sweep would refuse (a directory in use, --resume with another grid), refused here
        manifest = open_manifest(Path(out).resolve(), nb, parse_grid(params), reps, fixed, list(checks), resume)
    recs = [manifest.points.get(p.key) or PointRecord(p.key, p.index, p.rep, p.as_dict(), p.dirname, p.seed)
            for p in pts]
    todo = [r for r in recs if r.status != DONE]
    secs = estimates(notebook, declared, fixed, todo, manifest, workers=max(1, workers))
    return [Row(r.key, {**fixed, **r.params}, secs.get(r.key)) for r in todo]


def text(rows: list[Row], workers: int = 1) -> str:
    """The dry run as printed: a line per point, then the total (divided among parallel workers)."""
    lines = [f"{'seconds':>8}  point"]
    for r in rows:
        est = f"{r.seconds:8.1f}" if r.seconds is not None else f"{'?':>8}"
        lines.append(f"{est}  {r.key}")
    known = [r.seconds for r in rows if r.seconds is not None]
    total = sum(known)
    unknown = len(rows) - len(known)
    wall = total / max(1, workers)
    tail = f"; {unknown} point(s) without an estimate (the notebook's run is not a flow mix of ca and dur)" \
        if unknown else ""
    lines.append(f"# {len(rows)} point(s) to run, estimated {clock(wall)} ({wall:.0f} s"
                 + (f" on {workers} labs in parallel" if workers > 1 else "") + f"){tail}; nothing was run")
    return "\n".join(lines) + "\n"


__all__ = ["Row", "dry_run", "text"]
