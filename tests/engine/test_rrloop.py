"""The C loop of many TCP_RR flow ends (``_rrloop`` through ``rrgroup.RRGroup``) on socket pairs in one process.

Each pair's client end and server end are both members of one group, so what
one end counts is checked against the other's, exactly (one request may be in
flight). The flow ends here are the group's side of the hand-off only (their
counters, latencies and ``rr_left``); real flows are in test_rrloop_engine.py.
"""

from __future__ import annotations

import errno
import os
import signal
import socket
import statistics
import struct
import time
from array import array

import pytest

from netesto.engine.kinds import rrgroup
from netesto.engine.native import fastloop
from netesto.engine.core.loop import IN, Loop

rr = fastloop.rrloop
fast = fastloop.ext
pytestmark = pytest.mark.skipif(rr is None,
                                reason="netesto.engine.native._rrloop is not built or NETESTO_PURE_PYTHON is set")


def test_the_group_finds_fastloops_sample_api():
    """``_rrloop`` imports ``_fastloop``'s capsule by the extension's full name (``SAMPLE_API_NAME`` in
    ``_loops.h``): a name left behind by a move would leave the group loop without its members' hot rows."""
    assert rr.hot()


class End:
    """One end's state as RRClient/RRServer keep it; ``left`` records the group's hand-offs."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        sock.setblocking(False)
        self.fd = sock.fileno()
        self.got = self.tx = self.rx = self.trans = 0
        self.t0 = time.perf_counter_ns()
        self.rr_slot = -1
        self.lat_raw: array[int] = array("q")
        self.left: list[tuple[int, int, int]] = []

    def fold_latency(self) -> None:
        raise AssertionError("not expected with these few latencies")

    def rr_left(self, status: int, err: int, left: int) -> None:
        self.left.append((status, err, left))


def _tcp_pair() -> tuple[socket.socket, socket.socket]:
    lst = socket.create_server(("127.0.0.1", 0))
    a = socket.create_connection(lst.getsockname())
    b, _ = lst.accept()
    lst.close()
    for s in (a, b):
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return a, b


def _flows(group: rrgroup.RRGroup, n: int, req: int = 1, reply: int = 1) -> list[tuple[End, End]]:
    """``n`` client/server pairs in the group, each client's first request out."""
    out = []
    for _ in range(n):
        a, b = _tcp_pair()
        client, server = End(a), End(b)
        a.send(bytes(req))
        client.tx = req
        group.join(client, False, req, reply)
        group.join(server, True, req, reply)
        out.append((client, server))
    return out


def _agree(client: End, server: End, req: int = 1, reply: int = 1) -> None:
    """What one end counted is what the other did, a request in flight at most; a latency per transaction."""
    assert len(client.lat_raw) == client.trans
    assert server.trans in (client.trans, client.trans + 1)
    assert client.tx == req * (client.trans + 1)
    assert server.rx == req * server.trans + server.got <= client.tx
    assert server.tx == reply * server.trans
    assert client.rx == reply * client.trans + client.got <= server.tx


def _close(flows: list[tuple[End, End]]) -> None:
    for c, s in flows:
        c.sock.close()
        s.sock.close()


def test_members_are_served_in_turn_and_both_ends_agree():
    loop = Loop()
    group = rrgroup.group_of(loop, rr)
    flows = _flows(group, 8)
    assert loop.waiter == group.wait
    group.wait(time.monotonic() + 0.3)  # no timer, nothing else: the deadline ends the call
    counts = [c.trans for c, _ in flows]
    assert min(counts) > 100, counts
    # one transaction outstanding each and one loop serving them all in turn: equal shares
    assert max(counts) - min(counts) <= 0.05 * statistics.mean(counts) + 2, counts
    for c, s in flows:
        _agree(c, s)
        assert all(0 < x < 300_000_000 for x in c.lat_raw)
        assert not c.left and not s.left
    _close(flows)


def test_returns_when_the_loops_own_socket_is_ready():
    loop = Loop()
    group = rrgroup.group_of(loop, rr)
    flows = _flows(group, 2)
    r, w = os.pipe()
    seen = []
    loop.register(r, IN, lambda events: seen.append(os.read(r, 10)))
    loop.call_later(0.1, lambda: os.write(w, b"x"))
    loop.call_later(5.0, lambda: seen.append(b"late"))
    t = time.monotonic()
    loop.run(lambda: bool(seen))
    assert seen == [b"x"] and time.monotonic() - t < 2.0
    assert all(c.trans > 10 for c, _ in flows)  # served until then
    os.close(r)
    os.close(w)
    _close(flows)


def _running(n: int, gone: int) -> tuple[rrgroup.RRGroup, list[tuple[End, End]], End, End]:
    """``n`` pairs served a while; then pair ``gone``'s server end leaves the group (the test ends it)."""
    group = rrgroup.group_of(Loop(), rr)
    flows = _flows(group, n)
    group.wait(time.monotonic() + 0.05)
    client, server = flows[gone]
    group.leave(server)
    return group, flows, client, server


def test_an_ending_member_is_handed_back_and_the_others_keep_running():
    group, flows, c0, s0 = _running(4, 0)  # the server end of pair 0 ends: it half-closes (EOF at the client)
    _agree(c0, s0)
    s0.sock.shutdown(socket.SHUT_WR)
    before = [c.trans for c, _ in flows]
    while not c0.left:
        group.wait(time.monotonic() + 0.05)
    assert c0.left == [(rr.EOF, 0, 0)] and c0.rr_slot == -1 and c0 not in group.members.values()
    assert c0.trans == s0.trans and c0.rx == s0.tx  # every reply sent before the end, and nothing else
    assert len(c0.lat_raw) == c0.trans and c0.tx == c0.trans + 1
    group.wait(time.monotonic() + 0.1)
    for (c, s), n in list(zip(flows, before))[1:]:
        assert c.trans > n + 10 and not c.left
        _agree(c, s)
    _close(flows)


def test_a_reset_is_an_error_with_its_errno():
    group, flows, c1, s1 = _running(3, 1)
    s1.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s1.sock.close()  # RST
    while not c1.left:
        group.wait(time.monotonic() + 0.05)
    status, err, _ = c1.left[0]
    assert (status, err) == (rr.ERROR, errno.ECONNRESET)
    assert len(c1.lat_raw) == c1.trans > 0
    trans = flows[0][0].trans
    group.wait(time.monotonic() + 0.05)
    assert flows[0][0].trans > trans and len(group.members) == 4
    _close(flows)


def test_a_partial_reply_is_handed_back_with_what_is_left():
    loop = Loop()
    group = rrgroup.group_of(loop, rr)
    a, b = _tcp_pair()
    b.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    server = End(b)
    group.join(server, True, 1, 65536)
    a.send(bytes(20))  # 20 requests; the client reads none of the replies
    while not server.left:
        group.wait(time.monotonic() + 0.05)
    status, _, left = server.left[0]
    assert status == rr.PARTIAL and left > 0
    assert server.trans == 20 and server.rx == 20
    assert server.tx + left == 20 * 65536  # sent plus left: every reply, counted exactly
    a.close()
    b.close()


def _big_reply(loop: Loop) -> tuple[End, socket.socket, int]:
    """A client member whose reply (three reads and more of ``rr.MAX_MESSAGE``) is all in its socket at once:
    what its peer (not a member) sends comes to it in one go, so no more data comes after its first read."""
    group = rrgroup.group_of(loop, rr)
    a, b = _tcp_pair()
    a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)  # (room for all of it)
    reply = 3 * rr.MAX_MESSAGE + 123
    a.send(bytes(1))
    assert b.recv(10) == bytes(1)
    b.sendall(bytes(reply))
    while len(a.recv(reply + 1, socket.MSG_PEEK)) < reply:  # (all of it arrived)
        time.sleep(0.001)
    client = End(a)
    client.tx = 1
    group.join(client, False, 1, reply)
    return client, b, reply


def test_a_reply_bigger_than_one_read_is_read_whole_without_more_data():
    """The members' sockets are edge-triggered: the rest of a reply is read in the rounds after its first
    read, though no more data comes to wake epoll for it."""
    loop = Loop()
    client, b, reply = _big_reply(loop)
    loop.rr_group.wait(time.monotonic() + 0.1)
    assert client.trans == 1 and client.rx == reply and len(client.lat_raw) == 1
    assert b.recv(10) == bytes(1)  # its next request went out
    client.sock.close()
    b.close()


def test_a_reply_left_half_read_at_a_return_is_read_on_in_the_next_call():
    """The loop returns (its own epoll fd is ready) after the first read of a big reply: the next call goes on
    with what is left, from the table's MORE, with no new data and no event."""
    loop = Loop()
    r, w = os.pipe()
    loop.register(r, IN, lambda events: None)
    os.write(w, b"x")  # ready in the first round: the call returns after it
    client, b, reply = _big_reply(loop)
    group = loop.rr_group
    group.wait(time.monotonic() + 1.0)
    assert 0 < client.rx < reply and client.trans == 0
    assert group.table[client.rr_slot * group.fields + rr.MORE] == 1
    os.read(r, 1)
    group.wait(time.monotonic() + 0.1)
    assert client.trans == 1 and client.rx == reply
    assert b.recv(10) == bytes(1)
    os.close(r)
    os.close(w)
    client.sock.close()
    b.close()


def test_a_close_that_came_with_the_last_reply_is_seen():
    """Edge-triggered, epoll announces a reply and the peer's close that came after it once: the loop reads
    on to the EOF (and hands the flow end back) instead of waiting for an event that will not come."""
    loop = Loop()
    group = rrgroup.group_of(loop, rr)
    a, b = _tcp_pair()
    a.send(bytes(1))
    client = End(a)
    client.tx = 1
    group.join(client, False, 1, 1)
    assert b.recv(10) == bytes(1)
    b.send(bytes(1))  # its reply, then the close, both in before the loop looks
    b.shutdown(socket.SHUT_WR)
    time.sleep(0.05)
    group.wait(time.monotonic() + 1.0)
    assert client.left == [(rr.EOF, 0, 0)] and client.trans == 1 and client.rx == 1
    a.close()
    b.close()


def test_full_latency_buffers_return_and_lose_nothing(monkeypatch):
    monkeypatch.setattr(rrgroup, "LAT_SLOT", 4)
    loop = Loop()
    group = rrgroup.group_of(loop, rr)
    flows = _flows(group, 2)
    calls = 0
    deadline = time.monotonic() + 0.2
    while time.monotonic() < deadline:
        group.wait(deadline)
        calls += 1
    assert calls > 10  # a return each 4 latencies of a member
    for c, s in flows:
        _agree(c, s)
    _close(flows)


def test_the_table_grows_past_its_first_size():
    loop = Loop()
    group = rrgroup.group_of(loop, rr)
    flows = _flows(group, rrgroup.SLOTS + 3)
    group.wait(time.monotonic() + 0.2)
    for c, s in flows:
        assert c.trans > 5
        _agree(c, s)
    _close(flows)


def test_a_signal_handler_exception_leaves_exact_counters():
    loop = Loop()
    group = rrgroup.group_of(loop, rr)
    flows = _flows(group, 4)

    class Stop(BaseException):
        pass

    def on_alarm(signum, frame):
        raise Stop()

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, 0.2)
    try:
        with pytest.raises(Stop):
            while True:
                group.wait(float("inf"))  # no deadline: the exception ends it (or a full latency buffer)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    for c, s in flows:
        assert c.trans > 10
        _agree(c, s)
    _close(flows)


def _solo_pair() -> tuple[socket.socket, socket.socket]:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 0, 1000))
    return a, b


def test_solo_client_holds_the_next_request_at_the_deadline():
    """``rr_client`` with idle: at a due timer the reply is in and no request is out (the loop's timers hold no
    transaction)."""
    a, b = _solo_pair()
    a.send(bytes(1))  # the first request
    st = array("q", [0, 0, 1, 0, time.perf_counter_ns(), 0, 0])  # got, rx, tx, trans, t0, nlat, sent
    lat = array("q", [0]) * 64
    b.send(bytes(5))  # its reply and four more
    status = fast.rr_client(a.fileno(), 1, 1, time.monotonic() - 1, st, lat, True)  # a deadline already past
    assert status == fast.IDLE
    assert list(st[:4]) == [0, 1, 1, 1] and st[5] == 1 and lat[0] > 0  # one reply in, its latency, no request
    assert b.recv(10) == bytes(1)  # only the first request went out
    a.send(bytes(1))  # what the flow's _resume does
    st[2] += 1
    status = fast.rr_client(a.fileno(), 1, 1, float("inf"), st, lat, True)
    assert status == fast.AGAIN  # the four other replies, a request after each, then nothing within 1 ms
    assert list(st[:4]) == [0, 5, 6, 5] and st[5] == 4
    assert b.recv(10) == bytes(5)
    a.close()
    b.close()
