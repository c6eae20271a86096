"""A stream receiver's low-water mark (netesto/engine/kinds/lowat.py): raised at either end for a fast
flow whose sender paces, left at the kernel's one byte for a slow one or an unpaced sender, and every
byte is still read and counted."""

from __future__ import annotations

import pytest

from netesto.engine.kinds.lowat import MARK_MAX, MARK_MIN, PERIOD, PERIOD_MIN, SHARE, look_every, mark_for

from .test_engine import Server, ends, run_client, spec, terminal


def test_the_mark_is_a_sixteenth_of_an_interval_s_bytes_between_its_bounds():
    assert mark_for(0, 0.01) == 1
    slowest_marked = MARK_MIN / SHARE / 0.01  # bytes/s whose sixteenth of a 10 ms interval is MARK_MIN
    assert mark_for(slowest_marked * 0.99, 0.01) == 1
    assert mark_for(slowest_marked * 1.01, 0.01) == int(slowest_marked * 1.01 * 0.01 * SHARE)
    assert mark_for(5e9, 0.01) == MARK_MAX  # a 40 Gbit/s veth flow
    # a longer interval holds more back before a row would see it: slower flows get a mark
    assert mark_for(slowest_marked / 10, 0.1) > 1
    assert mark_for(slowest_marked / 10, 0.1) == mark_for(slowest_marked, 0.01)
    assert mark_for(slowest_marked * 2, 0) == mark_for(slowest_marked * 2, PERIOD)  # no rows: the period's bytes
    rates = [1e5 * 1.5**k for k in range(40)]
    marks = [mark_for(r, 0.01) for r in rates]
    assert marks == sorted(marks)
    # a look a row, so bytes held when the rate falls are read a row later at most; never closer than 10 ms
    assert look_every(0.02) == 0.02 and look_every(0.01) == PERIOD_MIN == look_every(0.001)
    assert look_every(1.0) == PERIOD == look_every(0)


@pytest.mark.netns
def test_a_fast_paced_flow_s_receiver_raises_its_mark_others_keep_the_default_and_every_byte_is_read(
        veth_pair, tmp_path):
    """Unpaced bbr and cubic paced at 2 Gbit/s read gigabits a second at the receiving end (the server of a
    TCP_STREAM, the client of a TCP_MAERTS): the mark goes to its maximum. Unpaced cubic keeps the
    default, fast as it is, and so does cubic paced at 8 Mbit/s (a 10 ms row's sixteenth is 625 bytes).
    The summaries' bytes and the rows' last counts agree end to end in every case."""
    pair = veth_pair
    server = Server(pair, pair.b, pair.addr_b, tmp_path / "srv")
    flows = {"a-b-0-0": ("TCP_STREAM", "bbr", 0, MARK_MAX), "a-b-1-0": ("TCP_MAERTS", "bbr", 0, MARK_MAX),
             "a-b-2-0": ("TCP_STREAM", "cubic", 2_000_000_000, MARK_MAX), "a-b-3-0": ("TCP_STREAM", "cubic", 0, 1),
             "a-b-4-0": ("TCP_MAERTS", "cubic", 8_000_000, 1)}
    specs = [spec(server, fid, test, dur=1.5, ca=ca, interval=0.01, pacing=pacing)
             for fid, (test, ca, pacing, _) in flows.items()]
    code, events = run_client(pair, pair.a, tmp_path, specs)
    assert code == 0 and {e["event"] for e in terminal(events).values()} == {"done"}, events
    marks = {}
    for fid, (test, *_) in flows.items():
        cli, srv = ends(tmp_path, fid)
        rx, tx = (cli, srv) if test == "TCP_MAERTS" else (srv, cli)
        assert rx.summary["status"] == tx.summary["status"] == "ok", (rx.summary["error"], tx.summary["error"])
        assert rx.summary["bytes_rx"] == tx.summary["bytes_tx"] == rx.columns["app_bytes_rx"][-1] \
            == tx.columns["app_bytes_tx"][-1]
        assert "read_mark" not in tx.summary  # only a receiving end has one
        marks[fid] = rx.summary["read_mark"]
    # MARK_MAX needs ~1.1 Gbit/s over one look (a 10 ms row): a veth flow beside two busy loops moves several
    assert marks == {fid: want for fid, (*_, want) in flows.items()}, marks
    server.events()
