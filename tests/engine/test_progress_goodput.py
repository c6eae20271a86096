"""The live view's goodput is what the other end received: a filling send buffer does not inflate it.

The engine's once-a-second ``progress`` event gave the live view ``rate_bps``, the bytes the
client's socket took in. In a sender's first second the send buffer fills as well, so a flow
through a 20 Mbit/s link showed well over 20 Mbit/s. ``goodput_bps`` counts what the server's
TCP acknowledged (``tcpi_bytes_acked``) and what the client received.
"""

from __future__ import annotations

import pytest

from netesto.controller.live import LiveState
from netesto.controller.progress import FlowProgress

from .test_engine import Server, run_client, spec, terminal

pytestmark = pytest.mark.netns

LINK = 20_000_000  # bit/s: the client's egress, shaped


def test_progress_goodput_stays_within_the_link_while_the_send_buffer_fills(veth_pair, tmp_path):
    pair = veth_pair
    pair.run(pair.a, ["tc", "qdisc", "add", "dev", pair.dev_a, "root", "tbf", "rate", str(LINK), "burst", "32kb",
                      "latency", "50ms"], check=True)
    server = Server(pair, pair.b, pair.addr_b, tmp_path / "srv")
    # a big send buffer fills with megabytes in the first second: the old rate counted them
    flows = [spec(server, "a-b-1-0", "TCP_STREAM", dur=2.5, ca="cubic", local_buffer=4 << 20)]
    code, events = run_client(pair, pair.a, tmp_path, flows)
    assert code == 0 and {e["event"] for e in terminal(events).values()} == {"done"}, events
    stream = [e for e in events if e["event"] == "progress"]
    assert len(stream) >= 2, stream
    assert stream[0]["tx_bps"] > 1.5 * LINK, stream[0]  # the buffer filled: what the socket took in
    assert stream[0]["goodput_bps"] < 1.1 * LINK, stream[0]
    # a second's acks can bunch (a loaded host); over the flow they are the link's rate
    mean = sum(e["goodput_bps"] for e in stream) / len(stream)
    assert 0.7 * LINK < mean < 1.02 * LINK and all(e["goodput_bps"] < 1.25 * LINK for e in stream), stream
    # the other way the client is the receiver: its goodput is what it read
    pair.run(pair.a, ["tc", "qdisc", "del", "dev", pair.dev_a, "root"], check=True)
    code, events = run_client(pair, pair.a, tmp_path, [spec(server, "a-b-2-0", "TCP_MAERTS", dur=1.5, ca="cubic")])
    maerts = [e for e in events if e["event"] == "progress"]
    assert code == 0 and maerts, events
    assert all(e["goodput_bps"] == pytest.approx(e["rx_bps"] + e["tx_bps"], rel=0.02) for e in maerts), maerts
    # ... and the live view shows goodput_bps
    state = LiveState()
    for e in stream:
        state.handle(FlowProgress(host="a", exp=0, flow=e["flow"], event="progress", data=e, t=state.t0 + e["t"]))
    assert [s.rate for s in state.take()] == [e["goodput_bps"] for e in stream]


def test_the_live_view_takes_rate_bps_from_an_engine_without_goodput():
    state = LiveState()
    state.handle(FlowProgress(host="a", exp=0, flow="f", event="progress", data={"rate_bps": 5e6}, t=state.t0 + 1))
    assert [s.rate for s in state.take()] == [5e6]
