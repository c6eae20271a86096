"""A paced flow ends on time: its sender holds only a short unsent backlog.

SO_MAX_PACING_RATE alone left the autotuned send buffer holding megabytes that
drained at the paced rate after the flow's time was up (a 1 s flow at 10 Mbit/s
ran 2.8 s, at 1 Mbit/s 11 s), so a paced experiment overran its WAIT.
"""

from __future__ import annotations

import socket

import pytest

from netesto.collectors import tcpinfo

from .test_engine import Server, ends, run_client, spec, terminal

pytestmark = pytest.mark.netns

RATE = 1_000_000  # bit/s: the slower the rate, the longer the old backlog took to drain


def test_paced_senders_end_on_time_at_the_paced_rate(veth_pair, tmp_path):
    pair = veth_pair
    server = Server(pair, pair.b, pair.addr_b, tmp_path / "srv")
    # the client sends (STREAM), the server sends (MAERTS)
    specs = [spec(server, f"a-b-{t}-0", t, dur=1.0, pacing=RATE) for t in ("TCP_STREAM", "TCP_MAERTS")]
    code, events = run_client(pair, pair.a, tmp_path, specs)
    assert code == 0 and {e["event"] for e in terminal(events).values()} == {"done"}, events
    for s in specs:
        cli, srv = ends(tmp_path, s["flow_id"])
        cs, ss = cli.summary, srv.summary
        rx, tx = (cs, ss) if s["test"] == "TCP_MAERTS" else (ss, cs)
        # What the sender wrote is the flow's time at the paced rate plus a short backlog: the floor
        # (PACED_BACKLOG_MIN) and the last skb (on a path this short the kernel's TSO autosizing lets a
        # paced skb grow to 64 KiB whatever the rate). The uncapped send buffer took megabytes, which
        # drained at the paced rate after the flow's time was up (1.6-1.9 s for this 1 s flow). A
        # loaded machine can only make the sender write less, so this holds whatever else runs.
        backlog = tcpinfo.PACED_BACKLOG_MIN + 64 * 1024
        assert tx["bytes_tx"] <= RATE / 8 * s["dur"] * 1.1 + backlog, (s["test"], tx["bytes_tx"])
        assert rx["bytes_rx"] == tx["bytes_tx"]
        assert rx["bytes_rx"] * 8 / rx["duration"] == pytest.approx(RATE, rel=0.25), (s["test"], rx)
    server.events()


def test_the_backlog_cap_follows_the_rate_with_a_floor():
    with socket.socket() as sock:
        tcpinfo.set_pacing(sock, 800_000_000)
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NOTSENT_LOWAT) == 2_000_000  # 20 ms of it
        tcpinfo.set_pacing(sock, 1_000_000)
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NOTSENT_LOWAT) == tcpinfo.PACED_BACKLOG_MIN
    with socket.socket() as sock:
        tcpinfo.set_pacing(sock, 0)  # not paced: 0, the sysctl tcp_notsent_lowat (no cap) stays
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NOTSENT_LOWAT) == 0
