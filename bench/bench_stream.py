"""Stream goodput of the engine vs iperf3, netperf and neper, with the same write size and CPU placement.

``nice -n 10 python3 -m bench.bench_stream [--dur 4] [--reps 3] [--cpus 0,1] [--case TEXT]`` (root, repository
root).

1 and 4 flows, cubic and bbr, on one veth pair. Like with like:

- write size: the engine writes ``SEND_CHUNK`` (512 KiB) and reads
  ``RECV_SIZE`` (256 KiB) at a time, from and into page-aligned buffers;
  iperf3 gets ``-l 512K`` (one length for both ends: its server reads 512
  KiB; 256 vs 512 KiB reads made no difference in CPU per GB here),
  netperf ``-m 512K -M 256K``. Syscalls: the engine's lone sender blocks in
  ``send`` (SO_SNDTIMEO 1 ms, back to its loop by the next timer), several
  flows of one worker poll (epoll, one send each a turn); its lone receiver
  blocks in ``recv``, several poll (reading until the socket is empty).
  iperf3 3.12 polls every end (``select`` + non-blocking ``write``/``read``),
  netperf blocks.
- placement: every client (engine client and its workers, iperf3 -c,
  netperf) runs under ``taskset -c <client CPU>``, every server (engine
  server, iperf3 -s, netserver and its children) under ``taskset -c
  <server CPU>`` (``--cpus none``: unpinned, all alike), each end in a
  session of its own (``common.place``: one autogroup share each).
- 4 flows: 4 engine flows on ONE client worker (``--workers 1``; the pinned
  server runs one worker) vs ``iperf3 -P 4`` (3.12 here: one process, one
  thread, for all 4 flows at each end; iperf3 is multi-threaded from 3.16
  on), ``tcp_stream -F 4 -T 1`` (neper: 4 flows on one thread at each end,
  ``-B 512K`` for its writes and reads, its default MSG_MORE on every send)
  and 4 netperf processes started together from one shell (one session, as
  a user's script; a netserver child each, in netserver's session). Beside
  busy loops each tool's end is one autogroup share, the 4 netperf processes
  as the engine's one worker. Each case also prints the engine over the best
  peer: the peer with the highest median goodput over the reps, the ratio
  taken per rep against it (the best of the three afresh in each rep,
  printed too, is biased low: see ``bench/stream_null.py``). With several
  flows the best peer is iperf3 or neper (every flow on one thread at each
  end, as the engine's one worker), and the 4 netperf processes (4 blocking
  senders, a netserver child each) meet the engine with a worker per flow
  at each end (``engine x4``: client and server ``--workers 4``).
- socket options: none of the tools sets buffers, pacing or TCP_NODELAY on
  its data sockets here (iperf3 sets TCP_NODELAY on its control connection
  only); each sets the congestion control.
- the engine samples every flow every 10 ms (its default; part of its cost),
  the peers sample nothing.

Readings, all the receiver's goodput: engine, sum over flows of the server
end's bytes received / its duration (from its ``.nflow`` summary; the client's
bytes sent must equal them); iperf3, the receiver's ``sum_received``; netperf,
the sum of its THROUGHPUT (bytes sent over the elapsed time) times
REMOTE_BYTES_RECVD / LOCAL_BYTES_SENT (netperf waits for the receiver to
drain: the two differ by a few KB in GBs).
Each case also prints the CPU seconds per GB received of the engine's,
iperf3's and neper's processes (client + server, their own rusage over the
flows; the softirq work a process runs in its context included): less sensitive to the
machine's load than the rates; and every tool's retransmitted segments per GB
received, on the sending side (the engine's clients' last ``total_retrans``,
iperf3's ``sum_sent.retransmits``, netperf's LOCAL_TRANSPORT_RETRANS). On a
veth pair nothing is lost: these retransmissions are spurious, the sender's
segments leaving from both CPUs out of order, and they are part of what a
user of the tool would measure (no target).
Two more cases, labelled, run the peers at their default write sizes
(iperf3 128 KiB, netperf the socket buffer's size, 16 KiB here, neper 16 KiB)
without a target: 1 cubic flow and 4 bbr flows. neper's retransmissions are
the client namespace's ``RetransSegs`` over its run (neper reports none; no
other tool sends there meanwhile); its CPU, both ends' own rusage. Target: engine / peer >= 1.0 in every case. Shared noisy machine:
read the ratios and their spread, not the absolute numbers.
"""

from __future__ import annotations

import contextlib
import json
import math
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import (Engine, arguments, busy_note, each_rep_extreme, keyvals, leading, place, ready, rotated,
                          summary_line, table, verdict, where)
from netesto.engine.core.balance import deal
from netesto.engine.kinds.flowend import RECV_SIZE, SEND_CHUNK
from tests import netns
from tests.testbed.delayrun import busy_loops

NAN = float("nan")
Cpus = tuple[int | None, int | None]
# receiver goodput (bit/s), CPU seconds per GB received (None: not known), retransmitted segments per GB received
Reading = tuple[float, float | None, float]


def iperf3(pair: netns.VethPair, dur: float, ca: str, flows: int, cpus: Cpus, write: int | None) -> Reading:
    """Receiver goodput of one iperf3 run and its processes' CPU per GB (``write`` None: its default length)."""
    server = pair.popen(pair.b, [*place(cpus[1]), "iperf3", "-s", "-1", "-B", pair.addr_b, "-p", "5299"],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        argv = [*place(cpus[0]), "iperf3", "-c", pair.addr_b, "-p", "5299", "-t", str(dur), "-J", "-C", ca,
                "-P", str(flows)]
        if write:
            argv += ["-l", str(write)]
        proc = pair.run(pair.a, argv, timeout=dur + 30)
        end = json.loads(proc.stdout)["end"]
        got, cpu = end["sum_received"], end["cpu_utilization_percent"]
        seconds = (cpu["host_total"] + cpu["remote_total"]) / 100 * got["seconds"]
        gb = got["bytes"] / 1e9
        return float(got["bits_per_second"]), seconds / gb, end["sum_sent"].get("retransmits", NAN) / gb
    finally:
        server.wait(timeout=10)


def netperf(pair: netns.VethPair, bin_dir: Path, dur: float, ca: str, flows: int, cpus: Cpus,
            write: int | None) -> Reading:
    """Summed receiver goodput (bit/s) of ``flows`` netperf TCP_STREAM processes started together from one
    shell, as a user's script would (one session: beside busy loops, one autogroup share as the engine's
    one worker has; netserver's children share its session too); CPU not read."""
    test = ["-k", "THROUGHPUT,THROUGHPUT_UNITS,LOCAL_BYTES_SENT,REMOTE_BYTES_RECVD,LOCAL_TRANSPORT_RETRANS",
            "-K", f"{ca},{ca}"]
    if write:
        test += ["-m", str(write), "-M", str(RECV_SIZE)]
    cmd = shlex.join([str(bin_dir / "netperf"), "-H", pair.addr_b, "-p", "12865", "-t", "TCP_STREAM",
                      "-l", str(int(dur)), "-P", "0", "--", *test])
    total = 0.0
    received = 0
    retrans: float = 0
    with tempfile.TemporaryDirectory(prefix="bench_netperf") as tmp:
        script = "".join(f"({cmd} > {tmp}/{i}.out 2> {tmp}/{i}.err; echo $? > {tmp}/{i}.rc) & "
                         for i in range(flows)) + "wait"
        pair.run(pair.a, [*place(cpus[0]), "sh", "-c", script], timeout=dur + 30)
        for i in range(flows):
            out, err, rc = (Path(tmp, f"{i}.{ext}").read_text() for ext in ("out", "err", "rc"))
            keys = keyvals(out)
            if rc.strip() != "0" or keys.get("THROUGHPUT_UNITS") != "10^6bits/s":
                raise RuntimeError(f"netperf failed (exit {rc.strip()}): {out[-300:]} {err[-300:]}")
            # THROUGHPUT counts the bytes sent: scaled to the receiver's over the same elapsed time
            total += float(keys["THROUGHPUT"]) * 1e6 * int(keys["REMOTE_BYTES_RECVD"]) / int(keys["LOCAL_BYTES_SENT"])
            received += int(keys["REMOTE_BYTES_RECVD"])
            retrans += int(keys["LOCAL_TRANSPORT_RETRANS"]) if "LOCAL_TRANSPORT_RETRANS" in keys else NAN
    return total, None, retrans / (received / 1e9) if received else NAN


def snmp_retrans(pair: netns.VethPair) -> int:
    """TCP segments retransmitted so far in the client's namespace (``Tcp: RetransSegs``)."""
    lines = [line.split() for line in pair.run(pair.a, ["cat", "/proc/net/snmp"]).stdout.splitlines()
             if line.startswith("Tcp:")]
    return int(lines[1][lines[0].index("RetransSegs")])


def neper_stream(pair: netns.VethPair, bin_dir: Path, dur: float, ca: str, flows: int, cpus: Cpus,
                 write: int | None) -> Reading:
    """Receiver goodput of one neper ``tcp_stream`` run, ``flows`` flows on one thread at each end (``-T 1``),
    its processes' CPU per GB (their own rusage) and the retransmitted segments per GB (neper reports none:
    the client namespace's ``RetransSegs``, nothing else sends there)."""
    common = ["-F", str(flows), "-T", "1", "-C", "12872", "-P", "12873", "-l", str(int(dur)), "--nolog",
              "--congestion-control", ca]
    if write:
        common += ["-B", str(write)]
    server = pair.popen(pair.b, [*place(cpus[1]), str(bin_dir / "tcp_stream"), *common],
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(0.3)
        before = snmp_retrans(pair)
        client = pair.run(pair.a, [*place(cpus[0]), str(bin_dir / "tcp_stream"), "-c", "-H", pair.addr_b, *common],
                          timeout=dur + 30)
        retrans = snmp_retrans(pair) - before
        out, err = server.communicate(timeout=15)
    finally:
        if server.poll() is None:
            server.kill()
    keys = keyvals(out)
    if client.returncode or server.returncode or keys.get("throughput_units") != "Mbit/s":
        raise RuntimeError(f"neper tcp_stream failed: {client.stdout[-300:]} {client.stderr[-300:]} {err[-300:]}")
    rate = float(keys["throughput"]) * 1e6
    gb = rate / 8 * dur / 1e9
    ckeys = keyvals(client.stdout)
    cpu = sum(float(k[f"{t}_end"]) - float(k[f"{t}_start"]) for k in (keys, ckeys) for t in ("utime", "stime"))
    return rate, cpu / gb, retrans / gb


def engine_stream(engine: Engine, dur: float, ca: str, flows: int, cpus: Cpus, workers: int = 1,
                  server_workers: int = 1) -> Reading:
    """Receiver goodput: the server ends' bytes received over their durations, summed over flows; CPU per GB.

    A flow end's CPU is its worker process's over the flow: the client's flows
    of one worker (dealt as the client deals them) count once, as do the
    server's (one process when pinned to one CPU; unpinned or with ``server_workers`` > 1, not read: a
    flow end's summary does not say which of its server's workers ran it).
    """
    ids = [f"a-b-0-{i}" for i in range(flows)]
    sent = engine.run([dict(flow_id=fid, test="TCP_STREAM", dur=dur, ca=ca, interval=0.01) for fid in ids],
                      workers=workers, client_prefix=place(cpus[0]))
    got = engine.server_summaries(ids)
    if sum(s["bytes_tx"] for s in sent) != sum(s["bytes_rx"] for s in got):
        raise RuntimeError("engine: the server received other than the client sent")
    rate = sum(s["bytes_rx"] * 8 / s["duration"] for s in got)
    gb = sum(s["bytes_rx"] for s in got) / 1e9
    retrans = sum(engine.client_flow(fid).columns["total_retrans"][-1] for fid in ids) / gb
    if cpus[1] is None or server_workers > 1:
        return rate, None, retrans
    client = sum(max(sent[k]["cpu"]["seconds"] for k in ks) for ks in deal(["TCP_STREAM"] * flows, min(workers, flows)))
    server = max(s["cpu"]["seconds"] for s in got)
    return rate, (client + server) / gb, retrans


def spread_line(label: str, runs: dict[str, list[Reading]], field: int, fmt: str) -> None:
    """``label``, then every tool's reading ``field`` (those known: not None, not NaN): median [min-max]."""
    parts = []
    for name, vals in runs.items():
        known = sorted(x for v in vals if (x := v[field]) is not None and not math.isnan(x))
        if known:
            parts.append(f"{name} {statistics.median(known):{fmt}} [{known[0]:{fmt}}-{known[-1]:{fmt}}]")
    if parts:
        print(f"  {label:<46}{', '.join(parts)}", flush=True)


def cost_lines(runs: dict[str, list[Reading]]) -> None:
    """The CPU per GB of every tool whose CPU was read, and every tool's retransmissions per GB."""
    spread_line("CPU s/GB (client + server processes)", runs, 1, ".3f")
    spread_line("retransmitted segments per GB (senders)", runs, 2, ".0f")


def main() -> int:
    parser = arguments(__doc__, 4.0)
    parser.add_argument("--case", action="append", default=[], metavar="TEXT",
                        help="run only the cases whose label holds TEXT ('4 flows bbr'; repeatable)")
    args = parser.parse_args()
    bin_dir = ready("bench_stream", ("iperf3",))
    if bin_dir is None:
        return 1
    cpus = args.cpus
    pair = netns.make_veth_pair()
    workdir = Path(tempfile.mkdtemp(prefix="bench_stream"))
    results: list[bool | None] = []
    busy = contextlib.ExitStack()  # (the busy loops, if asked for, until the tools are done)
    busy.enter_context(busy_loops(args.busy))
    try:
        netserver = pair.popen(pair.b, [*place(cpus[1]), str(bin_dir / "netserver"), "-D", "-L", pair.addr_b,
                                        "-p", "12865"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        engine = Engine(pair, workdir, server_prefix=place(cpus[1]))
        time.sleep(0.3)
        if netserver.poll() is not None:
            raise RuntimeError("netserver did not start")
        print(f"# stream goodput (Gbit/s), {args.dur:g} s runs, {args.reps} interleaved reps, veth pair, "
              f"{where(cpus)} for every tool; shared noisy 2-vCPU machine")
        print(f"# engine writes {SEND_CHUNK // 1024} KiB, reads {RECV_SIZE // 1024} KiB; ratio = engine / peer "
              "of the same rep; CPU = s per GB received of the client + server processes")
        print(busy_note(args.busy))
        cases = [(f"{n} flow{'s' if n > 1 else ''} {ca}", ca, n, True)
                 for n in (1, 4) for ca in ("cubic", "bbr")]
        cases += [("1 flow cubic, PEERS AT THEIR DEFAULT WRITE SIZES", "cubic", 1, False),
                  ("4 flows bbr, PEERS AT THEIR DEFAULT WRITE SIZES", "bbr", 4, False)]
        for label, ca, n, same in cases:
            if args.case and not any(text in label for text in args.case):
                continue
            write = SEND_CHUNK if same else None
            tools = {
                "engine": lambda: engine_stream(engine, args.dur, ca, n, cpus),
                "iperf3": lambda: iperf3(pair, args.dur, ca, n, cpus, write),
                "netperf": lambda: netperf(pair, bin_dir, args.dur, ca, n, cpus, write),
                "neper": lambda: neper_stream(pair, bin_dir, args.dur, ca, n, cpus, write),
            }
            # n netperf processes are n blocking senders, served by a netserver child each: their like is the
            # engine with a client worker per flow and a server worker per flow (its own server, for this case)
            many = f"engine x{n}"
            engines = contextlib.ExitStack()
            if n > 1:
                per_flow = Engine(pair, workdir / many.replace(" ", "-"), server_prefix=place(cpus[1]),
                                  options=("--workers", str(n)))
                engines.callback(per_flow.close)
                tools[many] = lambda: engine_stream(per_flow, args.dur, ca, n, cpus, workers=n, server_workers=n)
            runs: dict[str, list[Reading]] = {name: [] for name in tools}
            with engines:
                for rep in range(args.reps):
                    for name in rotated(list(tools), rep):
                        runs[name].append(tools[name]())
            peers = (f"iperf3 -P {n} -l 512K, {n} x netperf -m 512K -M 256K, neper tcp_stream -F {n} -T 1 -B 512K"
                     if same else f"iperf3 -P {n} (-l 128K default), {n} x netperf (default -m/-M), "
                     f"neper -F {n} -T 1 (-B 16K default)")
            table(f"{label}  [vs {peers}]", {k: [v[0] / 1e9 for v in vals] for k, vals in runs.items()}, ".2f")
            others = ("iperf3", "netperf", "neper")
            for peer in others:
                mine = many if peer == "netperf" and n > 1 else "engine"
                results.append(verdict(f"{mine} / {peer}", [v[0] for v in runs[mine]], [v[0] for v in runs[peer]],
                                       ">=", 1.0 if same else None))
            # the best peer is a tool, chosen by its median over the reps (common.leading); the best of the three
            # afresh in each rep is biased against the engine (an engine against copies of itself reads 0.94 so).
            # Several flows on one worker: the best of the peers that also run them on one thread at each end.
            alike = ("iperf3", "neper") if n > 1 else others
            best = leading({p: [v[0] for v in runs[p]] for p in alike})
            print(f"  best peer (highest median goodput of {', '.join(alike)}): {best}")
            results.append(verdict("engine / best peer", [v[0] for v in runs["engine"]],
                                   [v[0] for v in runs[best]], ">=", 1.0 if same else None))
            verdict("engine / best peer of each rep (biased low)", [v[0] for v in runs["engine"]],
                    each_rep_extreme({p: [v[0] for v in runs[p]] for p in alike}), ">=", None)
            cost_lines(runs)
            # no more retransmissions per GB than the peer with the fewest (its median over the reps; not the best
            # goodput's: 4 netperf processes, often the fastest, retransmit 10x more than iperf3 and would flatter)
            fewest = leading({p: [v[2] for v in runs[p]] for p in others}, higher=False)
            print(f"  fewest retransmissions per GB (lowest median): {fewest}")
            results.append(verdict("retransmissions per GB: engine / fewest peer", [v[2] for v in runs["engine"]],
                                   [v[2] for v in runs[fewest]], "<=", 1.0 if same else None))
        engine.close()
    finally:
        busy.close()
        pair.close()
        shutil.rmtree(workdir, ignore_errors=True)
    summary_line(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
