"""The sweep's record: every point's parameters, status, error, timings, outputs and earlier attempts.

``manifest.json`` in the sweep directory is rewritten (atomically) after every
point, so an interrupted sweep knows what it did and ``--resume`` runs the rest.
It is read as untrusted input: a path that leaves the sweep directory, names a
scheme (``javascript:``) or another point's directory, a status or parameter the
grid does not have, a file past :data:`MAX_BYTES`: each is refused naming the entry.
"""

from __future__ import annotations

import json
import math
import os
import re
import threading
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Iterator

from netesto.errors import SweepError
from netesto.raw.jsontext import dumps, finite

MANIFEST = "manifest.json"
# 2: attempts and leftover; 3: a point's per-algorithm and per-group numbers (parts), the sweep's steady
# window and the notebook's defaults, numbers that are none null (strict JSON). Older formats read as
# ones without what came later.
FORMAT = 3
READABLE = (1, 2, 3)
MAX_BYTES = 64 << 20  # a 10,000-point sweep's manifest is a few MB
DONE = "ok"
STATUSES = ("pending", "running", DONE, "failed", "interrupted")
# An attempt set aside: it failed, was interrupted, or was running when its sweep died.
ATTEMPT_STATUSES = ("failed", "interrupted", "killed")
ATTEMPTS = "attempts"  # where set-aside attempts go, in the sweep directory
LEFTOVER = "leftover"  # where stale agent data is fetched, inside the attempt it belongs to
_SEGMENT = re.compile(r"^[A-Za-z0-9_+=,.-]{1,200}$")


@dataclass
class Attempt:
    """An earlier run of a point, kept apart from its result: never in its summary or the cube."""

    n: int
    status: str  # one of ATTEMPT_STATUSES
    dir: str  # attempts/<point dir>-a<n>, relative to the sweep directory
    error: str = ""
    lab: str = ""
    started: float | None = None
    seconds: float | None = None
    experiments: list[str] = field(default_factory=list)
    leftover: list[str] = field(default_factory=list)  # agents' stale data fetched into it


@dataclass
class PointRecord:
    """What happened to one point: its current attempt, and the earlier ones set aside."""

    key: str
    index: int
    rep: int
    params: dict[str, Any]
    dir: str  # relative to the sweep directory
    seed: int
    status: str = "pending"
    error: str = ""
    lab: str = ""
    started: float | None = None
    seconds: float | None = None
    notebook: str = ""  # the executed notebook, relative
    html: str = ""  # its HTML export, relative
    experiments: list[str] = field(default_factory=list)  # relative exp directories
    checks: dict[str, bool] = field(default_factory=dict)
    summary: dict[str, float] = field(default_factory=dict)  # the point's numbers, read once when it ends
    # per congestion control and per flow group: {"cc": {"bbr": {"share": ..}}, "grp": {..}, "grp_ca": {..}}
    parts: dict[str, Any] = field(default_factory=dict)
    attempt: int = 1  # the number of the attempt the fields above describe
    attempts: list[Attempt] = field(default_factory=list)
    leftover: list[str] = field(default_factory=list)  # agents' stale data of this attempt, not its result


@dataclass
class Manifest:
    """The sweep's settings and its points, keyed by :attr:`PointRecord.key`."""

    notebook: str
    grid: dict[str, list[Any]]
    reps: int
    fixed: dict[str, Any] = field(default_factory=dict)
    checks: list[str] = field(default_factory=list)
    points: dict[str, PointRecord] = field(default_factory=dict)
    created: float = field(default_factory=time.time)
    provenance: dict[str, Any] = field(default_factory=dict)
    leftover: list[str] = field(default_factory=list)  # stale agent data no attempt of this sweep owned
    steady: str = ""  # the warm-up left out of every summary ("" = none; netesto.results.steady)
    defaults: dict[str, Any] = field(default_factory=dict)  # the notebook's parameter defaults
    figures: list[str] = field(default_factory=list)  # the report's figures ([]: the default)
    format: int = FORMAT

    def save(self, directory: str | Path) -> Path:
        path = Path(directory) / MANIFEST
        # one temporary file per writer: points end in parallel threads
        tmp = path.with_name(f".{MANIFEST}.{os.getpid()}.{threading.get_ident()}.tmp")
        data = asdict(self)
        data["format"] = FORMAT
        tmp.write_text(dumps(data, indent=1))
        tmp.replace(path)
        return path

    @classmethod
    def load(cls, directory: str | Path) -> "Manifest":
        path = Path(directory) / MANIFEST
        try:
            size = path.stat().st_size
            if size > MAX_BYTES:
                raise SweepError(f"{path}: {size} bytes, more than a sweep's manifest has ({MAX_BYTES}); "
                                 "not read")
            data = json.loads(path.read_text())
        except FileNotFoundError:
            raise SweepError(f"{Path(directory)}: not a sweep directory (no {MANIFEST})") from None
        except (OSError, ValueError, RecursionError) as exc:  # RecursionError: nesting no manifest has
            raise SweepError(f"{path}: unreadable: {type(exc).__name__}: {str(exc)[:200]}") from None
        return from_data(data, str(path))

    def __iter__(self) -> Iterator[PointRecord]:
        return iter(sorted(self.points.values(), key=lambda r: (r.index, r.rep)))

    def counts(self) -> dict[str, int]:
        out = {s: 0 for s in STATUSES}
        for r in self.points.values():
            out[r.status] = out.get(r.status, 0) + 1
        return out


def _number(v: Any) -> bool:
    return v is None or (isinstance(v, (int, float)) and not isinstance(v, bool))


def _parts(raw: Any) -> None:
    if not isinstance(raw, dict) or set(raw) - {"cc", "grp", "grp_ca"}:
        raise ValueError("parts: not {cc, grp, grp_ca}")
    for dim in ("cc", "grp"):
        table = raw.get(dim, {})
        if not isinstance(table, dict) or not all(isinstance(row, dict) and all(_number(v) for v in row.values())
                                                  for row in table.values()):
            raise ValueError(f"parts: {dim}: not {{name: {{measure: number}}}}")
    if not isinstance(raw.get("grp_ca", {}), dict) or not all(isinstance(v, str) for v in raw.get("grp_ca", {}).values()):
        raise ValueError("parts: grp_ca: not {group: text}")


def relative(text: Any, what: str, under: str = "") -> str:
    """``text`` if it is a relative path of plain segments (no ``..``, no scheme, no absolute
    path) under ``under``; else a ValueError saying why (the caller names the entry)."""
    if not isinstance(text, str) or not text:
        raise ValueError(f"{what} {text!r}: not a relative path")
    parts = text.split("/")
    for part in parts:
        if part in (".", "..") or not _SEGMENT.match(part):
            raise ValueError(f"{what} {text!r}: not a path inside the sweep directory (segment {part[:40]!r})")
    if under and (len(parts) < 2 or "/".join(parts[:len(under.split('/'))]) != under):
        raise ValueError(f"{what} {text!r}: not inside {under!r}")
    return text


def inside(root: str | Path, rel: str) -> Path:
    """``root/rel``, refused (SweepError) if it resolves outside ``root`` (a symlink out of the sweep)."""
    base = Path(root).resolve()
    path = (base / rel).resolve()
    if path != base and base not in path.parents:
        raise SweepError(f"{base}: {rel!r} leads outside the sweep directory (to {path}); not written")
    return base / rel


def _record(raw: Any, key: str, grid: dict[str, list[Any]], where: str) -> PointRecord:
    if not isinstance(raw, dict):
        raise ValueError("not an object")
    unknown = set(raw) - {f.name for f in fields(PointRecord)}
    if unknown:
        raise ValueError(f"unknown field(s) {', '.join(sorted(unknown))}")
    attempts = raw.get("attempts", [])
    if not isinstance(attempts, list):
        raise ValueError("attempts: not a list")
    rec = PointRecord(**{**raw, "attempts": []})
    if rec.key != key or not isinstance(rec.params, dict):
        raise ValueError(f"key {rec.key!r} under {key!r}")
    if list(rec.params) != list(grid) or any(str(rec.params[n]) not in map(str, grid[n]) for n in grid):
        raise ValueError(f"params {rec.params!r}: not a cell of the grid")
    for name in ("index", "rep", "seed", "attempt"):
        if not isinstance(getattr(rec, name), int) or isinstance(getattr(rec, name), bool):
            raise ValueError(f"{name} {getattr(rec, name)!r}: not an integer")
    if not isinstance(rec.summary, dict) or not all(_number(v) for v in rec.summary.values()):
        raise ValueError("summary: not {measure: number}")
    rec.summary = {k: math.nan if v is None else v for k, v in rec.summary.items()}  # null: no number
    _parts(rec.parts)
    if not isinstance(rec.checks, dict) or not all(isinstance(v, bool) for v in rec.checks.values()):
        raise ValueError("checks: not {expression: true/false}")
    if not all(isinstance(x, list) for x in (rec.experiments, rec.leftover)):
        raise ValueError("experiments and leftover: lists of paths")
    if rec.status not in STATUSES:
        raise ValueError(f"status {rec.status!r}: one of {', '.join(STATUSES)}")
    relative(rec.dir, "dir")
    if "/" in rec.dir:
        raise ValueError(f"dir {rec.dir!r}: a point's directory is directly in the sweep directory")
    for name in ("notebook", "html"):
        if getattr(rec, name):
            relative(getattr(rec, name), name, rec.dir)
    for e in [*rec.experiments, *rec.leftover]:
        relative(e, "experiment", rec.dir)
    for item in attempts:
        if not isinstance(item, dict) or set(item) - {f.name for f in fields(Attempt)}:
            raise ValueError(f"attempt {item!r}: not an attempt record")
        a = Attempt(**item)
        if a.status not in ATTEMPT_STATUSES:
            raise ValueError(f"attempt {a.n} status {a.status!r}: one of {', '.join(ATTEMPT_STATUSES)}")
        relative(a.dir, f"attempt {a.n} dir", ATTEMPTS)
        for e in [*a.experiments, *a.leftover]:
            relative(e, f"attempt {a.n} experiment", a.dir)
        rec.attempts.append(a)
    return rec


def from_data(data: Any, where: str = MANIFEST) -> Manifest:
    """A Manifest from the parsed JSON ``data``, every entry checked (a SweepError naming the first bad one)."""
    if not isinstance(data, dict) or data.get("format") not in READABLE:
        got = data.get("format") if isinstance(data, dict) else None
        newer = " (written by a newer netesto)" if isinstance(got, int) and got > FORMAT else ""
        raise SweepError(f"{where}: not a netesto sweep manifest of format {'/'.join(map(str, READABLE))}{newer}")
    raw_points = data.pop("points", {})
    grid = data.get("grid")
    if not isinstance(grid, dict) or not all(isinstance(v, list) for v in grid.values()):
        raise SweepError(f"{where}: damaged manifest: grid {str(grid)[:80]!r} is not {{name: [values]}}")
    if not isinstance(raw_points, dict):
        raise SweepError(f"{where}: damaged manifest: points is not an object")
    points = {}
    for key, raw in raw_points.items():
        try:
            points[key] = _record(raw, key, grid, where)
        except (TypeError, ValueError) as exc:
            raise SweepError(f"{where}: point {key!r}: {exc}; refused (changed by hand or damaged: "
                             "sweep into a new --out)") from None
    if not isinstance(data.get("steady", ""), str) or not isinstance(data.get("defaults", {}), dict) \
            or not isinstance(data.get("figures", []), list) or not all(isinstance(f, str) for f in data.get("figures", [])):
        raise SweepError(f"{where}: damaged manifest: steady, defaults or figures of the wrong type")
    for e in data.get("leftover", []) or []:
        try:
            relative(e, "leftover", LEFTOVER)
        except ValueError as exc:
            raise SweepError(f"{where}: {exc}; refused") from None
    try:
        return Manifest(**{**data, "format": FORMAT}, points=points)
    except TypeError as exc:
        raise SweepError(f"{where}: damaged manifest: {exc}") from exc


__all__ = ["ATTEMPTS", "ATTEMPT_STATUSES", "Attempt", "DONE", "FORMAT", "LEFTOVER", "MANIFEST", "MAX_BYTES",
           "Manifest", "PointRecord", "STATUSES", "dumps", "finite", "from_data", "inside", "relative"]
