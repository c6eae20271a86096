"""The delay line's loop in this process, its netlink socket a socketpair: stamps decide, the clock releases."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from types import SimpleNamespace
from typing import Iterator

from netesto.testbed import nfqueue
from netesto.testbed.delaycontrol import send_control
from netesto.testbed.delayloop import DelayLine, LinkSettings

from .test_delayline_units import packet_message


def verdicts(data: bytes) -> list[tuple[int, int, int]]:
    """(queue, packet id, verdict) of each verdict message in a datagram the loop sent."""
    out = []
    off = 0
    while off + 16 <= len(data):
        length, mtype = struct.unpack_from("=IH", data, off)
        assert mtype == (nfqueue.NFNL_SUBSYS_QUEUE << 8) | nfqueue.NFQNL_MSG_VERDICT
        (queue,) = struct.unpack_from("!H", data, off + 18)
        verdict, packet_id = struct.unpack_from("!II", data, off + 24)
        out.append((queue, packet_id, verdict))
        off += (length + 3) & ~3
    return out


@contextlib.contextmanager
def running(line: DelayLine, kernel: socket.socket) -> Iterator[None]:
    """``line``'s loop in a thread while the block runs; then stopped, joined, closed (``kernel`` too)."""
    thread = threading.Thread(target=line.run)
    thread.start()
    try:
        yield
    finally:
        line.running = False
        line.wake_w.send(b"\0")
        thread.join(timeout=10)
        line.close()
        kernel.close()
    assert not thread.is_alive()


def test_each_packet_held_from_its_own_stamp(tmp_path) -> None:
    ours, kernel = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    nfq = SimpleNamespace(sock=ours, close=ours.close, stamper=None)
    control = str(tmp_path / "control.sock")
    line = DelayLine(nfq, {1: LinkSettings(delay_ms=20), 2: LinkSettings(delay_ms=20, loss=1.0)},  # type: ignore[arg-type]
                     control=control)
    ours.setblocking(False)
    got: dict[int, tuple[int, int]] = {}
    with running(line, kernel):
        start = time.monotonic_ns()
        real = time.time_ns()
        ago = real - 8_000_000  # arrived 8 ms ago: due 12 ms from now
        kernel.send(packet_message(1, 1, (ago // 10**9, ago % 10**9 // 1000)))
        kernel.send(packet_message(1, 2))  # no stamp: held from when the loop read it
        tai = real + 37 * 10**9  # a stamp from another clock (a TAI departure time): held from the read
        kernel.send(packet_message(1, 3, (tai // 10**9, tai % 10**9 // 1000)))
        kernel.send(packet_message(2, 4, (real // 10**9, real % 10**9 // 1000)))  # loss 1: dropped at once
        kernel.settimeout(12)
        while len(got) < 4:
            data = kernel.recv(65536)
            at = time.monotonic_ns() - start
            for _queue, packet_id, verdict in verdicts(data):
                got[packet_id] = (verdict, at)
        stats = send_control(control, {"op": "stats"})["stats"]
    # dropped as read, not held: before packets 2 and 3, read before it and held 20 ms from their reads (not
    # before packet 1 as such: a loop kept off its CPU for 570 ms in a busy run read all four when 1 was due)
    assert got[4][0] == nfqueue.NF_DROP and got[4][1] <= min(got[2][1], got[3][1]), got
    assert got[1][0] == nfqueue.NF_ACCEPT and got[1][1] >= 12_000_000
    assert got[2][0] == nfqueue.NF_ACCEPT and got[2][1] >= 20_000_000
    # held from its read, not to its stamp 37 s ahead (a busy runner once kept the loop off its CPU 1.16 s)
    assert got[3][0] == nfqueue.NF_ACCEPT and 20_000_000 <= got[3][1] < 10_000_000_000
    assert stats["early"] == 0 and stats["held"] == 3 and stats["dropped"] == 1  # type: ignore[index]
    assert stats["unstamped"] == 1 and stats["capped"] == 1 and stats["packets"] == 4  # type: ignore[index]
    assert stats["queues"]["1"]["released"] == 3 and stats["queues"]["2"]["dropped"] == 1  # type: ignore[index]


def test_a_control_socket_with_a_long_path_answers(tmp_path) -> None:
    """A control socket whose path fits an AF_UNIX address with no room for the reply socket's suffix
    beside it (a pytest-xdist worker's tmp_path came to that) still answers; no reply socket is left."""
    ours, kernel = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    nfq = SimpleNamespace(sock=ours, close=ours.close, stamper=None)
    deep = tmp_path / ("d" * max(1, 100 - len(str(tmp_path)) - len("/control.sock") - 1))
    deep.mkdir()
    control = str(deep / "control.sock")
    assert 95 <= len(control) <= 107
    line = DelayLine(nfq, {1: LinkSettings(delay_ms=20)}, control=control)  # type: ignore[arg-type]
    with running(line, kernel):
        reply = send_control(control, {"op": "settings", "queue": 1})
    assert reply["ok"] and reply["settings"]["delay_ms"] == 20, reply  # type: ignore[index]
    assert sorted(p.name for p in deep.iterdir()) == []  # (the loop removed its own socket on close)
