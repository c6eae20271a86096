"""``netesto report sweep|compare|index``: write the HTML reports again, or compare two sweeps."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="what", required=True, metavar="sweep|compare|index")
    sweep_help = "(re)write DIR/sweep.html of a sweep directory (and its cube, sweep.nc)"
    sweep = sub.add_parser("sweep", help=sweep_help, description=sweep_help)
    sweep.add_argument("dir", help="the sweep directory (netesto sweep --out)")
    from netesto.report.figures import NAMES

    sweep.add_argument("--figures", metavar="NAMES",
                       help=f"the figures to draw, comma-separated ({', '.join(NAMES)}; NAME:X picks the x axis)")
    sweep.add_argument("--steady", metavar="WARMUP",
                       help="summarize every point again leaving each flow's first WARMUP out (5s, 20rtt; 0: none)")
    compare_help = "sweep B against sweep A, point by point: deltas with 95 % CIs"
    compare = sub.add_parser("compare", help=compare_help.replace("%", "%%"), description=compare_help)
    compare.add_argument("a", help="the baseline sweep directory")
    compare.add_argument("b", help="the sweep compared with it")
    compare.add_argument("--out", "-o", help="the page to write (default B/compare.html)")
    index_help = "(re)write WORKDIR/index.html: every experiment of a working directory, linked to its exp.html"
    index = sub.add_parser("index", help=index_help, description=index_help)
    index.add_argument("workdir", help="a working directory of experiments (netesto run --workdir)")
    for p in (sweep, compare, index):
        p.add_argument("--templates", metavar="DIR", help="a directory of Jinja2 templates replacing netesto's")


def main(args: argparse.Namespace) -> int:
    if args.what == "sweep":
        from netesto.report.sweep import write_report
        from netesto.results.cube import write_cube
        from netesto.results.manifest import Manifest

        manifest = Manifest.load(args.dir)
        if args.figures:
            from netesto.sweep.run import figure_list

            manifest.figures = figure_list(args.figures, None)
        if args.steady is not None:
            from netesto.sweep.point import summarize
            from netesto.sweep.run import steady_text

            manifest.steady = steady_text(args.steady)
            for rec in manifest:
                if rec.status == "ok" and rec.experiments:
                    summarize(rec, Path(args.dir), manifest.steady, manifest.checks)
        if args.figures or args.steady is not None:
            manifest.save(args.dir)
        write_cube(args.dir, manifest)
        print(write_report(args.dir, templates=args.templates))
    elif args.what == "compare":
        from netesto.report.compare import write_compare

        print(write_compare(args.a, args.b, args.out, templates=args.templates))
    else:
        from netesto.report.index import write_index

        print(write_index(args.workdir, templates=args.templates))
    return 0
