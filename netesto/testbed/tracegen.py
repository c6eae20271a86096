"""The delivery traces netesto ships, generated here (reproducible: fixed seeds, no input).

``python -m netesto.testbed.tracegen`` writes them into the package's
``data/traces/`` (``--out DIR`` elsewhere; ``--check`` says whether the
shipped files are what this module makes). Each is a rate over time turned
into Mahimahi delivery opportunities (:mod:`netesto.linktrace`): every
millisecond gets the 1500-byte opportunities its rate has earned so far
(the remainder carries over), so a trace delivers its rate to within one
packet at every instant.

``const12``   12 Mbit/s, one opportunity every millisecond, 1 s long.
``onoff``     24 Mbit/s, except 0.75 s to 1.25 s of every 2 s (mean 18 Mbit/s).
``cellular``  10 s of a synthetic cellular downlink: the rate a random walk in
              log space (new value every 20-200 ms, 0.5 to 48 Mbit/s, mean 10.1
              Mbit/s) with three outages of 150-400 ms; seed 35.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from pathlib import Path
from typing import Callable

from netesto.linktrace import MTU, SUFFIX, builtin_dir

RateAt = Callable[[int], float]  # bit/s during millisecond ms (1-based)


def opportunities(rate_at: RateAt, period_ms: int) -> list[int]:
    """The trace of a rate: for each ms 1..period, the opportunities it has earned (carried over);
    the last millisecond always has one (a trace's period is its last timestamp)."""
    out: list[int] = []
    credit = 0.0
    for ms in range(1, period_ms + 1):
        credit += rate_at(ms) / 1000 / (MTU * 8)
        n = math.floor(credit + 1e-9)
        credit -= n
        out.extend([ms] * n)
    if not out or out[-1] != period_ms:
        out.append(period_ms)
    return out


def const12() -> list[int]:
    return opportunities(lambda ms: 12e6, 1000)


def onoff() -> list[int]:
    return opportunities(lambda ms: 0.0 if 750 < ms <= 1250 else 24e6, 2000)


def cellular(seed: int = 35, period_ms: int = 10_000) -> list[int]:
    """A random walk of the rate in log space, held 20-200 ms at a time, with three outages."""
    rng = random.Random(seed)
    rates = [0.0] * (period_ms + 1)
    log_rate = math.log(12e6)
    ms = 1
    while ms <= period_ms:
        hold = rng.randint(20, 200)
        log_rate += rng.gauss(0.0, 0.35) + 0.08 * (math.log(10e6) - log_rate)  # pulled back toward ~10-12 Mbit/s
        log_rate = min(max(log_rate, math.log(0.5e6)), math.log(48e6))
        for t in range(ms, min(period_ms, ms + hold - 1) + 1):
            rates[t] = math.exp(log_rate)
        ms += hold
    for _ in range(3):
        start = rng.randint(500, period_ms - 1000)
        for t in range(start, start + rng.randint(150, 400)):
            rates[t] = 0.0
    return opportunities(lambda t: rates[t], period_ms)


TRACES: dict[str, Callable[[], list[int]]] = {"const12": const12, "onoff": onoff, "cellular": cellular}


def text(times: list[int]) -> str:
    return "".join(f"{t}\n" for t in times)


def write(out: Path) -> list[Path]:
    """Write every trace into ``out``; the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, make in TRACES.items():
        path = out / f"{name}{SUFFIX}"
        path.write_text(text(make()))
        paths.append(path)
    return paths


def stale(where: Path) -> list[str]:
    """The shipped traces in ``where`` that differ from what this module makes (missing ones too)."""
    bad = []
    for name, make in TRACES.items():
        path = where / f"{name}{SUFFIX}"
        if not path.is_file() or path.read_text() != text(make()):
            bad.append(name)
    return bad


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m netesto.testbed.tracegen", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=builtin_dir(), help="directory to write into (default: the package's)")
    parser.add_argument("--check", action="store_true", help="only say whether the files there are up to date")
    args = parser.parse_args(argv)
    if args.check:
        bad = stale(args.out)
        print(f"out of date: {', '.join(bad)}" if bad else "up to date")
        return 1 if bad else 0
    for path in write(args.out):
        print(path)
    return 0


__all__ = ["TRACES", "cellular", "const12", "onoff", "opportunities", "stale", "write"]

if __name__ == "__main__":
    sys.exit(main())
