"""The stream path: a sender alone in its worker sends in blocking spins (FlowEnd.send_spin): it
ran, its counts are exact, and the loop's timers (the 10 ms sampler) are still served; the send and
receive buffers are page-aligned."""

from __future__ import annotations

import ctypes
import json
import mmap
import re
import shutil
import statistics
from pathlib import Path

import pytest

from netesto.engine.kinds import flowend
from netesto.engine.core.loop import Loop
from tests.engine.test_engine import ENGINE, Server, ends, spec, terminal

pytestmark = pytest.mark.netns


def syscall_counts(path: Path) -> dict[str, int]:
    """``strace -c`` output: syscall name -> calls."""
    counts = {}
    for line in path.read_text().splitlines():
        m = re.match(r"\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)\s*$", line)
        if m:
            counts[m.group(2)] = int(m.group(1))
    return counts


def run_traced(pair, tmp: Path, specs: list[dict], workers: int) -> tuple[dict[str, dict], dict[str, int]]:
    """Run the client under ``strace -c -f`` (sends and polls only): its events, its syscall counts."""
    path = tmp / "specs.json"
    path.write_text(json.dumps(specs))
    trace = tmp / "strace.txt"
    proc = pair.run(pair.a, ["strace", "-c", "-f", "-o", str(trace), "-e", "trace=sendto,epoll_wait",
                             *ENGINE, "client", "--specs", str(path), "--datadir", str(tmp / "cli"),
                             "--workers", str(workers)], timeout=60)
    events = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert proc.returncode == 0, [e for e in events if e["event"] == "error"] or proc.stderr[-2000:]
    return terminal(events), syscall_counts(trace)


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")
@pytest.mark.parametrize("flows", [1, 2])
def test_lone_sender_spins_and_both_ends_agree(veth_pair, tmp_path, flows):
    """1 flow: blocking sends, many per poll; 2 flows on one worker: polled, one send per poll and flow
    (send_burst). Either way the server received every byte the client counted and the sampler kept
    its 10 ms."""
    pair = veth_pair
    server = Server(pair, pair.b, pair.addr_b, tmp_path / "srv")
    specs = [spec(server, f"a-b-0-{i}", "TCP_STREAM", dur=1.5, ca="cubic", interval=0.01, exp=1)
             for i in range(flows)]
    done, calls = run_traced(pair, tmp_path, specs, workers=1)
    server.wait_done(flows)
    server.events()
    sends_per_poll = calls["sendto"] / calls["epoll_wait"]
    if flows == 1:
        # spinning: as many blocking sends as fit between two of the loop's timers (~10 quiet, fewer the
        # less CPU a loaded machine leaves it); a polled sender makes at most one a poll
        assert sends_per_poll > 3, calls
    else:
        assert sends_per_poll <= 2.05, calls  # (a few of the sends are the handshake's)
    for s in specs:
        fid = s["flow_id"]
        assert done[fid]["event"] == "done"
        cli, srv = ends(tmp_path, fid, exp=1)
        cs, ss = cli.summary, srv.summary
        assert cs["status"] == ss["status"] == "ok", (cs["error"], ss["error"])
        assert cs["bytes_tx"] > 10_000_000
        assert cs["bytes_tx"] == ss["bytes_rx"] == cli.columns["app_bytes_tx"][-1] == srv.columns["app_bytes_rx"][-1]
        t = cli.columns["t_mono"]
        gaps = [b - a for a, b in zip(t, t[1:])]
        assert statistics.median(gaps) == pytest.approx(0.010, rel=0.2)
        # never short; late by what the machine keeps the loop waiting at the end (under strace, which
        # stops it at every send and poll: 1.569 s beside two busy loops and three test workers). The
        # timers served during the spin are the 10 ms rows above.
        assert 1.5 - 0.005 <= cs["duration"] < 1.5 + 0.25, cs["duration"]


def address(view: memoryview) -> int:
    return ctypes.addressof(ctypes.c_char.from_buffer(view))


def test_stream_buffers_are_page_aligned():
    """A bytearray's data starts 16 bytes into its page; the kernel's copy into such a buffer cost
    ~3x the CPU per byte of an aligned one here (TCP over lo, AMD EPYC): both buffers are mmaps."""
    loop = Loop()
    try:
        worker = flowend.Worker(loop, "/nonexistent", lambda event: None)
        assert address(worker.rxview) % mmap.PAGESIZE == 0
        assert len(worker.rxview) == flowend.RECV_SIZE
    finally:
        loop.close()
    assert address(flowend._SEND_BUF) % mmap.PAGESIZE == 0
    assert len(flowend._SEND_BUF) == flowend.SEND_CHUNK
    assert flowend._SEND_BUF[-256:] == bytes(range(256))  # filled pages, as the peers send
