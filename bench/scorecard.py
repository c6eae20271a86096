"""The peer rows with targets, run quiet and with busy loops beside every tool, in one table.

``nice -n 10 python3 -m bench --score [--busy 0,2] [--reps 3]`` (root, repository root).

Each row is a targeted ratio one of the peer benches prints (``verdict`` in
``bench/common.py``): the engine over a peer, or over the best peer (the
peer with the best median over the repetitions, ``common.leading``), as the
median of the per-repetition ratios with its [min-max] spread and the
target. The benches run here:

- ``bench_stream --case "4 flows bbr"``: 4 bbr streams on one engine worker
  against iperf3 ``-P 4`` and neper ``-F 4 -T 1`` and the best of them, 4
  netperf processes against the engine at a worker per flow, at the
  engine's write size; goodput against each of these, and
  retransmitted segments per GB against the peer with the fewest (<= 1.0).
- ``bench_crr`` (client CPU 0, server CPU 1): one TCP_CRR flow closing as
  netperf does (server first) against netperf, and resetting as neper does
  against neper, the first and second run on one server.
- ``bench_rr --cases 16``: 16 RR flows on one engine worker against neper
  ``tcp_rr -F 16 -T 1``, same CPU and cross CPU: rate, p99 (<= 1.2 quiet,
  1.5 with busy loops) and the sampler's rows lost (0).

Each load in ``--busy`` (a comma list of busy-loop counts; default ``0,2``)
runs every bench with that many busy loops beside every tool (the kernel
places them); the table has a column per load. Each bench's own output
is printed as it runs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.common import SCORE_ENV, reps

HERE = Path(__file__).resolve().parent
RUNS: tuple[tuple[str, list[str]], ...] = (
    ("bench_stream", ["--case", "4 flows bbr"]),
    ("bench_crr", []),
    ("bench_rr", ["--cases", "16"]),
)

Row = dict[str, Any]


def loads(text: str) -> list[int]:
    """An argparse type: a comma list of busy-loop counts (``0,2``)."""
    try:
        out = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"a comma list of busy-loop counts, like 0,2; got {text!r}") from None
    if not out or any(n < 0 for n in out):
        raise argparse.ArgumentTypeError(f"busy-loop counts are 0 or more; got {text!r}")
    return out


def cell(row: Row) -> str:
    """One reading: median [min-max] and whether its target held."""
    return (f"{row['median']:.2f} [{row['min']:.2f}-{row['max']:.2f}] "
            f"{'ok' if row['ok'] else 'MISSED'}")


def render(by_load: dict[int, list[Row]]) -> str:
    """The scorecard: a line per targeted row (bench, case, reading, target), a column per load; a row one load
    lacks (its bench failed there) reads "not run"; targets that differ by load are all given, in load order."""
    order: list[tuple[str, str, str]] = []
    targets: dict[tuple[str, str, str], dict[str, None]] = {}  # (each load's, in order, once)
    cells: dict[tuple[str, str, str], dict[int, str]] = {}
    for load, rows in by_load.items():
        for row in rows:
            key = (row["bench"].removeprefix("bench_"), row["case"], row["label"])
            if key not in cells:
                order.append(key)
                cells[key] = {}
                targets[key] = {}
            targets[key][f"{row['op']} {row['target']:g}"] = None
            cells[key][load] = cell(row)
    heads = [f"{n} busy loop(s)" if n else "quiet" for n in by_load]
    lines = ["| bench | case | ratio | target | " + " | ".join(heads) + " |",
             "|---|---|---|---|" + "---|" * len(heads)]
    for key in order:
        got = [cells[key].get(load, "not run") for load in by_load]
        lines.append(f"| {key[0]} | {key[1]} | {key[2]} | {' / '.join(targets[key])} | " + " | ".join(got) + " |")
    held = sum(c.endswith(" ok") for key in order for c in cells[key].values())
    total = sum(len(cells[key]) for key in order)
    lines.append(f"\n# targets: {held} of {total} held, {total - held} MISSED")
    return "\n".join(lines)


def run(busy: list[int], rep_count: int, only: list[str]) -> tuple[dict[int, list[Row]], list[str]]:
    """Every bench of :data:`RUNS` (those named in ``only``, if any) at every load; the rows each load scored, and
    the benches that failed."""
    by_load: dict[int, list[Row]] = {}
    failed = []
    for load in busy:
        with tempfile.NamedTemporaryFile(prefix="bench_score", suffix=".jsonl", delete=False) as f:
            path = f.name
        try:
            for name, extra in RUNS:
                if only and name.removeprefix("bench_") not in only:
                    continue
                print(f"\n=== {name} {' '.join(extra)} --busy {load} ===", flush=True)
                argv = [sys.executable, "-m", f"bench.{name}", *extra, "--busy", str(load), "--reps", str(rep_count)]
                if subprocess.run(argv, cwd=HERE.parent, env={**os.environ, SCORE_ENV: path}).returncode:
                    failed.append(f"{name} (busy {load})")
            by_load[load] = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
        finally:
            os.unlink(path)
    return by_load, failed


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m bench --score", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--busy", type=loads, default=[0, 2], help="busy-loop counts, one run of every bench each "
                                                                   "(default 0,2)")
    parser.add_argument("--reps", type=reps, default=3, help="interleaved repetitions per case (>= 3)")
    names = [n.removeprefix("bench_") for n, _ in RUNS]
    parser.add_argument("only", nargs="*", metavar="BENCH", help=f"only these benches ({', '.join(names)})")
    args = parser.parse_args(argv)
    unknown = [n for n in args.only if n not in names]
    if unknown:
        parser.error(f"unknown bench {', '.join(unknown)}; one of {', '.join(names)}")
    by_load, failed = run(args.busy, args.reps, args.only)
    print("\n=== scorecard: engine over peer, median of the per-rep ratios [min-max] ===")
    print(render(by_load))
    if failed:
        print(f"failed: {', '.join(failed)}")
    return 1 if failed else 0


__all__ = ["RUNS", "cell", "loads", "main", "render", "run"]
