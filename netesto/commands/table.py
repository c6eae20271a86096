"""``netesto table SCRIPT [-o out.html] [var=value ...]``: run an exp.py-style script."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from netesto.errors import UsageError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("script", help="exp.py-style script (File=..., Select=..., doTable, doPlot ...)")
    parser.add_argument("vars", nargs="*", metavar="var=value", help="variables for $var in the script")
    parser.add_argument("-o", "--output", "--out", help="write the HTML page here (default: stdout)")
    parser.add_argument("-C", "--directory", default=".", help="resolve File= paths from here (default: .)")


def main(args: argparse.Namespace) -> int:
    from netesto.report.table import run_script

    variables = {}
    for item in args.vars:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"expected var=value, got {item!r}")
        variables[key] = value
    page_dir = Path(args.output).parent if args.output else Path.cwd()
    page = run_script(args.script, variables, base=args.directory, page_dir=page_dir)
    if args.output:
        Path(args.output).write_text(page)
    else:
        sys.stdout.write(page)
    return 0
