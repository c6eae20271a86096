"""The sampler's row builder: the C one (fastloop.sample_row) and the Python one build the same rows."""

from __future__ import annotations

import socket
import struct

import pytest

from netesto.traffic import fastloop, tcpinfo
from netesto.traffic.flowend import _GAPS, _HEAD, _INFO_LEN, _sample_row_py

_ext = pytest.importorskip("netesto.traffic._fastloop")
BUILDERS = {"C": _ext.sample_row, "python": _sample_row_py}
LAST = _INFO_LEN + 24


@pytest.fixture
def conn():
    """An established loopback connection (client end, server end), data exchanged and quiet."""
    lsock = socket.create_server(("127.0.0.1", 0))
    c = socket.create_connection(lsock.getsockname())
    s, _ = lsock.accept()
    c.sendall(b"x" * 5000)
    got = 0
    while got < 5000:
        got += len(s.recv(65536))
    yield c, s
    for sock in (c, s, lsock):
        sock.close()


def build(name: str, sock, parts: int, counters=(1, 2, 3, 4, 5, 6), last=None, gaps=None, mono=2.5):
    rec, last = bytearray(), last if last is not None else bytearray(LAST)
    read = BUILDERS[name](rec, sock, parts, 1.25, mono, *counters, last, gaps or bytearray(_GAPS.size))
    return rec, last, read


def test_the_extension_lays_rows_out_as_the_engine_does():
    assert fastloop.ROW_LAYOUT in (None, (_HEAD.size, _INFO_LEN, 24))
    assert (_ext.ROW_HEAD, _ext.ROW_INFO, _ext.ROW_CC_SLOT) == (_HEAD.size, _INFO_LEN, 24)


@pytest.mark.parametrize("name", BUILDERS)
def test_head_and_tcp_info_of_a_real_socket(conn, name):
    c, _ = conn
    rec, last, read = build(name, c, 1)
    assert read == 1 and len(rec) == _HEAD.size + _INFO_LEN
    assert _HEAD.unpack_from(rec) == (1.25, 2.5, 1, 2, 3, 4, 5, 6)
    info = tcpinfo.decode_record(bytes(rec[_HEAD.size:]))
    assert info["state"] == 1 and info["bytes_acked"] == 5001  # established; SYN + 5000 bytes acked
    assert rec[_HEAD.size:] == last[:_INFO_LEN]  # what was read is kept as the last values


@pytest.mark.parametrize("name", BUILDERS)
def test_cc_info_of_a_bbr_socket(name):
    if "bbr" not in tcpinfo.available_congestion_controls():
        pytest.skip("no bbr here")
    lsock = socket.create_server(("127.0.0.1", 0))
    c = socket.socket()
    tcpinfo.set_congestion_control(c, "bbr")
    c.connect(lsock.getsockname())
    s, _ = lsock.accept()
    try:
        c.sendall(b"x" * 1000)
        s.recv(1000)
        rec, last, read = build(name, c, 2)
        assert read == 2 and len(rec) == _HEAD.size + _INFO_LEN + 24
        cc = bytes(rec[_HEAD.size + _INFO_LEN:])
        assert cc[20:] == bytes(4)  # the pad
        bw_lo, bw_hi, min_rtt, pacing_gain, cwnd_gain = struct.unpack_from("=5I", cc)
        assert 0 < min_rtt < 1_000_000 and pacing_gain > 0 and cwnd_gain > 0
        assert last[_INFO_LEN:] == cc
    finally:
        for sock in (c, s, lsock):
            sock.close()


@pytest.mark.parametrize("name", BUILDERS)
def test_an_unreadable_socket_repeats_the_last_values(conn, name):
    c, _ = conn
    known = bytearray(range(256)) + bytearray(LAST - 256)
    for sock in (None, c):
        if sock is c:
            c.close()  # fileno() is -1 now
        rec, last, read = build(name, sock, 2, last=bytearray(known))
        assert read == 0
        assert rec[_HEAD.size:] == known and last == known


@pytest.mark.parametrize("name", BUILDERS)
def test_head_only_rows_and_counters(name):
    rec, last, read = build(name, None, 0, counters=(10, 20, 30, 40, -3, 60))
    assert read == 0 and last == bytearray(LAST)
    assert _HEAD.unpack(rec) == (1.25, 2.5, 10, 20, 30, 40, 0, 60)  # late datagrams ahead: lost counts as 0


def test_both_builders_keep_the_same_gaps():
    stamps = [5.0, 5.01, 5.025, 5.03, 5.05, 5.2]
    kept = {}
    for name, fn in BUILDERS.items():
        gaps = bytearray(_GAPS.size)
        for mono in stamps:
            fn(bytearray(), None, 0, 0.0, mono, 0, 0, 0, 0, 0, 0, bytearray(LAST), gaps)
        kept[name] = gaps
    assert kept["C"] == kept["python"]
    first, last, count, low, high = _GAPS.unpack(kept["C"])
    assert (first, last, count) == (5.0, 5.2, 5)
    assert low == pytest.approx(0.005) and high == pytest.approx(0.15)


@pytest.mark.parametrize("args, error", [
    ((bytes(0), None, 0, 0.0, 0.0, 0, 0, 0, 0, 0, 0, bytearray(LAST), bytearray(40)), TypeError),
    ((bytearray(), None, 3, 0.0, 0.0, 0, 0, 0, 0, 0, 0, bytearray(LAST), bytearray(40)), ValueError),
    ((bytearray(), None, 1, 0.0, 0.0, 0, 0, 0, 0, 0, 0, bytearray(10), bytearray(40)), ValueError),
    ((bytearray(), None, 0, 0.0, 0.0, 0, 0, 0, 0, 0, 0, bytearray(LAST), bytearray(8)), ValueError),
    ((bytearray(), None, 0, "x", 0.0, 0, 0, 0, 0, 0, 0, bytearray(LAST), bytearray(40)), TypeError),
    ((bytearray(), None, 0, 0.0, 0.0, 0, 0), TypeError),
])
def test_bad_arguments_raise(args, error):
    with pytest.raises(error):
        _ext.sample_row(*args)
