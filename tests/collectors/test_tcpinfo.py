"""struct tcp_info decoding, the strided column extraction and congestion-control setting."""

from __future__ import annotations

import os
import socket
import struct
from array import array

import pytest

from netesto.errors import CongestionControlError
from netesto.collectors import tcpinfo


def _connected_pair():
    lsock = socket.create_server(("127.0.0.1", 0))
    cli = socket.create_connection(lsock.getsockname())
    srv, _ = lsock.accept()
    lsock.close()
    return cli, srv


def test_read_real_tcp_info_from_loopback():
    cli, srv = _connected_pair()
    try:
        cli.sendall(b"x" * 100_000)
        got = 0
        while got < 100_000:
            got += len(srv.recv(65536))
        raw = tcpinfo.read_tcp_info(cli)
        assert len(raw) == tcpinfo.TCP_INFO_LEN
        info = tcpinfo.decode_record(raw)
        assert info["state"] == 1  # TCP_ESTABLISHED
        assert info["snd_cwnd"] >= 1 and info["snd_mss"] > 0
        assert info["bytes_acked"] >= 100_000 and info["bytes_sent"] >= 100_000
        assert info["min_rtt"] > 0 and info["rtt"] > 0
        assert tcpinfo.decode_record(tcpinfo.read_tcp_info(srv))["bytes_received"] >= 100_000
    finally:
        cli.close()
        srv.close()


def test_segment_counters_count_data_segments_both_ways():
    cli, srv = _connected_pair()
    try:
        for _ in range(5):  # five small writes: five data segments (loopback acks each at once)
            cli.sendall(b"y" * 100)
            assert srv.recv(1000)
        c = tcpinfo.decode_record(tcpinfo.read_tcp_info(cli))
        s = tcpinfo.decode_record(tcpinfo.read_tcp_info(srv))
        assert c["data_segs_out"] == s["data_segs_in"] == 5
        assert c["data_segs_in"] == s["data_segs_out"] == 0
        # segs_* include the handshake and pure ACKs
        assert c["segs_out"] > c["data_segs_out"] and s["segs_in"] > s["data_segs_in"]
    finally:
        cli.close()
        srv.close()


def test_short_struct_from_an_older_kernel_is_zero_filled():
    old = bytes([1, 0, 0]) + bytes(5) + struct.pack("=I", 204000) + bytes(92)  # 104 bytes (4.x kernels)
    info = tcpinfo.decode_record(old)
    assert info["state"] == 1 and info["rto"] == 204000
    assert info["pacing_rate"] == 0 and info["bytes_sent"] == 0


def test_records_to_columns_matches_per_record_decoding():
    recs = [os.urandom(tcpinfo.TCP_INFO_LEN) for _ in range(37)]
    cols = tcpinfo.column_arrays(b"".join(recs), tcpinfo.TCP_INFO_LEN, tcpinfo.TCP_INFO_FIELDS)
    for i, raw in enumerate(recs):
        want = tcpinfo.decode_record(raw)
        for name in tcpinfo.TCP_INFO_FIELDS:
            assert cols[name][i] == want[name], name
    cc = [struct.pack("=QIII", 10**9 + i, 100 + i, 256 + i, 512) for i in range(5)]
    ccols = tcpinfo.column_arrays(b"".join(cc), tcpinfo.CC_INFO_LEN, tcpinfo.CC_INFO_FIELDS)
    assert list(ccols["bbr_bw"]) == [10**9 + i for i in range(5)]
    assert list(ccols["bbr_min_rtt"]) == [100 + i for i in range(5)]
    assert isinstance(ccols["bbr_cwnd_gain"], array)


@pytest.mark.skipif(os.geteuid() != 0, reason="cubic needs CAP_NET_ADMIN here")
@pytest.mark.parametrize("ca", ["reno", "cubic", "bbr"])
def test_set_congestion_control(ca):
    if ca not in tcpinfo.available_congestion_controls():
        pytest.skip(f"{ca} not in this kernel")
    sock = socket.socket()
    try:
        tcpinfo.set_congestion_control(sock, ca)
        assert tcpinfo.congestion_control(sock) == ca
    finally:
        sock.close()


def test_unknown_congestion_control_lists_available():
    sock = socket.socket()
    try:
        with pytest.raises(CongestionControlError) as err:
            tcpinfo.set_congestion_control(sock, "nosuchca")
    finally:
        sock.close()
    available = tcpinfo.available_congestion_controls()
    assert err.value.available == available and available
    for name in available:
        assert name in str(err.value)


def test_bbr_cc_info_from_loopback():
    if "bbr" not in tcpinfo.available_congestion_controls():
        pytest.skip("no bbr")
    lsock = socket.create_server(("127.0.0.1", 0))
    cli = socket.socket()
    try:
        tcpinfo.set_congestion_control(cli, "bbr")
        cli.connect(lsock.getsockname())
        srv, _ = lsock.accept()
        cli.sendall(b"y" * 200_000)
        got = 0
        while got < 200_000:
            got += len(srv.recv(65536))
        cc = tcpinfo.decode_record(tcpinfo.read_bbr_info(cli), tcpinfo.CC_INFO_FIELDS)
        assert cc["bbr_bw"] > 0 and cc["bbr_min_rtt"] > 0 and cc["bbr_pacing_gain"] > 0
        srv.close()
    finally:
        cli.close()
        lsock.close()
