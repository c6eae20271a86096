"""The C loops of a solo TCP_RR flow (``_fastloop``): the functions on socketpairs, real flows both ways."""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from array import array

import pytest

from netesto.engine.native import fastloop
from netesto.raw.nflow import read_flow
from tests.engine.test_engine import (Server, ends, run_client, spec, start_client, terminal,
                                      wait_for_summary, wait_started)

needs_ext = pytest.mark.skipif(
    not fastloop.AVAILABLE,
    reason="netesto.engine.native._fastloop is not built (python3 setup.py build_ext --inplace) "
           "or NETESTO_PURE_PYTHON is set",
)
INF = float("inf")


def _pair(rcvtimeo_us: int = 1000) -> tuple[socket.socket, socket.socket]:
    """A blocking stream socketpair; ``a`` (the side under test) with SO_RCVTIMEO."""
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", rcvtimeo_us // 1_000_000,
                                                                      rcvtimeo_us % 1_000_000))
    return a, b


def _drain(sock: socket.socket) -> bytes:
    sock.setblocking(False)
    out = bytearray()
    try:
        while chunk := sock.recv(1 << 16):
            out += chunk
    except BlockingIOError:
        pass
    sock.setblocking(True)
    return bytes(out)


def _lat(n: int) -> array:
    return array("q", [0]) * n


def _client_state(t0: int = 0) -> array:
    return array("q", [0, 0, 0, 0, t0, 0, 0])  # got, rx, tx, trans, t0, nlat, sent


@needs_ext
def test_client_runs_queued_replies_then_returns_on_eagain():
    ext = fastloop.ext
    a, b = _pair()
    with a, b:
        b.sendall(bytes(2000 * 5))  # five replies waiting
        st, lat = _client_state(time.perf_counter_ns()), _lat(64)
        status = ext.rr_client(a.fileno(), 100, 2000, INF, st, lat)
        assert status == ext.AGAIN  # the sixth reply never came within 1 ms
        got, rx, tx, trans, t0, nlat, _ = st
        assert (got, rx, tx, trans, nlat) == (0, 10_000, 500, 5, 5)
        assert all(x >= 0 for x in lat[:5]) and t0 > 0
        # the latencies are on perf_counter_ns's clock: t0 advanced to the last reply's instant
        assert t0 <= time.perf_counter_ns()
        assert _drain(b) == bytes(500)  # five zero-filled requests


@needs_ext
def test_client_partial_reply_across_calls_and_eof():
    ext = fastloop.ext
    a, b = _pair()
    with a, b:
        b.sendall(bytes(150))  # one reply of 100 and half of the next
        st, lat = _client_state(), _lat(16)
        assert ext.rr_client(a.fileno(), 1, 100, INF, st, lat) == ext.AGAIN
        assert list(st[:4]) == [50, 150, 1, 1] and st[5] == 1
        b.sendall(bytes(50))
        b.shutdown(socket.SHUT_WR)
        assert ext.rr_client(a.fileno(), 1, 100, INF, st, lat) == ext.EOF
        assert list(st[:4]) == [0, 200, 2, 2] and st[5] == 1


@needs_ext
def test_client_stops_on_full_latency_buffer_and_deadline():
    ext = fastloop.ext
    a, b = _pair()
    with a, b:
        b.sendall(bytes(10))
        st, lat = _client_state(), _lat(3)
        assert ext.rr_client(a.fileno(), 1, 1, INF, st, lat) == ext.LATFULL
        assert st[3] == 3 and st[5] == 3
        # a deadline in the past: one transaction (a request is out again), then back to the loop
        assert ext.rr_client(a.fileno(), 1, 1, time.monotonic() - 1, st, lat) == ext.DEADLINE
        assert st[3] == 4 and st[5] == 1 and st[2] == 4


@needs_ext
def test_client_returns_a_partial_request_to_python():
    ext = fastloop.ext
    a, b = _pair()
    with a, b:
        a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", 0, 20_000))
        b.sendall(bytes(1))  # one reply; b never reads the 64 KiB request that follows
        st = _client_state()
        assert ext.rr_client(a.fileno(), 65536, 1, INF, st, _lat(8)) == ext.PARTIAL
        got, rx, tx, trans, _, nlat, sent = st
        assert (got, rx, trans, nlat) == (0, 1, 1, 1)
        assert tx == 0 and 0 < sent < 65536  # the caller sends the rest, then counts the request
        assert len(_drain(b)) == sent


@needs_ext
def test_client_error_raises_oserror_with_state_written_back():
    ext = fastloop.ext
    a, b = _pair()
    with a:
        b.sendall(bytes(2))
        b.close()  # the replies stay readable; the next request hits a closed peer
        st = _client_state()
        with pytest.raises(BrokenPipeError):
            ext.rr_client(a.fileno(), 1, 1, INF, st, _lat(8))
        # the first reply completed a transaction (and its latency); the next request failed, uncounted
        assert st[3] == 1 and st[1] == 1 and st[2] == 0 and st[5] == 1


@needs_ext
def test_a_signal_handler_exception_stops_a_blocked_call():
    ext = fastloop.ext

    class Stop(Exception):
        pass

    def on_alarm(signum, frame):
        raise Stop()

    a, b = _pair(rcvtimeo_us=5_000_000)  # would block 5 s without the signal
    old = signal.signal(signal.SIGALRM, on_alarm)
    try:
        with a, b:
            b.sendall(bytes(3))
            st = _client_state()
            signal.setitimer(signal.ITIMER_REAL, 0.2)
            t0 = time.monotonic()
            with pytest.raises(Stop):
                ext.rr_client(a.fileno(), 1, 1, INF, st, _lat(8))
            assert time.monotonic() - t0 < 4
            assert st[3] == 3 and st[5] == 3  # what was done before the signal is kept
            st2 = array("q", [0, 0, 0, 0, 0])
            signal.setitimer(signal.ITIMER_REAL, 0.2)
            with pytest.raises(Stop):
                ext.rr_server(a.fileno(), 1, 1, INF, st2)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@needs_ext
def test_server_answers_queued_and_split_requests():
    ext = fastloop.ext
    a, b = _pair()
    with a, b:
        b.sendall(bytes(100 * 3 + 40))  # three requests and part of a fourth
        st = array("q", [0, 0, 0, 0, 0])  # got, rx, tx, trans, pending
        assert ext.rr_server(a.fileno(), 100, 2000, INF, st) == ext.AGAIN
        assert list(st) == [40, 340, 6000, 3, 0]
        assert _drain(b) == bytes(6000)
        b.sendall(bytes(60))
        b.shutdown(socket.SHUT_WR)
        assert ext.rr_server(a.fileno(), 100, 2000, INF, st) == ext.EOF
        assert list(st[:4]) == [0, 400, 8000, 4]
        assert _drain(b) == bytes(2000)


@needs_ext
def test_server_returns_a_partial_reply_to_python():
    ext = fastloop.ext
    a, b = _pair()
    with a, b:
        a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", 0, 20_000))
        b.sendall(bytes(64))  # 64 requests of one byte, 64 KiB replies each; b never reads
        st = array("q", [0, 0, 0, 0, 0])
        assert ext.rr_server(a.fileno(), 1, 65536, INF, st) == ext.PARTIAL
        got, rx, tx, trans, pending = st
        assert got == 0 and rx == 64 and trans == 64
        assert pending > 0 and tx + pending == 64 * 65536  # every transaction's reply is sent or pending


@needs_ext
def test_bad_arguments_raise():
    ext = fastloop.ext
    with pytest.raises(ValueError):
        ext.rr_client(0, 70_000, 1, INF, _client_state(), _lat(8))
    with pytest.raises(ValueError):
        ext.rr_client(0, 1, 1, INF, array("q", [0]), _lat(8))
    with pytest.raises(ValueError):
        ext.rr_server(0, 1, 70_000, INF, _lat(5))
    with pytest.raises(BufferError):
        ext.rr_server(0, 1, 1, INF, b"\0" * 40)  # read-only


def test_pure_python_switch():
    code = "from netesto.engine.native import fastloop; print(fastloop.AVAILABLE, fastloop.PATH)"
    env = dict(os.environ, NETESTO_PURE_PYTHON="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "python"]


# Real flows between two namespaces, through the C loops and through the Python ones.

PATHS = [pytest.param("C", marks=needs_ext), "python"]


def use_path(request, monkeypatch) -> str:
    """The loops ``request.param`` names ("C" or "python") for the engine processes started after
    (the environment reaches the server and the client)."""
    if request.param == "python":
        monkeypatch.setenv("NETESTO_PURE_PYTHON", "1")
    else:
        monkeypatch.delenv("NETESTO_PURE_PYTHON", raising=False)
    return request.param


@pytest.fixture(params=PATHS)
def path(request, monkeypatch):
    """Which loop the engine processes run."""
    return use_path(request, monkeypatch)


@pytest.mark.netns
@pytest.mark.parametrize("req,reply", [(1, 1), (100, 2000), (65536, 65536)])
def test_solo_rr_flow_both_ends_agree(veth_pair, tmp_path, path, req, reply):
    pair = veth_pair
    server = Server(pair, pair.b, pair.addr_b, tmp_path / "srv")
    code, events = run_client(pair, pair.a, tmp_path,
                              [spec(server, "a-b-rr-0", "TCP_RR", dur=1.5, req=req, reply=reply)])
    assert code == 0, events
    cli, srv = ends(tmp_path, "a-b-rr-0")
    cs, ss = cli.summary, srv.summary
    assert cs["status"] == ss["status"] == "ok", (cs["error"], ss["error"])
    assert cs["rr_loop"] == ss["rr_loop"] == path  # both ends ran the loop asked for
    assert cs["transactions"] == ss["transactions"] > 100
    assert cs["bytes_tx"] == ss["bytes_rx"] == req * cs["transactions"]
    assert cs["bytes_rx"] == ss["bytes_tx"] == reply * cs["transactions"]
    assert cs["latency_us"]["count"] == sum(cli.columns["lat_count"]) == cs["transactions"]
    assert cli.columns["transactions"][-1] == cs["transactions"]
    lat = cs["latency_us"]
    assert 0 < lat["min"] <= lat["p50"] <= lat["max"]
    # the latency is one transaction's time: consistent with the rate (one transaction in flight)
    assert cs["tps"] == pytest.approx(1e6 / lat["mean"], rel=0.3)
    server.events()


@pytest.mark.netns
def test_server_killed_mid_flow_is_reported_and_data_kept(veth_pair, tmp_path, path):
    pair = veth_pair
    server = Server(pair, pair.b, pair.addr_b, tmp_path / "srv")
    specs = [spec(server, "a-b-rr-0", "TCP_RR", dur=4.0)]
    client = start_client(pair, pair.a, tmp_path, specs)
    early = wait_started(client, 1)
    time.sleep(1.0)
    server.proc.kill()
    out, _ = client.communicate(timeout=20)
    assert client.returncode == 1
    ev = terminal(early + [json.loads(line) for line in out.splitlines()])["a-b-rr-0"]
    assert ev["event"] == "error" and " after " in ev["message"], ev
    flow = read_flow(tmp_path / "cli" / "0" / "flows" / "a-b-rr-0.client.nflow")
    summary = flow.summary
    assert not flow.truncated and summary["status"] == "error" and summary["error"] == ev["message"]
    assert summary["rr_loop"] == path
    assert flow.rows > 50 and summary["transactions"] > 100  # what was measured before the kill is kept
    assert summary["latency_us"]["count"] == summary["transactions"]
    assert 0.8 < summary["duration"] < 3.9


@pytest.mark.netns
def test_sigterm_stops_a_spinning_client_promptly(veth_pair, tmp_path, path):
    pair = veth_pair
    server = Server(pair, pair.b, pair.addr_b, tmp_path / "srv")
    specs = [spec(server, "a-b-rr-0", "TCP_RR", dur=30.0)]
    client = start_client(pair, pair.a, tmp_path, specs)
    early = wait_started(client, 1)
    time.sleep(1.0)
    client.send_signal(signal.SIGTERM)
    out, _ = client.communicate(timeout=10)  # the flow would run 30 s without the stop
    assert client.returncode == 1
    ev = terminal(early + [json.loads(line) for line in out.splitlines()])["a-b-rr-0"]
    assert "stopped by SIGTERM after" in ev["message"], ev
    flow = read_flow(tmp_path / "cli" / "0" / "flows" / "a-b-rr-0.client.nflow")
    summary = flow.summary
    assert not flow.truncated and summary["status"] == "error" and flow.rows > 50
    assert summary["rr_loop"] == path and summary["duration"] < 10
    assert summary["transactions"] > 100 and summary["latency_us"]["count"] == summary["transactions"]
    # the server's spinning end saw the connection go and wrote its data too
    srv_path = tmp_path / "srv" / "0" / "flows" / "a-b-rr-0.server.nflow"
    wait_for_summary(srv_path)
    srv = read_flow(srv_path).summary
    assert srv["status"] == "error" and srv["rr_loop"] == path
    assert srv["transactions"] >= summary["transactions"]
    server.events()


@pytest.mark.netns
def test_sigterm_stops_a_spinning_server_promptly(veth_pair, tmp_path, path):
    pair = veth_pair
    server = Server(pair, pair.b, pair.addr_b, tmp_path / "srv")
    specs = [spec(server, "a-b-rr-0", "TCP_RR", dur=30.0)]
    client = start_client(pair, pair.a, tmp_path, specs)
    wait_started(client, 1)
    time.sleep(1.0)
    events = server.events()  # SIGTERM; waits at most 10 s for the server to exit
    assert server.proc.returncode == 0
    ended = terminal(events)["a-b-rr-0"]
    assert ended["event"] == "error" and ended["message"] == "server stopped", ended
    srv = read_flow(tmp_path / "srv" / "0" / "flows" / "a-b-rr-0.server.nflow").summary
    assert srv["rr_loop"] == path and srv["transactions"] > 100 and srv["duration"] < 10
    client.communicate(timeout=20)
    assert client.returncode == 1
