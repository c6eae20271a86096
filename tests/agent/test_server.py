"""A real netesto-agent on loopback: CURVE, allowlists, options, versions, bad frames, leases, faults."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time

import msgpack
import pytest
import zmq
import zmq.auth

from netesto.controller.client import AgentClient
from netesto.errors import AgentError, AgentUnreachable, VersionMismatch
from netesto.protocol import Request, decode, encode
from tests.agent.agentproc import FAULTY_AGENT, REPO, wait_for


def raw_dealer(agent, keys, key="controller"):
    """A bare DEALER (no AgentClient) for sending hand-made frames."""
    ctx = zmq.Context.instance()
    sock = ctx.socket(zmq.DEALER)
    sock.linger = 0
    if keys is not None:
        sock.curve_serverkey = zmq.auth.load_certificate(str(keys.agent_public))[0]
        sock.curve_publickey, sock.curve_secretkey = zmq.auth.load_certificate(str(keys.dir / f"{key}.key_secret"))
    sock.connect(f"tcp://127.0.0.1:{agent.port}")
    return sock


def test_hello_over_curve(agents, keys):
    agent = agents(keys=keys)
    with agent.client() as c:
        info = c.hello()
        assert info.protocol == "1.0" and info.package
        assert info.kernel == os.uname().release
        assert abs(info.time - time.time()) < 5
        offset, rtt = c.clock_offset(samples=4)
        assert abs(offset) < 0.05 and 0 < rtt < 0.5
    assert agent.logged("accepted connection from 127.0.0.1"), agent.log_text()[-2000:]


def test_wrong_key_is_refused_and_the_refusal_logged(agents, keys):
    # A refused key looked like a dead agent: the controller waited out its timeout (10 s a
    # host) and ran the script anyway. The handshake failure is seen and named at once.
    agent = agents(keys=keys)
    t0 = time.monotonic()
    with agent.client(key="intruder", timeout=10.0) as c:
        with pytest.raises(AgentError, match=f"127.0.0.1:{agent.port} refused our CURVE key") as info:
            c.hello()
    assert info.value.kind == "AuthFailed" and info.value.host == "h1" and time.monotonic() - t0 < 5
    intruder = zmq.auth.load_certificate(str(keys.dir / "intruder.key"))[0].decode()
    assert wait_for(lambda: f"refused connection from 127.0.0.1: Unknown key client key {intruder}" in agent.log_text())
    with agent.client() as c:  # and the right key still works
        assert c.hello().protocol == "1.0"


@pytest.mark.parametrize("curve", [True, False], ids=["curve", "insecure-loopback"])
def test_address_not_in_allowlist_is_refused(agents, keys, tmp_path, curve):
    # With CURVE and in insecure loopback mode alike, the allowlist applies.
    allow = tmp_path / "clients.txt"
    allow.write_text("# only this one\n127.0.0.9\n")
    agent = agents(keys=keys if curve else None, extra=("--allow", str(allow)))
    with agent.client(timeout=1.0) as c:
        # with CURVE the refused handshake is seen at once; without it there is only silence
        with pytest.raises(AgentError, match="or our address is not allowed" if curve else "no answer") as info:
            c.hello()
        assert isinstance(info.value, AgentUnreachable) != curve
    assert wait_for(lambda: "refused connection from 127.0.0.1: Address not allowed" in agent.log_text())


def test_address_in_allowlist_is_accepted(agents, keys, tmp_path):
    allow = tmp_path / "clients.txt"
    allow.write_text("127.0.0.1   # the controller\n")
    agent = agents(keys=keys, extra=("--allow", str(allow)))
    with agent.client() as c:
        assert c.hello().protocol == "1.0"


def test_insecure_refused_on_a_non_loopback_bind(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "netesto.agent.cli", "--insecure", "--bind", "0.0.0.0",
                           "--datadir", str(tmp_path)], capture_output=True, text=True, timeout=30,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 2
    assert "--insecure is only allowed on a loopback address" in proc.stderr


def test_curve_without_keys_refused(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "netesto.agent.cli", "--bind", "127.0.0.1", "--port", "0",
                           "--datadir", str(tmp_path)], capture_output=True, text=True, timeout=30,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 2 and "CURVE needs" in proc.stderr


def test_version_mismatch_is_reported_naming_both(agents, keys):
    agent = agents(keys=keys)
    sock = raw_dealer(agent, keys)
    sock.send(msgpack.packb({"v": "2.0", "k": "req", "id": 5, "t": "hello", "a": {}}))
    assert sock.poll(5000)
    reply = decode(sock.recv())
    sock.close()
    assert not reply.ok and reply.id == 5 and reply.error.type == "VersionMismatch"
    assert "we speak 1.0, peer speaks 2.0" in reply.error.message
    assert reply.error.detail == {"ours": "1.0", "theirs": "2.0"}
    assert wait_for(lambda: "refused a request from peer" in agent.log_text())
    assert agent.logged("protocol version mismatch: we speak 1.0, peer speaks 2.0"), agent.log_text()[-2000:]


def test_client_reports_an_agent_of_another_major_version(agents, keys):
    agent = agents(keys=keys, env={"NETESTO_AGENT_PROTOCOL_VERSION": "2.1"}, module=FAULTY_AGENT)
    with agent.client() as c:
        with pytest.raises(VersionMismatch) as info:
            c.hello()
    text = str(info.value)
    assert "we speak 1.0" in text and "peer speaks 2.1" in text and "h1" in text


def test_malformed_and_oversized_messages_are_dropped_and_the_agent_keeps_serving(agents, keys):
    agent = agents(keys=keys, extra=("--max-message", "65536"))
    sock = raw_dealer(agent, keys)
    sock.send(b"\xc1 this is not msgpack")
    sock.send(msgpack.packb(["a", "list"]))
    sock.send_multipart([b"two", b"frames"])
    oversized = encode(Request(1, "hello", {"pad": b"x" * 70000}))
    sock.send(oversized)
    sock.send(encode(Request(2, "hello")))
    assert sock.poll(5000)
    reply = decode(sock.recv())
    sock.close()
    assert reply.id == 2 and reply.ok  # only the good request was answered
    log = agent.log_text()
    assert "dropped a malformed message" in log
    assert "dropped a message of 2 frames" in log
    assert f"dropped an oversized message from peer " in log
    assert f"{len(oversized)} bytes > limit 65536" in log
    with agent.client() as c:
        assert c.hello().protocol == "1.0"


def test_a_frame_over_the_hard_cap_drops_that_peer_and_the_agent_keeps_serving(agents, keys):
    agent = agents(keys=keys, extra=("--max-message", "65536"))  # libzmq's cap: 4 x 65536
    sock = raw_dealer(agent, keys)
    sock.send(encode(Request(1, "hello")))
    assert sock.poll(5000) and decode(sock.recv()).ok
    sock.send(encode(Request(2, "hello", {"pad": b"x" * 300_000})))
    sock.send(encode(Request(3, "hello")))  # may arrive over the DEALER's automatic reconnection
    answered = []
    while sock.poll(1000):
        answered.append(decode(sock.recv()).id)
    sock.close()
    assert 2 not in answered
    with agent.client() as c:
        assert c.hello().protocol == "1.0"


def test_unknown_command_gets_a_structured_error(agents, keys):
    agent = agents(keys=keys)
    sock = raw_dealer(agent, keys)
    sock.send(encode(Request(3, "format_disk")))
    assert sock.poll(5000)
    reply = decode(sock.recv())
    sock.close()
    assert reply.error.type == "UnknownCommand" and "format_disk" in reply.error.message


def test_drop_replies_fault_gives_agent_unreachable_naming_host_and_port(agents, keys):
    agent = agents(keys=keys, env={"NETESTO_AGENT_FAULT": "drop-replies"}, module=FAULTY_AGENT)
    with agent.client(timeout=0.5) as c:
        with pytest.raises(AgentUnreachable) as info:
            c.hello()
    assert f"127.0.0.1:{agent.port}" in str(info.value) and info.value.host == "h1"


def test_the_shipped_package_has_no_fault_switches():
    # The faults above come from the test-only entry point tests/agent/faulty_agent.py.
    for path in (REPO / "netesto").rglob("*.py"):
        text = path.read_text()
        assert "NETESTO_AGENT_FAULT" not in text and "NETESTO_AGENT_PROTOCOL_VERSION" not in text, path


def test_crash_on_start_fault(tmp_path, keys):
    proc = subprocess.run([sys.executable, "-m", FAULTY_AGENT, "--bind", "127.0.0.1", "--insecure",
                           "--port", "0", "--datadir", str(tmp_path)], capture_output=True, text=True, timeout=30,
                          env={**os.environ, "PYTHONPATH": str(REPO), "NETESTO_AGENT_FAULT": "crash-on-start"})
    assert proc.returncode == 3


def test_events_and_heartbeat_keep_the_lease(agents, keys):
    agent = agents(keys=keys, extra=("--lease", "1.5"))
    with agent.client(heartbeat=0.3) as c:
        c.hello()
        time.sleep(2.5)  # longer than the lease: only heartbeats keep it
    assert "lease expired" not in agent.log_text()
    assert wait_for(lambda: "lease expired" in agent.log_text(), timeout=5)


def test_default_heartbeat_keeps_a_lease_shorter_than_its_period(agents, keys):
    # heartbeat=5 s but the agent's lease is 1.5 s: the client must beat every lease/3.
    agent = agents(keys=keys, extra=("--lease", "1.5"))
    with agent.client(heartbeat=5.0) as c:
        c.hello()
        time.sleep(3.0)
        assert "lease expired" not in agent.log_text()


def test_importing_the_agent_is_light():
    code = ("import sys, netesto.agent, netesto.agent.server, netesto.agent.cli, netesto.controller.client; "
            "print('\\n'.join(sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(REPO)}).stdout.split()
    for heavy in ("xarray", "IPython", "bokeh", "holoviews", "pandas", "numpy"):
        assert heavy not in out, heavy


def test_bad_arguments_get_usage_errors_not_crashes(agents, keys):
    agent = agents(keys=keys)
    with agent.client() as c:
        for cmd, args, text in (("status", {"exp": "../etc"}, "bad experiment name"),
                                ("fetch_chunk", {"exp": 1, "path": "../../etc/passwd"}, "no data|no file"),
                                ("start_flows", {"exp": 1, "specs": [{"flow_id": "x", "test": "NOPE"}]}, "bad flow spec"),
                                ("start_flows", {"exp": 1, "specs": [1]}, "bad flow spec 1: expected a map"),
                                ("start_flows", {"exp": 1, "at": float("inf"), "specs": [
                                    {"flow_id": "x", "test": "TCP_STREAM", "server": "127.0.0.1", "port": 9}]},
                                 r"start time inf is not a finite number"),
                                ("start_flows", {"exp": 1, "specs": [{"flow_id": "x", "test": "TCP_STREAM",
                                                                      "server": "127.0.0.1", "port": 9,
                                                                      "dur": float("nan")}]},
                                 r"bad flow spec: flow x: dur must be a finite number, got nan"),
                                ("snapshot", {"exp": 1, "interfaces": [1]}, r"bad interface 1 for snapshot"),
                                ("prepare_server", {"exp": 1, "driver": "iperf3", "ports": ["a"]},
                                 r"bad port 'a' for the iperf3 server: expected 1024\.\.65535"),
                                ("prepare_server", {"exp": 1, "driver": "netperf", "ports": [70000]},
                                 r"bad port 70000 for the netperf server"),
                                ("set_sysctl", {"settings": [1, 2]}, r"bad sysctl setting 1: expected \[name, value\]"),
                                ("set_sysctl", {"settings": [["net.ipv4.tcp_ecn", 1, 2]]},
                                 r"bad sysctl setting \['net.ipv4.tcp_ecn', 1, 2\]"),
                                ("snapshot", {"exp": 1, "interfaces": ["../../tmp"]}, r"bad interface '../../tmp'"),
                                ("ping_start", {"exp": 1, "target": "127.0.0.1", "duration": float("nan")},
                                 r"ping 127.0.0.1: duration nan is outside"),
                                ("snapshot", {"exp": 1, "order": "zero"}, "wrong type")):
            with pytest.raises(AgentError, match=text) as info:
                c.request(cmd, args)
            assert info.value.kind == ("NotFound" if cmd == "fetch_chunk" else "UsageError"), (cmd, args)
        assert c.hello().protocol == "1.0"


def test_netesto_keys_creates_a_pair_and_refuses_to_overwrite(tmp_path):
    run = lambda *a: subprocess.run([sys.executable, "-m", "netesto", "keys", str(tmp_path / "k"), *a],  # noqa: E731
                                    capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(REPO)})
    first = run("--name", "h1", "--name", "controller")
    assert first.returncode == 0, first.stderr
    public, secret = zmq.auth.load_certificate(str(tmp_path / "k" / "h1.key_secret"))
    assert len(public) == 40 and len(secret) == 40
    assert zmq.auth.load_certificate(str(tmp_path / "k" / "h1.key"))[0] == public
    assert oct((tmp_path / "k" / "h1.key_secret").stat().st_mode & 0o777) == "0o600"
    again = run("--name", "h1")
    assert again.returncode == 2 and "already exists" in again.stderr


def test_ipv6_loopback_agent(agents):
    import socket

    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback here")
    agent = agents(keys=None, bind="::1")
    with agent.client() as c:
        assert c.hello().protocol == "1.0"


def test_lease_warning_is_pushed_to_the_controller(agents, keys):
    agent = agents(keys=keys, extra=("--lease", "1.5"))
    events = []
    with agent.client(heartbeat=0) as c:
        c.on_event(events.append)
        c.hello()
        c.poll_events(timeout=1.4)
    kinds = [e.event for e in events]
    assert kinds == ["lease_warning"], kinds
    assert events[0].data["agent"] == "h1" and 0 < events[0].data["remaining"] <= 0.5


def test_slow_fault_times_out_a_short_timeout_but_not_a_long_one(agents, keys):
    agent = agents(keys=keys, env={"NETESTO_AGENT_FAULT": "slow", "NETESTO_AGENT_FAULT_DELAY": "0.6"}, module=FAULTY_AGENT)
    with agent.client(timeout=0.2, heartbeat=0) as c:
        with pytest.raises(AgentUnreachable):
            c.hello()
    with agent.client(timeout=5.0, heartbeat=0) as c:
        t0 = time.monotonic()
        assert c.hello().protocol == "1.0"
        assert time.monotonic() - t0 >= 0.5


@pytest.mark.parametrize("frame", [
    {"v": "1.0", "k": "req", "id": 1, "t": ["hello"], "a": {}},  # unhashable command
    {"v": "1.0", "k": "req", "id": 1, "t": {"x": 1}, "a": {}},
    {"v": "\u00b2.0", "k": "req", "id": 1, "t": "hello", "a": {}},  # str.isdigit() but not int()
    {"v": "1" * 5000 + ".0", "k": "req", "id": 1, "t": "hello", "a": {}},  # past int()'s digit limit
    {"v": "1.0", "k": "req", "id": 1, "t": "hello", "a": {"x": 1}, "extra": {"unknown": ["field"]}},
], ids=["list-command", "map-command", "superscript-version", "huge-version", "unknown-field"])
def test_one_hostile_frame_never_kills_the_agent(agents, keys, frame):
    agent = agents(keys=keys)
    sock = raw_dealer(agent, keys)
    sock.send(msgpack.packb(frame, use_bin_type=True))
    sock.send(encode(Request(2, "hello")))
    replies = []
    while sock.poll(3000):
        replies.append(decode(sock.recv()))
        if replies[-1].id == 2:
            break
    sock.close()
    assert agent.proc.poll() is None, agent.log_text()[-2000:]
    assert replies and replies[-1].id == 2 and replies[-1].ok


def test_one_unreadable_authorized_key_does_not_lock_out_every_controller(tmp_path):
    # zmq.auth loads a key directory all or nothing: one bad *.key there refused every
    # controller ("Unknown domain") while the agent said it was listening.
    from tests.agent.agentproc import Keys, start_agent

    keys = Keys.make(tmp_path / "keys")
    (keys.dir / "authorized" / "broken.key").write_text("not a key\n")
    agent = start_agent(tmp_path, keys=keys)
    try:
        with agent.client() as c:
            assert c.hello().protocol == "1.0"
        with agent.client(key="intruder", timeout=1.0) as c:
            with pytest.raises(AgentError, match="refused our CURVE key"):
                c.hello()
        assert agent.logged("broken.key", "skipped"), agent.log_text()[-2000:]
    finally:
        agent.kill()


@pytest.mark.parametrize("args, text", [
    (["--allow", "{tmp}/no-such-clients.txt"], r"cannot read the allowlist .*no-such-clients\.txt"),
    (["--lease", "nan"], r"bad lease nan"),
    (["--keys", "{tmp}/bad.key_secret"], r"cannot read the key file .*bad\.key_secret"),
], ids=["allowlist-missing", "lease-nan", "secret-key-garbage"])
def test_bad_agent_options_get_a_clear_error_not_a_traceback(tmp_path, args, text):
    (tmp_path / "bad.key_secret").write_text("garbage\n")
    (tmp_path / "auth").mkdir()
    argv = [a.format(tmp=tmp_path) for a in args]
    base = ["--bind", "127.0.0.1", "--port", "0", "--datadir", str(tmp_path / "d")]
    if "--keys" in argv:
        base += ["--authorized", str(tmp_path / "auth")]
    else:
        base.append("--insecure")
    proc = subprocess.run([sys.executable, "-m", "netesto.agent.cli", *base, *argv], capture_output=True, text=True,
                          timeout=30, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 2, proc.stderr
    assert re.search(text, proc.stderr) and "Traceback" not in proc.stderr, proc.stderr


def test_a_wrong_agent_key_in_the_lab_fails_at_once_naming_it(agents, keys, tmp_path):
    from netesto.commands.keys import create_keys

    agent = agents(keys=keys)
    create_keys(tmp_path, "other")
    t0 = time.monotonic()
    with AgentClient("h1", agent.address, agent.port, server_key=tmp_path / "other.key",
                     client_keys=keys.dir / "controller.key_secret", timeout=10.0) as c:
        with pytest.raises(AgentError, match="agent's public key in the lab file does not match") as info:
            c.hello()
    assert info.value.kind == "AuthFailed" and time.monotonic() - t0 < 5


def test_refused_connections_are_logged_at_a_bounded_rate(agents, keys):
    # Each refused connection logged a line: a peer retrying or flooding filled the log.
    agent = agents(keys=keys)
    for _ in range(20):
        with agent.client(key="intruder", timeout=2.0, heartbeat=0) as c:
            with pytest.raises(AgentError, match="refused our CURVE key"):
                c.hello()
    assert agent.logged("refused connection from 127.0.0.1")
    with agent.client() as c:  # a request the agent answers after the 20 refusals were handled
        c.hello()
    assert agent.log_text().count("refused connection from 127.0.0.1") == 1, agent.log_text()[-3000:]


def test_the_agent_bounds_experiment_numbers_ports_and_durations(agents, keys):
    # The agent accepted experiment 2**64-1, dur=1e12 and privileged iperf3 ports.
    agent = agents(keys=keys, extra=("--test-bind", "127.0.0.1"))
    with agent.client() as c:
        with pytest.raises(AgentError, match=r"experiment number 18446744073709551615 is over 2147483647"):
            c.status(2**64 - 1)
        with pytest.raises(AgentError, match=r"bad port 80 for the iperf3 server: expected 1024\.\.65535"):
            c.prepare_server(31, "", driver="iperf3", ports=[80])
        port = c.prepare_server(31, "").port
        spec = dict(flow_id="h1-h1-1-0", test="TCP_STREAM", server="127.0.0.1", port=port, dur=1e12, interval=0.05)
        with pytest.raises(AgentError, match=r"dur must be in \(0, 86400\]"):
            c.start_flows(31, [spec])
    assert not (agent.datadir / "18446744073709551615").exists()
