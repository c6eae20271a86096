"""1-byte TCP request/response of the engine vs netperf TCP_RR (1 flow) and neper tcp_rr (16 flows).

``nice -n 10 python3 -m bench.bench_rr [--dur 3] [--reps 3] [--pure-python]`` (root, repository root).

Two placements, every tool's ends pinned alike with ``taskset`` (each in a session of its own:
``common.place``): same CPU
(client and server on CPU 0) and cross CPU (client CPU 0, server CPU 1);
on 2-vCPU machines the placement changes the rate ~5x. Like with like:

- 1 flow: one engine TCP_RR flow (1-byte request and reply) vs ``netperf -t
  TCP_RR -- -r 1,1``; rate (transactions/s) and p99 latency (netperf's
  ``P99_LATENCY`` via ``-k``, the engine's client histogram).
- 16 flows: 16 engine TCP_RR flows on ONE client worker (``--workers 1``;
  the pinned server runs one worker, one per usable CPU) vs ``tcp_rr -F 16
  -T 1`` (neper, 16 flows on one thread at each end, 1-byte request and
  response); aggregate rate, and p99 over all flows (the engine's 16
  client histograms merged; neper's ``latency_p99``).

The engine's loops each run really ran are printed (``rr_loop`` of the
client/server summaries: for 1 flow the C or Python blocking loop, for 16
the C loop of many RR flow ends ``C-group`` or the Python ``epoll`` loop);
``--pure-python`` sets ``NETESTO_PURE_PYTHON=1`` on both engine ends.
Every tool runs the namespaces' default congestion control (the host's;
the engine's flows are given ``ca=""``, netperf and neper are not told one). Targets: rate ratio engine / peer >= 1.0 and p99 ratio engine / peer <= 1.2
in every case. Shared noisy machine: read the ratios and their spread.

Also the client's CPU time per transaction (us), which the host's load
changes far less: the engine's client worker (its summary's CPU over the
flows' span, sampler included; ``cpu-smp``: its sampler's CPU left out),
netperf's client process (its rusage) and neper's client (its own utime +
stime); ratio engine / peer, no target. For 1 flow the server's too
(``srv cpu us/t``: the engine server worker's summary; netserver's per-test
child, read from /proc while it runs), and how often the engine's lone C loops
came back to Python (``ret/s``: client + server ``rr_returns`` a second).
``--cases 1`` runs only the 1-flow cases (``16``: only the 16-flow ones).

``--busy N`` runs N busy loops beside every tool for the whole bench (the
kernel places them; every tool shares the machine with them alike): the p99
target is then 1.5x the peer's, and the engine's sampler is held to losing
no row (``missed``: grid points without a row over both ends of every flow,
netesto.results.ticks; the rows a late tick owes are taken, not skipped).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

from bench.common import (Engine, arguments, busy_note, keyvals, place, ready, rotated, score, summary_line, table,
                          verdict, where)
from netesto.engine.native import fastloop
from netesto.results.ticks import tick_stats
from tests import netns
from tests.testbed.delayrun import busy_loops

Cpus = tuple[int | None, int | None]
FLOWS = 16
# tps, p99 us, loops ran (client/server), client CPU us per transaction, the same without the engine's sampler,
# server CPU us per transaction (nan: not measured), the lone loops' returns to Python a second (nan: none),
# the engine's missed ticks over both ends of every flow (nan: a peer)
Result = tuple[float, float, str, float, float, float, float, float]
NAN = float("nan")


def children_cpu() -> float:
    """CPU seconds of the waited-for child processes so far (netperf's client is one: ``ip netns exec`` and
    ``setsid`` and ``taskset`` exec it)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def child_cpu(pid: int) -> float | None:
    """CPU seconds (utime + stime) of the live child of ``pid`` (netserver forks one a test), None if none."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        if fields[1] == str(pid):
            return sum(int(v) for v in fields[11:13]) / os.sysconf("SC_CLK_TCK")
    return None


class ChildCpu:
    """The CPU share of a server's per-test child (netserver's), read from /proc every 0.1 s while a run lasts
    (the child is gone, unreaped into no one's cutime, when the run ends): CPU seconds per second between
    the first and the last reading."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.reads: list[tuple[float, float]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)
        self.thread.start()

    def _poll(self) -> None:
        while not self.stop.wait(0.1):
            cpu = child_cpu(self.pid)
            if cpu is not None:
                self.reads.append((time.monotonic(), cpu))

    def share(self) -> float:
        self.stop.set()
        self.thread.join()
        if len(self.reads) < 2:
            return NAN
        (t0, c0), (t1, c1) = self.reads[0], self.reads[-1]
        return (c1 - c0) / (t1 - t0) if t1 > t0 else NAN


def netperf_rr(pair: netns.VethPair, bin_dir: Path, test: str, dur: float, cpus: Cpus,
               netserver: int | None = None) -> Result:
    """(transactions/s, p99 us, "-", client CPU us per transaction, the same, netserver's CPU us per transaction
    when its pid is given) of one netperf TCP_RR/TCP_CRR run with 1-byte request and response."""
    cpu0 = children_cpu()
    srv = ChildCpu(netserver) if netserver else None
    proc = pair.run(pair.a, [*place(cpus[0]), str(bin_dir / "netperf"), "-H", pair.addr_b, "-p", "12865",
                             "-t", test, "-l", str(int(dur)), "-P", "0", "-j", "--", "-r", "1,1",
                             "-k", "THROUGHPUT,P99_LATENCY"], timeout=dur + 30)
    keys = keyvals(proc.stdout)
    if proc.returncode or "THROUGHPUT" not in keys:
        if srv is not None:
            srv.share()
        raise RuntimeError(f"netperf {test} failed: {proc.stdout[-300:]} {proc.stderr[-300:]}")
    tps = float(keys["THROUGHPUT"])
    cpu = (children_cpu() - cpu0) / max(1.0, tps * dur) * 1e6
    srv_t = srv.share() / tps * 1e6 if srv is not None and tps else NAN
    return tps, float(keys["P99_LATENCY"]), "-", cpu, cpu, srv_t, NAN, NAN


def neper(pair: netns.VethPair, bin_dir: Path, tool: str, flows: int, dur: float, cpus: Cpus) -> Result:
    """(transactions/s, p99 us, "-", client CPU us per transaction) of one neper run (``tcp_rr``/``tcp_crr``),
    ``flows`` flows on one thread each end."""
    common = ["-F", str(flows), "-T", "1", "-C", "12870", "-P", "12871", "-l", str(int(dur)), "--nolog"]
    server = pair.popen(pair.b, [*place(cpus[1]), str(bin_dir / tool), *common],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        proc = pair.run(pair.a, [*place(cpus[0]), str(bin_dir / tool), "-c", "-H", pair.addr_b, *common,
                                 "-p", "50,99"], timeout=dur + 30)
        keys = keyvals(proc.stdout)
        if proc.returncode or "throughput" not in keys:
            raise RuntimeError(f"neper {tool} failed: {proc.stdout[-300:]} {proc.stderr[-300:]}")
        cpu = sum(float(keys[f"{k}_end"]) - float(keys[f"{k}_start"]) for k in ("utime", "stime"))
        cpu_t = cpu / max(1, int(keys["num_transactions"])) * 1e6
        return float(keys["throughput"]), float(keys["latency_p99"]) * 1e6, "-", cpu_t, cpu_t, NAN, NAN, NAN
    finally:
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def default_cc() -> str:
    """The congestion control new namespaces start with (this host's): the one every tool here runs."""
    return Path("/proc/sys/net/ipv4/tcp_congestion_control").read_text().strip()


def engine_rr(engine: Engine, test: str, dur: float, flows: int, prefix: list[str]) -> Result:
    """(aggregate tps, p99 us over all flows, loops the ends ran "client/server", the client worker's CPU us
    per transaction, the same without its sampler; for 1 flow the server worker's, and the lone loops' returns
    to Python a second)."""
    ids = [f"a-b-0-{i}" for i in range(flows)]
    summaries = engine.run([dict(flow_id=fid, test=test, dur=dur, ca="") for fid in ids],  # the peers' cc
                           workers=1, client_prefix=prefix)
    server = engine.server_summaries(ids)[0]  # (all written: their files are read for the missed ticks)
    missed = sum(tick_stats(flow).missed for fid in ids for flow in (engine.client_flow(fid), engine.server_flow(fid)))
    loops = f"{summaries[0].get('rr_loop', '-')}/{(server or {}).get('rr_loop', '-')}"
    trans = sum(s["transactions"] for s in summaries)
    # one worker: every summary has its CPU over the flow's span (and of it, its sampler's)
    cpu = max(s["cpu"]["seconds"] for s in summaries)
    sampling = max(s["cpu"]["sampling_seconds"] for s in summaries)
    per = 1e6 / max(1, trans)
    srv, returns = NAN, NAN
    if flows == 1 and server is not None:
        srv = server["cpu"]["seconds"] / max(1, server["transactions"]) * 1e6
        returns = (summaries[0].get("rr_returns", 0) + server.get("rr_returns", 0)) / max(1e-9, summaries[0]["duration"])
    return (sum(s["tps"] for s in summaries), engine.p99_us(ids), loops, cpu * per, (cpu - sampling) * per, srv,
            returns, missed)


def main() -> int:
    parser = arguments(__doc__, 3.0, cpus=False)
    parser.add_argument("--pure-python", action="store_true", help="NETESTO_PURE_PYTHON=1 on both engine ends")
    parser.add_argument("--cases", choices=("1", "16", "both"), default="both", help="1 flow, 16 flows or both")
    args = parser.parse_args()
    p99_target = 1.5 if args.busy else 1.2
    bin_dir = ready("bench_rr")
    if bin_dir is None:
        return 1
    env = ["env", f"NETESTO_PURE_PYTHON={1 if args.pure_python else 0}"]
    workdir = Path(tempfile.mkdtemp(prefix="bench_rr"))
    print(f"# 1-byte TCP_RR, {args.dur:g} s runs, {args.reps} interleaved reps, veth pair; "
          "shared noisy 2-vCPU machine")
    print(f"# C extension importable: {fastloop.AVAILABLE}; NETESTO_PURE_PYTHON={int(args.pure_python)}; "
          "ratio = engine / peer of the same rep")
    print(f"# every tool on the namespaces' default congestion control: {default_cc()}")
    print(busy_note(args.busy))
    results: list[bool | None] = []
    with busy_loops(args.busy):
        run_all(args, bin_dir, env, workdir, results, p99_target)
    summary_line(results)
    return 0


def run_all(args: argparse.Namespace, bin_dir: Path, env: list[str], workdir: Path, results: list[bool | None],
            p99_target: float) -> None:
    """Every case of ``args``, its tables and verdicts (into ``results``)."""
    try:
        for label, cpus in (("same CPU", (0, 0)), ("cross CPU", (0, 1))):
            pair = netns.make_veth_pair()
            try:
                netserver = pair.popen(pair.b, [*place(cpus[1]), str(bin_dir / "netserver"), "-D", "-L", pair.addr_b,
                                                "-p", "12865"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                engine = Engine(pair, workdir / label.replace(" ", "-"), server_prefix=[*env, *place(cpus[1])])
                prefix = [*env, *place(cpus[0])]
                time.sleep(0.3)
                if netserver.poll() is not None:
                    raise RuntimeError("netserver did not start")
                every: dict[str, Callable[[], Result]] = {
                    "engine 1": lambda: engine_rr(engine, "TCP_RR", args.dur, 1, prefix),
                    "netperf": lambda: netperf_rr(pair, bin_dir, "TCP_RR", args.dur, cpus, netserver.pid),
                    "engine 16": lambda: engine_rr(engine, "TCP_RR", args.dur, FLOWS, prefix),
                    "neper": lambda: neper(pair, bin_dir, "tcp_rr", FLOWS, args.dur, cpus),
                }
                keep = {"1": ("engine 1", "netperf"), "16": ("engine 16", "neper")}.get(args.cases, tuple(every))
                tools = {name: run for name, run in every.items() if name in keep}
                got: dict[str, list[Result]] = {name: [] for name in tools}
                for rep in range(args.reps):
                    for name in rotated(list(tools), rep):
                        got[name].append(tools[name]())
                engine.close()
            finally:
                pair.close()
            for ours, peer, title in (
                ("engine 1", "netperf", f"1 flow, {label} ({where(cpus)})  [vs netperf -t TCP_RR -- -r 1,1]"),
                ("engine 16", "neper", f"{FLOWS} flows on one engine worker, {label} ({where(cpus)})  "
                                       f"[vs neper tcp_rr -F {FLOWS} -T 1]"),
            ):
                if ours not in got:
                    continue
                loops = sorted({r[2] for r in got[ours]})
                what_cols = [(0, "tps"), (1, "p99 us"), (3, "cpu us/t"), (4, "cpu-smp us/t")]
                if peer == "netperf":
                    what_cols.append((5, "srv cpu us/t"))
                cols = {f"{who} {what}": [float(r[k]) for r in got[key]]
                        for k, what in what_cols for key, who in ((ours, "engine"), (peer, peer))}
                if peer == "netperf":
                    cols["engine ret/s"] = [float(r[6]) for r in got[ours]]
                cols["engine missed"] = [float(r[7]) for r in got[ours]]
                table(f"{title}; engine loops client/server: {', '.join(loops)}", cols, ".1f")
                results.append(verdict(f"rate: engine / {peer}", cols["engine tps"], cols[f"{peer} tps"], ">=", 1.0))
                results.append(verdict(f"p99: engine / {peer}", cols["engine p99 us"], cols[f"{peer} p99 us"],
                                       "<=", p99_target))
                lost = sum(cols["engine missed"])
                results.append(lost == 0)
                print(f"  sampler rows lost (missed ticks, both ends, every rep): {lost:.0f}  target 0  "
                      f"{'ok' if lost == 0 else 'MISSED'}")
                score("sampler rows lost (all reps)", lost, min(cols["engine missed"]), max(cols["engine missed"]),
                      args.reps, "<=", 0, lost == 0)
                verdict(f"client CPU per transaction: engine / {peer}", cols["engine cpu us/t"],
                        cols[f"{peer} cpu us/t"], None, None)
                verdict("  the same, engine's sampler excluded", cols["engine cpu-smp us/t"],
                        cols[f"{peer} cpu-smp us/t"], None, None)
                if peer == "netperf":
                    verdict("server CPU per transaction: engine / netserver", cols["engine srv cpu us/t"],
                            cols["netperf srv cpu us/t"], None, None)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
