"""Benchmark: opening a 1,000-point sweep and one point's flows (target of the sweeps issue).

A synthetic sweep (ca 4 x bw 5 x rtt 5 x 10 repetitions; each point one experiment of
16 flows x 30 s x 10 ms: goodput, cwnd and rtt, float32) is written once into a cache
directory. Then, in a fresh process each time, ``open_sweep`` + one selection + the
lazily opened flows of that point, computed. Target: < 2 s and < 500 MB peak RSS.
Also shown: opening every point's flows lazily (not a target: it reads 1,000 headers).
No peer tool reads netesto sweeps: no ratio; repeated, median and spread.

Run: ``python3 -m bench.bench_sweep [--reps N] [--cache DIR]``
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import xarray as xr

FLOWS, SECONDS, INTERVAL = 16, 30, 0.01
GRID = {"ca": ["cubic", "bbr", "reno", "dctcp"], "bw": ["10mbit", "50mbit", "100mbit", "500mbit", "1gbit"],
        "rtt": ["5ms", "10ms", "20ms", "40ms", "80ms"]}
REPS = 10
TARGET_SECONDS, TARGET_MB = 2.0, 500.0

PROBE = """
import json, resource, sys, time
t0 = time.perf_counter()
from netesto.results.cube import open_sweep
sw = open_sweep(sys.argv[1])
one = dict(ca="bbr", bw="100mbit", rtt="20ms", rep=3)
rate = float(sw.cube.rate.sel(**one))
flows = sw.flows(**one)
mean = float(flows.goodput.mean().compute())
t1 = time.perf_counter()
out = {"seconds": t1 - t0, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "rate": rate}
if sys.argv[2] == "all":
    t2 = time.perf_counter()
    every = sw.flows()
    out["all_seconds"] = time.perf_counter() - t2
    out["all_points"] = every.sizes["point"]
print(json.dumps(out))
"""


def build(root: Path) -> Path:
    """The synthetic sweep directory (made once; reused when its manifest is there)."""
    from netesto.results.cube import CUBE
    from netesto.sweep.grid import points
    from netesto.results.manifest import Manifest, PointRecord

    out = root / "sweep-1000"
    if (out / CUBE).exists():
        return out
    rng = np.random.default_rng(7)
    n = int(SECONDS / INTERVAL)
    time_ax = np.arange(n) * INTERVAL
    flows = [f"h{2 + i % 4}-h1-1-{i}" for i in range(FLOWS)]
    m = Manifest("sweep.ipynb", GRID, REPS)
    t0 = time.perf_counter()
    for p in points(GRID, REPS):
        d = out / p.dirname / "results" / "1"
        d.mkdir(parents=True)
        ds = xr.Dataset(
            {v: (("flow", "time"), rng.random((FLOWS, n), dtype=np.float32) * scale, {"units": u})
             for v, scale, u in (("goodput", 1e8, "bit/s"), ("cwnd", 100, "packets"), ("rtt", 2e4, "us"))},
            coords={"flow": flows, "time": time_ax, "ca": ("flow", [p.as_dict()["ca"]] * FLOWS)})
        ds.to_netcdf(d / "exp.nc", engine="netcdf4")
        rec = PointRecord(p.key, p.index, p.rep, p.as_dict(), p.dirname, p.seed, status="ok",
                          experiments=[f"{p.dirname}/results/1"])
        m.points[p.key] = rec
    m.save(out)
    shape = tuple(len(v) for v in GRID.values()) + (REPS,)
    dims = [*GRID, "rep"]
    cube = xr.Dataset({"rate": (dims, rng.random(shape) * 100, {"units": "Mbit/s"}),
                       "status": (dims, np.full(shape, "ok")),
                       "experiments": (dims, np.array([r.experiments[0] for r in m]).reshape(shape))},
                      coords={**GRID, "rep": np.arange(REPS)})
    cube.to_netcdf(out / CUBE, engine="netcdf4")
    print(f"built {len(m.points)} points in {time.perf_counter() - t0:.0f} s "
          f"({sum(f.stat().st_size for f in out.rglob('exp.nc')) / 1e6:.0f} MB)")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "netesto-bench-sweep"))
    args = ap.parse_args()
    root = build(Path(args.cache))
    runs = []
    for i in range(args.reps):
        what = "all" if i == 0 else "one"
        proc = subprocess.run([sys.executable, "-c", PROBE, str(root), what], capture_output=True, text=True, check=True)
        runs.append(json.loads(proc.stdout))
    secs = [r["seconds"] for r in runs]
    rss = [r["rss_mb"] for r in runs]
    print(f"open_sweep + select one point + its flows computed, {args.reps} fresh processes:")
    print(f"  seconds  median {statistics.median(secs):.2f}  [{min(secs):.2f}-{max(secs):.2f}]  target < {TARGET_SECONDS}")
    print(f"  peak RSS median {statistics.median(rss):.0f} MB  [{min(rss):.0f}-{max(rss):.0f}]  target < {TARGET_MB:.0f} MB")
    print(f"  (every point's flows, lazily: {runs[0]['all_seconds']:.1f} s for {runs[0]['all_points']} points)")
    ok = statistics.median(secs) < TARGET_SECONDS and statistics.median(rss) < TARGET_MB
    print("target met" if ok else "target MISSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
