"""A real agent's claims and limits (issue 32): a claim belongs to a run's token and key, never to a
routing id; requests, servers and connections are bounded, and the agent keeps answering."""

from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path

import msgpack
import pytest
import zmq
import zmq.auth

from netesto.errors import AgentError, UsageError
from netesto.policy import MAX_CONNECTIONS, MAX_FLOWS_PER_REQUEST, MAX_PORTS_PER_REQUEST
from netesto.protocol import PROTOCOL_VERSION
from netesto.protocol.codec import unpack
from tests.agent.agentproc import AgentProc, Keys, wait_for

TOKEN = "0123456789abcdef0123456789abcdef"


@pytest.fixture
def two_keys(tmp_path: Path) -> Keys:
    """Keys where the intruder's key is authorized too: a second controller of the lab, not a stranger."""
    keys = Keys.make(tmp_path / "keys")
    shutil.copy(keys.dir / "intruder.key", keys.dir / "authorized" / "intruder.key")
    return keys


class Raw:
    """A DEALER speaking the wire protocol by hand, with the routing id and claim token a test picks."""

    def __init__(self, agent: AgentProc, key: str, routing_id: bytes | None = None) -> None:
        assert agent.keys is not None
        self.sock = zmq.Context.instance().socket(zmq.DEALER)
        self.sock.linger = 0
        if routing_id is not None:
            self.sock.routing_id = routing_id
        public, secret = zmq.auth.load_certificate(str(agent.keys.dir / f"{key}.key_secret"))
        self.sock.curve_serverkey = zmq.auth.load_certificate(str(agent.keys.agent_public))[0]
        self.sock.curve_publickey, self.sock.curve_secretkey = public, secret
        self.sock.connect(f"tcp://127.0.0.1:{agent.port}")
        self.public = public.decode()
        self.ids = iter(range(1, 10**6))

    def call(self, command: str, args: dict | None = None, token: str | None = None,
             timeout: float = 3.0) -> dict | None:
        """The reply map, or None if none came within ``timeout``."""
        rid = next(self.ids)
        end = time.monotonic() + timeout
        if not self.sock.poll(int(timeout * 1000), zmq.POLLOUT):  # not connected (refused)
            return None
        request = {"v": PROTOCOL_VERSION, "k": "req", "id": rid, "t": command, "a": args or {}}
        if token is not None:
            request["c"] = token  # what any peer may put on the wire
        try:
            self.sock.send(msgpack.packb(request, use_bin_type=True), zmq.NOBLOCK)
        except zmq.Again:  # refused between the poll and the send
            return None
        while self.sock.poll(max(1, int((end - time.monotonic()) * 1000))):
            msg = unpack(self.sock.recv())
            if msg.get("k") == "rep" and msg.get("id") == rid:
                return msg
        return None

    def close(self) -> None:
        self.sock.close(0)


def _error(reply: dict | None) -> str:
    assert reply is not None and reply["ok"] is False, reply
    return reply["e"][1]


def test_a_copied_routing_id_takes_nothing_and_the_run_keeps_its_claim_on_a_new_socket(agents, two_keys):
    # A second authorized controller that reused the owner's routing id took the claim over
    # (ROUTER_HANDOVER); and the owner itself, reconnected with a new routing id after a stall,
    # was refused "lab busy: run <itself>".
    agent = agents(keys=two_keys)
    owner = Raw(agent, "controller", routing_id=b"owner-1")
    assert owner.call("claim", {"run": "r1", "controller": "me"}, token=TOKEN)["ok"]
    # the copier's connection is refused while the owner's lives: it gets nothing done
    copier = Raw(agent, "intruder", routing_id=b"owner-1")
    assert copier.call("restore", timeout=1.5) is None
    assert owner.call("heartbeat", token=TOKEN)["ok"]  # the owner's connection was not taken
    copier.close()
    owner.close()
    # the routing id free again (once the agent dropped the closed connections): neither another key
    # nor the owner's own key without the token may act
    for key in ("intruder", "controller"):
        for _ in range(20):
            other = Raw(agent, key, routing_id=b"owner-1")
            reply = other.call("restore", timeout=1.0)
            if reply is not None:
                break
            other.close()  # the old connection with that id was still there
        text = _error(reply)
        assert text.startswith("lab busy: run 'r1' (calling itself 'me'), claimed by the controller with CURVE key "
                               f"{owner.public} since "), text
        assert "lapses in" in text
        assert "Busy" == other.call("stop", token="f" * 32)["e"][0]  # a wrong token is no token
        other.close()
    thief = Raw(agent, "intruder")  # the token (say, from a leaked log) without the owner's secret key
    assert "lab busy" in _error(thief.call("restore", token=TOKEN))
    assert "lab busy" in _error(thief.call("claim", {"run": "r2"}, token=TOKEN))
    thief.close()
    # the run on a new socket (a new routing id, as after a stall) is still the owner
    back = Raw(agent, "controller")
    assert back.call("restore", token=TOKEN)["ok"]
    assert back.call("release", token=TOKEN)["a"]["released"] is True
    back.close()


def test_claim_strings_over_their_limits_are_refused(agents, keys):
    agent = agents(keys=keys)
    raw = Raw(agent, "controller")
    reply = raw.call("claim", {"run": "r" * 65, "controller": "me"}, token=TOKEN)
    assert reply["e"][:2] == ["UsageError", "claim: run is 65 characters long; at most 64"], reply
    reply = raw.call("claim", {"run": "r", "controller": "c" * 201}, token=TOKEN)
    assert reply["e"][1] == "claim: controller is 201 characters long; at most 200", reply
    assert raw.call("claim", {"run": "r" * 64, "controller": "c" * 200}, token=TOKEN)["a"]["run"] == "r" * 64
    raw.close()
    with agent.client() as c, pytest.raises(UsageError, match="at most 64"):  # our side refuses it first
        c.claim("r" * 65, "me")


def test_5000_server_ports_are_refused_and_the_agent_keeps_answering_hello_and_sigterm(agents, keys):
    # prepare_server with 5,000 iperf3 ports started ~1,000 servers, one by one inside the agent's
    # loop: it stopped answering and ignored SIGTERM.
    agent = agents(keys=keys)
    with agent.client() as c:
        t0 = time.monotonic()
        with pytest.raises(AgentError, match=rf"5000 iperf3 server ports in one request; at most "
                                             rf"{MAX_PORTS_PER_REQUEST}") as err:
            c.prepare_server(1, driver="iperf3", ports=list(range(20000, 25000)))
        assert err.value.kind == "UsageError" and time.monotonic() - t0 < 2
        spec = dict(test="TCP_STREAM", server="127.0.0.1", port=9, dur=1.0)
        flows = [dict(spec, flow_id=f"h1-h1-1-{i}") for i in range(MAX_FLOWS_PER_REQUEST + 1)]
        with pytest.raises(AgentError, match=rf"{MAX_FLOWS_PER_REQUEST + 1} flows in one start_flows request; "
                                             rf"at most {MAX_FLOWS_PER_REQUEST}"):
            c.start_flows(2, flows)
        assert c.hello().agent == "h1"
    assert not (agent.datadir / "2").exists()  # nothing of the refused request started
    t0 = time.monotonic()
    agent.proc.send_signal(signal.SIGTERM)
    agent.proc.wait(timeout=5)
    assert time.monotonic() - t0 < 2


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_connections_beyond_the_cap_are_refused_and_the_agent_keeps_serving_the_others(agents, keys):
    # 5,000 idle connections raised the agent's descriptors from 17 to 5,017, with no cap.
    agent = agents(keys=keys)
    idle = _fds(agent.proc.pid)
    held: list[Raw] = []
    try:
        for _ in range(MAX_CONNECTIONS):
            held.append(Raw(agent, "controller"))
            assert held[-1].call("heartbeat", timeout=10) is not None, len(held)
        held += [Raw(agent, "controller") for _ in range(40)]  # refused (and retrying every 100 ms)
        time.sleep(1.0)
        assert _fds(agent.proc.pid) <= idle + MAX_CONNECTIONS + 20, _fds(agent.proc.pid)
        late = agent.client(timeout=3.0)
        try:
            with pytest.raises(AgentError, match=r"refused the connection: the agent holds as many connections "
                                                 r"as it takes \(netesto.policy.MAX_CONNECTIONS\)") as err:
                late.hello()
            assert err.value.kind == "AuthFailed"
        finally:
            late.close()
        assert held[0].call("hello") is not None  # those it took are served
        assert held[-1].call("hello", timeout=0.5) is None
        assert agent.logged("too many connections")
    finally:
        for r in held:
            r.close()
    assert wait_for(lambda: _fds(agent.proc.pid) <= idle + 4, timeout=10), _fds(agent.proc.pid)
    with agent.client() as c:  # room again
        assert c.hello().agent == "h1"


def test_a_flow_start_leaves_no_stderr_file_behind(agents, keys):
    # Each start of the flow engine left a client-*.stderr in the agent's .agent/ for ever.
    agent = agents(keys=keys, extra=("--test-bind", "127.0.0.1"))
    with agent.client() as c:
        port = c.prepare_server(3, "").port
        spec = dict(flow_id="h1-h1-1-0", test="TCP_STREAM", server="127.0.0.1", port=port, dur=0.3)
        c.start_flows(3, [spec])
        c.start_flows(3, [dict(spec, flow_id="h1-h1-1-1", port=9)])  # refused connection: the engine fails
        assert c.wait_flows(3, timeout=20).complete
    assert wait_for(lambda: not list((agent.datadir / ".agent").glob("client-*.stderr")), timeout=5), \
        list((agent.datadir / ".agent").iterdir())
