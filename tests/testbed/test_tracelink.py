"""The trace-driven link of the delay line, without a kernel: departures against Mahimahi's own loop."""

from __future__ import annotations

import random
import socket
import struct
import time
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netesto.errors import TestbedError
from netesto.linktrace import MTU, bytes_between, parse_trace
from netesto.testbed import nfqueue
from netesto.testbed.delaycontrol import send_control
from netesto.testbed.delaylinks import LinkSettings, TraceLink
from netesto.testbed.delayloop import DelayLine

from .test_delayline_loop import running, verdicts
from .test_delayline_units import packet_message

MS = 1_000_000


def mahimahi(times_ms: list[int], arrivals: list[tuple[int, int]], limit_bytes: int = 0) -> list[int | None]:
    """Departure (ns) of each ``(arrival ns, size)`` as mm-link's LinkQueue computes it: opportunities
    are burnt one by one up to each arrival (``rationalize``), a packet joins the queue after that;
    -1 for a packet the drop-tail queue refused (what is queued: not yet fully sent)."""
    period = times_ms[-1]
    out: list[int | None] = [None] * len(arrivals)
    queue: list[list[int]] = []  # [index, bytes still to send]
    nxt, base = 0, 0

    def rationalize(now: int | None) -> None:  # None: until the queue is empty
        nonlocal nxt, base
        while (base + times_ms[nxt]) * MS <= now if now is not None else queue:
            when = (base + times_ms[nxt]) * MS
            budget = MTU
            nxt += 1
            if nxt == len(times_ms):
                nxt, base = 0, base + period
            while budget > 0 and queue:
                head = queue[0]
                head[1] -= budget
                budget = 0
                if head[1] <= 0:
                    budget = -head[1]
                    out[head[0]] = when
                    queue.pop(0)

    for i, (t, size) in enumerate(arrivals):
        rationalize(t)
        queued = sum(arrivals[j][1] for j, _ in queue)
        if limit_bytes and queued + size > limit_bytes:
            out[i] = -1
            continue
        queue.append([i, size])
    rationalize(None)
    return out


def run_link(times_ms: list[int], arrivals: list[tuple[int, int]], limit_bytes: int = 0) -> list[int | None]:
    link = TraceLink(LinkSettings(), random.Random(1), times_ms, 0, limit_bytes=limit_bytes)
    got = [link.admit(t, size) for t, size in arrivals]
    return [-1 if d is None else d for d in got]


traces = st.lists(st.integers(0, 40), min_size=1, max_size=30).map(lambda gaps: [sum(gaps[: i + 1]) for i in range(len(gaps))]) \
    .filter(lambda t: t[-1] > 0)


@settings(max_examples=300, deadline=None)
@given(times=traces, gaps=st.lists(st.tuples(st.integers(0, 30 * MS), st.integers(40, 3 * MTU)), min_size=1, max_size=60),
       limit=st.sampled_from([0, 3000, 9000]))
def test_departures_are_mahimahis(times, gaps, limit) -> None:
    arrivals, t = [], 0
    for gap, size in gaps:
        t += gap
        arrivals.append((t, size))
    assert run_link(times, arrivals, limit) == mahimahi(times, arrivals, limit)


def test_a_backlog_leaves_at_every_opportunity_and_loops() -> None:
    times = [1, 1, 2, 5]  # two at 1 ms, one at 2, one at 5; loops every 5 ms
    got = run_link(times, [(0, MTU)] * 9)
    assert [d // MS for d in got] == [1, 1, 2, 5, 6, 6, 7, 10, 11]  # type: ignore[operator]


def test_big_and_small_packets_share_opportunities() -> None:
    # a 64 KB packet takes 44 opportunities (1036 bytes of the last); 700-byte ones fill the rest
    got = run_link([1], [(0, 65536), (0, 700), (0, 700), (0, 700)])
    assert [d // MS for d in got] == [44, 45, 45, 46]  # type: ignore[operator]
    # an opportunity unused while the queue is empty is lost; so is what is left of one
    got = run_link([1], [(0, 100), (5 * MS + 1, 100)])
    assert [d // MS for d in got] == [1, 6]  # type: ignore[operator]


def test_the_queue_drops_at_its_limit_in_packets() -> None:
    link = TraceLink(LinkSettings(), random.Random(1), [10], 0, limit_packets=2)
    assert [link.admit(0, MTU) is None for _ in range(4)] == [False, False, True, True]
    assert link.tail_dropped == 2 and link.stats.dropped == 2
    assert link.admit(10 * MS, MTU) is not None  # the first one left at 10 ms: room for one


def test_delay_is_added_after_the_queue_and_order_kept() -> None:
    link = TraceLink(LinkSettings(delay_ms=20), random.Random(1), [1], 0)
    first = link.admit(0, MTU)
    link.configure(LinkSettings(delay_ms=5))  # shorter from now on: never before the one ahead
    assert first == 21 * MS and link.admit(0, MTU) == 21 * MS


def test_bad_traces_refused() -> None:
    with pytest.raises(TestbedError, match="last timestamp"):
        TraceLink(LinkSettings(), random.Random(1), [0, 0], 0)


def sized_message(queue: int, packet_id: int, size: int) -> bytes:
    """A queued packet's message whose copy was cut at 28 bytes: NFQA_CAP_LEN says its length."""
    attrs = nfqueue._nla(nfqueue.NFQA_PACKET_HDR, struct.pack("!IHB", packet_id, 0x0800, 2))
    attrs += nfqueue._nla(nfqueue.NFQA_CAP_LEN, struct.pack("!I", size))
    attrs += nfqueue._nla(nfqueue.NFQA_PAYLOAD, b"\x45" + b"\0" * 27)
    return nfqueue._nfmsg(nfqueue.NFQNL_MSG_PACKET, queue, attrs)


def test_packet_lengths_parsed_from_cap_len_or_the_copy() -> None:
    data = sized_message(1, 7, 65226) + packet_message(2, 8)
    assert nfqueue.parse_sized(data, len(data)) == [(1, 7, -1, 65226), (2, 8, -1, 28)]


def test_a_queue_becomes_a_trace_link_through_the_control_socket(tmp_path) -> None:
    """The loop in this process: a backlog of 1500-byte packets sent to a 1-opportunity-per-2-ms
    trace comes out 2 ms apart, on the trace's instants; its queue drops what does not fit;
    turned back into a plain link, packets leave at once."""
    trace = tmp_path / "t.trace"
    trace.write_text("2\n")
    ours, kernel = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    gso: list[tuple[int, bool]] = []
    nfq = SimpleNamespace(sock=ours, close=ours.close, stamper=None, set_gso=lambda q, w: gso.append((q, w)))
    control = str(tmp_path / "control.sock")
    line = DelayLine(nfq, {1: LinkSettings()}, control=control)  # type: ignore[arg-type]
    ours.setblocking(False)
    got: dict[int, int] = {}
    with running(line, kernel):
        epoch = time.monotonic_ns()
        reply = send_control(control, {"op": "trace", "queue": 1, "file": str(trace), "epoch_ns": epoch,
                                       "limit_packets": 5, "name": "t"})
        assert reply["ok"] and reply["settings"]["opportunities"] == 1, reply  # type: ignore[index]
        sent = time.monotonic_ns() - epoch  # they arrive after it: the first leaves at an opportunity after it
        kernel.send(b"".join(sized_message(1, pid, MTU) for pid in range(1, 8)))  # one read: they arrive together
        kernel.settimeout(2)
        while len(got) < 7:
            for _q, pid, verdict in verdicts(kernel.recv(65536)):
                got[pid] = verdict if verdict == nfqueue.NF_DROP else time.monotonic_ns() - epoch
        back = send_control(control, {"op": "trace", "queue": 1, "file": None})
        kernel.send(packet_message(1, 8))
        for _q, pid, verdict in verdicts(kernel.recv(65536)):
            got[pid] = verdict
        read = send_control(control, {"op": "settings", "queue": 1})
    left = [got[p] for p in range(1, 6)]
    # one an opportunity, each never before its own: the k-th after the first's, which is after the send
    # (not read from the first's release: a loop that got no CPU for 3.7 ms released it at the 2nd after)
    first = sent // (2 * MS) + 1
    assert all(t >= (first + k) * 2 * MS for k, t in enumerate(left)), (sent, left)
    assert left == sorted(left) and left[-1] < 500 * MS, left
    assert got[6] == got[7] == nfqueue.NF_DROP  # the queue held five
    assert got[8] == nfqueue.NF_ACCEPT and back["ok"] and "trace" not in read["settings"]  # type: ignore[operator]
    assert gso == [(1, False), (1, True)]


def test_bytes_between_counts_what_a_backlogged_link_delivers() -> None:
    trace = parse_trace("1\n1\n3\n10\n", "x")
    arrivals = [(0, MTU)] * 40
    departures = run_link(list(trace.times), arrivals)
    for start in range(0, 30, 3):
        sent = sum(MTU for d in departures if d is not None and start * MS < d <= (start + 7) * MS)
        assert sent == bytes_between(trace, start, start + 7)
