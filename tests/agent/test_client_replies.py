"""The controller's client against a hand-made agent: corrupted and malformed replies name the agent."""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass

import msgpack
import pytest
import zmq

from netesto.controller.client import AgentClient
from netesto.errors import ProtocolError


@dataclass
class Raw:
    reply: dict


class FakeAgent:
    """A bare ROUTER on loopback answering each command with a hand-made result (a corrupted agent)."""

    def __init__(self, results):
        import threading

        self.results = results
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.ROUTER)
        self.sock.linger = 0
        self.port = self.sock.bind_to_random_port("tcp://127.0.0.1")
        self.seen = []
        self._stop = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self._stop:
            if not self.sock.poll(50):
                continue
            ident, data = self.sock.recv_multipart()
            req = msgpack.unpackb(data)
            self.seen.append(req["t"])
            result = self.results.get(req["t"], {})
            reply = {"v": "1.0", "k": "rep", "id": req["id"], "ok": True, "a": result}
            if isinstance(result, Raw):  # the whole reply map, hand-made
                reply = {**result.reply, "id": req["id"]}
            self.sock.send_multipart([ident, msgpack.packb(reply, use_bin_type=True)])

    def close(self):
        self._stop = True
        self.thread.join(5)
        self.sock.close(0)
        self.ctx.term()


GOOD_FILE = {"path": "a.txt", "size": 3, "sha256": hashlib.sha256(b"abc").hexdigest()}


@pytest.mark.parametrize("results, what", [
    ({"fetch_list": {"files": "nope"}}, "fetch_list"),
    ({"fetch_list": {"files": [{"path": "a.txt"}]}}, "fetch_list"),
    ({"fetch_list": {"files": [{**GOOD_FILE, "size": "3"}]}}, "fetch_list"),
    ({"fetch_list": {"files": [{**GOOD_FILE, "path": "a\x00b"}]}}, "fetch_list"),
    ({"fetch_list": {"files": [GOOD_FILE]}, "fetch_chunk": {"data": "abc", "crc32": 0, "offset": 0}}, "fetch_chunk"),
    ({"fetch_list": {"files": [GOOD_FILE]}, "fetch_chunk": ["abc"]}, "fetch_chunk"),
    ({"fetch_list": {"files": [GOOD_FILE]}, "fetch_chunk": {"data": b"abc", "offset": 0}}, "fetch_chunk"),
], ids=["files-not-a-list", "entry-without-size", "size-as-text", "nul-in-path", "data-as-text", "chunk-not-a-map",
        "chunk-without-crc"])
def test_client_reports_a_corrupted_fetch_reply_naming_the_agent(tmp_path, results, what):
    fake = FakeAgent(results)
    try:
        with AgentClient("h9", "127.0.0.1", fake.port, insecure=True, timeout=3, heartbeat=0) as c:
            with pytest.raises(ProtocolError, match=rf"h9 \(127\.0\.0\.1:{fake.port}\): malformed {what} reply"):
                c.fetch(1, tmp_path / "dest")
        assert "ack" not in fake.seen  # nothing acknowledged: the agent keeps its copy
    finally:
        fake.close()


@pytest.mark.parametrize("results, call", [
    ({"hello": ["not", "a", "map"]}, lambda c: c.hello()),
    ({"hello": {"lease": "soon"}}, lambda c: c.hello()),
    ({"time": {"time": "noon"}}, lambda c: c.clock_offset(samples=1)),
    ({"time": {}}, lambda c: c.clock_offset(samples=1)),
], ids=["hello-list", "hello-lease-text", "time-text", "time-missing"])
def test_client_reports_a_corrupted_session_reply_naming_the_agent(results, call):
    fake = FakeAgent(results)
    try:
        with AgentClient("h9", "127.0.0.1", fake.port, insecure=True, timeout=3, heartbeat=0) as c:
            with pytest.raises(ProtocolError, match=rf"h9 \(127\.0\.0\.1:{fake.port}\): malformed (hello|time) reply"):
                call(c)
    finally:
        fake.close()


@pytest.mark.parametrize("reply", [
    {"v": "1.0", "k": "rep", "ok": False, "e": "boom"},
    {"v": "1.0", "k": "rep", "ok": False, "e": [1, 2]},
    {"v": "1.0", "k": "rep", "ok": False},
], ids=["error-as-text", "error-too-short", "failure-without-error"])
def test_a_malformed_reply_to_a_request_is_reported_at_once_not_as_a_timeout(reply):
    fake = FakeAgent({"status": Raw(reply)})
    try:
        with AgentClient("h9", "127.0.0.1", fake.port, insecure=True, timeout=30, heartbeat=0) as c:
            t0 = time.monotonic()
            with pytest.raises(ProtocolError, match=rf"h9 \(127\.0\.0\.1:{fake.port}\): malformed reply to status"):
                c.status(1)
            assert time.monotonic() - t0 < 20  # not the 30 s timeout
    finally:
        fake.close()


def test_closing_does_not_wait_for_a_heartbeat_an_agent_will_never_answer():
    """An agent that stopped answering (here a bare socket that never replies): the heartbeat in
    flight gives up when the connection closes, instead of holding close() for its timeout."""
    ctx = zmq.Context()
    silent = ctx.socket(zmq.ROUTER)
    silent.linger = 0
    port = silent.bind_to_random_port("tcp://127.0.0.1")
    try:
        c = AgentClient("h9", "127.0.0.1", port, insecure=True, timeout=5, heartbeat=0.2)
        deadline = time.monotonic() + 5
        while not silent.poll(50) and time.monotonic() < deadline:
            pass  # until the heartbeat's request is in
        assert msgpack.unpackb(silent.recv_multipart()[1])["t"] == "heartbeat"
        start = time.monotonic()
        c.close()
        assert time.monotonic() - start < 1.0  # was the heartbeat's 5 s timeout
    finally:
        silent.close(0)
        ctx.term()
