"""The test-port handshake: framing, bounds, and the server's refusal of bad hellos."""

from __future__ import annotations

import os
import socket

import pytest

from netesto.engine.core import handshake as hs
from netesto.engine.core.loop import Loop
from netesto.engine.serve.accept import ServerWorker
from netesto.engine.serve.tokens import TokenSet


def test_hello_round_trip_and_join():
    data = hs.encode_hello({"flow": "a-b-0-0", "test": "TCP_RR", "token": "t"})
    assert hs.parse_prefix(data[:3]) is None  # a short read waits for more
    kind, length = hs.parse_prefix(data)
    assert kind == "hello" and length == len(data)
    hello = hs.decode_hello(data)
    assert hello.test == "TCP_RR" and hello.token == "t"
    join = hs.encode_join(b"12345678")
    assert hs.parse_prefix(join) == ("join", 16) and hs.decode_join(join) == b"12345678"
    reply = hs.encode_reply({"ok": True, "udp_port": 5})
    assert hs.reply_length(reply) == len(reply) and hs.decode_reply(reply)["udp_port"] == 5


@pytest.mark.parametrize("junk", [b"GET / HTTP/1.0", b"\x00\x00\x00\x00", b"NTFX", b"NTFL\x00\x09\x00\x00\x00\x00\x00\x01",
                                  b"NTFL\x00\x01\x00\x00\xff\xff\xff\xff"])
def test_garbage_prefixes_are_rejected(junk):
    with pytest.raises(hs.HandshakeError):
        hs.parse_prefix(junk)


def test_undecodable_hello_is_rejected():
    body = b"\xc1\xc1\xc1"
    data = hs.HELLO_HEAD.pack(hs.HELLO_MAGIC, hs.VERSION, 0, len(body)) + body
    with pytest.raises(hs.HandshakeError):
        hs.decode_hello(data)


@pytest.mark.parametrize("fields,why", [
    ({"flow": "a", "test": "TCP_RR", "exp": "x"}, "bad exp"),
    ({"flow": "../etc", "test": "TCP_RR", "dur": 1, "interval": 0.01}, "bad flow id"),
    ({"flow": "a", "test": "SCTP", "dur": 1, "interval": 0.01}, "unknown test"),
    ({"flow": "a", "test": "TCP_RR", "dur": -1, "interval": 0.01}, "bad dur"),
    ({"flow": "a", "test": "TCP_RR", "dur": 1, "interval": 0.0001}, "bad interval"),
    ({"flow": "a", "test": "TCP_RR", "dur": 1, "interval": 0.01, "req": 2**40}, "over 1 GiB"),
    ({"flow": "a", "test": "TCP_RR", "dur": 1, "interval": 0.01, "spec": {"meta": [1, 2]}}, "bad hello"),
    ({"flow": "a", "test": "TCP_RR", "dur": 1, "interval": 0.01, "token": "nope"}, "unknown token"),
    ({"flow": "a", "test": "TCP_RR", "dur": 1, "interval": 0.01, "go": -1.0}, "bad go"),
    ({"flow": "a", "test": "TCP_RR", "dur": 1, "interval": 0.01, "go": True}, "bad go"),
])
def test_server_refuses_bad_hellos(tmp_path, fields, why):
    events: list[dict] = []
    listener = socket.create_server(("127.0.0.1", 0))
    worker = ServerWorker(Loop(), str(tmp_path), events.append, listener, TokenSet(["right"]))
    ours, theirs = socket.socketpair()
    try:
        worker.hello(ours, hs.Hello(dict({"token": "right"} | fields, kind="main")))
        reply = hs.decode_reply(theirs.recv(4096))
    finally:
        theirs.close()
        listener.close()
    assert reply["ok"] is False and why in reply["error"]
    assert events == [{"event": "refused", "reason": reply["error"]}]
    assert not worker.flows and not list(tmp_path.iterdir())


def test_token_file_is_reread(tmp_path):
    path = tmp_path / "tokens"
    path.write_text("one\n")
    tokens = TokenSet(path=str(path))
    assert tokens.accepts("one") and not tokens.accepts("two")
    path.write_text("one\ntwo\n")
    os.utime(path, (1, 1))  # a changed mtime, whatever the clock granularity
    assert tokens.accepts("two")
    assert TokenSet().accepts("anything")
