"""Benchmark: the per-flow plots of a 64 flows x 60 s x 10 ms experiment (target of the plots issue).

Builds ``netesto.plots.timeseries`` (goodput, cwnd, RTT; 384,000 samples per variable)
and saves it as one offline HTML page. Target: < 2 s and < 5 MB. Above
``PER_FLOW_MAX`` (8) flows a panel is one multi-line; the last line printed times 8
flows, the most that still get a line (and legend entry) each. No peer tool draws
netesto datasets; the baseline measured in the same run is the plain holoviews way, a
``hv.Curve`` per flow in an overlay per panel (same thinned data, same page), and the
ratio is printed. The times of building, rendering (holoviews -> bokeh) and saving are
printed apart, repeated, with their spread. The machine is a shared 2-vCPU VM: compare
runs of one session.

Run: ``python3 -m bench.bench_plots [--reps N] [--no-baseline]``
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
    from netesto.plots.page import render

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--no-baseline", action="store_true", help="skip the holoviews curve-per-flow baseline")
    args = parser.parse_args()
    ds = synthetic()
    netesto.plots.timeseries(ds.isel(flow=slice(0, 2)))  # imports and the bokeh backend, once
    builds, renders, totals, sizes = [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.reps):
            t0 = time.perf_counter()
            layout = netesto.plots.timeseries(ds)
            t1 = time.perf_counter()
            file_html(render(layout), INLINE, "bench")  # thinned for the screen, as netesto's pages draw it
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
    if not args.no_baseline:
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            path = netesto.plots.save(baseline(ds), Path(tmp) / "flows.html")
            took = time.perf_counter() - t0
            size = path.stat().st_size / 1e6
        print(f"  baseline, hv.Curve per flow:  {took:.2f} s (once), {size:.1f} MB; ratio baseline/netesto "
              f"{took / med:.1f}x")


def baseline(ds: xr.Dataset) -> object:
    """The plain holoviews way: an overlay of one ``hv.Curve`` per flow per panel, hover on each,
    over the same display-thinned data netesto.plots draws."""
    import holoviews as hv

    from netesto.plots.display import PAGE_BINS, envelope

    time_ = ds["time"].values
    bins = PAGE_BINS // ds.sizes["flow"]
    panels = []
    for var in ("goodput", "cwnd", "rtt"):
        ts, vs = envelope(time_, ds[var].values, bins)
        panels.append(hv.Overlay([hv.Curve((ts[i], vs[i]), "time", var, label=str(f)).opts(tools=["hover"])
                                  for i, f in enumerate(ds["flow"].values)]).opts(width=900, height=260))
    return hv.Layout(panels).cols(1)


if __name__ == "__main__":
    main()
