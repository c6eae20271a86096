"""One attempt per point in the results: an earlier one (failed, interrupted, killed) is moved aside and named.

A point runs in ``<sweep>/<point dir>/``. Before it runs again, whatever an earlier
attempt left there moves to ``<sweep>/attempts/<point dir>-a<n>/`` and the point's
record lists it under ``attempts`` (its status, error, directory, experiments):
kept for a look, never in the point's summary, the cube or the report's numbers.
"""

from __future__ import annotations

from pathlib import Path

from netesto.results.manifest import ATTEMPTS, DONE, LEFTOVER, Attempt, PointRecord, inside

# What an unfinished record's status says of the attempt it describes.
_AS_ATTEMPT = {"running": "killed", "failed": "failed", "interrupted": "interrupted", "pending": "interrupted"}


def experiments_in(directory: Path, rel: str) -> tuple[list[str], list[str]]:
    """(experiments, leftover) under ``directory/rel``: the ``exp.nc`` folders, relative to
    ``directory``; those fetched into ``leftover/`` apart (stale data, not the attempt's result)."""
    root = directory / rel
    found = sorted(p.parent.relative_to(directory).as_posix() for p in root.rglob("exp.nc")) if root.is_dir() else []
    stale = f"{rel}/{LEFTOVER}/"
    return [e for e in found if not e.startswith(stale)], [e for e in found if e.startswith(stale)]


def set_aside(rec: PointRecord, directory: Path) -> Attempt | None:
    """Move what an earlier attempt of ``rec`` left to ``attempts/`` and record it; the record
    is then ready for attempt ``rec.attempt`` (None: nothing to set aside)."""
    if rec.status == DONE:
        return None
    pdir = inside(directory, rec.dir)
    used = pdir.is_dir() and any(pdir.iterdir())
    if rec.status == "pending" and not used:
        return None
    rel = f"{ATTEMPTS}/{rec.dir}-a{rec.attempt}"
    while (directory / rel).exists():  # an attempt number reused by a manifest older than its files
        rel += "x"
    dest = inside(directory, rel)
    if used:
        dest.parent.mkdir(exist_ok=True)
        pdir.rename(dest)
    experiments, leftover = experiments_in(directory, rel) if used else ([], [])
    old = Attempt(rec.attempt, _AS_ATTEMPT.get(rec.status, "interrupted"), rel, rec.error or (
        "the sweep died while the point ran" if rec.status == "running" else ""), rec.lab, rec.started,
                  rec.seconds, experiments, leftover)
    rec.attempts.append(old)
    rec.attempt += 1
    rec.status, rec.error, rec.notebook, rec.html, rec.experiments, rec.leftover = "pending", "", "", "", [], []
    rec.checks, rec.summary, rec.started, rec.seconds = {}, {}, None, None
    return old


__all__ = ["experiments_in", "set_aside"]
