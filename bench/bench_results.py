"""Benchmark: results processing at scale (targets from issue 6).

1. 64 flows x 60 s at 10 ms (384,000 samples per variable): raw ``.nflow``
   files (both ends) -> Dataset -> ``exp.nc`` in < 2 s.
2. Loading 1,000 experiments' summaries (``<exp>/all.exp.out``, and the
   DESC/OTHER pairs from ``experiment.json``) in < 5 s.
3. Peak memory (max RSS of this process, and tracemalloc's peak for the
   processing step).

The raw files are synthesised with FlowWriter (that is fine for a benchmark;
the tests use real recorded flows). No installed peer tool processes Netesto
raw data; as a reference the same samples are also stored the way flent
stores its results (gzipped JSON) and the ratio is printed. The machine is
shared by several engineers: numbers are noisy.

Run: ``python3 -m bench.bench_results``
"""

from __future__ import annotations

import gzip
import json
import os
import resource
import shutil
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

from netesto.results import Table, build_dataset, load_experiment
from netesto.results.storage import write_netcdf
from netesto.raw.columns import FLOW_COLUMNS
from netesto.raw.nflow import FlowWriter

FLOWS, SECONDS, INTERVAL = 64, 60, 0.01
ROWS = int(SECONDS / INTERVAL)
TARGET_BUILD, TARGET_SUMMARIES = 2.0, 5.0


def _write_flow(path: Path, flow: dict, side: str, t0: float, rng: np.random.Generator) -> None:
    """One end's samples, one block per second as the engine flushes."""
    n = ROWS
    t = t0 + np.arange(n) * INTERVAL + rng.normal(0, 0.0005, n)
    rate = 1e9 / FLOWS / 8 * (1 + 0.2 * rng.standard_normal(n)).clip(0.1)
    cum = np.cumsum(rate * INTERVAL).astype(np.uint64)
    cols = {c.name: np.zeros(n) for c in FLOW_COLUMNS}
    cols["t_wall"] = t
    cols["t_mono"] = t - t0 + 1000.0
    cols["app_bytes_tx" if side == "client" else "app_bytes_rx"] = cum
    cols["snd_cwnd"] = rng.integers(10, 200, n)
    cols["rtt"] = rng.integers(100, 20000, n)
    cols["rttvar"] = rng.integers(10, 5000, n)
    cols["min_rtt"] = np.full(n, 90)
    cols["snd_mss"] = np.full(n, 1448)
    cols["total_retrans"] = np.cumsum(rng.random(n) < 0.01)
    cols["bytes_acked"] = cum
    cols["bytes_sent"] = cum
    cols["delivery_rate"] = rate
    cols["pacing_rate"] = rate * 1.2
    cols["snd_ssthresh"] = np.full(n, 0x7FFFFFFF)
    meta = {"flow": flow, "side": side, "host": flow["host"] if side == "client" else flow["server"],
            "start_wall": t0, "interval": INTERVAL, "engine": "bench"}
    with FlowWriter(path, FLOW_COLUMNS, meta, flush_rows=10**9) as w:
        for lo in range(0, n, 100):
            hi = min(n, lo + 100)
            w.write_columns(hi - lo, {c.name: np.asarray(cols[c.name][lo:hi]).astype(np.dtype(c.typecode)).tobytes()
                                      for c in FLOW_COLUMNS})
        w.close({"status": "ok", "duration": SECONDS, "bytes_tx": int(cum[-1]), "bytes_rx": int(cum[-1]),
                 "cpu": {"percent": 10.0}})


def synthesise(expdir: Path) -> None:
    rng = np.random.default_rng(1)
    (expdir / "flows").mkdir(parents=True)
    t0 = 1.8e9
    flows = []
    for i in range(FLOWS):
        f = {"flow_id": f"h{i % 8}-srv-{i // 8 + 1}-{i % 8}", "host": f"h{i % 8}", "server": "srv",
             "group": i // 8 + 1, "instance": i % 8, "instances": 8, "test": "TCP_STREAM", "ca": "cubic",
             "dur": SECONDS, "delay": 0.0, "req": 1, "reply": 1, "driver": "builtin"}
        flows.append(f)
        for side in ("client", "server"):
            _write_flow(expdir / "flows" / f"{f['flow_id']}.{side}.nflow", f, side, t0, rng)
    (expdir / "experiment.json").write_text(json.dumps({"schema": 1, "exp": 1, "flows": flows, "hosts": {}}))


def bench_build(root: Path) -> tuple[float, float, dict]:
    expdir = root / "1"
    synthesise(expdir)
    t = time.perf_counter()
    raw = load_experiment(expdir)
    t_load = time.perf_counter() - t
    ds = build_dataset(raw)
    t_build = time.perf_counter() - t - t_load
    write_netcdf(ds, expdir / "exp.nc")
    total = time.perf_counter() - t
    detail = {"read raw": t_load, "build dataset": t_build, "write netCDF": total - t_load - t_build,
              "samples/var": ds.goodput.size, "exp.nc MB": (expdir / "exp.nc").stat().st_size / 1e6}
    from netesto.report.experiment import page_plots

    page_plots(ds.isel(flow=slice(0, 1)))  # holoviews' import and backend, once
    t = time.perf_counter()
    plots = page_plots(ds)
    detail["exp.html plots (not in the total)"] = time.perf_counter() - t
    detail["exp.html plots KB (bokeh code, data)"] = (len(plots.head) + len(plots.script)) / 1e3
    # Peer-style storage of the same samples: flent keeps gzipped JSON.
    t = time.perf_counter()
    blob = {name: ds[name].values.tolist() for name in ("goodput", "cwnd", "rtt")}
    with gzip.open(root / "peer.json.gz", "wt") as fh:
        json.dump(blob, fh)
    peer = time.perf_counter() - t
    tracemalloc.start()
    build_dataset(load_experiment(expdir))
    detail["tracemalloc peak MB"] = tracemalloc.get_traced_memory()[1] / 1e6
    tracemalloc.stop()
    return total, peer, detail


def bench_summaries(root: Path, n: int = 1000) -> float:
    sample = (Path(__file__).resolve().parents[1] / "tests" / "results" / "data" / "1")
    work = root / "many"
    work.mkdir()
    from netesto.results import process_experiment

    shutil.copytree(sample, work / "1")
    process_experiment(work, 1)
    text = (work / "1" / "all.exp.out").read_text()
    for i in range(2, n + 1):
        d = work / str(i)
        d.mkdir()
        (d / "all.exp.out").write_text(text.replace("exp:1.0", f"exp:{i}.0"))
        # what every processed experiment has beside it (links, not copies): the rows' DESC/OTHER
        # come from experiment.json's "processed", or from exp.nc where that is missing
        for name in ("exp.nc", "experiment.json"):
            os.link(work / "1" / name, d / name)
    t = time.perf_counter()
    table = Table.from_workdir(work)
    elapsed = time.perf_counter() - t
    assert len(table) == n
    return elapsed


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-results-") as tmp:
        root = Path(tmp)
        total, peer, detail = bench_build(root)
        print(f"64 flows x 60 s @ 10 ms -> Dataset + exp.nc: {total:.2f} s "
              f"(target {TARGET_BUILD} s, ratio {total / TARGET_BUILD:.2f} of target)")
        for k, v in detail.items():
            print(f"  {k}: {v:.3f}" if isinstance(v, float) else f"  {k}: {v}")
        print(f"  peer-style gzipped JSON of 3 of the variables: {peer:.2f} s "
              f"(ours/peer = {total / peer:.2f} for {len(FLOW_COLUMNS)} raw columns x 2 ends)")
        s = bench_summaries(root)
        print(f"1,000 experiments' summaries (all.exp.out -> Table): {s:.2f} s "
              f"(target {TARGET_SUMMARIES} s, ratio {s / TARGET_SUMMARIES:.2f} of target)")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS of this process: {peak:.0f} MB")
    print("note: shared 2-core machine, other engineers' runs in parallel: numbers are noisy")


if __name__ == "__main__":
    main()
