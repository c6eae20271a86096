"""A polled stream end's turn (FlowEnd.send_burst, FlowEnd.recv_burst) on real sockets: a sender sends one
chunk a turn, however much room its socket has; a receiver reads until its socket is empty, past short
reads, at most RECV_TURN reads, and says when the peer closed."""

from __future__ import annotations

import socket
from types import SimpleNamespace

import pytest

from netesto.engine.kinds.flowend import RECV_TURN, SEND_CHUNK, FlowEnd


def end(view_size: int = 1024) -> SimpleNamespace:
    """What the turns use of a flow end: its counters and its worker's receive buffer."""
    return SimpleNamespace(tx=0, rx=0, worker=SimpleNamespace(rxview=memoryview(bytearray(view_size))))


def room(sock: socket.socket, force: int, plain: int) -> None:
    """Buffers of 8 chunks: past net.core.[wr]mem_max as root (SO_*BUFFORCE), else as far as it lets."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, force, 8 * SEND_CHUNK)
    except PermissionError:
        sock.setsockopt(socket.SOL_SOCKET, plain, 8 * SEND_CHUNK)


@pytest.fixture
def tcp_pair():
    """A connected loopback TCP pair (sender, receiver), both non-blocking, with room for several chunks."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        tx = socket.socket()
        room(tx, getattr(socket, "SO_SNDBUFFORCE", 32), socket.SO_SNDBUF)
        tx.connect(listener.getsockname())
        rx, _ = listener.accept()
    room(rx, getattr(socket, "SO_RCVBUFFORCE", 33), socket.SO_RCVBUF)
    if tx.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) < 2 * SEND_CHUNK:
        pytest.skip("the send buffer cannot hold two chunks here (net.core.wmem_max, not root)")
    tx.setblocking(False)
    rx.setblocking(False)
    yield tx, rx
    tx.close()
    rx.close()


def drain(sock: socket.socket) -> int:
    sock.setblocking(True)
    sock.settimeout(2.0)
    got = 0
    try:
        while True:
            chunk = sock.recv(1 << 20)
            if not chunk:
                return got
            got += len(chunk)
    except TimeoutError:
        return got


def test_a_sender_sends_one_chunk_a_turn_though_more_would_fit(tcp_pair):
    tx, rx = tcp_pair
    e = end()
    FlowEnd.send_burst(e, tx)  # type: ignore[arg-type]
    assert e.tx == SEND_CHUNK  # the buffers hold several: one went
    FlowEnd.send_burst(e, tx)  # type: ignore[arg-type]
    assert e.tx == 2 * SEND_CHUNK
    tx.shutdown(socket.SHUT_WR)
    assert drain(rx) == e.tx


def test_a_full_socket_ends_the_turn_with_nothing_sent(tcp_pair):
    tx, rx = tcp_pair
    e = end()
    with pytest.raises(BlockingIOError):
        while True:
            tx.send(bytes(SEND_CHUNK))  # fill it
    FlowEnd.send_burst(e, tx)  # type: ignore[arg-type]
    assert e.tx == 0


def test_a_receiver_reads_past_a_short_read_until_its_socket_is_empty():
    a, b = socket.socketpair()
    with a, b:
        b.setblocking(False)
        a.sendall(bytes(5 * 1024 + 100))  # five full reads of the 1 KiB buffer, then a short one
        e = end(1024)
        assert FlowEnd.recv_burst(e, b) is True  # type: ignore[arg-type]
        assert e.rx == 5 * 1024 + 100
        assert FlowEnd.recv_burst(e, b) is True  # type: ignore[arg-type]  # empty: nothing, no error
        assert e.rx == 5 * 1024 + 100


def test_a_receivers_turn_ends_after_recv_turn_reads():
    a, b = socket.socketpair()
    with a, b:
        b.setblocking(False)
        a.sendall(bytes((RECV_TURN + 3) * 512))
        e = end(512)
        assert FlowEnd.recv_burst(e, b) is True  # type: ignore[arg-type]
        assert e.rx == RECV_TURN * 512  # the others get their turn; the rest waits for the next
        assert FlowEnd.recv_burst(e, b) is True  # type: ignore[arg-type]
        assert e.rx == (RECV_TURN + 3) * 512


def test_a_receiver_sees_the_peers_close_after_its_data():
    a, b = socket.socketpair()
    with b:
        b.setblocking(False)
        a.sendall(bytes(3000))
        a.close()
        e = end(1024)
        assert FlowEnd.recv_burst(e, b) is False  # type: ignore[arg-type]
        assert e.rx == 3000

