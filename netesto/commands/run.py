"""``netesto run SCRIPT --lab LAB``: run a script on a lab of netesto-agents."""

from __future__ import annotations

import argparse
import sys

from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from netesto.errors import NetestoError, UsageError
from netesto.script.store import parse_defines

if TYPE_CHECKING:
    from netesto.controller.result import RunResult


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("script", nargs="?", help="script file ('-' reads standard input, like the original)")
    parser.add_argument("--lab", required=True, help="lab file (TOML) naming the agents")
    parser.add_argument("--workdir", default=".", help="where <exp>/, counter and exp.csv go (default .)")
    parser.add_argument(
        "-D", dest="defines", action="append", default=[], metavar="VAR=VALUE",
        help="define a script variable before the script runs (repeatable)",
    )
    parser.add_argument("--quiet", "-q", action="store_true", help="print only errors and the final line")
    parser.add_argument("--verbose", "-v", action="store_true", help="also print flow events")
    parser.add_argument(
        "--steady", metavar="WARMUP",
        help="leave each flow's first WARMUP (5s, 500ms, 20rtt) out of its experiment's per-flow, per-group and "
             "per-algorithm numbers (default none)",
    )
    parser.add_argument(
        "--collect", action="store_true",
        help="run no script: fetch the data the agents still hold (after a controller crash) into --workdir",
    )



def main(args: argparse.Namespace) -> int:
    from netesto.controller import ConsoleProgress, Lab, collect, run
    from netesto.controller.result import RunResult
    from netesto.controller.progress import HostError, Progress, ProgressEvent, RunFinished
    from netesto.controller.signals import signals_interrupt

    if (args.script is None) == (not args.collect):
        raise UsageError("give a SCRIPT to run, or --collect (not both)")
    if args.steady is not None:
        from netesto.results.steady import Steady

        Steady.parse(args.steady)  # a bad window is refused before anything runs
    lab = Lab.from_file(args.lab)
    console = ConsoleProgress(sys.stdout, verbose=args.verbose)
    progress: Progress = console
    if args.quiet:

        class Quiet(Progress):
            def handle(self, event: ProgressEvent) -> None:
                if isinstance(event, (HostError, RunFinished)):
                    console.handle(event)

        progress = Quiet()
    try:
        if args.collect:
            result = collect(lab, workdir=args.workdir, progress=progress)
        else:
            script: str | Path = sys.stdin.read() if args.script == "-" else Path(args.script)
            if isinstance(script, Path) and not script.is_file():
                raise UsageError(f"script {script} not found")
            with signals_interrupt():  # SIGTERM, SIGHUP: stopped as Ctrl-C stops it, hosts restored
                result = run(script, lab=lab, workdir=args.workdir, defines=parse_defines(args.defines),
                             progress=progress, steady=args.steady)
    except NetestoError as exc:  # a failed or interrupted run still shows what it kept
        if isinstance(exc.detail, RunResult) and not args.quiet:
            summarize(exc.detail, sys.stdout)
        raise
    if not args.quiet:
        summarize(result, sys.stdout)
    return 0 if result.ok else 1


def summarize(result: "RunResult", out: TextIO) -> None:
    """The rate table of the run's experiments (exp.csv) and where their reports are."""
    if not any((e.path / "all.exp.out").is_file() for e in result.experiments):
        return  # nothing processed (a run hurried out by a second signal): no rows, and no seconds importing results
    try:
        from netesto.results.expcsv import rate_table, read_rows
    except ImportError:  # the results extra is not installed: raw data only
        return
    rows = read_rows(result.workdir / "exp.csv", result.exps)
    if rows:
        print("", *rate_table(rows), sep="\n", file=out)
    for e in result.experiments:
        page = e.path / "exp.html"
        if page.is_file():
            print(f"report: {page} (open it in a browser)", file=out)
