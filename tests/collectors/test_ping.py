"""Ping collector: parsing of real iputils output, and real pings between namespaces."""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

import pytest

from netesto.errors import TrafficError
from netesto.collectors import ping
from netesto.raw.nflow import read_flow

DATA = Path(__file__).parents[1] / "data"


def _rows(name: str, interval: float = 0.2) -> tuple[list, ping.SeqTracker, ping.PingSummary | None]:
    text = (DATA / name).read_text()
    tracker = ping.SeqTracker(interval)
    rows = []
    for line in text.splitlines():
        reply = ping.parse_reply(line)
        if reply:
            rows += tracker.feed(reply)
    summary = ping.parse_summary(text)
    if summary:
        rows += tracker.finish(summary.sent)
    return rows, tracker, summary


@pytest.mark.parametrize(
    "name, n_rows, lost, sent, received, loss, avg_us",
    [
        ("ping_ok.txt", 8, 0, 8, 8, 0.0, 97.0),
        ("ping6_ok.txt", 3, 0, 3, 3, 0.0, 39.0),
        ("ping_lost.txt", 15, 4, 15, 11, 26.6667, 47.0),
        ("ping_unreach.txt", 10, 10, 10, 0, 100.0, math.nan),
    ],
)
def test_parse_real_output(name, n_rows, lost, sent, received, loss, avg_us):
    rows, tracker, summary = _rows(name)
    assert summary is not None
    assert (summary.sent, summary.received, summary.loss_pct) == (sent, received, loss)
    if math.isnan(avg_us):
        assert math.isnan(summary.rtt_avg)
    else:
        assert summary.rtt_avg == pytest.approx(avg_us)
    assert len(rows) == n_rows
    assert tracker.lost == lost
    assert [r[1] for r in rows] == list(range(1, n_rows + 1))
    assert sum(math.isnan(r[2]) for r in rows) == lost
    times = [r[0] for r in rows]
    assert times == sorted(times)


def test_lost_rows_are_placed_between_neighbours():
    rows, _, _ = _rows("ping_lost.txt")
    # icmp_seq 6..9 were dropped: times interpolate from seq 5 at the interval.
    lost = [r for r in rows if math.isnan(r[2])]
    assert [r[1] for r in lost] == [6, 7, 8, 9]
    assert lost[0][0] == pytest.approx(1795323490.721347 + 0.2)
    assert rows[9][0] == pytest.approx(1795323491.741410)


def test_parse_reply_units_and_dups():
    r = ping.parse_reply("[1.5] 64 bytes from fd00::2: icmp_seq=7 ttl=64 time=1.25 ms (DUP!)")
    assert r == ping.PingReply(1.5, 7, 1250.0, True)
    assert ping.parse_reply("From 10.0.0.1 icmp_seq=3 Destination Host Unreachable") is None
    assert ping.parse_summary("no statistics here") is None


def test_seq_wraps_past_65535():
    t = ping.SeqTracker(0.2)
    t.last_seq, t.last_t = 65535, 100.0
    rows = t.feed(ping.PingReply(100.2, 0, 10.0))
    assert rows == [(100.2, 65536, 10.0)]
    rows = t.feed(ping.PingReply(100.6, 2, 10.0))
    assert [r[1] for r in rows] == [65537, 65538]
    assert math.isnan(rows[0][2]) and rows[1][2] == 10.0
    assert t.lost == 1


def test_duplicate_and_out_of_order_replies_are_dropped():
    t = ping.SeqTracker(0.2)
    assert len(t.feed(ping.PingReply(1.0, 1, 5.0))) == 1
    assert t.feed(ping.PingReply(1.1, 1, 5.0, duplicate=True)) == []
    assert t.feed(ping.PingReply(1.2, 1, 5.0)) == []


def test_argv_and_path():
    assert ping.ping_argv("fd00::1", 0.5, 2.5) == ["ping", "-6", "-n", "-D", "-i", "0.5", "-w", "3", "fd00::1"]
    assert ping.ping_path("/d", 3, "h1.example", "h2") == Path("/d/3/ping/h1-h2.nflow")


def test_no_socket_is_a_clear_error(tmp_path):
    """An unprivileged ping without ping_group_range cannot open its socket."""
    if os.geteuid() != 0:
        pytest.skip("needs root to drop privileges")
    with open("/proc/sys/net/ipv4/ping_group_range") as fh:
        low, high = (int(x) for x in fh.read().split())
    if low <= 65534 <= high:
        pytest.skip("unprivileged ICMP sockets allowed here")
    # setpriv drops every capability, so ping cannot open a raw or ICMP socket.
    prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
              "--inh-caps=-all", "--bounding-set=-all"]
    col = ping.PingCollector("127.0.0.1", tmp_path / "p.nflow", argv_prefix=prefix)
    with pytest.raises(TrafficError, match="ping 127.0.0.1 failed to start"):
        col.start()


@pytest.mark.netns
def test_ping_between_namespaces(veth_pair, tmp_path):
    dest = ping.ping_path(tmp_path, 1, "a", "b")
    col = ping.PingCollector(
        veth_pair.addr_b, dest, interval=0.2, duration=2,
        meta={"host": "a"}, argv_prefix=["ip", "netns", "exec", veth_pair.a],
    )
    col.start()
    time.sleep(1.4)
    partial = read_flow(dest)  # written as it runs: about one block a second
    assert partial.rows >= 5 and partial.summary is None
    summary = col.wait(timeout=10)
    assert summary is not None and summary.received >= 8
    flow = read_flow(dest)
    assert flow.header["target"] == veth_pair.addr_b and flow.header["host"] == "a"
    assert flow.summary["status"] == "ok" and flow.summary["sent"] == summary.sent
    rtt = list(flow.columns["rtt"])
    assert flow.rows == summary.sent >= 9
    assert all(r > 0 for r in rtt)
    t = list(flow.columns["t_wall"])
    assert all(b >= a for a, b in zip(t, t[1:]))  # a row per reply, in order
    # stamped by ping (-D) as its replies came, 0.2 s apart, over the run: a loaded runner bunches some of them
    # (one CI run's median gap was 56 ms), so the span is what is held, not each gap
    assert 0.5 * 0.2 * (len(t) - 1) < t[-1] - t[0] < 2.5, t
    mono = list(flow.columns["t_mono"])
    assert abs((mono[-1] - mono[0]) - (flow.columns["t_wall"][-1] - flow.columns["t_wall"][0])) < 0.05


@pytest.mark.netns
def test_ping_counts_lost_probes(veth_pair, tmp_path):
    dest = tmp_path / "lost.nflow"
    col = ping.PingCollector(veth_pair.addr_b, dest, interval=0.1,
                             argv_prefix=["ip", "netns", "exec", veth_pair.a])
    rule = ["iptables", "-w", "-A", "INPUT", "-p", "icmp", "-j", "DROP"]
    col.start()
    try:
        time.sleep(0.5)
        veth_pair.run(veth_pair.b, rule, check=True)
        time.sleep(0.6)
    finally:
        veth_pair.run(veth_pair.b, ["iptables", "-w", "-D", *rule[3:]])
    time.sleep(0.5)
    summary = col.stop()
    assert summary is not None and summary.sent > summary.received
    flow = read_flow(dest)
    rtt = list(flow.columns["rtt"])
    lost = sum(math.isnan(r) for r in rtt)
    assert lost == summary.sent - summary.received >= 3
    assert flow.summary["lost"] == lost
    assert list(flow.columns["seq"]) == list(range(1, summary.sent + 1))
    # the lost run sits in the middle, not at the end
    assert not math.isnan(rtt[-1])


def test_ping_without_tool_is_clear(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(TrafficError, match="ping not found on PATH"):
        ping.PingCollector("127.0.0.1", tmp_path / "x.nflow").start()


def test_ping_loopback_stop(tmp_path):
    """Real ping on loopback, stopped early: the file is closed with a summary."""
    try:
        col = ping.PingCollector("127.0.0.1", tmp_path / "lo.nflow", interval=0.05).start()
    except TrafficError as exc:
        pytest.skip(str(exc))
    time.sleep(0.4)
    summary = col.stop()
    assert summary is not None and summary.received >= 3
    flow = read_flow(tmp_path / "lo.nflow")
    assert flow.rows == summary.sent and not flow.truncated


@pytest.mark.netns
def test_unreachable_network_is_a_clear_error(veth_pair, tmp_path):
    col = ping.PingCollector("192.0.2.1", tmp_path / "u.nflow",
                             argv_prefix=["ip", "netns", "exec", veth_pair.a])
    with pytest.raises(TrafficError, match="ping 192.0.2.1 failed to start: .*Network is unreachable"):
        col.start()
    assert read_flow(tmp_path / "u.nflow").summary["status"] == "error"
