"""What :func:`netesto.sweep.run.sweep` hands back: the directory, the manifest, the cube and the report."""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from netesto.results.manifest import DONE, Manifest, PointRecord


@dataclass
class SweepResult:
    """The sweep directory, its manifest and what it produced."""

    directory: Path
    manifest: Manifest
    report: Path | None = None
    cube: Path | None = None
    ran: list[str] = field(default_factory=list)  # keys of the points run this time
    timings: dict[str, dict[str, float]] = field(default_factory=dict)  # key -> seconds per phase, run this time

    @property
    def failed(self) -> list[PointRecord]:
        return [r for r in self.manifest if r.status != DONE]

    @property
    def check_failures(self) -> list[PointRecord]:
        return [r for r in self.manifest if r.checks and not all(r.checks.values())]

    @property
    def ok(self) -> bool:
        return not self.failed and not self.check_failures

    def open(self) -> Any:
        """The sweep as a :class:`netesto.results.cube.Sweep` (the cube, lazily the flows)."""
        from netesto.results.cube import open_sweep

        return open_sweep(self.directory)

    def _repr_html_(self) -> str:
        # Every value escaped: keys, statuses and errors carry parameter text. The report is
        # named, not linked: an absolute path is no link a notebook front end can follow.
        c = self.manifest.counts()
        rows = "".join(f"<tr><td>{html.escape(r.key)}</td><td>{html.escape(r.status)}</td>"
                       f"<td>{html.escape(r.error)}</td></tr>"
                       for r in self.manifest if r.status != DONE or (r.checks and not all(r.checks.values())))
        report = f", report <code>{html.escape(str(self.report))}</code>" if self.report else ""
        return (f"<p>netesto sweep <code>{html.escape(str(self.directory))}</code>: {c[DONE]} of "
                f"{len(self.manifest.points)} points ok, {len(self.ran)} run now{report}</p>"
                + (f"<table><tr><th>point</th><th>status</th><th>error</th></tr>{rows}</table>" if rows else ""))

    def __repr__(self) -> str:
        c = self.manifest.counts()
        return (f"<SweepResult {self.directory}: {c[DONE]} ok, {c['failed']} failed, {c['interrupted']} interrupted, "
                f"{len(self.check_failures)} failing checks>")


__all__ = ["SweepResult"]
