"""Flows scheduled at an instant: handshake ahead, data phase at start_at on both ends."""

from __future__ import annotations

import socket
import time

import pytest

from netesto.engine.core import handshake as hs
from tests.engine.test_engine import LOADED_SLACK, Server, ends, run_client, spec, start_lateness, terminal

pytestmark = pytest.mark.netns

TYPES = ["TCP_STREAM", "TCP_MAERTS", "TCP_RR", "TCP_CRR", "UDP_STREAM", "UDP_RR"]


@pytest.mark.alone
def test_every_type_starts_at_its_instant(veth_pair, tmp_path):
    pair = veth_pair
    server = Server(pair, pair.b, pair.addr_b, tmp_path / "srv")
    at = time.time() + 1.5  # the client process starts, connects and handshakes well before
    specs = [spec(server, f"a-b-{i}-0", t, dur=1.0, start_at=at, req=1, reply=1,
                  rate=10_000_000 if t == "UDP_STREAM" else 0, exp=5) for i, t in enumerate(TYPES)]
    code, events = run_client(pair, pair.a, tmp_path, specs)
    assert code == 0, [e for e in events if e["event"] == "error"]
    done = terminal(events)
    started = {e["flow"]: e for e in events if e["event"] == "started"}
    for s in specs:
        fid = s["flow_id"]
        assert done[fid]["event"] == "done", done[fid]
        cli, srv = ends(tmp_path, fid, exp=5)
        skew = cli.header["start_wall"] - at
        # never early; late by the timer and marker only, unless the client process was not even ready by
        # then (its start-up on a loaded machine); a start held to anything else is seconds late
        assert 0 <= skew < start_lateness(started[fid]) + LOADED_SLACK, (fid, skew, started[fid])
        assert started[fid]["skew"] == pytest.approx(skew, abs=1e-6)
        # the server held the flow until the marker: its data phase did not start at accept
        assert srv.header["start_wall"] >= at - 0.002, (fid, srv.header["start_wall"] - at)
        assert srv.summary["status"] == "ok" and cli.summary["status"] == "ok"
        if s["test"].startswith("TCP"):
            assert cli.summary["bytes_tx"] == srv.summary["bytes_rx"], fid
            assert cli.summary["bytes_rx"] == srv.summary["bytes_tx"], fid
        # never shorter than asked; longer by the end timer's lateness and the drain (stretched by load)
        assert 1.0 - 0.01 <= cli.summary["duration"] < 1.0 + 1.0
    server.events()


class HeldFlow:
    """An in-process server worker and a client socket that said hello with ``go``: the server holds the flow."""

    def __init__(self, tmp_path, flow: str, test: str, dur: float, go: float) -> None:
        from netesto.engine.core.loop import Loop
        from netesto.engine.serve.accept import ServerWorker, TokenSet

        self.events: list[dict] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.worker = ServerWorker(Loop(), str(tmp_path), self.events.append, self.listener, TokenSet())
        self.theirs = socket.create_connection(self.listener.getsockname())
        ours, _ = self.listener.accept()
        ours.setblocking(False)
        self.worker.hello(ours, hs.Hello({"flow": flow, "test": test, "dur": dur, "interval": 0.01, "go": go,
                                          "kind": "main"}))
        self.reply = hs.decode_reply(self.theirs.recv(4096))

    def run(self) -> dict:
        """Run the worker until its flow ends; the last event."""
        try:
            self.worker.loop.run(lambda: not self.worker.flows)
        finally:
            self.listener.close()
            self.theirs.close()
        return self.events[-1]


def test_held_flow_without_marker_ends_with_error(tmp_path):
    """A client that handshakes ahead and then closes before its instant: the server ends the flow."""
    held = HeldFlow(tmp_path, "a-b-1-0", "TCP_RR", dur=1, go=0.5)
    assert held.reply["ok"] is True and held.reply["go"] is True
    flow = held.worker.flows[0]
    assert flow.start_mono == 0 and flow.writer is None  # held: nothing started
    held.theirs.close()
    last = held.run()
    assert last["event"] == "error"
    assert "closed the connection before the start" in last["message"]


def test_a_started_flow_runs_past_the_start_marker_timeout(tmp_path, monkeypatch):
    """The wait for the marker ends once the marker is in: a flow longer than GO_TIMEOUT runs to its end
    (the timer used to end every held flow GO_TIMEOUT after its instant, even a running one)."""
    from netesto.engine.kinds import serverflow

    monkeypatch.setattr(serverflow, "GO_TIMEOUT", 0.2)
    held = HeldFlow(tmp_path, "a-b-2-0", "TCP_STREAM", dur=0.6, go=0.05)
    assert held.reply["go"] is True
    theirs = held.theirs
    theirs.sendall(hs.GO)
    for at in (0.1, 0.3, 0.5):
        held.worker.loop.call_later(at, lambda: theirs.sendall(bytes(1000)))
    held.worker.loop.call_later(0.65, theirs.close)  # past dur: the normal end
    last = held.run()
    assert last["event"] == "done", last
    assert last["bytes_rx"] == 3000


def test_a_server_end_held_off_the_cpu_dates_the_start_from_the_markers_arrival(tmp_path):
    """The server end reads the start marker 0.3 s after it came (a loaded host held it off the CPU): the
    flow's start is the marker's arrival (the kernel's stamp), so a client that ran its whole time is not
    judged to have ended early (it read 'client ... ended the flow after 0.3 s of 0.6 s')."""
    held = HeldFlow(tmp_path, "a-b-3-0", "TCP_STREAM", dur=0.6, go=0.05)
    assert held.reply["go"] is True
    time.sleep(0.1)  # (the kernel turns receive stamps on a moment after the first socket asks)
    sent = time.time()
    held.theirs.sendall(hs.GO)
    time.sleep(0.3)  # the server's loop does not run: its end cannot read the marker
    held.worker.loop.call_at(time.monotonic() + sent + 0.65 - time.time(), held.theirs.close)  # past dur
    flow = held.worker.flows[0]
    last = held.run()
    assert last["event"] == "done", last
    assert flow.start_wall == pytest.approx(sent, abs=0.05)


@pytest.mark.parametrize("early", [False, True])
def test_a_marker_out_late_is_not_a_client_that_stopped_early(tmp_path, early):
    """The client's marker leaves 0.1 s after its start instant (a client held off its CPU inside that
    send dated its start before it, and ends dur after its instant): the server counts from the instant
    too, and the flow is done. A client that closes 0.9 s early is still one that stopped early (the server
    reads the close when its loop runs: a loaded runner's can read it a few hundred ms late)."""
    held = HeldFlow(tmp_path, "a-b-4-0", "TCP_STREAM", dur=1.2, go=0.05)
    assert held.reply["go"] is True
    instant = time.monotonic() + 0.05
    time.sleep(0.15)
    held.theirs.sendall(hs.GO)  # (0.1 s after the instant)
    end = instant + 1.2 + 0.005 - (0.9 if early else 0.0)
    held.worker.loop.call_at(end, held.theirs.close)
    last = held.run()
    if early:
        assert last["event"] == "error" and "s of 1.2 s" in last["message"], last
        assert "ended the flow after" in last["message"], last
    else:
        assert last["event"] == "done", last


def test_realtime_hold_lasts_while_any_flow_holds_it():
    import os

    from netesto.engine.core.realtime import RealtimeHold

    if os.sched_getscheduler(0) != os.SCHED_OTHER:
        pytest.skip("this process already runs under another policy")
    hold = RealtimeHold()
    a, b = object(), object()
    hold.acquire(a)
    try:
        if os.sched_getscheduler(0) == os.SCHED_OTHER:
            pytest.skip("no privilege for SCHED_FIFO here (the hold does nothing)")
        hold.acquire(b)
        hold.release(a)
        assert os.sched_getscheduler(0) == os.SCHED_FIFO
        hold.release(a)  # twice: no effect
        assert os.sched_getscheduler(0) == os.SCHED_FIFO
        hold.release(b)
        assert os.sched_getscheduler(0) == os.SCHED_OTHER
    finally:
        hold.release(a)
        hold.release(b)
        if os.sched_getscheduler(0) != os.SCHED_OTHER:
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
