"""One point of a sweep: its notebook run by papermill in the point's directory, and its record.

The point's values reach the notebook only as papermill's parameters cell (Python
literals, each checked against its kind by :mod:`netesto.sweep.values`); the
shipped notebook hands them to the script as variables (``netesto.run(...,
defines=...)``), never as text of an option line. A notebook that ends without an
experiment (no ``exp.nc`` under the point's directory) fails its point.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

from netesto.sweep import checks as criteria  # not "import netesto.sweep.checks": netesto.sweep is also a function
from netesto.errors import NetestoError, clip
from netesto.results.manifest import DONE, LEFTOVER, Manifest, PointRecord, inside
from netesto.sweep.attempts import experiments_in, set_aside
from netesto.sweep.values import checked

if TYPE_CHECKING:
    from netesto.sweep.kernel import WarmKernel

SHAPE_PARAMS = ("bw", "rtt", "buffer", "loss", "jitter", "host_rtt")  # applied to a testbed before its point runs
# The kernel's own warnings (e.g. ipykernel's about TCP without encryption, on a
# loopback the sweep opened itself) would print once per point over the progress bar.
KERNEL_ARGS = ["--IPKernelApp.log_level=ERROR"]


@dataclass(frozen=True)
class Worker:
    """Where points run: a lab file (and the testbed behind it, if it is one), or nothing
    (the notebook brings up its own lab)."""

    lab: str = ""
    testbed: str = ""


@dataclass
class Context:
    """What every point of one sweep shares."""

    nb: Path
    directory: Path
    declared: dict[str, Any]
    fixed: dict[str, Any]
    kernel_name: str
    timeout: float | None
    checks: list[str]
    manifest: Manifest
    lock: threading.Lock
    stop: threading.Event
    fresh_kernels: bool = False
    timings: dict[str, dict[str, float]] = field(default_factory=dict)  # point key -> seconds per phase

    def save(self) -> None:
        with self.lock:
            self.manifest.save(self.directory)


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def point_values(rec: PointRecord, worker: Worker, ctx: Context) -> dict[str, Any]:
    """The parameters papermill sets: the point's and the fixed values, checked, and what the sweep supplies."""
    values = {k: checked(k, v, ctx.declared[k]) for k, v in {**ctx.fixed, **rec.params}.items()}
    supplied = {"lab": worker.lab, "workdir": "results", "seed": rec.seed, "rep": rec.rep, "point": rec.key,
                "steady": ctx.manifest.steady}
    for name, value in supplied.items():
        if name in ctx.declared and not (name == "lab" and not worker.lab):
            values[name] = value
    return values


def recover_stale(worker: Worker, ctx: Context, rec: PointRecord | None) -> None:
    """Fetch what the worker's agents still hold into ``rec``'s attempt (its ``leftover/``), or
    into the sweep's ``leftover/`` when no attempt of this sweep ran on the lab."""
    from netesto.sweep.recover import recover

    if not worker.lab:
        return
    rel = f"{rec.dir}/{LEFTOVER}" if rec is not None else f"{LEFTOVER}/{time.strftime('%Y%m%dT%H%M%S')}"
    found = recover(worker.lab, inside(ctx.directory, rel), say)
    if not found:
        return
    names = [p.relative_to(ctx.directory).as_posix() for p in found]
    with ctx.lock:
        target = rec.leftover if rec is not None else ctx.manifest.leftover
        target.extend(n for n in names if n not in target)
        ctx.manifest.save(ctx.directory)


def run_point(rec: PointRecord, worker: Worker, ctx: Context, kernel: WarmKernel | None = None,
              on_line: Callable[[str], None] | None = None) -> None:
    """Run ``rec``'s next attempt (in ``kernel``, kept warm from the worker's last point; each line the
    kernel prints to ``on_line``); its record saved when it starts, when its notebook ends, when all is read."""
    import papermill

    from netesto.sweep.kernel import ENGINE

    set_aside(rec, ctx.directory)
    pdir = inside(ctx.directory, rec.dir)
    pdir.mkdir(parents=True, exist_ok=True)
    values = point_values(rec, worker, ctx)
    out_nb = pdir / "notebook.ipynb"
    rec.status, rec.error, rec.lab, rec.started = "running", "", worker.lab, time.time()
    rec.notebook = out_nb.relative_to(ctx.directory).as_posix()
    ctx.save()
    clock = Clock()
    try:
        if worker.testbed:
            _shape(worker.testbed, {**{k: ctx.declared[k] for k in SHAPE_PARAMS if k in ctx.declared}, **values},
                   worker.lab)
        clock.lap("shape")
        km = kernel.manager(pdir) if kernel is not None else None
        clock.lap("kernel")
        # The kernel starts in the point's directory (nbclient's resources path), not through
        # papermill's cwd=, which chdirs the whole process: points run in parallel threads.
        papermill.execute_notebook(str(ctx.nb), str(out_nb), parameters=values, kernel_name=ctx.kernel_name,
                                   progress_bar=False, log_output=False, execution_timeout=ctx.timeout,
                                   extra_arguments=KERNEL_ARGS, resources={"metadata": {"path": str(pdir)}},
                                   engine_name=ENGINE, km=km, on_line=on_line)
        clock.lap("notebook")
        rec.status = DONE
    except papermill.PapermillExecutionError as exc:
        rec.status, rec.error = "failed", f"In [{exc.exec_count}]: {_cell_error(out_nb, exc)}"
    except NetestoError as exc:
        rec.status, rec.error = "failed", exc.format_message()
    except Exception as exc:  # noqa: BLE001 - a kernel that died, a bad notebook: recorded, the sweep goes on
        rec.status, rec.error = "failed", f"{type(exc).__name__}: {exc}"
    finally:
        if rec.status != DONE and kernel is not None:
            kernel.end()  # its state is unknown: its atexit handlers run now, the next point gets a new kernel
        if rec.status == "failed" and ctx.stop.is_set():
            rec.status = "interrupted"  # it failed because the sweep was being stopped
        rec.seconds = round(clock.total(), 3)
        rec.experiments, rec.leftover = experiments_in(ctx.directory, rec.dir)
        if rec.status == DONE and not rec.experiments:
            rec.status = "failed"
            rec.error = (f"the notebook ended without an experiment (no exp.nc under {rec.dir}/): "
                         "did its run go to another workdir?")
        ctx.save()  # the point is recorded as it ended before anything slower (a second Ctrl-C) can stop us
    _finish_point(rec, worker, ctx, out_nb, clock)
    ctx.timings[rec.key] = {**clock.laps, **_cells(out_nb), "total": round(clock.total(), 3)}


class Clock:
    """Seconds per phase of a point (``laps``), for the sweep's timing breakdown."""

    def __init__(self) -> None:
        self.t0 = self.last = time.monotonic()
        self.laps: dict[str, float] = {}

    def lap(self, name: str) -> None:
        now = time.monotonic()
        self.laps[name] = round(self.laps.get(name, 0.0) + now - self.last, 3)
        self.last = now

    def total(self) -> float:
        return time.monotonic() - self.t0


def _cells(out_nb: Path) -> dict[str, float]:
    """From the executed notebook's papermill metadata: the seconds its code cells ran (``cells``) and the
    longest one (``cell_max``)."""
    import json

    try:
        nb = json.loads(out_nb.read_text(encoding="utf-8"))
        durations = [float(c["metadata"]["papermill"]["duration"] or 0) for c in nb["cells"]
                     if c.get("cell_type") == "code" and "papermill" in c.get("metadata", {})]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    return {"cells": round(sum(durations), 3), "cell_max": round(max(durations, default=0.0), 3)}


def _finish_point(rec: PointRecord, worker: Worker, ctx: Context, out_nb: Path, clock: Clock) -> None:
    """The slower part of a point's end: stale agent data fetched, HTML export, summary, checks."""
    clock.lap("recorded")
    try:
        recover_stale(worker, ctx, rec)
    except NetestoError as exc:  # the next point's own check says it again if it still matters
        say(f"netesto sweep: after {rec.key}: {exc.format_message()}")
    clock.lap("recover")
    if out_nb.exists():
        rec.html = _export_html(out_nb, ctx.directory)
    clock.lap("export")
    if rec.status == DONE:
        summarize(rec, ctx.directory, ctx.manifest.steady, ctx.checks)
    ctx.save()
    clock.lap("summary")


def summarize(rec: PointRecord, directory: Path, steady: str, checks: list[str], *, read: bool = True) -> None:
    """``rec``'s summary and parts over the ``steady`` window (read from its experiments unless ``read``
    is false and it has them), and its checks' verdicts on them."""
    from netesto.results.cube import point_summary

    if read or not rec.summary or not rec.parts:
        rec.summary, rec.parts = point_summary([directory / e for e in rec.experiments], steady or None)
    rec.checks = criteria.evaluate(checks, criteria.flat(rec.summary, rec.parts)) if checks else {}


def _cell_error(out_nb: Path, exc: Any) -> str:
    """What the failed cell said. A magic's UsageError reaches papermill with no text
    (IPython prints it on stderr instead of raising it): then the cell's last stderr lines."""
    if exc.evalue:
        return f"{exc.ename}: {exc.evalue}"
    try:
        import nbformat

        nb = nbformat.read(out_nb, as_version=4)
        cell = next(c for c in nb.cells if c.get("execution_count") == exc.exec_count)
        text = "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("name") == "stderr")
    except (OSError, ValueError, StopIteration):
        text = ""
    lines = [line for line in text.splitlines() if line.strip()]
    error = next((line for line in reversed(lines) if "rror" in line), lines[-1] if lines else exc.ename)
    return clip(error, 600)


def _shape(testbed: str, values: Mapping[str, Any], lab: str) -> None:
    from netesto.controller import Lab
    from netesto.controller.claim import LabClaim
    from netesto.testbed import reshape

    # A reshape takes the lab's claim, as a run does: never under another run's flows.
    with LabClaim(Lab.from_file(lab), run=f"sweep reshape of {testbed}") as claim:
        reshape(testbed, claim=claim, **{k: str(values[k]) for k in SHAPE_PARAMS if k in values})


def _export_html(nb: Path, directory: Path) -> str:
    """The executed notebook as HTML beside it (nbconvert; nothing loaded from the network)."""
    from netesto.report.notebook import export_html

    try:
        return export_html(nb).relative_to(directory).as_posix()
    except Exception as exc:  # noqa: BLE001 - the point's own record says it; the sweep goes on
        say(f"netesto sweep: {nb}: no HTML export: {type(exc).__name__}: {exc}")
        return ""


__all__ = ["Context", "KERNEL_ARGS", "SHAPE_PARAMS", "Worker", "point_values", "recover_stale", "run_point", "say",
           "summarize"]
