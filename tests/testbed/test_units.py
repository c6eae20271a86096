"""Pure parts of the testbed: rates, times, buffers, lab files, netlink messages."""

from __future__ import annotations

import struct

import pytest

from netesto.errors import TestbedError, UsageError
from netesto.testbed import delayline, lifecycle, nfqueue, shaping, topology
from netesto.testbed.config import TestbedConfig


@pytest.mark.parametrize("text", ["bogus", "-5mbit", "0", "100 mbits/s"])
def test_bad_rates_are_usage_errors(text: str) -> None:
    with pytest.raises(UsageError, match="rate"):
        shaping.parse_rate(text)


def test_buffer_forms() -> None:
    assert shaping.parse_buffer("2bdp", 100_000_000, 20) == 500_000
    assert shaping.parse_buffer("bdp", 1_000_000_000, 10) == 1_250_000
    with pytest.raises(UsageError, match="buffer"):
        shaping.parse_buffer("lots", 100_000_000, 20)
    with pytest.raises(UsageError, match="3000"):
        shaping.parse_buffer("100", 100_000_000, 20)


def test_bad_config_names_what() -> None:
    with pytest.raises(UsageError, match="testbed name"):
        TestbedConfig.parse(name="Bad_Name")
    with pytest.raises(UsageError, match="loss"):
        TestbedConfig.parse(loss="150")
    with pytest.raises(UsageError, match="--ca"):
        TestbedConfig.parse(ca="vegas")


def test_topology_addresses_and_distinct_subnets() -> None:
    a = topology.plan_topology("alpha", 3, set())
    b = topology.plan_topology("alpha", 3, {a.subnet})
    assert a.subnet != b.subnet and 100 <= a.subnet < 200
    assert [lk.addr for lk in a.links] == [f"10.{a.subnet}.{i}.1" for i in (1, 2, 3)]
    assert a.links[1].router_dev == "r-h2" and a.links[1].queue == 2
    assert a.namespaces == ["alpha-r", "alpha-h1", "alpha-h2", "alpha-h3"]
    assert len(a.control_dev) <= 15


def test_verdict_message_layout() -> None:
    msg = nfqueue.verdict_message(7, 1234, nfqueue.NF_ACCEPT)
    length, mtype, flags, _seq, _pid = struct.unpack_from("=IHHII", msg)
    assert length == len(msg) == 16 + 4 + 4 + 8
    assert mtype == (3 << 8) | 1 and flags == 1
    assert struct.unpack_from("!H", msg, 18) == (7,)
    assert struct.unpack_from("!II", msg, 24) == (1, 1234)


def _packet_message(queue: int, packet_id: int) -> bytes:
    hdr = nfqueue._nla(nfqueue.NFQA_PACKET_HDR, struct.pack("!IHB", packet_id, 0x0800, 2))
    payload = nfqueue._nla(10, b"\x45" + b"\0" * 27)
    return nfqueue._nfmsg(nfqueue.NFQNL_MSG_PACKET, queue, hdr + payload)


def test_packet_ids_parsed_from_several_messages() -> None:
    data = _packet_message(1, 10) + _packet_message(2, 11)
    assert nfqueue.parse_packets(data, len(data)) == [(1, 10, -1), (2, 11, -1)]


def test_netlink_error_replies_are_counted_not_fatal() -> None:
    error = struct.pack("=IHHII", 16 + 4 + 16, nfqueue.NLMSG_ERROR, 0, 0, 0) + struct.pack("=i", -2) + b"\0" * 16
    data = _packet_message(1, 10) + error + _packet_message(1, 12)
    errors: list[int] = []
    assert nfqueue.parse_packets(data, len(data), errors) == [(1, 10, -1), (1, 12, -1)]
    assert errors == [2]


def test_link_settings_validated() -> None:
    with pytest.raises(TestbedError, match="loss"):
        delayline.LinkSettings(10, 0, 1.5)
    with pytest.raises(TestbedError, match=">= 0"):
        delayline.LinkSettings(-1)


def test_package_exports_the_lifecycle() -> None:
    import netesto.testbed as tb

    assert sorted(tb.__all__) == tb.__all__
    assert tb.up is lifecycle.up and tb.testbed is lifecycle.testbed
    with pytest.raises(AttributeError):
        tb.nothing_here  # noqa: B018
