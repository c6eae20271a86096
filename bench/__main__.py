"""``python3 -m bench [NAME ...]``: run the benchmarks one after another, each in its own process.

Every benchmark measures its peer tool (iperf3, netperf, neper, bare pyzmq,
...) in the same run and prints ratios; the peer benches (``stream``, ``rr``,
``crr``) say how they match the peer and judge each ratio against its target
(``bench/common.py``). This runner only sequences them and says which failed.
Names are the parts after ``bench_`` (``stream``, ``rr``, ``crr``, ...). Run it
as ``nice -n 10 python3 -m bench ...``: every side inherits the same niceness.
``python3 -m bench --score`` runs the peer rows with targets quiet and beside
busy loops, and prints them in one table (``bench/scorecard.py``).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ALL = sorted(p.stem.removeprefix("bench_") for p in HERE.glob("bench_*.py"))


def main(argv: list[str]) -> int:
    if argv[:1] == ["--score"]:  # (the targeted peer rows, quiet and busy, in one table: bench/scorecard.py)
        from bench import scorecard

        return scorecard.main(argv[1:])
    names = argv or ALL
    unknown = [n for n in names if n not in ALL]
    if unknown:
        print(f"bench: unknown {', '.join(unknown)}; one of {', '.join(ALL)}", file=sys.stderr)
        return 2
    failed = []
    for name in names:
        print(f"\n=== bench_{name} ===", flush=True)
        rc = subprocess.run([sys.executable, "-m", f"bench.bench_{name}"], cwd=HERE.parent).returncode
        if rc != 0:
            failed.append(name)
    print(f"\n{len(names) - len(failed)} benchmark(s) ran, failed: {', '.join(failed) or 'none'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
