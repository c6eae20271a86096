"""bench_sampling's cost parts: what one sample costs, split into its parts, and the CPU of the
Sampler on idle connections (``python3 -m bench.bench_sampling --cost-only`` / ``--cpu-only``).

Times are thread CPU time (``time.thread_time_ns``), not wall time: on the shared machine a
neighbour preempting the bench would otherwise count as the sampler's cost. Idle sockets: no
packet arrives while a getsockopt holds the socket, so the tick pays only for its own work
(on busy sockets the kernel also runs, in the ticking thread, receive work it would have done
anyway; bench_sampling's runs show both readings).
"""

from __future__ import annotations

import os
import shutil
import socket
import statistics
import time
import zlib
from array import array
from pathlib import Path
from random import Random

import msgpack

from netesto.collectors import tcpinfo
from netesto.engine.sampling import sampler as _sampler
from netesto.engine.kinds.client import StreamClient
from netesto.engine.kinds.flowend import FlowEnd, Worker
from netesto.engine.core.loop import Loop
from netesto.engine.sampling import records as _records
from netesto.engine.sampling.records import HEAD as _HEAD, LAYOUTS as _LAYOUTS, sample_row as _sample_row

# (getattr: the bench also runs against engines built before them, for A/B)
_sample_end, _sample_tick = getattr(_records, "sample_end", None), getattr(_records, "sample_tick", None)
from netesto.protocol.flowspec import FlowSpec
from netesto.raw.columns import FLOW_COLUMNS
from netesto.raw.nflow import FlowWriter, read_flow
from netesto.raw.nflow_format import BLOCK as _BLOCK

RR_VALUES = 60  # latencies per RR flow end and tick in the cost split (16 flows at ~6k transactions/s)


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


def _per_call_us(fn, items: list, reps: int) -> float:
    """Median over 5 rounds of us (thread CPU) per call of ``fn(item)`` over ``items`` x ``reps``."""
    rounds = []
    for _ in range(5):
        t0 = time.thread_time_ns()
        for _ in range(reps):
            for item in items:
                fn(item)
        rounds.append((time.thread_time_ns() - t0) / 1e3 / (reps * len(items)))
    return statistics.median(rounds)


def begun_ends(worker: Worker, conns: list[socket.socket], cls: type[FlowEnd], test: str, prefix: str) -> list[FlowEnd]:
    """Flow ends of ``cls`` on ``conns`` (sampled every 10 ms by ``worker``'s Sampler), begun."""
    ends = []
    for i, conn in enumerate(conns):
        spec = FlowSpec(flow_id=f"{prefix}-{i}", test=test, server="127.0.0.1", port=1, interval=0.01, exp=1)
        end = cls(worker, spec)
        end.sock = conn
        ends.append(end)
    for end in ends:
        end.begin()
    return ends


def sample_cost(flows: int, ca: str, workdir: Path, ticks: int = 400) -> dict[str, float]:
    """us per flow per tick of each part of sampling, on ``flows`` idle connections."""
    lsock, conns, peers = connections(flows, ca)
    out: dict[str, float] = {}
    out["getsockopt TCP_INFO"] = _per_call_us(lambda s: s.getsockopt(6, tcpinfo.TCP_INFO, 280), conns, 200)
    out["getsockopt TCP_CC_INFO"] = _per_call_us(lambda s: s.getsockopt(6, tcpinfo.TCP_CC_INFO, 20), conns, 200)
    out["time.time()"] = _per_call_us(lambda s: time.time(), conns, 200)
    parts = 2 if ca == "bbr" else 1
    last, gaps = bytearray(280 + 24), bytearray(40)

    def row(sock: socket.socket) -> None:
        _sample_row(bytearray(), 0, sock, parts, 1.0, 2.0, 3, 4, 5, 6, 0, 0, last, gaps)

    out[f"one row: stamps, counters, getsockopt ({_sample_row.__module__})"] = _per_call_us(row, conns, 200)
    for rows in (20, 50):  # blocks of 0.2 s (before) and 0.5 s (FLUSH_SECONDS) at 10 ms
        out.update(block_cost(workdir, rows, _HEAD.size + 280 + (24 if ca == "bbr" else 0)))
    loop = Loop()
    worker = Worker(loop, str(workdir), lambda event: None)
    ends = begun_ends(worker, conns, StreamClient, "TCP_STREAM", f"c-{ca}")
    flush_ns = 0
    real_flush = FlowEnd.flush

    def timed_flush(self: FlowEnd, written: int = 0) -> None:
        nonlocal flush_ns
        t = time.thread_time_ns()
        real_flush(self, written)
        flush_ns += time.thread_time_ns() - t

    sampler = worker.sampler
    FlowEnd.flush = timed_flush  # type: ignore[method-assign, assignment]
    try:
        t0 = time.thread_time_ns()
        for _ in range(ticks):
            sampler._tick(0.01)  # a tick as the loop's timer runs it (it re-arms its timer too)
        tick_ns = time.thread_time_ns() - t0
    finally:
        FlowEnd.flush = real_flush  # type: ignore[method-assign]
    rows = ticks * len(ends)
    if flush_ns:  # Python wrote the blocks (FlowEnd.flush)
        out["flush (one records block), per row"] = flush_ns / 1e3 / rows
        out[f"{WHOLE_TICK} (all of the above)"] = tick_ns / 1e3 / rows
    else:  # the C tick wrote them (fastloop.TICK_WRITES)
        out[f"{WHOLE_TICK} (all of the above; the C tick writes the blocks)"] = tick_ns / 1e3 / rows
    for end in ends:
        end.finish()
    if ca == "cubic":
        out.update(rr_tick_cost(worker, conns[:16], ticks))
    for s in conns + peers:
        s.close()
    lsock.close()
    shutil.rmtree(workdir, ignore_errors=True)
    return out


def rr_tick_cost(worker: Worker, conns: list[socket.socket], ticks: int) -> dict[str, float]:
    """us (thread CPU) per RR flow end and tick of the Sampler's whole tick on ``conns`` (client ends
    of RR flows, RR_VALUES latencies each per tick), with the latency parts a tick leaves for later
    (``Sampler._fill``, runs between the loop's handlers) and apart: what a tick holds the replies
    of every flow of the worker back for."""
    ends = begun_ends(worker, conns, FlowEnd, "TCP_RR", "rr")
    sampler, rng = worker.sampler, Random(1)
    batches = [array("q", (rng.randint(20_000, 400_000) for _ in range(RR_VALUES))) for _ in range(8)]
    tick_ns = all_ns = 0
    for k in range(ticks):
        for end in ends:
            end.lat_raw.extend(batches[k % len(batches)])
        t0 = time.thread_time_ns()
        sampler._tick(0.01)
        t1 = time.thread_time_ns()
        while getattr(sampler, "filling", None):  # the parts left for later (the Python path)
            sampler._fill()
        all_ns += time.thread_time_ns() - t0
        tick_ns += t1 - t0
    for end in ends:
        end.finish()
    rows = ticks * len(ends)
    return {f"RR ({len(ends)} client ends, {RR_VALUES} latencies a tick): the tick, per flow": tick_ns / 1e3 / rows,
            "  RR: tick + latency parts filled after it, per flow": all_ns / 1e3 / rows}


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
            f"  the same, us per row ({rows} rows a block)": new / rows,
            f"  (packb + concat + buffered write + flush, {rows} rows)": old}


WHOLE_TICK = "whole Sampler tick, per flow"  # ticks back to back: warm caches (see idle_tick_runs)


def print_idle(flows: int, workdir: Path, rounds: int = 3, seconds: float = 1.5) -> None:
    """The idle-row lines (``--idle-only``, quick: an A/B of two builds alternates this)."""
    spaced, warm = idle_tick_runs(flows, workdir, seconds, rounds)
    for what, vals in (("ticks 10 ms apart", spaced), ("ticks back to back", warm)):
        print(f"  a row on idle sockets, {what}: {statistics.median(vals):.2f} us [{min(vals):.2f}-{max(vals):.2f}]"
              f" of thread CPU, median [min-max] of {rounds} ({flows} stream ends)", flush=True)
    alone, grouped = flush_groups(flows, workdir / "groups", seconds, rounds)
    print(f"  the same, ticks 10 ms apart, the blocks written one flow end a sweep: {statistics.median(alone):.2f} us "
          f"[{min(alone):.2f}-{max(alone):.2f}]; {_sampler.FLUSH_GROUP} a sweep (the Sampler's groups): "
          f"{statistics.median(grouped):.2f} us [{min(grouped):.2f}-{max(grouped):.2f}] (rounds interleaved)",
          flush=True)
    if _sample_end is None or _sample_tick is None:
        return
    alone, batch, own = alone_vs_batch(flows, workdir / "alone", seconds, rounds)
    for what, vals in ((f"one end every 10 ms / {flows} (sample_end: a hot row's placement)", alone),
                       (f"all {flows} every 10 ms (sample_tick: the sweep's)", batch),
                       ("the same, no socket read (the engine's own part: the flow end's objects, the row, "
                        "its block writes)", own)):
        print(f"  a row on idle sockets, {what}: {statistics.median(vals):.2f} us [{min(vals):.2f}-{max(vals):.2f}]"
              f" of thread CPU, median [min-max] of {rounds}", flush=True)


def alone_vs_batch(flows: int, workdir: Path, seconds: float,
                   rounds: int) -> tuple[list[float], list[float], list[float]]:
    """us (thread CPU, the clock reads' own part taken off) of a row on ``flows`` idle stream ends, per round:
    (one end at a time every 10 ms / flows, as hot rows come; all of them every 10 ms in one call, as the
    sweep; the sweep again with no socket read, each row the last values: the engine's own part of a row)."""
    lsock, conns, peers = connections(flows, "cubic")
    loop = Loop()
    worker = Worker(loop, str(workdir), lambda event: None)
    ends = begun_ends(worker, conns, StreamClient, "TCP_STREAM", "alone")
    tt = time.thread_time_ns
    probe = min(-(tt() - tt()) for _ in range(200))  # (two reads back to back)
    acc = array("q", [0] * len(worker.sampler.acc))
    alone: list[float] = []
    batch: list[float] = []
    own: list[float] = []
    for _ in range(rounds):
        for got, one in ((alone, True), (batch, False), (own, False)):
            for end, conn in zip(ends, conns):
                end.sock = None if got is own else conn
            used = rows = 0
            stop = time.monotonic() + seconds
            while time.monotonic() < stop:
                time.sleep(0.01 / flows if one else 0.01)
                cpu0 = tt()
                if one:
                    _sample_end(ends[rows % flows], acc)
                else:
                    _sample_tick(ends, time.time(), time.monotonic())
                used += tt() - cpu0 - probe
                rows += 1 if one else flows
            got.append(used / rows / 1e3)
    for end, conn in zip(ends, conns):
        end.sock = conn
    _close(ends, lsock, conns + peers, loop)
    return alone, batch, own


def _close(ends: list[FlowEnd], lsock: socket.socket, socks: list[socket.socket], loop: Loop) -> None:
    """The flow ends finished (their files closed), then the sockets, the listener and the loop."""
    for end in ends:
        end.finish()
    for sock in socks:
        sock.close()
    lsock.close()
    loop.close()


def idle_tick_runs(flows: int, workdir: Path, seconds: float = 2.0, rounds: int = 3,
                   warm: bool = True) -> tuple[list[float], list[float]]:
    """us (thread CPU) of the Sampler's tick per row on ``flows`` idle stream connections (cubic),
    per round: (ticks every 10 ms on the real loop, as in a run; ticks back to back). Idle
    sockets: no receive work of the kernel runs in the tick. Spaced ticks find the flow ends'
    and sockets' memory gone from the caches (~2.5x the back-to-back cost on the shared host:
    the same with a spinner keeping the CPU busy between ticks), as in a run; that is the
    sampler's own cost of a row (``warm``: also the back-to-back ticks)."""
    spaced = []
    for k in range(rounds):
        lsock, conns, peers = connections(flows, "cubic")
        loop = Loop()
        worker = Worker(loop, str(workdir / f"spaced{k}"), lambda event: None)
        ends = begun_ends(worker, conns, StreamClient, "TCP_STREAM", "idle")
        cpu0 = worker.sampler.cpu_ns
        stop = time.monotonic() + seconds
        loop.run(lambda: time.monotonic() >= stop)
        rows = sum(end.nrows + end.samples for end in ends)
        spaced.append((worker.sampler.cpu_ns - cpu0) / 1e3 / max(1, rows))
        _close(ends, lsock, conns + peers, loop)
    if not warm:
        return spaced, []
    back = [sample_cost(flows, "cubic", workdir / f"idle{k}", ticks=200) for k in range(rounds)]
    return spaced, [next(v for key, v in r.items() if key.startswith(WHOLE_TICK)) for r in back]


def flush_groups(flows: int, workdir: Path, seconds: float, rounds: int) -> tuple[list[float], list[float]]:
    """us (the Sampler's thread CPU) per row of spaced ticks on ``flows`` idle stream ends, per round, with
    the flow ends' blocks written one a sweep and in the Sampler's groups (FLUSH_GROUP a sweep): a block
    written alone finds the kernel's write path cold."""
    grouped = _sampler.FLUSH_GROUP
    alone: list[float] = []
    together: list[float] = []
    try:
        for k in range(rounds):
            for size, got in ((1, alone), (grouped, together)):
                _sampler.FLUSH_GROUP = size
                got.append(idle_tick_runs(flows, workdir / f"{size}-{k}", seconds, 1, warm=False)[0][0])
    finally:
        _sampler.FLUSH_GROUP = grouped
    return alone, together


def print_cost(flows: int, workdir: Path) -> None:
    for ca in ("cubic", "bbr"):
        runs = [sample_cost(flows, ca, workdir / f"cost{k}") for k in range(3)]
        print(f"# per-sample cost, {flows} idle loopback connections ({ca}), us of thread CPU per flow per tick, "
              "median [min-max] of 3 runs")
        for key in runs[0]:
            vals = sorted(r[key] for r in runs)
            print(f"  {key:<52}{vals[1]:7.2f}  [{vals[0]:.2f}-{vals[-1]:.2f}]", flush=True)
    print("# a row's cost as a run pays it (caches cold: ticks 10 ms apart) and warm, us of thread CPU")
    print_idle(flows, workdir / "idle")
    from bench.cold_reads import print_cold_reads
    from bench.diag_cost import print_alternative  # (it imports this module)

    print_cold_reads(flows)
    print_alternative(flows)


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
          f"{100 * fracs[-1]:.2f}], median of 3 ({rows} rows written in the last; no target: idle flows)", flush=True)


__all__ = ["RR_VALUES", "WHOLE_TICK", "alone_vs_batch", "begun_ends", "block_cost", "connections", "flush_groups",
           "idle_tick_runs", "print_cost", "print_idle", "rr_tick_cost", "sample_cost", "sampler_cpu", "sampler_part", "timer_cpu"]
