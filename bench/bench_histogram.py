"""Latency folding cost: ns per value of ``Histogram.record_many(array('q'))`` in C and in pure Python.

``python3 -m bench.bench_histogram [--reps 5]`` (repository root). A flow
end folds its buffered latencies into the interval histogram at every sample
(``FlowEnd.fold_latency``); this times that call on batches like a solo RR
flow's (1500: one 10 ms sample at 150k transactions/s; 65536: the most a
fold gets) of latencies lognormal like a same-CPU run's ("rr": 4.6 us,
10 % spread, ~50 buckets a sample; "wide": 8 us, 30 %, ~250 buckets; C's
cost is per value plus per bucket hit), on values that reach the exact
range below 256 (where Python takes its plain loop, not its batch
shortcut), and times the whole per-sample histogram work (fold, summary,
merge into the flow's total, clear). Shared noisy machine:
median [min-max] of the repetitions; the ratio is Python over C.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from array import array
from typing import Callable

from netesto.engine.sampling import histogram
from netesto.engine.sampling.histogram import Histogram

try:
    from netesto.engine.native import _fastloop  # type: ignore[attr-defined]
except ImportError:
    _fastloop = None


def _batches(kind: str, size: int, count: int) -> list[array]:
    rng = random.Random(f"{kind}-{size}")
    if kind == "rr":  # a same-CPU solo RR flow (p50 4.6 us, p99 5.6 us in one run)
        gen: Callable[[], int] = lambda: int(rng.lognormvariate(8.43, 0.1))  # noqa: E731
    elif kind == "wide":
        gen = lambda: int(rng.lognormvariate(9, 0.3))  # noqa: E731
    else:  # a mix that reaches the exact range below 256
        gen = lambda: int(rng.expovariate(1 / 2_000))  # noqa: E731
    return [array("q", [gen() for _ in range(size)]) for _ in range(count)]


def _ns_per_value(fast, batches: list[array], whole_sample: bool) -> float:
    histogram._fast_record = fast
    total, interval = Histogram(), Histogram()
    start = time.perf_counter_ns()
    for batch in batches:
        interval.record_many(batch)
        if whole_sample:
            interval.summary(0.001)
            total.merge(interval)
            interval.clear()
    elapsed = time.perf_counter_ns() - start
    return elapsed / sum(len(b) for b in batches)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    c_record = getattr(_fastloop, "hist_record", None)
    if c_record is None:
        print("needs the C extension (python3 setup.py build_ext --inplace)")
        return 1
    default = histogram._fast_record
    print(f"# Histogram.record_many(array('q')), ns per value, median [min-max] of {args.reps} (shared noisy machine)")
    print(f"{'case':<52}{'C ns/value':>20}{'python ns/value':>22}{'python/C':>18}")
    try:
        for kind, size, count, whole in (("rr", 1500, 100, False), ("rr", 65536, 4, False),
                                         ("wide", 1500, 100, False), ("small", 1500, 100, False),
                                         ("rr", 1500, 100, True)):
            batches = _batches(kind, size, count)
            runs: dict[str, list[float]] = {"C": [], "python": []}
            for _ in range(args.reps):
                for path, fast in (("C", c_record), ("python", None)):
                    runs[path].append(_ns_per_value(fast, batches, whole))
            ratios = [p / c for p, c in zip(runs["python"], runs["C"])]
            what = "fold+summary+merge+clear" if whole else "fold"
            case = f"{what}, {kind} values, {size}/batch"
            cells = [f"{statistics.median(v):.1f} [{min(v):.1f}-{max(v):.1f}]" for v in (runs["C"], runs["python"])]
            print(f"{case:<52}{cells[0]:>20}{cells[1]:>22}"
                  f"{f'{statistics.median(ratios):.0f} [{min(ratios):.0f}-{max(ratios):.0f}]':>18}", flush=True)
    finally:
        histogram._fast_record = default
    return 0


if __name__ == "__main__":
    sys.exit(main())
