"""TCP_CRR (a new connection per 1-byte transaction) of the engine vs netperf TCP_CRR and neper tcp_crr.

``nice -n 10 python3 -m bench.bench_crr [--dur 3] [--reps 3] [--cpus 0,1]`` (root, repository root).

One flow each: one engine TCP_CRR flow vs ``netperf -t TCP_CRR -- -r 1,1``
vs ``tcp_crr -F 1 -T 1`` (neper), each peer against the engine closing its
connections as that peer does (``--crr-close matched``: netperf's server
closes first, neper's client resets), every client under ``taskset -c <client
CPU>`` and every server under ``taskset -c <server CPU>``, each end in a
session of its own (``common.place``). Each tool, in
each repetition, gets a fresh veth pair (no TIME_WAIT sockets or server
state left by another tool or repetition) and runs TWICE back to back on it,
its server kept: the first and the second run are printed and judged apart,
since the engine has been seen to collapse on the second run (shown here,
never hidden). Rate: transactions (connections) per second; p99 latency of
a whole connect-request-reply-close (netperf's ``P99_LATENCY``, neper's
``latency_p99``, the engine's client histogram), printed without a target.
Every tool runs the namespaces' default congestion control (the engine's
flow asks for none, ``ca`` ""), as netperf and neper do unless told.
Target: engine / peer >= 1.0 on the first run and on the second. Shared
noisy machine: read the ratios and their spread. Also printed, without a
target: the engine's CPU time per transaction on each end (its worker
processes', softirq work charged to them included) and the loops that ran
(client ``rr_loop``, share of joins the server served in C).

``--syscalls``: instead, system calls per transaction on each end of every
tool, counted by ``strace -c -f`` attached for 1.5 s in the middle of a
4 s run and divided by the connections made (client: connect calls;
server: accepts that returned a connection): load-insensitive, like for like.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterator, Sequence

from bench.bench_rr import neper, netperf_rr
from bench.common import (ENGINE, Engine, arguments, busy_note, place, ready, rotated, summary_line, table, verdict,
                          where)
from netesto.raw.nflow import read_flow
from tests import netns
from tests.testbed.delayrun import busy_loops

Cpus = tuple[int | None, int | None]
Run = Callable[[], tuple[float, float]]


def twice(make: Callable[[netns.VethPair], tuple[Run, Callable[[], None]]]) -> list[tuple[float, float]]:
    """On a fresh pair: ``make`` starts the tool's server, then its run goes twice back to back."""
    pair = netns.make_veth_pair()
    try:
        run, stop = make(pair)
        try:
            return [run(), run()]
        finally:
            stop()
    finally:
        pair.close()


def engine_crr(eng: Engine, dur: float, prefix: list[str], costs: list[tuple[float, float, str]],
               close: str = "rst") -> tuple[float, float]:
    """(tps, p99 us) of one engine TCP_CRR flow closing as ``close`` says (netesto's ``crr_close``);
    appends (client, server CPU us per transaction, loops) to costs."""
    cli = eng.run([dict(flow_id="a-b-0-0", test="TCP_CRR", dur=dur, ca="", crr_close=close)], workers=1,
                  client_prefix=prefix)[0]
    srv = read_flow(eng.workdir / "srv" / str(eng.runs) / "flows" / "a-b-0-0.server.nflow").summary or {}
    per = [s["cpu"]["seconds"] * 1e6 / max(1, s["transactions"]) for s in (cli, srv)]
    loops = f"{cli.get('rr_loop', '-')}, {100 * srv.get('joins_c', 0) / max(1, srv['transactions']):.0f} % in C"
    costs.append((per[0], per[1], loops))
    return cli["tps"], eng.p99_us(["a-b-0-0"])


def descendants(pid: int) -> list[int]:
    """``pid`` and every process under it."""
    found = [pid]
    for task in Path(f"/proc/{pid}/task").glob("*"):
        for child in (task / "children").read_text().split():
            found += descendants(int(child))
    return found


def strace_counts(path: Path) -> dict[str, tuple[int, int]]:
    """{syscall: (calls, errors)} from ``strace -c`` output."""
    counts = {}
    for line in path.read_text().splitlines():
        m = re.match(r"\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(\d+)?\s*(\w+)$", line)
        if m and m.group(3) != "total":
            counts[m.group(3)] = (int(m.group(1)), int(m.group(2) or 0))
    return counts


def per_transaction(counts: dict[str, tuple[int, int]], per: int) -> str:
    total = sum(c for c, _ in counts.values()) / max(1, per)
    parts = ", ".join(f"{name} {c / per:.2f}" for name, (c, _) in sorted(counts.items(), key=lambda kv: -kv[1][0])
                      if c / max(1, per) >= 0.05)
    return f"{total:5.2f}  ({parts})"


@contextlib.contextmanager
def one_run(name: str, bin_dir: Path, cpus: Cpus, workdir: Path,
            dur: int = 4) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """A ``dur`` s run of ``name`` ("engine CLOSE", "netperf" or "neper") on a fresh veth pair, both ends
    pinned as ``cpus`` says: (its client, its server's pid) while it runs; every process killed after."""
    pair = netns.make_veth_pair()
    procs: list[subprocess.Popen[bytes]] = []
    try:
        if name.startswith("engine"):
            spec = workdir / "specs.json"
            eng = Engine(pair, workdir / pair.a, server_prefix=place(cpus[1]))
            procs.append(eng.proc)  # type: ignore[arg-type]
            spec.write_text(f'[{{"flow_id": "a-b-0-0", "test": "TCP_CRR", "dur": {dur}, "ca": "", '
                            f'"crr_close": "{name.split()[1]}", '
                            f'"server": "{pair.addr_b}", "port": {eng.port}}}]')
            client = pair.popen(pair.a, [*place(cpus[0]), *ENGINE, "client", "--specs", str(spec), "--datadir",
                                         str(workdir / "cli"), "--workers", "1"], stdout=subprocess.DEVNULL)
            server_pid = eng.proc.pid
        elif name == "netperf":
            server = pair.popen(pair.b, [*place(cpus[1]), str(bin_dir / "netserver"), "-D", "-L", pair.addr_b,
                                         "-p", "12865"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            procs.append(server)
            time.sleep(0.3)
            client = pair.popen(pair.a, [*place(cpus[0]), str(bin_dir / "netperf"), "-H", pair.addr_b,
                                         "-p", "12865", "-t", "TCP_CRR", "-l", str(dur), "--", "-r", "1,1"],
                                stdout=subprocess.DEVNULL)
            server_pid = server.pid
        else:
            common = ["-F", "1", "-T", "1", "-C", "12870", "-P", "12871", "-l", str(dur), "--nolog"]
            server = pair.popen(pair.b, [*place(cpus[1]), str(bin_dir / "tcp_crr"), *common],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            procs.append(server)
            time.sleep(0.3)
            client = pair.popen(pair.a, [*place(cpus[0]), str(bin_dir / "tcp_crr"), "-c", "-H", pair.addr_b,
                                         *common], stdout=subprocess.DEVNULL)
            server_pid = server.pid
        procs.append(client)
        yield client, server_pid
        client.wait(timeout=30)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
        pair.close()


def ends(name: str, client: subprocess.Popen[bytes], server_pid: int) -> dict[str, list[int]]:
    """The processes of a running tool's client and server ends (the engine's client: its worker)."""
    return {"client": descendants(client.pid)[-1:] if name.startswith("engine") else descendants(client.pid),
            "server": descendants(server_pid)}


def syscalls(bin_dir: Path, cpus: Cpus, workdir: Path, closes: Sequence[str]) -> None:
    """Each tool: one 4 s run, strace attached to both ends for 1.5 s in its middle; the engine once per
    close mode in ``closes`` (its row says which)."""
    print("# TCP_CRR system calls per transaction (strace -c -f, 1.5 s in the middle of a 4 s run, "
          f"{where(cpus)}), divided by the connections made in that window")
    for name in [f"engine {close}" for close in closes] + ["netperf", "neper"]:
        with one_run(name, bin_dir, cpus, workdir) as (client, server_pid):
            time.sleep(1.5)
            tracers = [subprocess.Popen(["timeout", "-s", "INT", "1.5", "strace", "-c", "-f", "-o",
                                         str(workdir / f"{end}.strace"), *[a for p in pids for a in ("-p", str(p))]],
                                        stderr=subprocess.DEVNULL)
                       for end, pids in ends(name, client, server_pid).items()]
            for tracer in tracers:
                tracer.wait()
        cli, srv = strace_counts(workdir / "client.strace"), strace_counts(workdir / "server.strace")
        accepts = sum(c - e for k, (c, e) in srv.items() if k in ("accept", "accept4"))
        print(f"  {name:14} client {per_transaction(cli, cli.get('connect', (0, 0))[0])}")
        print(f"  {'':14} server {per_transaction(srv, accepts)}")


# How each peer ends a transaction's connection, as netesto's crr_close names it: netperf closes
# gracefully, its server first; neper's client resets (no TIME_WAIT). The engine is compared with
# each peer closing the same way: a reset saves a FIN exchange and a TIME_WAIT socket (5-8 %).
PEER_CLOSE = {"netperf": "server", "neper": "rst"}


def main() -> int:
    parser = arguments(__doc__, 3.0)
    parser.add_argument("--syscalls", action="store_true", help="count system calls per transaction instead")
    parser.add_argument("--crr-close", choices=["matched", "rst", "client", "server"], default="matched",
                        help="how the engine's flows close (crr_close): matched (default) runs it twice, closing as "
                             "netperf does (server) against netperf and as neper does (rst) against neper; a mode "
                             "runs every comparison with it (labelled: not like for like for a peer that differs)")
    args = parser.parse_args()
    bin_dir = ready("bench_crr")
    if bin_dir is None:
        return 1
    cpus = args.cpus
    workdir = Path(tempfile.mkdtemp(prefix="bench_crr"))
    against = {peer: close if args.crr_close == "matched" else args.crr_close for peer, close in PEER_CLOSE.items()}
    if args.syscalls:
        try:
            syscalls(bin_dir, cpus, workdir, list(dict.fromkeys(against.values())))
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        return 0
    costs: list[tuple[float, float, str]] = []

    def engine(close: str) -> Callable[[netns.VethPair], tuple[Run, Callable[[], None]]]:
        def make(pair: netns.VethPair) -> tuple[Run, Callable[[], None]]:
            eng = Engine(pair, workdir / pair.a, server_prefix=place(cpus[1]))

            def run() -> tuple[float, float]:
                return engine_crr(eng, args.dur, place(cpus[0]), costs, close)
            return run, eng.close
        return make

    def netperf(pair: netns.VethPair) -> tuple[Run, Callable[[], None]]:
        srv = pair.popen(pair.b, [*place(cpus[1]), str(bin_dir / "netserver"), "-D", "-L", pair.addr_b,
                                  "-p", "12865"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.3)
        return (lambda: netperf_rr(pair, bin_dir, "TCP_CRR", args.dur, cpus)[:2]), srv.kill  # (tps, p99 us)

    def neper_crr(pair: netns.VethPair) -> tuple[Run, Callable[[], None]]:
        return (lambda: neper(pair, bin_dir, "tcp_crr", 1, args.dur, cpus)[:2]), (lambda: None)

    tools = {f"engine {close}": engine(close) for close in dict.fromkeys(against.values())}
    tools.update(netperf=netperf, neper=neper_crr)
    runs: dict[str, list[list[tuple[float, float]]]] = {name: [] for name in tools}
    try:
        with busy_loops(args.busy):
            for rep in range(args.reps):
                for name in rotated(list(tools), rep):
                    runs[name].append(twice(tools[name]))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"# TCP_CRR 1 flow, 1-byte request/reply, {args.dur:g} s runs, {args.reps} interleaved reps, "
          f"each tool on a fresh veth pair per rep, {where(cpus)} for every tool; shared noisy 2-vCPU machine")
    print("# ratio = engine / peer of the same rep, the engine closing as " + ", ".join(
        f"{close} against {peer} (which closes {PEER_CLOSE[peer]})" for peer, close in against.items())
          + "; p99 is of one whole connection's transaction")
    print(busy_note(args.busy))
    results: list[bool | None] = []
    for i, which in ((0, "first run"), (1, "second run, back to back, same server")):
        cols = {f"{name} {what}": [r[i][k] for r in runs[name]]
                for k, what in ((0, "tps"), (1, "p99 us")) for name in tools}
        table(f"TCP_CRR, {which}  [vs netperf -t TCP_CRR -- -r 1,1; neper tcp_crr -F 1 -T 1]", cols)
        for peer, close in against.items():
            mine = f"engine {close}"
            results.append(verdict(f"rate: {mine} / {peer}", cols[f"{mine} tps"], cols[f"{peer} tps"], ">=", 1.0))
            verdict(f"p99: {mine} / {peer}", cols[f"{mine} p99 us"], cols[f"{peer} p99 us"], None, None)
    print("\nengine CPU per transaction (its worker processes, softirq charged to them included), "
          "runs in order; loops: client, joins the server served in C")
    for i, (cli, srv, loops) in enumerate(costs):
        print(f"  run {i + 1}: client {cli:6.1f} us  server {srv:6.1f} us  ({loops})")
    summary_line(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
