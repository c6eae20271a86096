"""The sweep's record: every point's parameters, status, error, timings and outputs.

``manifest.json`` in the sweep directory is rewritten (atomically) after every
point, so an interrupted sweep knows what it did and ``--resume`` runs the rest.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterator

from netesto.errors import SweepError

MANIFEST = "manifest.json"
FORMAT = 1
DONE = "ok"
STATUSES = ("pending", "running", DONE, "failed", "interrupted")


@dataclass
class PointRecord:
    """What happened to one point."""

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
    format: int = FORMAT

    def save(self, directory: str | Path) -> Path:
        path = Path(directory) / MANIFEST
        tmp = path.with_name(f".{MANIFEST}.{os.getpid()}.tmp")
        data = asdict(self)
        tmp.write_text(json.dumps(data, indent=1, default=str))
        tmp.replace(path)
        return path

    @classmethod
    def load(cls, directory: str | Path) -> "Manifest":
        path = Path(directory) / MANIFEST
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            raise SweepError(f"{Path(directory)}: not a sweep directory (no {MANIFEST})") from None
        except (OSError, ValueError) as exc:
            raise SweepError(f"{path}: unreadable: {exc}") from exc
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise SweepError(f"{path}: not a netesto sweep manifest of format {FORMAT}")
        try:
            points = {k: PointRecord(**v) for k, v in data.pop("points", {}).items()}
            return cls(**data, points=points)
        except TypeError as exc:
            raise SweepError(f"{path}: damaged manifest: {exc}") from exc

    def __iter__(self) -> Iterator[PointRecord]:
        return iter(sorted(self.points.values(), key=lambda r: (r.index, r.rep)))

    def counts(self) -> dict[str, int]:
        out = {s: 0 for s in STATUSES}
        for r in self.points.values():
            out[r.status] = out.get(r.status, 0) + 1
        return out


__all__ = ["DONE", "MANIFEST", "Manifest", "PointRecord", "STATUSES"]
