"""A real netesto-agent on loopback: CURVE, refusals, versions, bad frames, faults, fetch, restart."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import msgpack
import pytest
import zmq
import zmq.auth

from netesto.controller.client import AgentClient
from netesto.errors import AgentError, AgentUnreachable, PolicyError, ProtocolError, VersionMismatch
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
        assert info["protocol"] == "1.0" and info["package"]
        assert info["kernel"] == os.uname().release
        assert abs(info["time"] - time.time()) < 5
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
        assert c.hello()["protocol"] == "1.0"


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
        assert c.hello()["protocol"] == "1.0"


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
        assert c.hello()["protocol"] == "1.0"


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
        assert c.hello()["protocol"] == "1.0"


def test_ack_is_refused_while_flows_run_and_nothing_is_deleted(agents, keys, tmp_path):
    agent = agents(keys=keys, extra=("--test-bind", "127.0.0.1"))
    with agent.client() as c:
        port = c.prepare_server(3, "t3")["port"]
        spec = dict(flow_id="h1-h1-1-0", test="TCP_STREAM", server="127.0.0.1", port=port, dur=3.0, token="t3",
                    exp=3, interval=0.05)
        c.start_flows(3, [spec])
        assert wait_for(lambda: c.status(3)["running"] == [] or
                        (agent.datadir / "3" / "flows" / "h1-h1-1-0.client.nflow").exists(), timeout=5)
        with pytest.raises(Exception, match="still has running flows; not deleting its data") as info:
            c.request("ack", {"exp": 3})
        assert getattr(info.value, "kind", "") == "Busy"
        assert (agent.datadir / "3" / "flows" / "h1-h1-1-0.client.nflow").exists()
        got = c.fetch(3, tmp_path / "early")  # a fetch during the flow does not acknowledge either
        assert got and (agent.datadir / "3").exists()
        c.stop(3)


def test_unknown_command_gets_a_structured_error(agents, keys):
    agent = agents(keys=keys)
    sock = raw_dealer(agent, keys)
    sock.send(encode(Request(3, "format_disk")))
    assert sock.poll(5000)
    reply = decode(sock.recv())
    sock.close()
    assert reply.error.type == "UnknownCommand" and "format_disk" in reply.error.message


def test_sysctl_outside_the_allowlist_is_refused_with_the_allowed_list(agents, keys):
    agent = agents(keys=keys)
    with agent.client() as c:
        with pytest.raises(PolicyError) as info:
            c.set_sysctl({"kernel.core_pattern": "|/bin/sh"})
        assert "net.ipv4.tcp_wmem" in str(info.value) and "net.core.rmem_max" in str(info.value)
        assert "h1" in str(info.value)
        with pytest.raises(PolicyError, match=r"outside 16000..270000"):
            c.set_sysctl({"net.ipv4.tcp_wmem": "4096 1000 4194304"})
        with pytest.raises(PolicyError, match="expected 3 value"):
            c.set_sysctl({"net.ipv4.tcp_wmem": "4096"})
        with pytest.raises(PolicyError, match="not allowed"):
            c.set_module_params("ext4", {"x": 1})
        with pytest.raises(PolicyError, match="qdisc 'sh' is not allowed"):
            c.set_qdisc("lo", "sh", rate="1")
        with pytest.raises(PolicyError, match="not valid"):
            c.set_qdisc("lo", "tbf", rate="1mbit; reboot")


def test_absent_module_gives_a_clear_error(agents, keys):
    agent = agents(keys=keys)
    with agent.client() as c:
        if os.path.isdir("/sys/module/tcp_nv"):
            pytest.skip("tcp_nv is loaded here")
        with pytest.raises(Exception, match="module tcp_nv is not loaded on this host"):
            c.set_module_params("tcp_nv", {"nv_pad": 2})


def test_drop_replies_fault_gives_agent_unreachable_naming_host_and_port(agents, keys):
    agent = agents(keys=keys, env={"NETESTO_AGENT_FAULT": "drop-replies"}, module=FAULTY_AGENT)
    with agent.client(timeout=0.5) as c:
        with pytest.raises(AgentUnreachable) as info:
            c.hello()
    assert f"127.0.0.1:{agent.port}" in str(info.value) and info.value.host == "h1"


def test_crash_on_start_fault(tmp_path, keys):
    proc = subprocess.run([sys.executable, "-m", FAULTY_AGENT, "--bind", "127.0.0.1", "--insecure",
                           "--port", "0", "--datadir", str(tmp_path)], capture_output=True, text=True, timeout=30,
                          env={**os.environ, "PYTHONPATH": str(REPO), "NETESTO_AGENT_FAULT": "crash-on-start"})
    assert proc.returncode == 3


def _fill(datadir, exp, files):
    for rel, data in files.items():
        p = datadir / str(exp) / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)


def test_fetch_chunks_digests_ack_then_delete(agents, keys, tmp_path):
    agent = agents(keys=keys)
    big = os.urandom(3 * 1024 * 1024 + 17)
    _fill(agent.datadir, 4, {"flows/a.client.nflow": big, "0/h1.snmp": b"Tcp: 1\n", "empty": b""})
    with agent.client() as c:
        assert "4" in c.hello()["unfetched"]
        paths = c.fetch(4, tmp_path / "got" / "4")
    got = {p.relative_to(tmp_path / "got" / "4").as_posix(): p.read_bytes() for p in paths}
    assert got["flows/a.client.nflow"] == big and got["0/h1.snmp"] == b"Tcp: 1\n" and got["empty"] == b""
    assert not (agent.datadir / "4").exists()  # deleted after the ack
    assert not list((tmp_path / "got").rglob("*.part"))


def test_fetch_detects_a_corrupted_chunk_and_keeps_the_agent_copy(agents, keys, tmp_path):
    agent = agents(keys=keys, env={"NETESTO_AGENT_FAULT": "corrupt-chunk"}, module=FAULTY_AGENT)
    data = os.urandom(200_000)
    _fill(agent.datadir, 9, {"flows/x.nflow": data})
    with agent.client() as c:
        with pytest.raises(ProtocolError, match="failed its crc32 check"):
            c.fetch(9, tmp_path / "got")
    assert (agent.datadir / "9" / "flows" / "x.nflow").read_bytes() == data  # not acknowledged, not deleted
    assert not (tmp_path / "got" / "flows" / "x.nflow").exists()


def test_fetch_resumes_from_a_partial_file(agents, keys, tmp_path):
    agent = agents(keys=keys)
    data = os.urandom(2 * 1024 * 1024 + 5)
    _fill(agent.datadir, 11, {"big.bin": data})
    dest = tmp_path / "got"
    dest.mkdir()
    (dest / "big.bin.part").write_bytes(data[:1_500_000])  # an earlier fetch was cut here
    with agent.client() as c:
        [path] = c.fetch(11, dest)
    assert hashlib.sha256(path.read_bytes()).digest() == hashlib.sha256(data).digest()


def test_agent_killed_and_restarted_offers_unfetched_data(agents, keys, tmp_path):
    agent = agents(keys=keys, tag="first")
    _fill(agent.datadir, 21, {"flows/h1-h2-1-0.server.nflow": b"abc" * 1000})
    with agent.client() as c:
        assert c.hello()["unfetched"] == ["21"]
    agent.kill()  # SIGKILL: no clean shutdown
    again = agents(keys=keys, tag="second", datadir=agent.datadir)
    with again.client() as c:
        assert c.hello()["unfetched"] == ["21"]
        [path] = c.fetch(21, tmp_path / "ctl" / "21")
        assert path.read_bytes() == b"abc" * 1000
        assert c.hello()["unfetched"] == []


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


def test_snapshot_writes_host_stats_under_the_order_directory(agents, keys):
    agent = agents(keys=keys)
    with agent.client() as c:
        out = c.snapshot(2, 0, "h1")
    assert "0/h1.info" in out["files"] and "0/h1.snmp" in out["files"]
    assert (agent.datadir / "2" / "0" / "h1.snmp").read_text().startswith("Ip:")


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
            with pytest.raises(Exception, match=text):
                c.request(cmd, args)
        assert c.hello()["protocol"] == "1.0"


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
        assert c.hello()["protocol"] == "1.0"


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
        assert c.hello()["protocol"] == "1.0"
        assert time.monotonic() - t0 >= 0.5


def _gone(pid: int) -> bool:
    """No such process, or only a zombie waiting for its new parent to reap it."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def _kill_if_alive(pid: int) -> None:
    """Teardown for a failed test: the server it started must not stay behind."""
    import signal

    if not _gone(pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_iperf3_server_dies_with_a_sigkilled_agent(agents, keys):
    import shutil

    if shutil.which("iperf3") is None:
        pytest.skip("iperf3 not installed")
    agent = agents(keys=keys, extra=("--test-bind", "127.0.0.1"))
    port = _free_port()
    with agent.client() as c:
        out = c.prepare_server(1, driver="iperf3", ports=[port])
    [pid] = out["pids"]
    assert out["ports"] == [port] and not _gone(pid)
    try:
        assert "iperf3" in open(f"/proc/{pid}/cmdline").read()
        agent.kill()  # SIGKILL: the agent cannot stop it itself
        assert wait_for(lambda: _gone(pid), timeout=1.0), f"iperf3 pid {pid} outlived the agent"
    finally:
        _kill_if_alive(pid)


def _fake_netserver(bindir):
    """A stand-in netserver (netperf is not installable here): logs its argv, then waits."""
    bindir.mkdir(exist_ok=True)
    script = bindir / "netserver"
    script.write_text(f"#!{sys.executable}\nimport json, sys, time\n"
                      f"open({str(bindir / 'argv.json')!r}, 'w').write(json.dumps(sys.argv[1:]))\n"
                      "time.sleep(120)\n")
    script.chmod(0o755)


def test_prepare_server_netperf_without_netserver_says_so(agents, keys, tmp_path):
    path = "/usr/sbin:/usr/bin:/sbin:/bin"
    import shutil

    if shutil.which("netserver", path=path):
        pytest.skip("netserver is installed here")
    agent = agents(keys=keys, env={"PATH": path})
    with agent.client() as c:
        with pytest.raises(Exception, match="netserver server on port 12865: netserver not found on PATH") as info:
            c.prepare_server(1, driver="netperf")
        assert "non-free" in str(info.value) and "h1" in str(info.value)
        assert c.hello()["protocol"] == "1.0"


def test_prepare_server_netperf_starts_netserver_that_dies_with_the_agent(agents, keys, tmp_path):
    _fake_netserver(tmp_path / "bin")
    agent = agents(keys=keys, extra=("--test-bind", "127.0.0.1"),
                   env={"PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"})
    with agent.client() as c:
        out = c.prepare_server(1, driver="netperf", ports=[12999])
        again = c.prepare_server(1, driver="netperf", ports=[12999])
    assert out["driver"] == "netperf" and out["ports"] == [12999] and again["pids"] == out["pids"]
    import json

    # The stand-in is a Python script: under load it may log its argv after the reply.
    assert wait_for(lambda: (tmp_path / "bin" / "argv.json").exists(), timeout=10)
    assert json.loads((tmp_path / "bin" / "argv.json").read_text()) == ["-D", "-p", "12999", "-L", "127.0.0.1"]
    [pid] = out["pids"]
    try:
        agent.kill()
        assert wait_for(lambda: _gone(pid), timeout=1.0), f"netserver pid {pid} outlived the agent"
    finally:
        _kill_if_alive(pid)


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


@pytest.mark.parametrize("host", ["../../../escaped", "/tmp/netesto-h-agent-escaped", "a/b", ".."])
def test_snapshot_host_cannot_write_outside_the_experiment(agents, keys, tmp_path, host):
    # The host name becomes a file name (<exp>/<order>/<host>.snmp): a path in it
    # would write the host's statistics wherever the controller asked.
    agent = agents(keys=keys)
    with agent.client() as c:
        with pytest.raises(AgentError, match="bad host name") as info:
            c.snapshot(1, 0, host)
        assert info.value.kind == "UsageError" and "h1" in str(info.value)
        assert c.hello()["protocol"] == "1.0"
    assert not list(tmp_path.glob("escaped*")) and not list(tmp_path.parent.glob("escaped*"))
    assert not list(Path("/tmp").glob("netesto-h-agent-escaped*"))
    assert not (agent.datadir / "1" / "0").exists() or not any((agent.datadir / "1" / "0").rglob("*"))


@pytest.mark.parametrize("args, text", [
    ({"path": "0/h1.snmp", "offset": 2**63}, r"bad chunk offset 9223372036854775808"),
    ({"path": "0/h1\x00.snmp"}, r"no file '0/h1\\x00.snmp' in experiment 4"),
    ({"path": "0"}, r"no file '0' in experiment 4"),
    ({"path": "/etc/passwd"}, r"no file '/etc/passwd' in experiment 4"),
], ids=["offset-past-off_t", "nul-in-path", "a-directory", "absolute"])
def test_fetch_chunk_refusals_name_the_file_and_experiment(agents, keys, args, text):
    agent = agents(keys=keys)
    with agent.client() as c:
        c.snapshot(4, 0, "h1")
        with pytest.raises(AgentError, match=text) as info:
            c.request("fetch_chunk", {"exp": 4, **args})
        assert info.value.kind in ("UsageError", "NotFound") and "internal error" not in str(info.value)
        assert c.request("fetch_chunk", {"exp": 4, "path": "0/h1.snmp"})["data"].startswith(b"Ip:")


needs_tcpdump = pytest.mark.skipif(shutil.which("tcpdump") is None or os.geteuid() != 0, reason="tcpdump as root")


@needs_tcpdump
def test_tcpdump_that_fails_at_once_is_reported_naming_the_cause(agents, keys):
    agent = agents(keys=keys)
    with agent.client() as c:
        with pytest.raises(AgentError, match=r"tcpdump .*exited.*unknown host 'no-such-host\.invalid'") as info:
            c.tcpdump_start(8, "lo", "no-such-host.invalid", 10)
        assert info.value.kind == "ToolError" and "h1" in str(info.value)
        assert c.tcpdump_stop(8)["stopped"] == []  # nothing left to stop
        assert c.hello()["protocol"] == "1.0"


@needs_tcpdump
def test_tcpdump_captures_from_the_moment_tcpdump_start_returns(agents, keys):
    # The runner starts flows right after tcpdump_start: packets sent then must be in the pcap.
    agent = agents(keys=keys)
    mark = f"netesto-mark-{os.getpid()}".encode()
    with agent.client() as c:
        path = c.tcpdump_start(9, "lo", "X", 100000)["path"]
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            for _ in range(3):
                s.sendto(mark, ("127.0.0.1", 9))
        time.sleep(0.2)  # the packets' way through the capture (-U --immediate-mode)
        c.tcpdump_stop(9)
    assert mark in (agent.datadir / "9" / path).read_bytes()


@needs_tcpdump
def test_fetch_while_tcpdump_runs_keeps_the_agent_copy(agents, keys, tmp_path):
    # The pcap still grows after the listing: acknowledging would delete what comes next.
    agent = agents(keys=keys)
    mark = f"netesto-late-{os.getpid()}".encode()
    with agent.client() as c:
        c.snapshot(10, 0, "h1")
        path = c.tcpdump_start(10, "lo", "X", 100000)["path"]
        c.fetch(10, tmp_path / "early")
        assert (agent.datadir / "10" / path).exists()
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.sendto(mark, ("127.0.0.1", 9))
        time.sleep(0.2)
        c.tcpdump_stop(10)
        got = c.fetch(10, tmp_path / "late")
    assert mark in (tmp_path / "late" / path).read_bytes()
    assert tmp_path / "late" / path in got and not (agent.datadir / "10").exists()


def test_ack_refuses_when_files_changed_since_the_listing(agents, keys, tmp_path):
    agent = agents(keys=keys)
    with agent.client() as c:
        c.snapshot(11, 0, "h1")
        c.request("fetch_list", {"exp": 11})
        with open(agent.datadir / "11" / "0" / "h1.snmp", "ab") as f:
            f.write(b"written after the listing\n")
        (agent.datadir / "11" / "late.txt").write_text("new\n")
        with pytest.raises(AgentError, match=r"changed since it was listed.*0/h1\.snmp.*late\.txt") as info:
            c.request("ack", {"exp": 11})
        assert info.value.kind == "Busy"
        assert (agent.datadir / "11" / "late.txt").exists()
        got = c.fetch(11, tmp_path / "again")  # a new listing covers them: now it is acknowledged
    assert (tmp_path / "again" / "late.txt").read_text() == "new\n"
    assert (tmp_path / "again" / "0" / "h1.snmp").read_bytes().endswith(b"written after the listing\n")
    assert len(got) > 2 and not (agent.datadir / "11").exists()


@pytest.mark.parametrize("exp, spec_exp, text", [
    ("x", None, r"experiment 'x'.*a number"),
    ("007", None, r"experiment '007'.*a number"),
    (12, 3, r"flow h1-h1-1-0 says exp 3 but start_flows is for experiment 12"),
], ids=["name", "leading-zero", "mismatch"])
def test_start_flows_refuses_flows_whose_files_would_land_in_another_experiment(agents, keys, exp, spec_exp, text):
    # The engine files a flow under <datadir>/<spec exp>/flows: a fetch of ``exp`` would miss it.
    agent = agents(keys=keys, extra=("--test-bind", "127.0.0.1"))
    with agent.client() as c:
        port = c.prepare_server(1, "")["port"]
        spec = dict(flow_id="h1-h1-1-0", test="TCP_STREAM", server="127.0.0.1", port=port, dur=0.5, interval=0.05)
        if spec_exp is not None:
            spec["exp"] = spec_exp
        with pytest.raises(AgentError, match=text) as info:
            c.start_flows(exp, [spec])
        assert info.value.kind == "UsageError"
    assert not [p for p in agent.datadir.iterdir() if not p.name.startswith(".")]


def test_start_flows_with_a_bad_ping_interval_starts_nothing(agents, keys):
    agent = agents(keys=keys, extra=("--test-bind", "127.0.0.1"))
    with agent.client() as c:
        port = c.prepare_server(13, "")["port"]
        spec = dict(flow_id="h1-h1-1-0", test="TCP_STREAM", server="127.0.0.1", port=port, dur=5.0, interval=0.05)
        with pytest.raises(AgentError, match=r"ping_interval 1000.* 0\.002\.\.60") as info:
            c.start_flows(13, [spec], ping=True, ping_interval=1000)
        assert info.value.kind == "UsageError"
        st = c.status(13)
        assert st["running"] == [] and st["failed"] == [] and st["done"] == []


def test_start_flows_whose_ping_cannot_start_still_reports_the_started_flows(agents, keys):
    # The engine is already running when ping fails: an error reply would hide running flows.
    agent = agents(keys=keys, extra=("--test-bind", "127.0.0.1"))
    with agent.client() as c:
        spec = dict(flow_id="h1-x-1-0", test="TCP_STREAM", server="no-such-host.invalid", port=9, dur=1.0,
                    interval=0.05)
        out = c.start_flows(14, [spec], ping=True)
        assert out["flows"] == ["h1-x-1-0"] and out["pid"]
        assert "no-such-host.invalid" in out["ping_errors"][0]
        done = c.wait_flows(14, timeout=20)
        assert done["complete"] and done["failed"] == ["h1-x-1-0"] and done["errors"]["h1-x-1-0"]


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


def test_a_restore_that_cannot_run_tc_is_reported_and_the_agent_keeps_serving(agents, keys, tmp_path):
    # A journal left by a killed agent, on a host where tc cannot run now: the restores at
    # start and at lease expiry fail; the agent says why, keeps the entry and keeps serving.
    datadir = tmp_path / "agent-data"
    (datadir / ".agent").mkdir(parents=True)
    (datadir / ".agent" / "journal.json").write_text('{"qdisc": {"lo": "noqueue"}}')
    agent = agents(keys=keys, datadir=datadir, extra=("--lease", "1"), env={"PATH": str(tmp_path / "empty-bin")})
    with agent.client(heartbeat=0) as c:
        assert c.hello()["journal_pending"]
    assert wait_for(lambda: "lease expired" in agent.log_text(), timeout=10), agent.log_text()
    time.sleep(0.3)
    assert agent.proc.poll() is None, agent.log_text()[-2000:]
    assert agent.logged("qdisc on lo: ", "tc is not installed"), agent.log_text()[-2000:]
    with agent.client() as c:
        assert c.hello()["journal_pending"]  # kept for a restore that can work
        out = c.restore()
        assert out["restored"] == [] and "qdisc on lo" in out["errors"][0] and "tc is not installed" in out["errors"][0]


def test_a_replayed_start_flows_never_overwrites_collected_flow_data(agents, keys, tmp_path):
    # The engine opens a flow's file with O_TRUNC: a second start of the same flow id
    # (a replayed or retried request, another controller's run with the same
    # experiment number) destroyed the first run's data before anybody fetched it.
    agent = agents(keys=keys, extra=("--test-bind", "127.0.0.1"))
    with agent.client() as c:
        port = c.prepare_server(15, "")["port"]
        spec = dict(flow_id="h1-h1-1-0", test="TCP_STREAM", server="127.0.0.1", port=port, dur=0.5, interval=0.05)
        c.start_flows(15, [spec])
        assert c.wait_flows(15, timeout=20)["complete"]
        flow = agent.datadir / "15" / "flows" / "h1-h1-1-0.client.nflow"
        before = hashlib.sha256(flow.read_bytes()).hexdigest()
        with pytest.raises(AgentError, match=r"flow h1-h1-1-0 already has data in experiment 15") as info:
            c.start_flows(15, [spec, dict(spec, flow_id="h1-h1-1-1")])
        assert info.value.kind == "Busy"
        time.sleep(1.0)
        assert hashlib.sha256(flow.read_bytes()).hexdigest() == before
        assert not (agent.datadir / "15" / "flows" / "h1-h1-1-1.client.nflow").exists()  # all or nothing
        c.fetch(15, tmp_path / "got")
        c.start_flows(15, [spec])  # once acknowledged the number is free again
        assert c.wait_flows(15, timeout=20)["complete"]


def test_an_ack_out_of_order_deletes_nothing(agents, keys, tmp_path):
    # ack means "I stored what fetch_list gave me": without a listing nobody has the data.
    agent = agents(keys=keys)
    with agent.client() as c:
        c.snapshot(16, 0, "h1")
        with pytest.raises(AgentError, match=r"ack of experiment 16 before any fetch_list") as info:
            c.request("ack", {"exp": 16})
        assert info.value.kind == "UsageError"
        assert (agent.datadir / "16" / "0" / "h1.snmp").exists()
        assert c.request("ack", {"exp": 99}) == {"exp": "99", "deleted": False}  # nothing there: nothing to refuse
        got = c.fetch(16, tmp_path / "got")
    assert (tmp_path / "got" / "0" / "h1.snmp") in got and not (agent.datadir / "16").exists()


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_flows_cut_short_by_an_agent_restart_are_reported_failed_after_it(agents, keys, tmp_path, sig):
    # Without this the restarted agent answered status with nothing running, nothing
    # failed and finished=True: a controller took the cut-short flows for complete ones.
    agent = agents(keys=keys, extra=("--test-bind", "127.0.0.1"))
    with agent.client() as c:
        port = c.prepare_server(17, "")["port"]
        spec = dict(flow_id="h1-h1-1-0", test="TCP_STREAM", server="127.0.0.1", port=port, dur=30.0, interval=0.05)
        c.start_flows(17, [spec])
        assert wait_for(lambda: c.status(17)["progress"], timeout=10)
    agent.kill(sig)
    again = agents(keys=keys, datadir=agent.datadir, tag="again", extra=("--test-bind", "127.0.0.1"))
    with again.client() as c:
        st = c.status(17)
        assert st["failed"] == ["h1-h1-1-0"] and st["running"] == [] and st["finished"], st
        assert "agent stopped while this flow ran" in st["errors"]["h1-h1-1-0"]
        got = c.fetch(17, tmp_path / "got")
        assert tmp_path / "got" / "flows" / "h1-h1-1-0.client.nflow" in got
        assert c.status(17)["failed"] == []  # acknowledged: forgotten
        # and a flow that ends normally leaves nothing behind to report after a restart
        c.start_flows(18, [dict(spec, dur=0.3)])
        assert c.wait_flows(18, timeout=20)["complete"]
    again.kill(signal.SIGKILL)
    third = agents(keys=keys, datadir=agent.datadir, tag="third")
    with third.client() as c:
        assert c.status(18)["failed"] == []


def test_a_flow_engine_killed_mid_flow_is_reported_by_signal_and_its_data_kept(agents, keys, tmp_path):
    agent = agents(keys=keys, extra=("--test-bind", "127.0.0.1"))
    with agent.client() as c:
        port = c.prepare_server(19, "")["port"]
        spec = dict(flow_id="h1-h1-1-0", test="TCP_STREAM", server="127.0.0.1", port=port, dur=30.0, interval=0.05)
        pid = c.start_flows(19, [spec])["pid"]
        assert wait_for(lambda: c.status(19)["progress"], timeout=10)
        os.kill(pid, signal.SIGKILL)
        st = c.wait_flows(19, timeout=20)
        assert st["complete"] and st["failed"] == ["h1-h1-1-0"]
        assert f"flow engine (pid {pid}) was killed by SIGKILL" in st["errors"]["h1-h1-1-0"]
        got = c.fetch(19, tmp_path / "got")
    assert tmp_path / "got" / "flows" / "h1-h1-1-0.client.nflow" in got


def test_an_experiment_directory_that_is_a_symlink_is_neither_served_nor_deleted(agents, keys, tmp_path):
    # Only the agent makes experiment directories; a symlink there points outside the
    # data directory: fetch would serve, and ack delete, whatever it points at.
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("not experiment data\n")
    agent = agents(keys=keys)
    (agent.datadir / "20").symlink_to(outside)
    with agent.client() as c:
        assert "20" not in c.hello()["unfetched"]
        for cmd, args in (("fetch_list", {}), ("fetch_chunk", {"path": "secret"}), ("ack", {})):
            with pytest.raises(AgentError, match=r"experiment 20 is a symbolic link") as info:
                c.request(cmd, {"exp": 20, **args})
            assert info.value.kind == "NotFound"
        with pytest.raises(AgentError, match=r"experiment 20 is a symbolic link"):
            c.snapshot(20, 0, "h1")
    assert (outside / "secret").read_text() == "not experiment data\n" and not (outside / "0").exists()


def _flow_in_flight(c, exp: int, dur: float) -> None:
    """Flow h1-h1-1-0 of ``exp`` through the agent's own tokened engine server, until its server end runs."""
    port = c.prepare_server(exp, f"tok{exp}")["port"]
    c.start_flows(exp, [dict(flow_id="h1-h1-1-0", test="TCP_STREAM", server="127.0.0.1", port=port, dur=dur,
                             interval=0.05, token=f"tok{exp}")])
    assert wait_for(lambda: c.status(exp)["server_running"], timeout=10)


def test_an_open_server_request_never_restarts_a_server_with_flows_in_flight(agents, keys):
    # prepare_server with no token restarts a tokened engine server: that killed the
    # server ends of another experiment's running flows (and their data).
    agent = agents(keys=keys, extra=("--test-bind", "127.0.0.1"))
    with agent.client() as c:
        _flow_in_flight(c, 21, 3.0)
        with pytest.raises(AgentError, match=r"server ends of h1-h1-1-0 \(experiment 21\) are running") as info:
            c.prepare_server(22, "")
        assert info.value.kind == "Busy"
        st = c.wait_flows(21, timeout=30)
        assert st["complete"] and st["done"] == ["h1-h1-1-0"] and st["failed"] == [], st
        assert c.prepare_server(22, "")["reused"] is False  # once they ended it restarts open


def _children(pid: int) -> list[int]:
    out = []
    for task in os.listdir(f"/proc/{pid}/task"):
        out += [int(x) for x in open(f"/proc/{pid}/task/{task}/children").read().split()]
    return out


def test_a_server_end_whose_engine_worker_died_does_not_hold_the_experiment_forever(agents, keys, tmp_path):
    # A killed server worker never reports its flows' end: the agent said their server ends
    # were running forever, so status never finished and ack was refused for good.
    agent = agents(keys=keys, extra=("--test-bind", "127.0.0.1"))
    with agent.client() as c:
        _flow_in_flight(c, 23, 30.0)
        (server,) = [p for p in _children(agent.proc.pid) if b"\x00server\x00" in open(f"/proc/{p}/cmdline", "rb").read()]
        for worker in _children(server):
            os.kill(worker, signal.SIGKILL)
        st = c.wait_flows(23, timeout=20)
        assert st["complete"] and st["server_running"] == [] and st["failed"] == ["h1-h1-1-0"], st
        got = c.fetch(23, tmp_path / "got")
        assert tmp_path / "got" / "flows" / "h1-h1-1-0.server.nflow" in got
    assert not (agent.datadir / "23").exists()  # acknowledged
    assert agent.logged("server end of h1-h1-1-0 ended without reporting"), agent.log_text()[-2000:]


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


@needs_tcpdump
def test_tcpdumps_for_two_address_servers_write_two_pcaps_and_never_share_one(agents, keys):
    # The pcap was named after the server's first label: 127.0.0.1 and 127.0.0.2 both
    # became h1-127.pcap, the second tcpdump truncating the first one's capture.
    agent = agents(keys=keys)
    with agent.client() as c:
        one = c.tcpdump_start(24, "lo", "127.0.0.1", 1000)["path"]
        two = c.tcpdump_start(24, "lo", "127.0.0.2", 1000)["path"]
        assert one == "h1-127.0.0.1.pcap" and two == "h1-127.0.0.2.pcap"
        with pytest.raises(AgentError, match=r"a tcpdump writing h1-127\.0\.0\.1\.pcap in experiment 24 is running"):
            c.tcpdump_start(24, "lo", "127.0.0.1", 1000)
        assert len(c.tcpdump_stop(24)["stopped"]) == 2
        assert c.tcpdump_start(25, "lo", "localhost", 10)["path"] == "h1-localhost.pcap"  # names: the first label
        c.tcpdump_stop(25)
    assert (agent.datadir / "24" / one).exists() and (agent.datadir / "24" / two).exists()


def test_pings_to_two_addresses_write_two_files(agents, keys):
    # Named after the target's first label, pings to 127.0.0.1 and 127.0.0.2 (start_flows'
    # ping=True names them by server address) both wrote ping/h1-127.nflow.
    agent = agents(keys=keys)
    with agent.client() as c:
        one = c.ping_start(26, "127.0.0.1", interval=0.05, duration=1.0)["path"]
        two = c.ping_start(26, "127.0.0.2", interval=0.05, duration=1.0)["path"]
        assert one == "ping/h1-127.0.0.1.nflow" and two == "ping/h1-127.0.0.2.nflow"
        with pytest.raises(AgentError, match=r"ping/h1-127\.0\.0\.1\.nflow already has data in experiment 26"):
            c.ping_start(26, "127.0.0.1", interval=0.05, duration=1.0)
        assert c.ping_start(26, "127.0.0.1", name="db1.lab", duration=1.0)["path"] == "ping/h1-db1.nflow"
        with pytest.raises(AgentError, match=r"bad ping name '../x'"):
            c.ping_start(26, "127.0.0.1", name="../x", duration=1.0)
        c.stop(26)
        files = {f["path"] for f in c.request("fetch_list", {"exp": 26})["files"]}
    assert {"ping/h1-127.0.0.1.nflow", "ping/h1-127.0.0.2.nflow", "ping/h1-db1.nflow"} <= files


def test_flows_stopped_by_lease_expiry_say_so(agents, keys):
    agent = agents(keys=keys, extra=("--test-bind", "127.0.0.1", "--lease", "1"))
    with agent.client(heartbeat=0) as c:
        port = c.prepare_server(27, "")["port"]
        spec = dict(flow_id="h1-h1-1-0", test="TCP_STREAM", server="127.0.0.1", port=port, dur=30.0, interval=0.05)
        c.start_flows(27, [spec])
        assert wait_for(lambda: "lease expired" in agent.log_text(), timeout=15)
        err = c.status(27)["errors"]["h1-h1-1-0"]
        assert "stopped: the controller's lease expired (no request for 1 s)" in err, err
        c.start_flows(28, [dict(spec, dur=30.0)])
        c.stop(28)
        assert c.status(28)["errors"]["h1-h1-1-0"] == "stopped by a stop request"


@pytest.mark.parametrize("text", ["[]", '{"qdisc": 5}', '{"sysctl": ["a"]}', "\x00\x00garbage"],
                         ids=["list", "number", "list-entry", "garbage"])
def test_a_corrupted_restore_journal_does_not_stop_the_agent_and_is_kept_aside(agents, keys, tmp_path, text):
    datadir = tmp_path / "agent-data"
    (datadir / ".agent").mkdir(parents=True)
    (datadir / ".agent" / "journal.json").write_text(text)
    (datadir / "3").mkdir()
    (datadir / "3" / "kept.txt").write_text("data\n")
    agent = agents(keys=keys, datadir=datadir)
    with agent.client() as c:
        assert "3" in c.hello()["unfetched"]  # the agent serves its data
    assert (datadir / ".agent" / "journal.json.bad").read_text() == text  # the evidence is kept
    assert agent.logged("journal.json is unreadable", "journal.json.bad"), agent.log_text()[-2000:]


def test_one_unreadable_authorized_key_does_not_lock_out_every_controller(tmp_path):
    # zmq.auth loads a key directory all or nothing: one bad *.key there refused every
    # controller ("Unknown domain") while the agent said it was listening.
    from tests.agent.agentproc import Keys, start_agent

    keys = Keys.make(tmp_path / "keys")
    (keys.dir / "authorized" / "broken.key").write_text("not a key\n")
    agent = start_agent(tmp_path, keys=keys)
    try:
        with agent.client() as c:
            assert c.hello()["protocol"] == "1.0"
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


@needs_tcpdump
def test_tcpdump_dies_with_a_sigkilled_agent(agents, keys):
    # tcpdump switched to its own user after opening the capture, and a change of user
    # clears the parent-death signal: it outlived a killed agent, capturing on.
    agent = agents(keys=keys)
    with agent.client() as c:
        pid = c.tcpdump_start(29, "lo", "X", 100000)["pid"]
    agent.kill(signal.SIGKILL)

    def gone() -> bool:
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] == "Z"  # a zombie has ended
        except OSError:
            return True

    try:
        assert wait_for(gone, timeout=10)
    finally:
        if not gone():
            os.kill(pid, signal.SIGKILL)
    assert (agent.datadir / "29" / "h1-X.pcap").stat().st_size >= 24  # the capture so far is kept


@pytest.mark.parametrize("flow_id", ["x/../../../../{outside}/pwned2", "{outside}/pwned", "..", "-oProxyCommand"])
def test_start_flows_refuses_flow_ids_that_name_paths(agents, keys, tmp_path, flow_id):
    # An authorized controller's ids "x/../../../../<elsewhere>/pwned2" and an absolute path made
    # the agent's engine write root-owned *.client.nflow files outside its data directory.
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    flow_id = flow_id.format(outside=str(outside).lstrip("/"))
    agent = agents(keys=keys, extra=("--test-bind", "127.0.0.1"))
    with agent.client() as c:
        port = c.prepare_server(21, "")["port"]
        spec = dict(flow_id=flow_id, test="TCP_STREAM", server="127.0.0.1", port=port, dur=1.0, interval=0.05)
        with pytest.raises(AgentError, match=r"bad flow id") as info:
            c.start_flows(21, [spec])
        assert info.value.kind == "UsageError"
        assert c.status(21)["running"] == []
    assert list(outside.rglob("*")) == []
    assert not list(Path("/").glob("pwned*")) and not list(agent.datadir.rglob("*pwned*"))


@pytest.mark.parametrize("target", ["-f", "--help", "../x"])
def test_ping_and_tcpdump_never_take_an_option_from_a_name(agents, keys, target):
    agent = agents(keys=keys, extra=("--test-bind", "127.0.0.1"))
    with agent.client() as c:
        with pytest.raises(AgentError, match=r"bad ping (target|name)"):
            c.ping_start(22, target)
        with pytest.raises(AgentError, match=r"bad tcpdump server"):
            c.tcpdump_start(22, "lo", target, 10)


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
        port = c.prepare_server(31, "")["port"]
        spec = dict(flow_id="h1-h1-1-0", test="TCP_STREAM", server="127.0.0.1", port=port, dur=1e12, interval=0.05)
        with pytest.raises(AgentError, match=r"dur must be in \(0, 86400\]"):
            c.start_flows(31, [spec])
    assert not (agent.datadir / "18446744073709551615").exists()
