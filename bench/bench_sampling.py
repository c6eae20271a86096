"""What sampling costs: goodput of 64 flows sampled every 10 ms vs (nearly) unsampled, and
the CPU the sampler of 100 flows at 100 Hz uses.

``python3 -m bench.bench_sampling [--dur 10] [--reps 6] [--within-dur 60] [--within-runs 2]
[--within-window 0.5]`` (root, repository root).

0. Within runs (the target's reading): 64 TCP_STREAM flows for 60 s on a
   fresh veth pair, the wall clock cut in pairs of 0.5 s windows and the
   engine's sampler on (10 ms) in one window of each pair and off in the
   other (the engine's bench-only ``--sample-duty W`` option, read by the
   Sampler; which window of a pair follows the Thue-Morse sequence,
   ``sampler.bench_window_sampled``); the client veth's byte counter read
   20 times a second gives each window's goodput, and each sampled window
   is divided by its pair's unsampled one. Drift and the neighbours' load
   change slowly, so this pairs far better than whole runs do: a standard
   error of ~0.3-0.7 % in one run where run pairs spread +-8 %. Sampling
   the even windows of every second instead (as this bench did before)
   gave control runs of 1.005-1.014: the flows' once-a-second progress
   events land at a fixed phase of each second, in one parity of windows.
   The reading is the median of the pair ratios with its distribution-free
   95 % interval: a pair where the host stalled the flows for a moment
   (a neighbour, writeback) moved means by up to 6 %. Runs still differ by
   ~1 %, more than their intervals, so the target's reading pools the pairs
   of all runs (``--within-runs``, 2 by default; 4 or more to tell 1 %). A
   control run (sampled in no window) shows the estimator has no bias of
   its own. ``--within-only`` runs just
   this part.
1. 64 TCP_STREAM flows on a veth pair with ``interval=0.01`` vs ``interval=60``
   (one sample at the start and one at the end: the engine's way of "not
   sampling"), the same flows, pairs of runs in ABBA order after one discarded
   warm-up run; ratio of aggregate goodput per pair, median and range.
2. 100 real, established TCP connections (loopback) each wrapped in a flow end
   with its ``.nflow`` writer, sampled at 100 Hz by the worker's Sampler on the
   real event loop for a few seconds: process CPU time / wall time (median of
   3), next to the same loop waking at 100 Hz with nothing to sample.
3. ``--cost``: what one sample costs, us per flow per tick, split into its parts
   (getsockopt TCP_INFO, the bbr TCP_CC_INFO getsockopt, time.time(), one
   row as the Sampler builds it (fastloop.sample_row, or its Python twin with
   NETESTO_PURE_PYTHON=1), one ``records`` block write (FlowWriter.write_records
   next to the old packb + copy + buffered write + flush), the flush, the
   Sampler's whole tick) on 64 idle established loopback connections (cubic, then
   bbr), and what one NETLINK sock_diag dump
   of the namespace's sockets would cost per flow instead (the kernel walks
   its whole TCP hash table). ``--cost-only`` runs just this part.

Part 1 also prints the bytes moved per CPU second of the engine's own processes
(client workers and server, sampled / unsampled), and the sampler's share of
the engine's CPU in each sampled run (``cpu.sampling_seconds`` of the flow
summaries: the thread CPU time of the ticks). Runs of the same thing differ by
several percent on this machine (a start transient, the neighbours), more than
the 1 % the target allows, so the share is the steadier reading of the cost.

Shared noisy machine: read the ratio, not the absolute numbers.
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

import msgpack

from bench.common import Engine
from netesto.engine.client import StreamClient
from netesto.collectors import tcpinfo
from netesto.raw.columns import FLOW_COLUMNS
from netesto.engine.flowend import FlowEnd, Worker
from netesto.engine.records import HEAD as _HEAD, LAYOUTS as _LAYOUTS, sample_row as _sample_row
from netesto.engine.sampler import bench_window_sampled
from netesto.engine.loop import Loop
from netesto.raw.nflow import FlowWriter, read_flow
from netesto.raw.nflow_format import BLOCK as _BLOCK
from netesto.protocol.flowspec import FlowSpec
from tests import netns


def tree_cpu(root: int) -> float:
    """CPU seconds (scheduler run time, ns-exact) of ``root`` and its live descendants."""
    parent: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as fh:
                    parent[int(name)] = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    tree, todo = set(), [root]
    while todo:
        pid = todo.pop()
        tree.add(pid)
        todo += [p for p, pp in parent.items() if pp == pid and p not in tree]
    total = 0
    for pid in tree:
        try:
            with open(f"/proc/{pid}/schedstat") as fh:
                total += int(fh.read().split()[0])
        except (OSError, IndexError, ValueError):
            pass
    return total / 1e9


SHARE_TARGET = 1.5  # %: the sampler's ticks within the engine's CPU (issue 14)


def sampling_share(engine: Engine) -> float:
    """The sampler's share of the engine's CPU in the last run, from both ends' flow summaries:
    per worker process (a file header's pid), the largest ``sampling_seconds`` and ``seconds``
    of its flows (they ran side by side), summed over the workers."""
    workers: dict[tuple[str, int], tuple[float, float]] = {}
    for side in ("cli", "srv"):
        for path in (engine.workdir / side / str(engine.runs) / "flows").glob("*.nflow"):
            flow = read_flow(path)
            cpu = flow.summary["cpu"]
            key = (side, flow.header["pid"])
            had = workers.get(key, (0.0, 0.0))
            workers[key] = (max(had[0], cpu["sampling_seconds"]), max(had[1], cpu["seconds"]))
    return sum(w[0] for w in workers.values()) / sum(w[1] for w in workers.values())


def goodput(engine: Engine, dur: float, interval: float, flows: int) -> tuple[float, float]:
    """Aggregate goodput (bit/s) and bytes per CPU second of the engine's processes (client and server)."""
    server0 = tree_cpu(engine.proc.pid)
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    summaries = engine.run([
        dict(flow_id=f"a-b-0-{i}", test="TCP_STREAM", dur=dur, ca="cubic", interval=interval)
        for i in range(flows)
    ])
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = tree_cpu(engine.proc.pid) - server0 + (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
    total = sum(s["bytes_tx"] for s in summaries)
    return total * 8 / max(s["duration"] for s in summaries), total / cpu


_COUNTER = """
import sys, time
end = time.time() + float(sys.argv[1])
with open("/sys/class/net/veth0/statistics/tx_bytes") as fh:
    while time.time() < end:
        fh.seek(0)
        print(time.time(), fh.read().strip(), flush=True)
        time.sleep(0.05)
"""


def window_rates(points: list[tuple[float, int]], window: float, skip: float) -> list[tuple[int, float]]:
    """(window number, bit/s) of every whole ``window``-second window of the wall clock between
    ``skip`` s after the first point and ``skip`` s before the last: the byte counter interpolated
    0.1 s inside each edge (a tick in flight at an edge counts for neither window)."""
    def at(t: float) -> float | None:
        for (t0, b0), (t1, b1) in zip(points, points[1:]):
            if t0 <= t <= t1:
                return b0 + (b1 - b0) * (t - t0) / (t1 - t0) if t1 > t0 else b0
        return None

    out = []
    k = int((points[0][0] + skip) / window) + 1
    while (k + 1) * window <= points[-1][0] - skip:
        lo, hi = at(k * window + 0.1), at((k + 1) * window - 0.1)
        if lo is not None and hi is not None:
            out.append((k, (hi - lo) * 8 / (window - 0.2)))
        k += 1
    return out


def duty_ratios(rates: list[tuple[int, float]], window: float) -> list[float]:
    """For each pair of windows (see ``bench_window_sampled``) with both windows measured: the
    sampled window's rate over the unsampled one's. Next to each other, they share the slow drift
    and the neighbours' load; which one is sampled is as often the first as the second, so a drift
    inside a pair and the flows' own once-a-second work cancel out over the pairs."""
    got = dict(rates)
    out = []
    for k in sorted(got):
        if k % 2 == 0 and k + 1 in got:
            first_sampled = bench_window_sampled((k + 0.5) * window, window)
            on, off = (got[k], got[k + 1]) if first_sampled else (got[k + 1], got[k])
            out.append(on / off)
    return out


def within_run(dur: float, flows: int, window: float, interval: float) -> list[float]:
    """One run of ``flows`` flows for ``dur`` s on a fresh veth pair, with the engine's sampler
    on in one ``window``-second window of each pair and off in the other (``--sample-duty``);
    the client's veth byte counter read 20 times a second. Returns :func:`duty_ratios`."""
    pair = netns.make_veth_pair()
    workdir = Path(tempfile.mkdtemp(prefix="bench_duty"))
    try:
        engine = Engine(pair, workdir, options=("--sample-duty", str(window)))
        counter = pair.popen(pair.a, [sys.executable, "-c", _COUNTER, str(dur + 3)], stdout=subprocess.PIPE,
                             text=True)
        engine.run([dict(flow_id=f"a-b-0-{i}", test="TCP_STREAM", dur=dur, ca="cubic", interval=interval)
                    for i in range(flows)])
        out = counter.communicate(timeout=30)[0]
        engine.close()
    finally:
        pair.close()
        shutil.rmtree(workdir, ignore_errors=True)
    points = [(float(t), int(b)) for t, b in (line.split() for line in out.splitlines())]
    return duty_ratios(window_rates(points, window, 3.0), window)


def median_ci(values: list[float], z: float = 1.96) -> tuple[float, float, float]:
    """The median of ``values`` and its distribution-free 95 % confidence interval (the order
    statistics n/2 -+ z*sqrt(n)/2): a window pair where the host stalled the flows (a neighbour,
    writeback) moves it no more than any other pair, where it can move a mean by several percent."""
    ranked = sorted(values)
    n = len(ranked)
    half = z * n ** 0.5 / 2
    lo, hi = max(0, math.floor(n / 2 - half) - 1), min(n - 1, math.ceil(n / 2 + half) - 1)
    return statistics.median(ranked), ranked[lo], ranked[hi]


def within_run_part(dur: float, flows: int, runs: int, window: float) -> None:
    """The sampling cost measured inside runs (see the module docstring), and its control."""
    print(f"# within-run: {flows} flows for {dur:.0f} s, sampled at 10 ms in one {window:g} s window of each pair "
          "and not at all in the other; each sampled window's goodput over its pair's unsampled one", flush=True)
    pooled: list[float] = []
    for label, interval, reps in (("control: sampled in no window", 60.0, 1), ("sampled", 0.01, runs)):
        for _ in range(reps):
            ratios = within_run(dur, flows, window, interval)
            pooled += ratios if interval == 0.01 else []
            mid, lo, hi = median_ci(ratios)
            se = statistics.stdev(ratios) / len(ratios) ** 0.5
            print(f"  {label}: pair ratio median {mid:.4f} [{lo:.4f}-{hi:.4f}] (95 % interval), mean "
                  f"{statistics.mean(ratios):.4f} +- {se:.4f}, {len(ratios)} pairs"
                  + (" (should be 1 within its interval)" if interval != 0.01 else ""), flush=True)
    # runs differ by more than their intervals (the neighbours' load, where the flows' work lands): pool them
    mid, lo, hi = median_ci(pooled)
    print(f"within-run goodput, sampled / unsampled windows: median of the {len(pooled)} pairs of {runs} runs "
          f"{mid:.4f} [{lo:.4f}-{hi:.4f}] (95 % interval; target >= 0.99)", flush=True)


def connections(n: int, ca: str) -> tuple[socket.socket, list[socket.socket], list[socket.socket]]:
    """``n`` established loopback TCP connections using ``ca``: (listener, client ends, server ends)."""
    lsock = socket.create_server(("127.0.0.1", 0), backlog=n)
    peers, conns = [], []
    for _ in range(n):
        c = socket.socket()
        tcpinfo.set_congestion_control(c, ca)
        c.connect(lsock.getsockname())
        s, _ = lsock.accept()
        c.sendall(b"x" * 1000)
        s.recv(1000)
        peers.append(s)
        conns.append(c)
    return lsock, conns, peers


def sock_diag_dump(nl: socket.socket, seq: int) -> dict[tuple[int, int], bytes]:
    """The alternative to a getsockopt per flow: one NETLINK_SOCK_DIAG dump of every IPv4 TCP
    socket of this namespace with its tcp_info, as {(sport, dport): raw tcp_info}."""
    req = struct.pack("=BBBxI", socket.AF_INET, socket.IPPROTO_TCP, 1 << (2 - 1), 0xFFFFFFFF) + bytes(48)
    # nlmsghdr: SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_DUMP; inet_diag_req_v2 asking for INET_DIAG_INFO
    nl.send(struct.pack("=IHHII", 16 + len(req), 20, 0x301, seq, 0) + req)
    out: dict[tuple[int, int], bytes] = {}
    while True:
        data = nl.recv(1 << 20)
        pos = 0
        while pos < len(data):
            length, kind = struct.unpack_from("=IH", data, pos)
            if kind in (2, 3):  # NLMSG_ERROR, NLMSG_DONE
                return out
            ports = struct.unpack_from(">HH", data, pos + 20)
            attr, end = pos + 16 + 72, pos + length  # after nlmsghdr and inet_diag_msg
            while attr < end:
                alen, atype = struct.unpack_from("=HH", data, attr)
                if atype == 2:  # INET_DIAG_INFO
                    out[ports] = data[attr + 4 : attr + alen]
                attr += (alen + 3) & ~3
            pos += (length + 3) & ~3


def _per_call_us(fn, items: list, reps: int) -> float:
    """Median over 5 rounds of us per call of ``fn(item)`` over ``items`` x ``reps``."""
    rounds = []
    for _ in range(5):
        t0 = time.perf_counter_ns()
        for _ in range(reps):
            for item in items:
                fn(item)
        rounds.append((time.perf_counter_ns() - t0) / 1e3 / (reps * len(items)))
    return statistics.median(rounds)


def sample_cost(flows: int, ca: str, workdir: Path, ticks: int = 400) -> dict[str, float]:
    """us per flow per tick of each part of sampling, on ``flows`` idle connections."""
    lsock, conns, peers = connections(flows, ca)
    out: dict[str, float] = {}
    out["getsockopt TCP_INFO"] = _per_call_us(lambda s: s.getsockopt(6, tcpinfo.TCP_INFO, 280), conns, 200)
    out["getsockopt TCP_CC_INFO"] = _per_call_us(lambda s: s.getsockopt(6, tcpinfo.TCP_CC_INFO, 20), conns, 200)
    out["time.time()"] = _per_call_us(lambda s: time.time(), conns, 200)
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 4) as nl:  # NETLINK_SOCK_DIAG
        sockets = len(sock_diag_dump(nl, 0))
        out[f"(alternative) sock_diag dump of {sockets} sockets / {flows}"] = (
            _per_call_us(lambda k: sock_diag_dump(nl, k), [1], 50) / flows)
    parts = 2 if ca == "bbr" else 1
    last, gaps = bytearray(280 + 24), bytearray(40)

    def row(sock: socket.socket) -> None:
        _sample_row(bytearray(), 0, sock, parts, 1.0, 2.0, 3, 4, 5, 6, 0, 0, last, gaps)

    out[f"one row: stamps, counters, getsockopt ({_sample_row.__module__})"] = _per_call_us(row, conns, 200)
    out.update(block_cost(workdir, 20, _HEAD.size + 280 + (24 if ca == "bbr" else 0)))
    loop = Loop()
    worker = Worker(loop, str(workdir), lambda event: None)
    ends = []
    for i, conn in enumerate(conns):
        spec = FlowSpec(flow_id=f"c-{ca}-{i}", test="TCP_STREAM", server="127.0.0.1", port=1, interval=0.01, exp=1)
        end = StreamClient(worker, spec)
        end.sock = conn
        ends.append(end)
    for end in ends:
        end.begin()
    flush_ns = 0
    real_flush = FlowEnd.flush

    def timed_flush(self: FlowEnd) -> None:
        nonlocal flush_ns
        t = time.perf_counter_ns()
        real_flush(self)
        flush_ns += time.perf_counter_ns() - t

    sampler = worker.sampler
    FlowEnd.flush = timed_flush  # type: ignore[method-assign]
    try:
        t0 = time.perf_counter_ns()
        for _ in range(ticks):
            sampler._tick(0.01)  # a tick as the loop's timer runs it (it re-arms its timer too)
        tick_ns = time.perf_counter_ns() - t0
    finally:
        FlowEnd.flush = real_flush  # type: ignore[method-assign]
    rows = ticks * len(ends)
    if flush_ns:  # Python wrote the blocks (FlowEnd.flush)
        out["flush (one records block), per row"] = flush_ns / 1e3 / rows
        out["whole Sampler tick, per flow (all of the above)"] = tick_ns / 1e3 / rows
    else:  # the C tick wrote them (fastloop.TICK_WRITES)
        out["whole Sampler tick, per flow (all of the above; the C tick writes the blocks)"] = tick_ns / 1e3 / rows
    for end in ends:
        end.finish()
    for s in conns + peers:
        s.close()
    lsock.close()
    shutil.rmtree(workdir, ignore_errors=True)
    return out


def block_cost(workdir: Path, rows: int, rec_len: int) -> dict[str, float]:
    """us per ``records`` block of ``rows`` records: FlowWriter.write_records (one writev,
    no copy of the records) next to the way it was written before (msgpack.packb, header +
    data, a buffered file's write and flush), both to a real file."""
    workdir.mkdir(parents=True, exist_ok=True)
    record = next(layout for layout in _LAYOUTS.values() if layout.length == rec_len)
    blocks = [bytearray(os.urandom(rows * rec_len)) for _ in range(8)]
    writer = FlowWriter(workdir / "blocks.nflow", FLOW_COLUMNS, {}, record=record)
    new = _per_call_us(lambda b: writer.write_records(rows, b), blocks, 100)
    writer.close()
    with open(workdir / "old.nflow", "wb") as fh:
        def old_write(b: bytearray) -> None:
            data = msgpack.packb({"type": "records", "n": rows, "rec": b}, use_bin_type=True)
            fh.write(_BLOCK.pack(len(data), zlib.crc32(data)) + data)
            fh.flush()

        old = _per_call_us(old_write, blocks, 100)
    return {f"records block of {rows} x {rec_len} B, us per block: write_records": new,
            f"  (before: packb + concat + buffered write + flush)": old}


def print_cost(flows: int, workdir: Path) -> None:
    for ca in ("cubic", "bbr"):
        runs = [sample_cost(flows, ca, workdir / f"cost{k}") for k in range(3)]
        print(f"# per-sample cost, {flows} idle loopback connections ({ca}), us per flow per tick, "
              "median [min-max] of 3 runs")
        for key in runs[0]:
            vals = sorted(r[key] for r in runs)
            print(f"  {key:<52}{vals[1]:7.2f}  [{vals[0]:.2f}-{vals[-1]:.2f}]", flush=True)


def sampler_cpu(flows: int, hz: float, seconds: float, workdir: Path) -> tuple[float, int]:
    """CPU fraction of one core used to sample ``flows`` idle connections at ``hz``."""
    lsock = socket.create_server(("127.0.0.1", 0), backlog=flows)
    peers, conns = [], []
    for _ in range(flows):
        c = socket.create_connection(lsock.getsockname())
        s, _ = lsock.accept()
        c.sendall(b"x" * 1000)
        s.recv(1000)
        peers.append(s)
        conns.append(c)
    loop = Loop()
    worker = Worker(loop, str(workdir), lambda event: None)
    ends = []
    for i, conn in enumerate(conns):
        spec = FlowSpec(flow_id=f"s-{i}", test="TCP_STREAM", server="127.0.0.1", port=1,
                        interval=1.0 / hz, exp=1)
        end = StreamClient(worker, spec)
        end.sock = conn
        ends.append(end)
    for end in ends:
        end.begin()
    stop = time.monotonic() + seconds
    cpu0, t0 = time.process_time(), time.monotonic()
    loop.run(lambda: time.monotonic() >= stop)
    cpu, wall = time.process_time() - cpu0, time.monotonic() - t0
    rows = 0
    for end in ends:
        end.finish()
        rows += read_flow(workdir / "1" / "flows" / f"{end.spec.flow_id}.client.nflow").rows
    for s in peers:
        s.close()
    lsock.close()
    return cpu / wall, rows


def timer_cpu(hz: float, seconds: float) -> float:
    """CPU fraction of one core of the event loop waking on a re-armed ``hz`` timer that does nothing."""
    loop = Loop()
    interval = 1.0 / hz
    state = {"next": time.monotonic() + interval}

    def tick() -> None:
        state["next"] += interval
        loop.call_at(state["next"], tick)

    loop.call_at(state["next"], tick)
    stop = time.monotonic() + seconds
    cpu0, t0 = time.process_time(), time.monotonic()
    loop.run(lambda: time.monotonic() >= stop)
    cpu, wall = time.process_time() - cpu0, time.monotonic() - t0
    loop.close()
    return cpu / wall


def sampler_part(workdir: Path) -> None:
    idle = sorted(timer_cpu(100.0, 2.0) for _ in range(3))
    print(f"event loop alone, a 100 Hz timer: {100 * idle[1]:.2f} % of one core "
          f"[{100 * idle[0]:.2f}-{100 * idle[-1]:.2f}]")
    fracs = []
    for k in range(3):
        frac, rows = sampler_cpu(100, 100.0, 3.0, workdir / f"sampler{k}")
        fracs.append(frac)
    fracs.sort()
    print(f"sampler, 100 flows at 100 Hz: {100 * fracs[1]:.2f} % of one core [{100 * fracs[0]:.2f}-"
          f"{100 * fracs[-1]:.2f}], median of 3 ({rows} rows written in the last; target < 5 %)", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dur", type=float, default=10.0,
                        help="seconds per run (3 s runs swing by +-10 %%: a start transient and the neighbours)")
    parser.add_argument("--reps", type=int, default=6)
    parser.add_argument("--flows", type=int, default=64)
    parser.add_argument("--cost", action="store_true", help="also print the per-sample cost split")
    parser.add_argument("--cost-only", action="store_true", help="only print the per-sample cost split")
    parser.add_argument("--cpu-only", action="store_true", help="only measure the sampler's CPU (part 2)")
    parser.add_argument("--within-dur", type=float, default=60.0, help="seconds of each within-run run")
    parser.add_argument("--within-runs", type=int, default=2, help="within-run runs sampled (0: none)")
    parser.add_argument("--within-window", type=float, default=0.5, help="seconds of each within-run window")
    parser.add_argument("--within-only", action="store_true", help="only the within-run measurement")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="bench_sampling"))
    if args.cost or args.cost_only:
        print_cost(args.flows, workdir)
        if args.cost_only:
            shutil.rmtree(workdir, ignore_errors=True)
            return 0
    if args.cpu_only:
        sampler_part(workdir)
        shutil.rmtree(workdir, ignore_errors=True)
        return 0
    if args.within_runs:
        within_run_part(args.within_dur, args.flows, args.within_runs, args.within_window)
        if args.within_only:
            shutil.rmtree(workdir, ignore_errors=True)
            return 0
    pair = netns.make_veth_pair()
    try:
        engine = Engine(pair, workdir / "engine")
        print(f"# sampling cost ({args.dur} s runs, {args.reps} pairs in ABBA order after a discarded warm-up "
              "run; shared noisy 2-vCPU machine)")
        goodput(engine, args.dur, 0.01, args.flows)  # warm-up: the first run after the server starts is slower
        sampled, unsampled, eff, share = [], [], [], []
        for k in range(args.reps):
            # ABBA: which run of a pair goes first alternates, so a drift or an
            # order effect does not favour one side
            order = (60.0, 0.01) if k % 2 == 0 else (0.01, 60.0)
            got = {}
            for interval in order:
                got[interval] = goodput(engine, args.dur, interval, args.flows)
                if interval == 0.01:
                    share.append(sampling_share(engine))
            unsampled.append(got[60.0][0])
            sampled.append(got[0.01][0])
            eff.append(got[0.01][1] / got[60.0][1])
            print(f"  pair {k + 1} ({'unsampled first' if k % 2 == 0 else 'sampled first'}): unsampled "
                  f"{unsampled[-1] / 1e9:.2f} Gbit/s, sampled {sampled[-1] / 1e9:.2f} Gbit/s, "
                  f"ratio {sampled[-1] / unsampled[-1]:.3f}; bytes per engine CPU second ratio {eff[-1]:.3f}; "
                  f"sampler {100 * share[-1]:.2f} % of the engine's CPU",
                  flush=True)
        engine.close()
        a, b = statistics.median(sampled), statistics.median(unsampled)
        ratios = sorted(x / y for x, y in zip(sampled, unsampled))
        print(f"{args.flows} flows goodput sampled@10ms {a / 1e9:.2f} Gbit/s, unsampled {b / 1e9:.2f} Gbit/s, "
              f"ratio of medians {a / b:.3f}, median pair ratio {statistics.median(ratios):.3f} "
              f"[{ratios[0]:.3f}-{ratios[-1]:.3f}] (target >= 0.99: "
              f"{'ok' if statistics.median(ratios) >= 0.99 else 'MISSED'})", flush=True)
        eff.sort()
        print(f"bytes moved per CPU second of the engine (client + server processes), sampled / unsampled: "
              f"median {statistics.median(eff):.3f} [{eff[0]:.3f}-{eff[-1]:.3f}] (less sensitive to other "
              "load on the machine than goodput; kernel work done in ksoftirqd is not in it)", flush=True)
        share.sort()
        print(f"the sampler's ticks took {100 * statistics.median(share):.2f} % [{100 * share[0]:.2f}-"
              f"{100 * share[-1]:.2f}] of the engine's CPU in the sampled runs (thread CPU time of the ticks "
              "over the workers' CPU, from the flow summaries; on a CPU-bound pair the goodput lost to "
              f"sampling is about this share); target < {SHARE_TARGET:g} %: "
              f"{'ok' if 100 * statistics.median(share) < SHARE_TARGET else 'MISSED'}", flush=True)
        sampler_part(workdir)
    finally:
        pair.close()
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
