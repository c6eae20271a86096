"""`netesto demo`: a testbed, the paper's TwoFlowBaseStream through 100 Mbit/s and 20 ms, results.

A cubic flow h2 -> h1 runs for ``dur1`` seconds; a bbr flow h3 -> h1 joins
``delay2`` seconds later for ``dur2`` seconds. Both cross the router's
bottleneck toward h1. The whole demo (up, run, fetch, process, down) takes
well under a minute. Where a layer is missing, the demo does what it can and
says what is missing.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, TextIO

from netesto.errors import RunInterrupted, UsageError
from netesto.testbed import lifecycle
from netesto.testbed.config import TestbedConfig, UpResult

DEMO_SCRIPT = """\
# netesto demo: the paper's TwoFlowBaseStream, shortened. h2 streams to h1
# with cubic; h3 joins with bbr {delay2} s later for {dur2} s.
DESC demo_cubic_then_bbr
OTHER bw={bw},netem={rtt}
SOURCE inlib
RUN InlibShortWaits
RUN TwoFlowBaseStream server=h1 client1=h2 client2=h3 expName=demo \\
    ca1={ca1} ca2={ca2} dur1={dur1} dur2={dur2} delay2={delay2} instances=1
"""
RESULT_FILES = ("exp.csv", "{exp}/all.exp.out", "{exp}/exp.nc", "{exp}/exp.html")


@dataclass
class DemoResult:
    """Where the demo put things and what it could not do."""

    workdir: Path
    lab: Path | None = None
    exps: list[int] = field(default_factory=list)
    files: dict[str, bool] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    rows: list[dict[str, str]] = field(default_factory=list)
    elapsed: float = 0.0
    ok: bool = False


class ProgressBar:
    """``[#####.....] 50% 6/12s``: rewritten in place on a terminal, every 10 % otherwise."""

    def __init__(self, total: float, out: TextIO, width: int = 30) -> None:
        self.total = max(total, 1.0)
        self.out = out
        self.width = width
        self.t0 = time.monotonic()
        self.tty = out.isatty()
        self._last_step = -1
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self.label = ""

    def render(self, elapsed: float) -> str:
        frac = min(elapsed / self.total, 0.99)
        done = int(frac * self.width)
        return f"[{'#' * done}{'.' * (self.width - done)}] {frac * 100:3.0f}% {elapsed:.0f}/{self.total:.0f}s {self.label}"

    def _loop(self) -> None:
        while not self._stop.wait(0.5):
            self.tick()

    def tick(self) -> None:
        elapsed = time.monotonic() - self.t0
        if self.tty:
            self.out.write("\r" + self.render(elapsed).ljust(self.width + 40))
            self.out.flush()
        else:
            step = int(min(elapsed / self.total, 0.99) * 10)
            if step > self._last_step:
                self._last_step = step
                self.out.write(self.render(elapsed) + "\n")
                self.out.flush()

    def start(self) -> "ProgressBar":
        self._thread.start()
        return self

    def finish(self, stopped: str = "") -> None:
        """The last line: full and "done", or where it was and why it ``stopped``."""
        self._stop.set()
        self._thread.join()
        elapsed = time.monotonic() - self.t0
        if stopped:
            self.label = stopped
            line = self.render(elapsed)
        else:
            line = f"[{'#' * self.width}] 100% {elapsed:.0f}/{elapsed:.0f}s done"
        self.out.write(("\r" + line.ljust(self.width + 40) if self.tty else line) + "\n")
        self.out.flush()


def run_demo(
    workdir: str | os.PathLike[str],
    *,
    keep: bool = False,
    dur1: int = 10,
    dur2: int = 4,
    delay2: int = 3,
    bw: str = "100mbit",
    rtt: str = "20ms",
    name: str | None = None,
    loopback: bool = False,
    out: TextIO = sys.stdout,
) -> DemoResult:
    """Bring a testbed up, run the two-flow experiment, collect results, tear down."""
    t0 = time.monotonic()
    wd = Path(workdir).expanduser().resolve()
    wd.mkdir(parents=True, exist_ok=True)
    result = DemoResult(wd)
    say: Callable[[str], None] = lambda msg: print(msg, file=out, flush=True)
    name = name or f"demo{os.getpid() % 100000}"
    cfg = TestbedConfig.parse(name=name, hosts=3, bw=bw, rtt=rtt, buffer="1bdp", dir=wd / "testbed", loopback=loopback)
    say(f"netesto demo: testbed {name}: 3 hosts, {bw} bottleneck, rtt {rtt}, buffer 1 BDP")
    up = lifecycle.up(cfg, progress=lambda m: say(f"  {m}"))
    result.lab = up.lab
    result.notes += up.notes
    for note in up.notes:
        say(f"  note: {note}")
    try:
        _run_experiment(result, up, dur1=dur1, dur2=dur2, delay2=delay2, bw=bw, rtt=rtt, say=say, out=out)
    except RunInterrupted as exc:
        # the controller stopped the flows, then fetched and processed what they wrote
        exps = ", ".join(f"{wd}/{e}/" for e in exc.result.exps) if exc.result is not None else ""
        say(f"interrupted: what ran until then is kept in {exps or wd}")
        raise
    finally:
        if keep:
            say(f"testbed {name} kept up (--keep): lab {up.lab}; `netesto testbed down --name {name}` removes it")
        else:
            problems = lifecycle.down(name)
            say(f"testbed {name} torn down" + (f" with problems: {'; '.join(problems)}" if problems else ""))
    result.elapsed = time.monotonic() - t0
    return result


def _run_experiment(result: DemoResult, up: UpResult, *, dur1: int, dur2: int, delay2: int, bw: str, rtt: str,
                    say: Callable[[str], None], out: TextIO) -> None:
    try:
        from netesto.controller import run
    except ImportError as exc:
        result.missing.append(f"the controller (netesto.controller.run): {exc}; the testbed was built and checked only")
        say(f"MISSING: {result.missing[-1]}")
        return
    if not Path(up.lab).exists() or "agents: not started" in " ".join(up.notes):
        result.missing.append("agents: the testbed has no agents, so no experiment can run")
        say(f"MISSING: {result.missing[-1]}")
        return
    ca1, ca2 = _congestion_controls(up.mode, say)
    if up.mode == "loopback":
        bw, rtt = "loopback", "none"
    script = DEMO_SCRIPT.format(dur1=dur1, dur2=dur2, delay2=delay2, bw=bw, rtt=rtt, ca1=ca1, ca2=ca2)
    (result.workdir / "demo.nts").write_text(script)
    say(f"running TwoFlowBaseStream: {ca1} h2->h1 for {dur1} s, {ca2} h3->h1 from {delay2} s for {dur2} s")
    bar = ProgressBar(dur1 + 3.0, out).start()
    errors: list[str] = []
    progress = demo_progress(bar, errors, result.notes)
    try:
        run_result = run(result.workdir / "demo.nts", lab=up.lab, workdir=result.workdir, progress=progress)
    except (KeyboardInterrupt, RunInterrupted):
        bar.finish("interrupted")
        raise
    except BaseException:
        bar.finish("failed")
        raise
    bar.finish()
    result.exps = list(run_result.exps)
    for err in dict.fromkeys((*errors, *run_result.errors)):
        say(f"  error: {err}")
    for note in result.notes[len(up.notes):]:
        say(f"  note: {note}")
    for exp in result.exps:
        for pattern in RESULT_FILES:
            rel = pattern.format(exp=exp)
            result.files[rel] = (result.workdir / rel).exists()
    absent = [f for f, ok in result.files.items() if not ok]
    if absent:
        result.missing.append(f"not written (results/report layer missing or failed): {', '.join(absent)}"
                              f"{missing_report_modules()}")
    try:
        from netesto.results.expcsv import read_rows
    except ImportError:  # the results extra is not installed: no exp.csv either
        pass
    else:
        result.rows = read_rows(result.workdir / "exp.csv", result.exps)
    result.ok = bool(result.exps) and run_result.ok


def missing_report_modules() -> str:
    """``"; it lacks xarray: the 'report' extra has it: pip ..."`` when a module that the results
    and their pages need is not installed (pyproject's 'report' extra says which), else ``""``."""
    from importlib.util import find_spec

    from netesto.extras import import_name, install_hint, provides

    for dist in provides("report"):
        module = import_name(dist)
        try:
            found = find_spec(module) is not None
        except (ImportError, ValueError):  # a finder that refuses it, or a broken install
            found = False
        if not found:
            return f"; this install lacks {module}: {install_hint(module, 'report')}"
    return ""


def demo_progress(bar: ProgressBar, errors: list[str], notes: list[str]) -> Callable[[object], None]:
    """The run's progress callback: errors and notes collected apart, the bar's label kept current.

    A ``Notice`` (leftover data, a late start, results not installed) is a
    note, not an error; notes already in ``notes`` are not repeated.
    """
    from netesto.controller.progress import ActionStarted, DataStored, ExperimentProcessed, FlowProgress, HostError, Notice

    def note(text: str) -> None:
        if text not in notes:
            notes.append(text)

    def progress(event: object) -> None:
        if isinstance(event, HostError):
            errors.append(f"{event.host}: {event.error}" + (" (host dropped)" if event.fatal else ""))
        elif isinstance(event, Notice):
            note(f"{event.host}: {event.text}" if event.host else event.text)
        elif isinstance(event, ExperimentProcessed) and event.note:
            if not any(event.note in n for n in notes):  # a failure came as a Notice already
                note(f"experiment {event.exp}: {event.note}")
        elif isinstance(event, ActionStarted):
            bar.label = f"{event.kind} {event.host}".strip()
        elif isinstance(event, FlowProgress):
            bar.label = "flows running"
        elif isinstance(event, DataStored):
            bar.label = f"fetched data from {event.host}"

    return progress


def _congestion_controls(mode: str, say: Callable[[str], None]) -> tuple[str, str]:
    """cubic and bbr, unless an unprivileged loopback run may not use them."""
    if os.geteuid() == 0:
        return "cubic", "bbr"
    try:
        allowed = Path("/proc/sys/net/ipv4/tcp_allowed_congestion_control").read_text().split()
    except OSError:
        allowed = []
    pick = [c if c in allowed else "reno" for c in ("cubic", "bbr")]
    if pick != ["cubic", "bbr"]:
        say(f"note: without root only {', '.join(allowed) or 'reno'} may be used per socket; running {pick[0]} vs {pick[1]}")
    return pick[0], pick[1]


def report(result: DemoResult, out: TextIO = sys.stdout) -> None:
    """Print where the results are and the headline numbers."""
    say = lambda msg: print(msg, file=out)  # noqa: E731
    if result.rows:
        from netesto.results.expcsv import rate_table

        say("")
        for line in rate_table(result.rows):
            say(line)
    say(f"\nresults in {result.workdir}")
    for rel, ok in result.files.items():
        say(f"  {'ok     ' if ok else 'MISSING'} {result.workdir / rel}")
    for rel, ok in result.files.items():
        if ok and rel.endswith(".html"):
            say(f"report: {result.workdir / rel} (open it in a browser)")
    for note in result.missing:
        say(f"MISSING: {note}")
    say(f"demo {'finished' if result.ok else 'did not complete'} in {result.elapsed:.1f} s")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dir", default="netesto-demo", help="where results go (default ./netesto-demo)")
    parser.add_argument("--keep", action="store_true", help="leave the testbed up afterwards")
    parser.add_argument("--dur", type=int, default=10, help="seconds of the cubic flow (default 10)")
    parser.add_argument("--bw", default="100mbit", help="bottleneck rate (default 100mbit)")
    parser.add_argument("--rtt", default="20ms", help="round-trip time (default 20ms)")
    parser.add_argument("--name", default=None, help="testbed name (default demo<pid>)")
    parser.add_argument("--loopback", action="store_true", help="agents on 127.0.0.1 only (no namespaces, no bottleneck)")


def main(args: argparse.Namespace) -> int:
    if args.dur < 3 or args.dur > 50:
        raise UsageError(f"--dur {args.dur}: 3..50 seconds (the demo stays under a minute)")
    dur2 = max(1, args.dur * 2 // 5)
    delay2 = max(1, args.dur * 3 // 10)
    result = run_demo(args.dir, keep=args.keep, dur1=args.dur, dur2=dur2, delay2=delay2, bw=args.bw, rtt=args.rtt, name=args.name,
                      loopback=args.loopback)
    report(result)
    return 0 if result.ok else 1


__all__ = ["DEMO_SCRIPT", "DemoResult", "ProgressBar", "add_arguments", "demo_progress", "main", "missing_report_modules", "report", "run_demo"]
