"""``netesto sweep NOTEBOOK -p ca=cubic,bbr -p bw=10mbit,100mbit``: one notebook run per grid point."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from netesto.errors import SweepError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("notebook", help="a notebook with a cell tagged 'parameters' (e.g. notebooks/sweep.ipynb)")
    parser.add_argument("-p", "--param", dest="params", action="append", default=[], metavar="NAME=V1,V2",
                        help="a swept parameter and its values (repeatable; the grid is their product)")
    parser.add_argument("--set", dest="fixed", action="append", default=[], metavar="NAME=VALUE",
                        help="a parameter fixed for every point (repeatable)")
    parser.add_argument("--reps", type=int, default=1, help="repetitions of each point (default 1)")
    parser.add_argument("--out", default="sweep", help="sweep directory (default ./sweep)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--lab", dest="labs", action="append", default=[],
                       help="lab file to run points on (repeatable: points run in parallel, one per lab)")
    where.add_argument("--testbed", dest="testbeds", action="append", default=[], metavar="NAME",
                       help="a testbed up on this machine (repeatable); reshaped to each point's bw/rtt/buffer/loss")
    parser.add_argument("--resume", action="store_true", help="run only the points missing, failed or interrupted")
    parser.add_argument("--check", dest="checks", action="append", default=[], metavar="EXPR",
                        help="pass/fail expression over each point's summary, e.g. 'jain >= 0.9' or "
                             "'cc_share_bbr < 0.8' (repeatable; evaluated on every point, also under --resume)")
    parser.add_argument("--steady", metavar="WARMUP",
                        help="leave each flow's first WARMUP out of every summary: 5s, 500ms or 20rtt "
                             "(round trips of the flow's median smoothed RTT); default none")
    from netesto.report.figures import NAMES

    parser.add_argument("--figures", metavar="NAMES",
                        help=f"the report's figures, comma-separated ({', '.join(NAMES)}; NAME:X picks the x axis); "
                             "default: the notebook's metadata netesto.figures, else all that apply")
    parser.add_argument("--no-report", dest="report", action="store_false",
                        help="write the cube (sweep.nc) but not the HTML report, seconds of plotting fewer; "
                             "`netesto report sweep OUT` writes it later")
    parser.add_argument("--kernel", default="python3", help="Jupyter kernel to run the notebook in (default python3)")
    parser.add_argument("--timeout", type=float, help="seconds a cell may run before the point fails")
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    parser.add_argument("--fresh-kernels", action="store_true",
                        help="a new kernel for every point (default: one kept warm per lab, reset between points)")
    parser.add_argument("--dry-run", action="store_true",
                        help="print every point's parameters and estimated seconds, and the total; run nothing")


def _fixed(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            raise SweepError(f"--set {item!r}: expected NAME=VALUE")
        out[name.strip()] = value.strip()
    return out


def check_out(out: str) -> None:
    """SweepError naming ``--out`` when it, or a folder above it, is a file (a traceback before)."""
    path = Path(out)
    for p in (path, *path.parents):
        if p.exists() and not p.is_dir():
            raise SweepError(f"--out {out}: {p} is a file, not a directory; give --out a new or empty directory")


def main(args: argparse.Namespace) -> int:
    from netesto.sweep.grid import count, parse_grid

    count(parse_grid(args.params), args.reps)  # the size limit, before the heavy imports below
    if args.dry_run:
        from netesto.sweep.dryrun import dry_run, text

        workers = max(1, len(args.labs) + len(args.testbeds))
        rows = dry_run(args.notebook, args.params, reps=args.reps, fixed=_fixed(args.fixed), checks=args.checks,
                       out=args.out, resume=args.resume, workers=workers)
        sys.stdout.write(text(rows, workers))
        return 0
    from netesto.sweep.run import sweep

    check_out(args.out)
    try:
        result = sweep(args.notebook, args.params, reps=args.reps, out=args.out, labs=args.labs,
                       testbeds=args.testbeds, fixed=_fixed(args.fixed), resume=args.resume, checks=args.checks,
                       kernel_name=args.kernel, timeout=args.timeout, progress=not args.quiet,
                       steady=args.steady, figures=args.figures, fresh_kernels=args.fresh_kernels,
                       report=args.report)
    except KeyboardInterrupt:
        print(f"netesto sweep: interrupted: the points done are kept in {args.out}/manifest.json; "
              f"`netesto sweep ... --out {args.out} --resume` runs the rest", file=sys.stderr)
        return 130
    c = result.manifest.counts()
    print(f"{c['ok']} of {len(result.manifest.points)} points ok ({len(result.ran)} run now), "
          f"{c['failed']} failed, {len(result.check_failures)} failing a check")
    for rec in result.failed:
        print(f"  failed {rec.key}: {rec.error}")
    for rec in result.check_failures:
        bad = [c for c, ok in rec.checks.items() if not ok]
        print(f"  check failed {rec.key}: {'; '.join(bad)}")
    print(f"cube   {result.cube}")
    print(f"report {result.report}" if args.report else
          f"report not written (--no-report): `netesto report sweep {args.out}` writes it")
    return 0 if result.ok else 1
