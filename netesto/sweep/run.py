"""Run a parameterized notebook once per grid point with papermill; keep everything.

Each point runs in its own directory ``<out>/<point.dirname>/`` (the kernel's
working directory): the executed notebook, its HTML export and whatever the
notebook wrote (its experiments). ``manifest.json`` records every point as it
ends, so a failed point is kept with its error while the others go on, and
``resume=True`` runs only the points that are missing, failed or interrupted.
At the end the points' experiments are combined into ``sweep.nc`` (the cube)
and ``sweep.html`` (the report).
"""

from __future__ import annotations

import contextlib
import platform
import queue
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import netesto.sweep.checks as criteria
from netesto._version import __version__
from netesto.errors import NetestoError, SweepError, clip
from netesto.results.manifest import DONE, Manifest, PointRecord
from netesto.sweep.grid import Point, parse_grid, points, typed
from netesto.sweep.notebook import check_names, parameters_of

SHAPE_PARAMS = ("bw", "rtt", "buffer", "loss", "jitter")  # applied to a testbed before its point runs
KERNEL = "python3"
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
class SweepResult:
    """The sweep directory, its manifest and what it produced."""

    directory: Path
    manifest: Manifest
    report: Path | None = None
    cube: Path | None = None
    ran: list[str] = field(default_factory=list)  # keys of the points run this time

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
        import html

        c = self.manifest.counts()
        rows = "".join(f"<tr><td>{html.escape(r.key)}</td><td>{r.status}</td><td>{html.escape(r.error)}</td></tr>"
                       for r in self.manifest if r.status != DONE or (r.checks and not all(r.checks.values())))
        report = f' <a href="{html.escape(str(self.report))}">report</a>' if self.report else ""
        return (f"<p>netesto sweep <code>{html.escape(str(self.directory))}</code>: {c[DONE]} of "
                f"{len(self.manifest.points)} points ok, {len(self.ran)} run now{report}</p>"
                + (f"<table><tr><th>point</th><th>status</th><th>error</th></tr>{rows}</table>" if rows else ""))

    def __repr__(self) -> str:
        c = self.manifest.counts()
        return (f"<SweepResult {self.directory}: {c[DONE]} ok, {c['failed']} failed, {c['interrupted']} interrupted, "
                f"{len(self.check_failures)} failing checks>")


def _workers(labs: Sequence[str | Path], testbeds: Sequence[str]) -> list[Worker]:
    from netesto.testbed.state import load_state, state_path

    out = [Worker(str(Path(lab).resolve())) for lab in labs]
    for name in testbeds:
        state = load_state(state_path(name))
        if state.get("status") != "up" or not state.get("lab"):
            raise SweepError(f"testbed {name!r} is not up (status {state.get('status')!r})")
        out.append(Worker(str(state["lab"]), name))
    return out or [Worker()]


def check_reachable(lab_path: str, timeout: float = 3.0) -> None:
    """Every agent of the lab answers ``hello`` (an AgentUnreachable naming the first that does not)."""
    from netesto.controller import Lab
    from netesto.controller.session import default_client_factory

    lab = Lab.from_file(lab_path)
    for host in lab:
        client = default_client_factory(host, lab)
        try:
            client.timeout = timeout
            client.hello()
        finally:
            client.close()


def provenance() -> dict[str, Any]:
    """Versions of what runs the sweep (the hosts' own facts are in each experiment)."""
    from importlib import metadata

    versions = {}
    for pkg in ("netesto", "papermill", "nbclient", "xarray", "holoviews", "bokeh", "numpy", "pandas", "pyzmq"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions[pkg] = metadata.version(pkg)
    return {"netesto": __version__, "python": sys.version.split()[0], "platform": platform.platform(),
            "kernel": platform.release(), "packages": versions, "argv": list(sys.argv)}


def _records(manifest: Manifest, pts: Iterable[Point]) -> None:
    for p in pts:
        if p.key not in manifest.points:
            manifest.points[p.key] = PointRecord(p.key, p.index, p.rep, p.as_dict(), p.dirname, p.seed)


def plan(notebook: str | Path, params: Mapping[str, Any] | Sequence[str], *, reps: int = 1,
         fixed: Mapping[str, Any] | None = None, checks: Sequence[str] = ()) -> tuple[dict[str, Any], list[Point]]:
    """Check a sweep before anything runs: the notebook's declared parameters
    and the grid's points (a SweepError for an unknown name, an empty grid,
    a value of the wrong type, a check that does not parse)."""
    declared = parameters_of(notebook)
    grid = parse_grid(params)
    fixed = dict(fixed or {})
    both = sorted(set(grid) & set(fixed))
    if both:
        raise SweepError(f"{', '.join(both)}: both swept and fixed")
    check_names(notebook, declared, {**grid, **fixed})
    for name, values in grid.items():
        for v in values:
            typed(v, declared[name], name)
    for name, v in fixed.items():
        typed(v, declared[name], name)
    for text in checks:
        criteria.parse(text)
    return declared, points(grid, reps)


def sweep(
    notebook: str | Path,
    params: Mapping[str, Any] | Sequence[str],
    *,
    reps: int = 1,
    out: str | Path = "sweep",
    labs: Sequence[str | Path] = (),
    testbeds: Sequence[str] = (),
    fixed: Mapping[str, Any] | None = None,
    resume: bool = False,
    checks: Sequence[str] = (),
    kernel_name: str = KERNEL,
    progress: bool | Callable[[PointRecord], None] = True,
    timeout: float | None = None,
    report: bool = True,
) -> SweepResult:
    """Run ``notebook`` once per point of the grid ``params`` (``{"ca": ["cubic",
    "bbr"]}`` or ``["ca=cubic,bbr", ...]``) and repetition, in ``out``.

    ``labs`` (lab files) and ``testbeds`` (names of testbeds up on this machine)
    are where points run, one at a time on each, in parallel across them; a
    testbed is reshaped to each point's bw/rtt/buffer/loss/jitter first. The
    notebook gets the lab file as its ``lab`` parameter and ``workdir``,
    ``seed``, ``rep`` when it declares them. ``checks`` are pass/fail
    expressions over each point's summary (``"jain >= 0.9"``).
    """
    nb_path = Path(notebook).resolve()
    grid = parse_grid(params)
    declared, pts = plan(nb_path, grid, reps=reps, fixed=fixed, checks=checks)
    workers = _workers(labs, testbeds)
    for w in workers:
        if w.lab:
            check_reachable(w.lab)
    directory = Path(out).resolve()
    manifest = _open_manifest(directory, nb_path, grid, reps, dict(fixed or {}), list(checks), resume)
    _records(manifest, pts)
    manifest.provenance = provenance()
    directory.mkdir(parents=True, exist_ok=True)
    manifest.save(directory)
    todo = [r for r in manifest if r.status != DONE]
    result = SweepResult(directory, manifest)
    lock = threading.Lock()
    bar = _progress(progress, len(manifest.points), len(manifest.points) - len(todo))
    jobs: queue.Queue[PointRecord] = queue.Queue()
    for r in todo:
        jobs.put(r)
    stop = threading.Event()
    errors: list[BaseException] = []

    def work(worker: Worker) -> None:
        while not stop.is_set():
            try:
                rec = jobs.get_nowait()
            except queue.Empty:
                return
            try:
                _run_point(rec, worker, nb_path, directory, declared, dict(fixed or {}), kernel_name, timeout,
                           list(checks), manifest, lock, stop)
            except BaseException as exc:  # noqa: BLE001 - handed to the main thread
                errors.append(exc)
                stop.set()
                return
            result.ran.append(rec.key)
            bar(rec)

    threads = [threading.Thread(target=work, args=(w,), name=f"sweep-{i}", daemon=True) for i, w in enumerate(workers)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            while t.is_alive():
                t.join(0.2)
    except KeyboardInterrupt:
        # Kernels run in sessions of their own (jupyter_client): the running points end
        # normally, and no new one starts.
        stop.set()
        print("netesto sweep: stopping after the point(s) running now", file=sys.stderr, flush=True)
        for t in threads:
            t.join()
        with lock:
            manifest.save(directory)
        raise
    finally:
        bar(None)
    if errors:
        raise errors[0]
    if report:
        _finish(result)
    return result


def _open_manifest(directory: Path, nb: Path, grid: dict[str, list[Any]], reps: int, fixed: dict[str, Any],
                   checks: list[str], resume: bool) -> Manifest:
    if not (directory / "manifest.json").exists():
        if directory.exists() and any(directory.iterdir()):
            raise SweepError(f"{directory}: exists and is not a sweep directory; give --out a new or empty directory")
        return Manifest(str(nb), grid, reps, fixed, checks)
    if not resume:
        raise SweepError(f"{directory} holds a sweep already: --resume to run its missing and failed points, "
                         "or another --out")
    old = Manifest.load(directory)
    if old.grid != grid or old.fixed != fixed:
        raise SweepError(f"{directory}: --resume with another grid ({old.grid}, fixed {old.fixed}); "
                         "resume with the same -p/--set, or sweep into another --out")
    old.reps, old.checks, old.notebook = max(old.reps, reps), checks, str(nb)
    return old


def _progress(progress: bool | Callable[[PointRecord], None], total: int, done: int) -> Callable[[PointRecord | None], None]:
    if callable(progress):
        cb = progress
        return lambda rec: cb(rec) if rec is not None else None
    if not progress:
        return lambda rec: None
    from tqdm.auto import tqdm

    bar = tqdm(total=total, initial=done, unit="point", desc="sweep", dynamic_ncols=True)

    def update(rec: PointRecord | None) -> None:
        if rec is None:
            bar.close()
            return
        bar.set_postfix_str(f"{rec.key}: {rec.status}", refresh=False)
        bar.update(1)

    return update


def _run_point(rec: PointRecord, worker: Worker, nb: Path, directory: Path, declared: dict[str, Any],
               fixed: dict[str, Any], kernel_name: str, timeout: float | None, checks: list[str],
               manifest: Manifest, lock: threading.Lock, stop: threading.Event | None = None) -> None:
    import papermill

    pdir = directory / rec.dir
    pdir.mkdir(parents=True, exist_ok=True)
    values = {k: typed(v, declared[k], k) for k, v in {**fixed, **rec.params}.items()}
    supplied = {"lab": worker.lab, "workdir": "results", "seed": rec.seed, "rep": rec.rep, "point": rec.key}
    for name, value in supplied.items():
        if name in declared and not (name == "lab" and not worker.lab):
            values[name] = value
    out_nb = pdir / "notebook.ipynb"
    rec.status, rec.error, rec.lab, rec.started = "running", "", worker.lab, time.time()
    rec.notebook, rec.html, rec.experiments = out_nb.relative_to(directory).as_posix(), "", []
    rec.checks, rec.summary = {}, {}
    with lock:
        manifest.save(directory)
    t0 = time.monotonic()
    try:
        if worker.testbed:
            _shape(worker.testbed, {**{k: declared[k] for k in SHAPE_PARAMS if k in declared}, **values}, worker.lab)
        # The kernel starts in the point's directory (nbclient's resources path), not through
        # papermill's cwd=, which chdirs the whole process: points run in parallel threads.
        papermill.execute_notebook(str(nb), str(out_nb), parameters=values, kernel_name=kernel_name,
                                   progress_bar=False, log_output=False, execution_timeout=timeout,
                                   extra_arguments=KERNEL_ARGS, resources={"metadata": {"path": str(pdir)}})
        rec.status = DONE
    except KeyboardInterrupt:
        rec.status, rec.error = "interrupted", "interrupted (Ctrl-C)"
        raise
    except papermill.PapermillExecutionError as exc:
        rec.status, rec.error = "failed", f"In [{exc.exec_count}]: {_cell_error(out_nb, exc)}"
    except NetestoError as exc:
        rec.status, rec.error = "failed", exc.format_message()
    except Exception as exc:  # noqa: BLE001 - a kernel that died, a bad notebook: recorded, the sweep goes on
        rec.status, rec.error = "failed", f"{type(exc).__name__}: {exc}"
    finally:
        if rec.status == "failed" and stop is not None and stop.is_set():
            rec.status = "interrupted"  # it failed because the sweep was being stopped
        rec.seconds = round(time.monotonic() - t0, 3)
        if out_nb.exists():
            rec.html = _export_html(out_nb, directory)
        rec.experiments = sorted(p.parent.relative_to(directory).as_posix() for p in pdir.rglob("exp.nc"))
        if rec.status == DONE and rec.experiments:
            from netesto.results.cube import point_summary

            rec.summary = point_summary([directory / e for e in rec.experiments])
        if rec.status == DONE and checks:
            rec.checks = criteria.evaluate(checks, rec.summary)
        with lock:
            manifest.save(directory)


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
        print(f"netesto sweep: {nb}: no HTML export: {type(exc).__name__}: {exc}", file=sys.stderr)
        return ""


def _finish(result: SweepResult) -> None:
    from netesto.report.sweep import write_report
    from netesto.results.cube import write_cube

    result.cube = write_cube(result.directory, result.manifest)
    result.report = write_report(result.directory)


__all__ = ["SweepResult", "Worker", "check_reachable", "plan", "provenance", "sweep"]
