"""``netesto run SCRIPT --lab LAB``: run a script on a lab of netesto-agents."""

from __future__ import annotations

import argparse
import sys

from netesto.errors import UsageError
from netesto.script.store import parse_defines


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
        "--collect", action="store_true",
        help="run no script: fetch the data the agents still hold (after a controller crash) into --workdir",
    )



def main(args: argparse.Namespace) -> int:
    from pathlib import Path

    from netesto.controller import ConsoleProgress, Lab, collect, run
    from netesto.controller.progress import HostError, Progress, ProgressEvent, RunFinished
    from netesto.controller.signals import signals_interrupt

    if (args.script is None) == (not args.collect):
        raise UsageError("give a SCRIPT to run, or --collect (not both)")
    lab = Lab.from_file(args.lab)
    console = ConsoleProgress(sys.stdout, verbose=args.verbose)
    progress: Progress = console
    if args.quiet:

        class Quiet(Progress):
            def handle(self, event: ProgressEvent) -> None:
                if isinstance(event, (HostError, RunFinished)):
                    console.handle(event)

        progress = Quiet()
    if args.collect:
        result = collect(lab, workdir=args.workdir, progress=progress)
        return 0 if result.ok else 1
    script: str | Path = sys.stdin.read() if args.script == "-" else Path(args.script)
    if isinstance(script, Path) and not script.is_file():
        raise UsageError(f"script {script} not found")
    with signals_interrupt():  # SIGTERM, SIGHUP: stopped as Ctrl-C stops it, hosts restored
        result = run(script, lab=lab, workdir=args.workdir, defines=parse_defines(args.defines), progress=progress)
    return 0 if result.ok else 1
