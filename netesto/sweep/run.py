"""Run a parameterized notebook once per grid point with papermill; keep everything.

Each point runs in its own directory ``<out>/<point.dirname>/`` (the kernel's
working directory): the executed notebook, its HTML export and whatever the
notebook wrote (its experiments). ``manifest.json`` records every point as it
ends, so a failed point is kept with its error while the others go on, and
``resume=True`` runs only the points that are missing, failed or interrupted,
each earlier attempt set aside under ``attempts/`` (:mod:`netesto.sweep.attempts`).
Before a lab's points, a dead run's claim is waited out and data its agents still
hold is fetched apart (:mod:`netesto.sweep.recover`). At the end the points'
experiments are combined into ``sweep.nc`` (the cube) and ``sweep.html`` (the report).
"""

from __future__ import annotations

import contextlib
import platform
import queue
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from netesto.sweep import checks as criteria  # not "import netesto.sweep.checks": netesto.sweep is also a function
from netesto._version import __version__
from netesto.errors import SweepError
from netesto.results.manifest import DONE, Manifest, PointRecord
from netesto.sweep.grid import Point, count, parse_grid, points
from netesto.sweep.notebook import check_names, parameters_of
from netesto.sweep.estimate import estimates
from netesto.sweep.point import KERNEL_ARGS, Context, Worker, recover_stale, run_point, say, summarize
from netesto.sweep.progress import SweepProgress, display
from netesto.sweep.result import SweepResult
from netesto.sweep.values import checked

KERNEL = "python3"


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
    grid = parse_grid(params)
    count(grid, reps)  # the limit, before the notebook is read or any point made
    declared = parameters_of(notebook)
    fixed = dict(fixed or {})
    both = sorted(set(grid) & set(fixed))
    if both:
        raise SweepError(f"{', '.join(both)}: both swept and fixed")
    check_names(notebook, declared, {**grid, **fixed})
    for name, values in grid.items():
        for v in values:
            checked(name, v, declared[name])
    for name, v in fixed.items():
        checked(name, v, declared[name])
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
    steady: str | None = None,
    figures: str | Sequence[str] | None = None,
    fresh_kernels: bool = False,
) -> SweepResult:
    """Run ``notebook`` once per point of the grid ``params`` (``{"ca": ["cubic",
    "bbr"]}`` or ``["ca=cubic,bbr", ...]``) and repetition, in ``out``.

    ``labs`` (lab files) and ``testbeds`` (names of testbeds up on this machine)
    are where points run, one at a time on each, in parallel across them; a
    testbed is reshaped to each point's bw/rtt/buffer/loss/jitter first. The
    notebook gets the lab file as its ``lab`` parameter and ``workdir``,
    ``seed``, ``rep``, ``steady`` when it declares them. ``checks`` are pass/fail
    expressions over each point's summary (``"jain >= 0.9"``, ``"cc_share_bbr < 0.8"``),
    evaluated on every point, also on those an earlier run of a resumed sweep ran.
    ``steady`` is the warm-up left out of every summary (``"5s"``, ``"10rtt"``;
    :mod:`netesto.results.steady`); ``figures`` the report's figures (see
    :mod:`netesto.report.figures`). Each lab's points run one after another in one
    kernel kept warm (:mod:`netesto.sweep.kernel`); ``fresh_kernels`` starts one per point.
    ``progress``: True shows the sweep's bar (or lines, off a terminal) with each point's
    own run progress; a callable is called with each point's record as it ends. The sweep ends with
    its cube (``sweep.nc``) written; ``report=False`` leaves out ``sweep.html``.
    """
    nb_path = Path(notebook).resolve()
    grid = parse_grid(params)
    declared, pts = plan(nb_path, grid, reps=reps, fixed=fixed, checks=checks)
    window = steady_text(steady)
    chosen = figure_list(figures, nb_path)
    workers = _workers(labs, testbeds)
    for w in workers:
        if w.lab:
            check_reachable(w.lab)
    directory = Path(out).resolve()
    manifest = open_manifest(directory, nb_path, grid, reps, dict(fixed or {}), list(checks), resume)
    _records(manifest, pts)
    manifest.provenance = provenance()
    manifest.defaults = {k: v for k, v in declared.items() if isinstance(v, (str, int, float, bool))}
    manifest.figures = chosen
    directory.mkdir(parents=True, exist_ok=True)
    # Points an earlier run of the sweep finished: their numbers over this window, this run's checks on them.
    again = manifest.steady != window
    manifest.steady = window
    for rec in manifest:
        if rec.status == DONE and rec.experiments:
            summarize(rec, directory, window, list(checks), read=again)
    manifest.save(directory)
    todo = [r for r in manifest if r.status != DONE]
    result = SweepResult(directory, manifest)
    ctx = Context(nb_path, directory, declared, dict(fixed or {}), kernel_name, timeout, list(checks), manifest,
                  threading.Lock(), threading.Event(), fresh_kernels, result.timings)
    show = display(progress, len(manifest.points), len(manifest.points) - len(todo),
                   estimates(nb_path, declared, dict(fixed or {}), todo, manifest))
    ended_cb = progress if callable(progress) else None
    jobs: queue.Queue[PointRecord] = queue.Queue()
    for r in todo:
        jobs.put(r)
    errors: list[BaseException] = []

    ended = [threading.Event() for _ in workers]

    from netesto.sweep.kernel import WarmKernel

    def work(worker: Worker, done: threading.Event) -> None:
        kernel = WarmKernel(kernel_name, KERNEL_ARGS, fresh=fresh_kernels)
        try:
            # what a killed run or a restarted agent left on this lab, before its first point here
            recover_stale(worker, ctx, _last_on(manifest, worker.lab))
            while not ctx.stop.is_set():
                try:
                    rec = jobs.get_nowait()
                except queue.Empty:
                    return
                if show is not None:
                    show.started(rec)
                run_point(rec, worker, ctx, kernel, on_line=_lines(show, rec))
                result.ran.append(rec.key)
                if show is not None:
                    show.ended(rec)
                    with jobs.mutex:  # the points left, estimated with the overhead the points done took
                        left = list(jobs.queue)
                    with contextlib.suppress(Exception):  # the display's estimates must not fail the sweep
                        show.re_estimate(estimates(nb_path, declared, dict(fixed or {}), left, manifest, workers=0))
                if ended_cb is not None:
                    ended_cb(rec)
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            errors.append(exc)
            ctx.stop.set()
        finally:
            kernel.end()
            done.set()

    threads = [threading.Thread(target=work, args=(w, e), name=f"sweep-{i}", daemon=True)
               for i, (w, e) in enumerate(zip(workers, ended))]
    try:
        for t in threads:
            t.start()
        _wait(ended)
    except KeyboardInterrupt:
        _interrupted(ended, ctx)
        for exc in errors:  # a worker's own failure is not lost behind the Ctrl-C
            say(f"netesto sweep: while stopping: {type(exc).__name__}: {exc}")
        raise
    finally:
        if show is not None:
            show.close()
    if errors:
        raise errors[0]
    _finish(result, report)
    return result


def _wait(ended: list[threading.Event]) -> None:
    """Until every worker has ended. Not Thread.join: a join that a Ctrl-C interrupts can leave
    its thread looking dead while it still runs (CPython 3.11), and the sweep would exit under
    a point that is still being recorded; an Event's flag stays true to what the worker said."""
    for e in ended:
        while not e.wait(0.2):
            pass


def _interrupted(ended: list[threading.Event], ctx: Context) -> None:
    """Ctrl-C: the running points end normally (their kernels run in sessions of their own,
    jupyter_client's) and are recorded; no new one starts. A second Ctrl-C stops the wait:
    the points still running are recorded as interrupted."""
    ctx.stop.set()
    say("netesto sweep: stopping after the point(s) running now (Ctrl-C again: stop now, "
        "recording them as interrupted)")
    try:
        _wait(ended)
    except KeyboardInterrupt:
        with ctx.lock:
            for rec in ctx.manifest.points.values():
                if rec.status == "running":
                    rec.status, rec.error = "interrupted", "interrupted (Ctrl-C twice) while it ran"
    ctx.save()


def steady_text(steady: str | None) -> str:
    """The steady window as the manifest keeps it ('' = none), or a SweepError saying what it takes."""
    from netesto.errors import ResultsError
    from netesto.results.steady import Steady

    try:
        sd = Steady.parse(steady)
    except ResultsError as exc:
        raise SweepError(f"--steady: {exc.message}") from None
    return sd.text if sd.amount else ""


def figure_list(figures: str | Sequence[str] | None, nb: Path | None) -> list[str]:
    """The report's figures: as given, else the notebook's metadata ``netesto.figures``, else the default."""
    from netesto.report.figures import chosen

    try:
        return chosen(figures, nb)
    except ValueError as exc:
        raise SweepError(str(exc)) from None


def _last_on(manifest: Manifest, lab: str) -> PointRecord | None:
    """The point that ran last on ``lab`` in this sweep (stale data on its agents is that attempt's)."""
    ran = [r for r in manifest.points.values() if lab and r.lab == lab and r.started is not None]
    return max(ran, key=lambda r: r.started or 0.0) if ran else None


def open_manifest(directory: Path, nb: Path, grid: dict[str, list[Any]], reps: int, fixed: dict[str, Any],
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


def _lines(show: SweepProgress | None, rec: PointRecord) -> Callable[[str], None] | None:
    """Where the lines ``rec``'s kernel prints go: the sweep's display, as the point's progress."""
    if show is None:
        return None
    return lambda text: show.line(rec, text)


def _finish(result: SweepResult, report: bool) -> None:
    """The cube, always (the data a sweep ends with); the report too with ``report``."""
    from netesto.results.cube import write_cube

    result.cube = write_cube(result.directory, result.manifest)
    if report:
        from netesto.report.sweep import write_report

        result.report = write_report(result.directory)


__all__ = ["SweepResult", "Worker", "check_reachable", "plan", "provenance", "sweep"]
