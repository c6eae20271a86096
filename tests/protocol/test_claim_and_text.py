"""The claim token in a request's envelope (optional: version 1.0 stays), and peer text made printable."""

from __future__ import annotations

import logging

import msgpack
import pytest

from netesto.errors import ProtocolError
from netesto.protocol import PROTOCOL_VERSION, Request, decode, encode
from netesto.protocol.codec import claim_token, encode_request, request_parts, unpack
from netesto.protocol.errorkinds import error_from_reply
from netesto.protocol.messages import ErrorInfo
from netesto.protocol.text import PrintableFormatter, printable

TOKEN = "0123456789abcdef0123456789abcdef"


def test_the_token_travels_as_an_optional_field_an_older_agent_ignores() -> None:
    frame = encode_request(7, "restore", {}, claim=TOKEN)
    obj = unpack(frame)
    assert obj == {"v": PROTOCOL_VERSION, "k": "req", "id": 7, "t": "restore", "a": {}, "c": TOKEN}
    assert request_parts(obj) == (7, "restore", {})  # what a 1.0 agent that predates tokens reads
    assert claim_token(obj) == TOKEN and decode(frame) == Request(7, "restore", {}, claim=TOKEN)
    assert encode(Request(7, "restore", {}, claim=TOKEN)) == frame
    plain = unpack(encode_request(8, "restore", {}))
    assert "c" not in plain and claim_token(plain) is None  # an older controller's request: no token


@pytest.mark.parametrize("bad", ["short", "x" * 129, "0123456789abcdef\n0123456789abcdef", 12345678901234567890])
def test_what_is_no_token_proves_nothing(bad: object) -> None:
    obj = {"v": PROTOCOL_VERSION, "k": "req", "id": 1, "t": "stop", "a": {}, "c": bad}
    assert claim_token(obj) is None
    with pytest.raises(ProtocolError, match="bad claim token"):
        decode(msgpack.packb(obj, use_bin_type=True))


def test_printable_escapes_what_drives_a_terminal_and_bounds_the_length() -> None:
    text = "a\x1b[31mb\r\nERROR forged\x07\x9b\u202etxt\tok"
    assert printable(text) == "a\\x1b[31mb\\r\\nERROR forged\\x07\\x9b\\u202etxt\tok"
    assert printable("é ü 中") == "é ü 中"  # text stays text
    assert printable("y" * 10_000_000, 100) == "y" * 100 + "... (9999900 more characters)"


def test_an_agents_error_message_is_printable_where_it_enters_the_controller() -> None:
    err = error_from_reply(ErrorInfo("Busy", "lab busy: run x\x1b]0;owned\x07\nERROR forged" + "z" * 10_000),
                           host="h2", what="claim")
    shown = str(err)
    assert "\x1b" not in shown and "\n" not in shown and "\\nERROR forged" in shown
    assert len(shown) < 2200 and err.kind == "Busy"


def test_the_agents_log_lines_stay_one_line_each(tmp_path) -> None:
    handler = logging.FileHandler(tmp_path / "agent.log")
    handler.setFormatter(PrintableFormatter("%(levelname)s: %(message)s"))
    log = logging.getLogger("test.printable")
    log.addHandler(handler)
    log.propagate = False
    try:
        log.warning("claim from %s refused: %s", "peer", "run\x1b[2J\nERROR forged")
        try:
            raise ValueError("bad\x1b[0m value")
        except ValueError:
            log.exception("failed")
    finally:
        log.removeHandler(handler)
        handler.close()
    lines = (tmp_path / "agent.log").read_text().splitlines()
    assert lines[0] == "WARNING: claim from peer refused: run\\x1b[2J\\nERROR forged"
    assert not any(line.startswith("ERROR forged") for line in lines)
    assert "\x1b" not in "".join(lines) and lines[-1] == "ValueError: bad\\x1b[0m value"
