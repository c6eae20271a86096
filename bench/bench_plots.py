"""Benchmark: the per-flow plots of a 64 flows x 60 s x 10 ms experiment (target of the plots issue).

Builds ``netesto.plots.timeseries`` (goodput, cwnd, RTT; 384,000 samples per variable)
and saves it as one offline HTML page. Target: < 2 s and < 5 MB. Above
``PER_FLOW_MAX`` (8) flows a panel is one multi-line; the last line printed times 8
flows, the most that still get a line (and legend entry) each. No peer tool draws
netesto datasets, so there is no ratio: the times of building, rendering (holoviews ->
bokeh) and saving are printed apart, repeated, with their spread. The machine is a
shared 2-vCPU VM: compare runs of one session.

Run: ``python3 -m bench.bench_plots [--reps N]``
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import xarray as xr

FLOWS, SECONDS, INTERVAL = 64, 60, 0.01
TARGET_SECONDS, TARGET_MB = 2.0, 5.0


def synthetic(flows: int = FLOWS, seconds: float = SECONDS) -> xr.Dataset:
    """A dataset with the schema's goodput, cwnd, rtt and retransmit counter (random values)."""
    rng = np.random.default_rng(1)
    n = int(seconds / INTERVAL)
    shape = (flows, n)
    ds = xr.Dataset(
        {"goodput": (("flow", "time"), rng.random(shape) * 1e8), "cwnd": (("flow", "time"), rng.random(shape) * 100),
         "rtt": (("flow", "time"), rng.random(shape) * 2e4),
         "retransmits": (("flow", "time"), np.cumsum(rng.random(shape) < 0.001, axis=1).astype(float))},
        coords={"flow": [f"h{i}-h0-1-0" for i in range(flows)], "time": np.arange(n) * INTERVAL,
                "ca": ("flow", ["cubic", "bbr"] * (flows // 2))},
        attrs={"interval": INTERVAL})
    return ds


def main() -> None:
    import holoviews as hv
    from bokeh.embed import file_html
    from bokeh.resources import INLINE

    import netesto.plots
    from netesto.plots.flows import PER_FLOW_MAX

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    ds = synthetic()
    netesto.plots.timeseries(ds.isel(flow=slice(0, 2)))  # imports and the bokeh backend, once
    builds, renders, totals, sizes = [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.reps):
            t0 = time.perf_counter()
            layout = netesto.plots.timeseries(ds)
            t1 = time.perf_counter()
            file_html(hv.render(layout, backend="bokeh"), INLINE, "bench")
            t2 = time.perf_counter()
            path = netesto.plots.save(netesto.plots.timeseries(ds), Path(tmp) / "flows.html")
            t3 = time.perf_counter()
            builds.append(t1 - t0)
            renders.append(t2 - t1)
            totals.append(t3 - t2)
            sizes.append(path.stat().st_size / 1e6)
    med, lo, hi = statistics.median(totals), min(totals), max(totals)
    print(f"{FLOWS} flows x {SECONDS} s at {INTERVAL * 1000:g} ms, {args.reps} repetitions")
    print(f"  build (holoviews objects):    median {statistics.median(builds):.2f} s")
    print(f"  render + page (bokeh):        median {statistics.median(renders):.2f} s")
    print(f"  build + save, as users do:    median {med:.2f} s [{lo:.2f}-{hi:.2f}]  target < {TARGET_SECONDS:g} s  "
          f"{'ok' if med < TARGET_SECONDS else 'MISSED'}")
    print(f"  page size:                    {max(sizes):.1f} MB  target < {TARGET_MB:g} MB  "
          f"{'ok' if max(sizes) < TARGET_MB else 'MISSED'}")
    small = ds.isel(flow=slice(0, PER_FLOW_MAX))
    per_flow = []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.reps):
            t0 = time.perf_counter()
            path = netesto.plots.save(netesto.plots.timeseries(small), Path(tmp) / "flows.html")
            per_flow.append(time.perf_counter() - t0)
        size = path.stat().st_size / 1e6
    print(f"  {PER_FLOW_MAX} flows, a line each:        median {statistics.median(per_flow):.2f} s, {size:.1f} MB")


if __name__ == "__main__":
    main()
