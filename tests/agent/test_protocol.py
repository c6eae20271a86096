"""Messages and codec: validation on construction, round trips, malformed/oversized/version errors."""

from __future__ import annotations

import msgpack
import pytest

from netesto.errors import ProtocolError, VersionMismatch
from netesto.protocol import (
    PROTOCOL_VERSION,
    ErrorInfo,
    Event,
    Reply,
    Request,
    check_compatible,
    decode,
    encode,
    parse_version,
)


def test_protocol_version_is_separate_from_package_version():
    from netesto._version import __version__

    assert parse_version(PROTOCOL_VERSION) == (1, 0)
    assert PROTOCOL_VERSION != __version__


@pytest.mark.parametrize("msg", [
    Request(7, "hello"),
    Request(8, "set_sysctl", {"settings": {"net.ipv4.tcp_wmem": "4096 16384 4194304"}}),
    Reply.success(7, {"data": b"\x00\x01" * 10, "n": 3}),
    Reply.failure(9, "PolicyError", "sysctl x not allowed", {"allowed": ["a", "b"]}),
    Event("flow", {"flow": "h1-h2-1-0", "bytes": 12}),
])
def test_round_trip(msg):
    assert decode(encode(msg)) == msg


@pytest.mark.parametrize("make", [
    lambda: Request(-1, "hello"),
    lambda: Request(True, "hello"),
    lambda: Request(1, "Hello; rm -rf /"),
    lambda: Request(1, "hello", {1: 2}),
    lambda: Request(1, "hello", version="one"),
    lambda: Reply(1, True, None, ErrorInfo("X", "y")),
    lambda: Reply(1, False),
    lambda: Event("", {}),
])
def test_invalid_messages_are_refused_on_construction(make):
    with pytest.raises(ProtocolError):
        make()


def test_malformed_frames_raise_protocol_error():
    for data in (b"", b"\xc1garbage", msgpack.packb([1, 2, 3]), msgpack.packb({"v": "1.0", "k": "zzz"}),
                 msgpack.packb({"v": "1.0", "k": "req", "id": "x", "t": "hello"})):
        with pytest.raises(ProtocolError):
            decode(data)


@pytest.mark.parametrize("frame", [
    {"v": "\u00b2.0", "k": "rep", "id": 1, "ok": True},  # str.isdigit() is true, int() refuses it
    {"v": "1" * 5000 + ".0", "k": "evt", "t": "flow", "a": {}},  # past int()'s 4300-digit limit
    {"v": "1.0 ", "k": "req", "id": 1, "t": "hello"},
], ids=["superscript", "huge", "trailing-space"])
def test_a_bad_version_text_is_a_protocol_error_not_a_crash(frame):
    with pytest.raises(ProtocolError, match="bad protocol version"):
        decode(msgpack.packb(frame))


def test_the_fast_request_path_declines_an_unhashable_command():
    from netesto.protocol.codec import request_parts

    for command in (["hello"], {"t": 1}):
        assert request_parts({"v": PROTOCOL_VERSION, "k": "req", "id": 1, "t": command, "a": {}}) is None
        with pytest.raises(ProtocolError):
            decode(msgpack.packb({"v": PROTOCOL_VERSION, "k": "req", "id": 1, "t": command, "a": {}}))


def test_oversized_frame_is_refused_before_parsing():
    data = encode(Request(1, "hello", {"pad": b"x" * 2000}))
    with pytest.raises(ProtocolError, match="exceeds the limit of 1024 bytes"):
        decode(data, max_size=1024)


def test_major_version_mismatch_names_both_versions_and_keeps_the_request_id():
    data = msgpack.packb({"v": "2.3", "k": "req", "id": 42, "t": "hello", "a": {}})
    with pytest.raises(VersionMismatch) as info:
        decode(data)
    assert "1.0" in str(info.value) and "2.3" in str(info.value)
    assert info.value.request_id == 42


def test_minor_version_difference_is_accepted():
    check_compatible("1.7")
    msg = decode(msgpack.packb({"v": "1.9", "k": "req", "id": 1, "t": "hello", "a": {}}))
    assert isinstance(msg, Request) and msg.version == "1.9"


def test_the_codec_never_pickles():
    class Thing:
        pass

    with pytest.raises(ProtocolError):
        encode(Reply.success(1, {"x": Thing()}))


def test_export_list_is_sorted_and_resolvable():
    import netesto.protocol as protocol

    assert protocol.__all__ == sorted(protocol.__all__)
    for name in protocol.__all__:
        assert getattr(protocol, name) is not None


def test_fast_paths_round_trip_like_the_full_codec():
    from netesto.protocol.codec import encode_request, encode_result

    args = {"settings": {"net.ipv4.tcp_wmem": "4096 16384 4194304"}}
    assert decode(encode_request(8, "set_sysctl", args)) == Request(8, "set_sysctl", args)
    assert decode(encode_result(8, {"time": 1.5, "data": b"\x00"})) == Reply.success(8, {"time": 1.5, "data": b"\x00"})


@pytest.mark.parametrize("rid, command, args", [
    (-1, "hello", {}), (True, "hello", {}), (2**63, "hello", {}), (1, "Hello; rm -rf /", {}), (1, "hello", {1: 2}),
])
def test_fast_request_encoding_still_refuses_what_request_refuses(rid, command, args):
    from netesto.protocol.codec import encode_request

    with pytest.raises(ProtocolError):
        encode_request(rid, command, args)


CANDIDATES = [
    {"v": "1.0", "k": "req", "id": 3, "t": "time", "a": {}},
    {"v": "1.0", "k": "req", "id": 3, "t": "time"},
    {"v": "1.0", "k": "req", "id": 3, "t": "time", "a": None},
    {"v": "1.9", "k": "req", "id": 3, "t": "time", "a": {}},
    {"v": "2.0", "k": "req", "id": 3, "t": "time", "a": {}},
    {"v": "1.0", "k": "req", "id": -3, "t": "time", "a": {}},
    {"v": "1.0", "k": "req", "id": True, "t": "time", "a": {}},
    {"v": "1.0", "k": "req", "id": 2**63, "t": "time", "a": {}},
    {"v": "1.0", "k": "req", "id": 3.0, "t": "time", "a": {}},
    {"v": "1.0", "k": "req", "id": 3, "t": "format_disk", "a": {}},
    {"v": "1.0", "k": "req", "id": 3, "t": "time", "a": []},
    {"v": "1.0", "k": "req", "id": 3, "t": "time", "a": {b"x": 1}},
    {"v": "1.0", "k": "rep", "id": 3, "ok": True, "a": 1},
    {"v": "1.0", "k": "evt", "t": "flow", "a": {}},
    [1, 2],
]


@pytest.mark.parametrize("index", range(len(CANDIDATES)))
def test_fast_request_path_accepts_only_what_full_validation_accepts(index):
    from netesto.protocol.codec import from_wire, request_parts

    obj = CANDIDATES[index]
    parts = request_parts(obj)
    try:
        msg = from_wire(obj)
    except ProtocolError:
        msg = None
    if parts is not None:  # the fast path never lets through what the full path refuses
        assert isinstance(msg, Request) and (msg.id, msg.type, dict(msg.args)) == parts
    assert (parts is not None) == (index < 3)  # the plain current-version requests take it


def test_fast_reply_path_only_takes_the_awaited_success():
    from netesto.protocol.codec import reply_result

    ok = {"v": "1.0", "k": "rep", "id": 4, "ok": True, "a": {"x": 1}}
    assert reply_result(ok, 4) == (True, {"x": 1})
    for other in ({**ok, "id": 5}, {**ok, "ok": False, "e": ["X", "y", None]}, {**ok, "k": "evt"},
                  {**ok, "v": "2.0"}, [ok]):
        assert reply_result(other, 4) == (False, None)
