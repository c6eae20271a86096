"""`netesto demo`: bring up a testbed, run a cubic-vs-bbr two-flow experiment, show the results."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dir", default="netesto-demo", help="where results go (default ./netesto-demo)")
    parser.add_argument("--keep", action="store_true", help="leave the testbed up afterwards")
    parser.add_argument("--dur", type=int, default=10, help="seconds of the cubic flow (default 10)")
    parser.add_argument("--bw", default="100mbit", help="bottleneck rate (default 100mbit)")
    parser.add_argument("--rtt", default="20ms", help="round-trip time (default 20ms)")
    parser.add_argument("--name", default=None, help="testbed name (default demo<pid>)")
    parser.add_argument("--loopback", action="store_true", help="agents on 127.0.0.1 only (no namespaces, no bottleneck)")


def main(args: argparse.Namespace) -> int:
    from netesto.errors import UsageError
    from netesto.testbed.demo import report, run_demo

    if args.dur < 3 or args.dur > 50:
        raise UsageError(f"--dur {args.dur}: 3..50 seconds (the demo stays under a minute)")
    dur2 = max(1, args.dur * 2 // 5)
    delay2 = max(1, args.dur * 3 // 10)
    result = run_demo(args.dir, keep=args.keep, dur1=args.dur, dur2=dur2, delay2=delay2, bw=args.bw, rtt=args.rtt, name=args.name,
                      loopback=args.loopback)
    report(result)
    return 0 if result.ok else 1
