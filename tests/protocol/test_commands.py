"""Command payloads: one class per command, validated from the wire, written back byte for byte."""

from __future__ import annotations

import msgpack
import pytest

from netesto.errors import UsageError
from netesto.protocol.codec import CHUNK_SIZE
from netesto.protocol.commands import (
    COMMAND_ARGS,
    FetchChunkArgs,
    PingStartArgs,
    SetNetemArgs,
    SnapshotArgs,
    StartFlowsArgs,
    StopArgs,
)
from netesto.protocol.messages import COMMANDS

# Argument maps as the controller's client sends them (netesto.controller.client), keys in its order.
SENT = {
    "hello": {},
    "time": {},
    "heartbeat": {},
    "snapshot": {"exp": 3, "order": 1, "host": "h1"},
    "prepare_server": {"exp": 3, "token": "t0k", "driver": "iperf3", "ports": [5201, 5202]},
    "start_flows": {"exp": 3, "specs": [{"flow_id": "h1-h2-3-0", "server": "10.0.0.2"}], "at": None, "ping": False,
                    "ping_interval": 0.2},
    "status": {"exp": "3"},
    "stop": {"exp": 3},
    "fetch_list": {"exp": 3},
    "fetch_chunk": {"exp": 3, "path": "flows/a.nflow", "offset": 1048576, "length": 1048576},
    "ack": {"exp": 3},
    "set_sysctl": {"settings": {"net.ipv4.tcp_wmem": "4096 16384 4194304", "net.core.rmem_max": ["1", "2"]}},
    "set_module_params": {"module": "tcp_nv", "params": {"nv_pad": "2"}},
    "set_qdisc": {"dev": "eth0", "qdisc": "htb", "action": "", "rate": "100mbit", "burst": "", "limit": "",
                  "other": ""},
    "set_netem": {"dev": "eth0", "delay": 20, "jitter": 0.5, "loss": 0.0, "rate": 0, "limit": 1000},
    "tcpdump_start": {"exp": 3, "dev": "", "server": "X", "packets": 10000},
    "tcpdump_stop": {},
    "ping_start": {"exp": 3, "target": "10.0.0.2", "name": "10.0.0.2", "interval": 0.2, "duration": 10.0},
    "restore": {},
    "claim": {"run": "20261126-1", "controller": "laptop:1234"},
    "release": {},
    "trace_start": {"exp": 3, "ports": [12867], "buffer_kb": 4096},
    "trace_stop": {"exp": 3},
    "watch_start": {"exp": 3, "name": "app", "interval": 0.01, "ports": [5000], "cgroup": "", "pid": 0},
    "watch_stop": {"exp": 3, "name": "app"},
    "link_schedule": {"exp": 3, "dev": "r-h1", "t0": 1764150000.25, "until": 1764150004.5,
                      "steps": [[0.0, "rate", 50e6], [2.0, "rate", 10e6]],
                      "trace": {"name": "cellular", "text": "1\n", "limit_bytes": 0, "limit_packets": 100},
                      "host": "router"},
    "link_stop": {"exp": 3},
    "shape": {"devs": ["veth0", "r-h1"]},
}


def test_one_payload_class_per_command() -> None:
    assert tuple(COMMAND_ARGS) == COMMANDS == tuple(SENT)
    for name, cls in COMMAND_ARGS.items():
        assert cls.command == name


@pytest.mark.parametrize("command", COMMANDS)
def test_the_wire_map_comes_back_byte_for_byte(command: str) -> None:
    sent = SENT[command]
    payload = COMMAND_ARGS[command].from_wire(sent)
    again = payload.to_wire()
    assert again == sent and list(again) == list(sent)
    assert msgpack.packb(again, use_bin_type=True) == msgpack.packb(sent, use_bin_type=True)
    assert COMMAND_ARGS[command].from_wire(again) == payload


def test_absent_and_nil_fields_take_their_defaults() -> None:
    assert FetchChunkArgs.from_wire({"exp": 1, "path": "x", "offset": None}) == FetchChunkArgs(1, "x", 0, CHUNK_SIZE)
    assert SnapshotArgs.from_wire({"exp": "e1"}) == SnapshotArgs("e1", 0, None, None)
    assert StopArgs.from_wire({}).to_wire() == {}  # "every experiment" travels as no exp at all
    assert PingStartArgs.from_wire({"exp": 1, "target": "h2"}).name is None  # the agent names it after the target


@pytest.mark.parametrize("cls, args, message", [
    (StartFlowsArgs, {"exp": 1}, "missing argument 'specs'"),
    (StartFlowsArgs, {"exp": 1.5, "specs": []}, "argument 'exp' has the wrong type float"),
    (StartFlowsArgs, {"exp": 1, "specs": [], "ping": 1}, "argument 'ping' has the wrong type int"),
    (FetchChunkArgs, {"exp": 1, "path": "x", "offset": True}, "argument 'offset' has the wrong type bool"),
    (SetNetemArgs, {"delay": "20ms"}, "argument 'delay' has the wrong type str"),
    (PingStartArgs, {"exp": 1}, "missing argument 'target'"),
])
def test_a_bad_field_is_a_usage_error_naming_it(cls: type, args: dict, message: str) -> None:
    with pytest.raises(UsageError) as info:
        cls.from_wire(args)
    assert info.value.message == message


def test_payloads_are_frozen() -> None:
    payload = StopArgs(3)
    with pytest.raises(AttributeError):
        payload.exp = 4  # type: ignore[misc]
