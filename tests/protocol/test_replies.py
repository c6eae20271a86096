"""Command replies: one class per command, read back from the wire, written byte for byte as the agent sends."""

from __future__ import annotations

import msgpack
import pytest

from netesto.errors import ProtocolError
from netesto.protocol.codec import CHUNK_SIZE
from netesto.protocol.messages import COMMANDS
from netesto.protocol.replies import (
    COMMAND_REPLIES,
    ChunkReply,
    FetchListReply,
    FileEntry,
    HelloReply,
    NetemReply,
    QdiscReply,
    ReleaseReply,
    ServerReply,
    StartFlowsReply,
    StatusReply,
    TimeReply,
)

# Result maps as the agent's handlers (netesto.agent.handlers) send them, keys in their order.
SENT = {
    "hello": {"protocol": "1.0", "package": "0.1.0", "agent": "h1.lab", "hostname": "h1", "kernel": "6.8.0",
              "time": 1764150000.25, "monotonic": 1234.5, "clock": "CLOCK_REALTIME (time.time)", "pid": 4242,
              "lease": 30.0, "unfetched": ["3", "4"], "commands": list(COMMANDS), "journal_pending": False,
              "tools": {"python": "3.12.3", "iperf3": "3.16"}, "congestion": ["reno", "cubic", "bbr"],
              "qdiscs": ["htb", "pfifo", "tbf"], "interfaces": ["eth0", "lo"],
              "stopped_at_start": ["pid 812 (netserver -D -p 12865) of agent 790: ended on SIGTERM"]},
    "time": {"time": 1764150000.25},
    "heartbeat": {"lease": 30, "time": 1764150000.25},
    "snapshot": {"files": ["0/h1.snmp", "0/h1.netstat"]},
    "prepare_server": {"port": 40123, "driver": "builtin", "reused": False},
    "start_flows": {"flows": ["h1-h2-3-0", "h1-h2-3-1"], "pid": 999, "specs": "specs-3-17-1.json"},
    "status": {"exp": "3", "running": ["h1-h2-3-1"], "done": ["h1-h2-3-0"], "failed": [],
               "progress": {"h1-h2-3-1": {"bytes": 1000, "t": 1.5}}, "errors": {}, "finished": False,
               "server_running": []},
    "stop": {"stopped": ["h1-h2-3-1"], "tcpdump": [1234]},
    "fetch_list": {"exp": "3", "files": [{"path": "flows/h1-h2-3-0.client.nflow", "size": 3,
                                          "sha256": "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"}],
                   "chunk": CHUNK_SIZE, "flows_running": ["tcpdump pid 1234"]},
    "fetch_chunk": {"path": "flows/a.nflow", "offset": 1048576, "data": b"\x00\x01abc", "crc32": 2910671697,
                    "eof": True},
    "ack": {"exp": "3", "deleted": True},
    "set_sysctl": {"applied": {"net.ipv4.tcp_wmem": "4096 16384 4194304"}},
    "set_module_params": {"applied": {"nv_pad": "2"}},
    "set_qdisc": {"dev": "eth0", "argv": [["tc", "qdisc", "replace", "dev", "eth0", "root", "fq"]], "kind": "fq",
                  "warnings": ["the root qdisc of eth0 (mq) cannot be rebuilt exactly"]},
    "set_netem": {"dev": "eth0", "argv": [["tc", "qdisc", "replace", "dev", "eth0", "root", "netem", "limit", "1000",
                                           "delay", "20ms"]]},
    "tcpdump_start": {"pid": 1234, "path": "h1.pcap", "argv": ["tcpdump", "-i", "eth0", "-w", "h1.pcap"]},
    "tcpdump_stop": {"stopped": [1234]},
    "ping_start": {"path": "ping/h1-10.0.0.2.nflow"},
    "restore": {"restored": ["net.ipv4.tcp_wmem=4096 16384 4194304"], "errors": []},
    "claim": {"run": "20261126-1", "since": 1764150000.25},
    "release": {"released": True, "tool_servers_stopped": ["iperf3:5201"]},
    "trace_start": {"exp": "3", "done": True, "observers": [{"kind": "trace", "name": "netesto-9-3-1", "pid": 77,
                                                              "state": "running"}]},
    "trace_stop": {"exp": "3", "done": False, "observers": [{"kind": "trace", "name": "netesto-9-3-1", "pid": 77,
                                                             "state": "stopping"}]},
    "watch_start": {"exp": "3", "done": True, "observers": [{"kind": "watch", "name": "app", "pid": 78,
                                                              "state": "running"}]},
    "watch_stop": {"exp": "3", "done": True, "observers": [{"kind": "watch", "name": "app", "pid": 78,
                                                            "state": "done", "summary": {"sockets": 1}}]},
    "link_schedule": {"dev": "r-h1", "base": {"rate": 100000000, "delay": 10.0}, "steps": 2, "trace": "ab12"},
    "link_stop": {"stopped": ["r-h1"], "errors": []},
    "shape": {"devs": {"r-h1": {"dev": "r-h1", "rate_bps": 20000000, "buffer_bytes": 25000, "delay_ms": 5.0,
                                "tc": "qdisc htb 1: root ..."}}},
}

# The other shapes a command's reply takes.
SHAPES = [
    ("prepare_server", {"port": 5201, "ports": [5201, 5202], "pids": [11, 12], "driver": "iperf3"}),
    ("prepare_server", {"port": 40123, "driver": "builtin", "reused": True}),
    ("start_flows", {"flows": ["h1-h2-3-0"], "pid": 999, "specs": "s.json", "ping_errors": ["ping 10.0.0.2: busy"]}),
    ("set_qdisc", {"dev": "eth0", "argv": [], "kind": "htb"}),
    ("set_netem", {"dev": "eth0", "argv": []}),
    ("set_netem", {"dev": "eth0", "fallback": "tests.agent.fake_delayline:apply", "result": {"delay_ms": 20}}),
    ("set_netem", {"dev": "eth0", "fallback": "tests.agent.fake_delayline:apply", "result": None}),
    ("set_netem", {"dev": "eth0", "argv": [["tc", "qdisc", "del"]], "warnings": ["not rebuilt"]}),
    ("release", {"released": False}),
    ("heartbeat", {"lease": 0.5, "time": 1764150000}),
]


def test_one_reply_class_per_command() -> None:
    assert tuple(COMMAND_REPLIES) == COMMANDS == tuple(SENT)
    for name, cls in COMMAND_REPLIES.items():
        assert cls.command == name


@pytest.mark.parametrize("command, sent", [*SENT.items(), *SHAPES],
                         ids=[*SENT, *(f"{c}-{i}" for i, (c, _) in enumerate(SHAPES))])
def test_the_wire_map_comes_back_byte_for_byte(command: str, sent: dict) -> None:
    reply = COMMAND_REPLIES[command].from_wire(sent)
    again = reply.to_wire()
    assert again == sent and list(again) == list(sent)
    assert [type(v) for v in again.values()] == [type(v) for v in sent.values()]
    assert msgpack.packb(again, use_bin_type=True) == msgpack.packb(sent, use_bin_type=True)
    assert COMMAND_REPLIES[command].from_wire(msgpack.unpackb(msgpack.packb(again, use_bin_type=True))) == reply


def test_the_agent_builds_the_maps_it_always_sent() -> None:
    # As the handlers and the agent's modules build them (keyword or positional), in the old maps' order.
    assert list(ServerReply(40123, driver="builtin", reused=True).to_wire()) == ["port", "driver", "reused"]
    assert list(ServerReply(5201, [5201], [7], "iperf3").to_wire()) == ["port", "ports", "pids", "driver"]
    assert list(StartFlowsReply(["f"], 1, "s.json", None).to_wire()) == ["flows", "pid", "specs"]
    assert list(QdiscReply("eth0", [], "fq", None).to_wire()) == ["dev", "argv", "kind"]
    assert NetemReply("eth0", fallback="m:f", result=None).to_wire() == {"dev": "eth0", "fallback": "m:f",
                                                                         "result": None}
    assert list(NetemReply("eth0", [["tc"]], warnings=["w"]).to_wire()) == ["dev", "argv", "warnings"]
    assert ReleaseReply(False).to_wire() == {"released": False}
    listing = FetchListReply("3", [FileEntry("a", 1, "x")], CHUNK_SIZE, [])
    assert listing.to_wire() == {"exp": "3", "files": [{"path": "a", "size": 1, "sha256": "x"}],
                                 "chunk": CHUNK_SIZE, "flows_running": []}


def test_absent_fields_take_their_defaults() -> None:
    assert HelloReply.from_wire({}) == HelloReply()  # an agent that tells little
    assert HelloReply.from_wire({"lease": 10}).lease == 10
    listing = FetchListReply.from_wire({"files": []})
    assert (listing.chunk, listing.flows_running) == (0, [])
    assert ServerReply.from_wire({"port": 1}).reused is None


@pytest.mark.parametrize("cls, result, message", [
    (HelloReply, ["not", "a", "map"], "malformed hello reply: expected a map, got list"),
    (HelloReply, {"lease": "soon"}, "malformed hello reply: lease='soon' is not int or float"),
    (TimeReply, {}, "malformed time reply: time is missing"),
    (TimeReply, {"time": True}, "malformed time reply: time=True is not int or float"),
    (ServerReply, {"port": "40123"}, "malformed prepare_server reply: port='40123' is not int"),
    (StatusReply, {"exp": "3", "running": [1], "done": [], "failed": [], "progress": {}, "errors": {},
                   "finished": True, "server_running": []},
     "malformed status reply: running=[1]: expected a list of str"),
    (StatusReply, {"exp": "3"}, "malformed status reply: running is missing"),
    (FetchListReply, {"files": "nope"}, "malformed fetch_list reply: files='nope' is not a list"),
    (FetchListReply, {"files": [{"path": "a"}]},
     "malformed fetch_list reply: bad file entry {'path': 'a'} (expected path, size, sha256)"),
    (FetchListReply, {"files": [], "chunk": -1}, "malformed fetch_list reply: chunk=-1 is not a positive integer"),
    (ChunkReply, {"path": "a", "data": "abc", "crc32": 0, "offset": 0},
     "malformed fetch_chunk reply: data='abc' is not bytes"),
    (ChunkReply, {"path": "a", "data": b"abc", "offset": 0}, "malformed fetch_chunk reply: crc32 is missing"),
    (ReleaseReply, {"released": 1}, "malformed release reply: released=1 is not bool"),
])
def test_a_malformed_reply_is_a_protocol_error_naming_command_and_field(cls: type, result: object,
                                                                        message: str) -> None:
    with pytest.raises(ProtocolError) as info:
        cls.from_wire(result)
    assert info.value.message == message


def test_replies_are_frozen() -> None:
    reply = TimeReply(1.0)
    with pytest.raises(AttributeError):
        reply.time = 2.0  # type: ignore[misc]
