"""TCP_CRR in C (``_crrloop``: the client's transactions, the server's accept) and its Python twin
(``NETESTO_PURE_PYTHON=1``): each end's counters agree with the other's and with the wire."""

from __future__ import annotations

import pytest

from netesto.engine.native import crrfast
from tests.engine.test_crr import crr_run
from tests.engine.test_engine import Server

pytestmark = pytest.mark.netns


@pytest.mark.parametrize("path, workers", [("C", 1), ("python", 1), ("C", 2)])
@pytest.mark.parametrize("close, req, reply", [("rst", 1, 1), ("server", 100, 3000), ("client", 1, 1)])
def test_crr_paths_count_what_went_over_the_wire(veth_pair, tmp_path, monkeypatch, path, workers, close, req, reply):
    """With 2 server workers the kernel hashes half the joins to the worker that does not own the flow:
    it serves them in C too, counting into the workers' shared table (LoadBoard.publish)."""
    if path == "C" and crrfast.ext is None:
        pytest.skip("the C extension is not built")
    monkeypatch.setenv("NETESTO_PURE_PYTHON", "1" if path == "python" else "0")  # both ends inherit it
    pair = veth_pair
    server = Server(pair, pair.b, pair.addr_b, tmp_path / "srv", "--workers", str(workers))
    try:
        cli, srv = crr_run(pair, server, tmp_path, "a-b-crr-0", crr_close=close, req=req, reply=reply)
    finally:
        server.events()
    assert cli["status"] == srv["status"] == "ok", (cli["error"], srv["error"])
    assert cli["rr_loop"] == path
    trans = cli["transactions"]
    assert trans > 100
    assert cli["connections"] == trans == srv["connections"] == srv["transactions"]
    assert cli["bytes_tx"] == srv["bytes_rx"] == req * trans
    assert cli["bytes_rx"] == srv["bytes_tx"] == reply * trans
    assert cli["latency_us"]["count"] == trans
    if path == "python" or close == "client":  # the server waits for the client's close: Python's JoinConn
        assert srv["joins_c"] == 0
    else:  # nearly every join brings its request: served in C, by whichever worker accepts it
        assert srv["joins_c"] >= 0.9 * trans, (srv["joins_c"], trans)


def test_crr_stopped_in_its_c_loop_keeps_exact_counts(veth_pair, tmp_path):
    """SIGTERM lands while the client runs its transactions in C: the flow ends with an error and its
    counters are what went over the wire (the server's differ by at most the transaction in flight)."""
    import signal
    import time

    from tests.engine.test_engine import ends, spec, start_client, wait_started

    if crrfast.ext is None:
        pytest.skip("the C extension is not built")
    pair = veth_pair
    server = Server(pair, pair.b, pair.addr_b, tmp_path / "srv", "--workers", "1")
    try:
        client = start_client(pair, pair.a, tmp_path, [spec(server, "a-b-crr-0", "TCP_CRR", dur=5.0, req=10)])
        wait_started(client, 1)
        time.sleep(0.7)
        client.send_signal(signal.SIGTERM)
        client.communicate(timeout=10)
        server.wait_done(1)
    finally:
        server.events()
    cli, srv = ends(tmp_path, "a-b-crr-0")
    c, s = cli.summary, srv.summary
    assert c["status"] == "error" and "stopped by SIGTERM" in c["error"], c["error"]
    assert c["rr_loop"] == "C" and c["transactions"] > 100
    assert 0 <= c["bytes_tx"] - s["bytes_rx"] <= 10 and 0 <= s["bytes_tx"] - c["bytes_rx"] <= 1
    assert s["transactions"] - 1 <= c["transactions"] <= s["transactions"]
    assert c["latency_us"]["count"] == c["transactions"]
    assert cli.columns["app_bytes_tx"][-1] == c["bytes_tx"]


@pytest.mark.parametrize("grace", [0.5, 0.0])
def test_a_transaction_under_way_at_the_tick_ends_in_c_with_its_tcp_info_or_is_left_open(grace):
    """The loop's timer comes due while a reply is 80 ms away: with a grace the C loop waits for it, keeps
    the connection's tcp_info for the sample (what Python's read_info would read), closes it and counts it
    (IDLE: the next transactions go on in C after the tick); without one, it leaves the connection open for
    the loop (OPEN), its transaction not counted. Loopback, a server process closing first (the C loop
    keeps the GIL: a thread of this process could not answer)."""
    import os
    import socket
    import struct
    import subprocess
    import sys
    import time
    from array import array

    from netesto.engine.sampling.records import CC_SLOT, INFO_LEN

    fast = crrfast.ext
    if fast is None:
        pytest.skip("the C extension is not built")
    server = subprocess.Popen([sys.executable, "-c", """import socket, time
listener = socket.create_server(("127.0.0.1", 0))
print(listener.getsockname()[1], flush=True)
conn, _ = listener.accept()
conn.recv(64)
time.sleep(0.08)
conn.sendall(b"r")
conn.close()
"""], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        st = array("q", [0]) * fast.CLIENT_STATE
        st[4] = -1  # no connection open on entry
        lat = array("q", [0]) * 16
        known = bytearray(INFO_LEN + CC_SLOT)
        deadline = time.monotonic() + 0.02  # due while the reply is on its way
        status = fast.crr_client("127.0.0.1", port, socket.AF_INET, 0, b"join+q", 1, 1, fast.WAIT_EOF, b"", 0, 0,
                                 deadline, st, lat, known, 1, INFO_LEN, grace)
    finally:
        server.wait(timeout=10)
    trans, fd, got, nlat = st[2], st[4], st[5], st[9]
    if grace:
        assert (status, trans, fd, nlat) == (fast.IDLE, 1, -1, 1)
        assert 0.07e9 < lat[0] < 0.5e9  # connect + request + the reply 80 ms later + close
        # struct tcp_info: tcpi_state is its first byte, tcpi_rto the u32 at 8, tcpi_snd_mss the one at 16
        assert known[0] in (1, 8), known[0]  # ESTABLISHED, or CLOSE_WAIT (the server's FIN in): before the close
        assert struct.unpack_from("I", known, 8)[0] > 0 and struct.unpack_from("I", known, 16)[0] > 0
    else:
        assert (status, trans, nlat) == (fast.OPEN, 0, 0) and fd >= 0 and got == 0
        assert known == bytearray(INFO_LEN + CC_SLOT)  # nothing read: Python reads it when it finishes
        os.close(fd)


def test_every_connection_of_the_c_client_has_the_flows_options_and_no_socket_outlives_its_call():
    """The C client makes each next connection's socket while the one before waits for its reply. Every
    connection still carries the flow's options (here SO_LINGER 0: the server sees each one end in a reset,
    never a FIN), and no socket made ahead outlives the call: this process holds no socket after it that it
    did not hold before (other threads of a test worker may close descriptors meanwhile). Loopback, a server
    process (the C loop keeps the GIL)."""
    import contextlib
    import os
    import socket
    import subprocess
    import sys
    import time
    from array import array

    from netesto.engine.sampling.records import CC_SLOT, INFO_LEN

    fast = crrfast.ext
    if fast is None:
        pytest.skip("the C extension is not built")

    def sockets() -> set[str]:
        held = set()
        for fd in os.listdir("/proc/self/fd"):
            with contextlib.suppress(FileNotFoundError):  # (closed meanwhile, or the listing's own descriptor)
                held.add(os.readlink(f"/proc/self/fd/{fd}"))
        return {link for link in held if link.startswith("socket:")}

    server = subprocess.Popen([sys.executable, "-c", """import socket
listener = socket.create_server(("127.0.0.1", 0))
listener.settimeout(1.0)
print(listener.getsockname()[1], flush=True)
ends = []
while True:
    try:
        conn, _ = listener.accept()
    except TimeoutError:
        break
    conn.settimeout(5.0)
    conn.recv(64)
    conn.sendall(b"r")
    try:
        ends.append("FIN" if conn.recv(64) == b"" else "DATA")
    except ConnectionResetError:
        ends.append("RST")
    conn.close()
print(" ".join(ends), flush=True)
"""], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        before = sockets()
        st = array("q", [0]) * fast.CLIENT_STATE
        st[4] = -1  # no connection open on entry
        lat = array("q", [0]) * 1000  # full (LATFULL) or the deadline (IDLE): either returns with none open
        known = bytearray(INFO_LEN + CC_SLOT)
        status = fast.crr_client("127.0.0.1", port, socket.AF_INET, 0, b"join+q", 1, 1, fast.RESET, b"", 0, 0,
                                 time.monotonic() + 0.3, st, lat, known, 1, INFO_LEN, 0.5)
        assert sockets() - before == set()
        ends = server.communicate(timeout=15)[0].split()
    finally:
        if server.poll() is None:
            server.kill()
    trans, conns = st[2], st[3]
    assert status in (fast.IDLE, fast.LATFULL) and trans == conns >= 5 and st[4] == -1
    assert ends == ["RST"] * trans


def test_the_c_accept_counts_each_join_to_its_own_session_when_sessions_alternate_in_one_call():
    """One crr_accept call takes six waiting joins: sessions A, B, A, A, an unknown one, and A with its
    request short. The joins of known sessions are served and counted to their own session (the
    session served last is kept between joins: a change of session must not count to the one before); the
    unknown join and the short one go back to Python with their bytes, nothing counted. Loopback, one process:
    every client has sent its join before the call."""
    import os
    import socket
    import time
    from array import array

    from netesto.engine.core import handshake as hs

    fast = crrfast.ext
    if fast is None:
        pytest.skip("the C extension is not built")
    a, b, unknown = b"A" * 8, b"B" * 8, b"U" * 8
    state = {a: array("q", [0]) * 4, b: array("q", [0]) * 4}
    sessions = {a: (state[a], 3, 2, True), b: (state[b], 3, 5, True)}  # (state, request, reply, close first)
    listener = socket.create_server(("127.0.0.1", 0), backlog=16)
    listener.setblocking(False)
    clients = []
    rest: list[tuple[int, bytes]] = []
    try:
        for session, request in ((a, 3), (b, 3), (a, 3), (a, 3), (unknown, 3), (a, 1)):
            c = socket.create_connection(listener.getsockname())
            c.sendall(hs.encode_join(session) + bytes(request))
            clients.append(c)
        time.sleep(0.05)  # every join queued, whole, before the call
        rest = fast.crr_accept(listener.fileno(), hs.JOIN_PREFIX, sessions)
        got = []
        for c in clients[:4]:  # the served ones: each reply, then the server's close
            c.settimeout(5)
            data = b""
            while chunk := c.recv(64):
                data += chunk
            got.append(len(data))
    finally:
        for c in clients:
            c.close()
        for fd, _ in rest:
            os.close(fd)
        listener.close()
    assert list(state[a]) == [9, 6, 3, 3]  # rx (3 requests), tx (3 replies of 2), transactions, connections
    assert list(state[b]) == [3, 5, 1, 1]
    assert got == [2, 5, 2, 2]
    assert sorted(len(data) for _, data in rest) == [16 + 1, 16 + 3]  # the short join, the unknown session's


def test_a_stop_raised_while_the_c_accept_holds_connections_for_python_is_never_swallowed():
    """A signal handler that raises (the server's stop) during a crr_accept call that has accepted a
    connection for Python goes up to the caller: that call used to drop the exception and hand the
    connection back, and the stop was lost for good (the handler raises once). The connection is
    closed. A blocking listener keeps the call in accept() until the timer's signal comes."""
    import signal
    import socket

    from netesto.engine.core import handshake as hs

    fast = crrfast.ext
    if fast is None:
        pytest.skip("the C extension is not built")

    class Stop(BaseException):
        pass

    def stop(signum: int, frame: object) -> None:
        raise Stop()

    listener = socket.create_server(("127.0.0.1", 0), backlog=4)
    hello = socket.create_connection(listener.getsockname())  # not a join: it is Python's
    hello.sendall(b"a hello")
    old = signal.signal(signal.SIGALRM, stop)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        with pytest.raises(Stop):
            fast.crr_accept(listener.fileno(), hs.JOIN_PREFIX, {})  # no deadline: a batch, blocking here
        hello.settimeout(5)
        assert hello.recv(64) == b""  # closed by the call
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        hello.close()
        listener.close()
