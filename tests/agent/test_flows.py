"""A real agent's flows: the engine's client runs, its server and the peer tools' servers, pings."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import socket
import sys
import time
from pathlib import Path

import pytest

from netesto.errors import AgentError
from tests.agent.agentproc import wait_for
from tests.leftovers import alive, children


def _gone(pid: int) -> bool:
    """No such process, or only a zombie waiting for its new parent to reap it."""
    return not alive(pid)


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
    [pid] = out.pids
    assert out.ports == [port] and not _gone(pid)
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
        with pytest.raises(AgentError, match="netserver server on port 12865: netserver not found on PATH") as info:
            c.prepare_server(1, driver="netperf")
        assert info.value.kind == "EngineError"
        assert "non-free" in str(info.value) and "h1" in str(info.value)
        assert c.hello().protocol == "1.0"


def test_prepare_server_netperf_starts_netserver_that_dies_with_the_agent(agents, keys, tmp_path):
    _fake_netserver(tmp_path / "bin")
    agent = agents(keys=keys, extra=("--test-bind", "127.0.0.1"),
                   env={"PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"})
    with agent.client() as c:
        out = c.prepare_server(1, driver="netperf", ports=[12999])
        again = c.prepare_server(1, driver="netperf", ports=[12999])
    assert out.driver == "netperf" and out.ports == [12999] and again.pids == out.pids
    import json

    logged = tmp_path / "bin" / "argv.json"  # written once the stand-in's interpreter is up: slow under load
    assert wait_for(lambda: logged.is_file() and logged.stat().st_size > 0, timeout=10.0)
    assert json.loads(logged.read_text()) == ["-D", "-p", "12999", "-L", "127.0.0.1"]
    [pid] = out.pids
    try:
        agent.kill()
        assert wait_for(lambda: _gone(pid), timeout=1.0), f"netserver pid {pid} outlived the agent"
    finally:
        _kill_if_alive(pid)


@pytest.mark.parametrize("exp, spec_exp, text", [
    ("x", None, r"experiment 'x'.*a number"),
    ("007", None, r"experiment '007'.*a number"),
    (12, 3, r"flow h1-h1-1-0 says exp 3 but start_flows is for experiment 12"),
], ids=["name", "leading-zero", "mismatch"])
def test_start_flows_refuses_flows_whose_files_would_land_in_another_experiment(agents, keys, exp, spec_exp, text):
    # The engine files a flow under <datadir>/<spec exp>/flows: a fetch of ``exp`` would miss it.
    agent = agents(keys=keys, extra=("--test-bind", "127.0.0.1"))
    with agent.client() as c:
        port = c.prepare_server(1, "").port
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
        port = c.prepare_server(13, "").port
        spec = dict(flow_id="h1-h1-1-0", test="TCP_STREAM", server="127.0.0.1", port=port, dur=5.0, interval=0.05)
        with pytest.raises(AgentError, match=r"ping_interval 1000.* 0\.002\.\.60") as info:
            c.start_flows(13, [spec], ping=True, ping_interval=1000)
        assert info.value.kind == "UsageError"
        st = c.status(13)
        assert st.running == [] and st.failed == [] and st.done == []


def test_start_flows_whose_ping_cannot_start_still_reports_the_started_flows(agents, keys):
    # The engine is already running when ping fails: an error reply would hide running flows.
    agent = agents(keys=keys, extra=("--test-bind", "127.0.0.1"))
    with agent.client() as c:
        spec = dict(flow_id="h1-x-1-0", test="TCP_STREAM", server="no-such-host.invalid", port=9, dur=1.0,
                    interval=0.05)
        out = c.start_flows(14, [spec], ping=True)
        assert out.flows == ["h1-x-1-0"] and out.pid
        assert "no-such-host.invalid" in out.ping_errors[0]
        done = c.wait_flows(14, timeout=20)
        assert done.complete and done.failed == ["h1-x-1-0"] and done.errors["h1-x-1-0"]


def test_a_replayed_start_flows_never_overwrites_collected_flow_data(agents, keys, tmp_path):
    # The engine opens a flow's file with O_TRUNC: a second start of the same flow id
    # (a replayed or retried request, another controller's run with the same
    # experiment number) destroyed the first run's data before anybody fetched it.
    agent = agents(keys=keys, extra=("--test-bind", "127.0.0.1"))
    with agent.client() as c:
        port = c.prepare_server(15, "").port
        spec = dict(flow_id="h1-h1-1-0", test="TCP_STREAM", server="127.0.0.1", port=port, dur=0.5, interval=0.05)
        c.start_flows(15, [spec])
        assert c.wait_flows(15, timeout=20).complete
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
        assert c.wait_flows(15, timeout=20).complete


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_flows_cut_short_by_an_agent_restart_are_reported_failed_after_it(agents, keys, tmp_path, sig):
    # Without this the restarted agent answered status with nothing running, nothing
    # failed and finished=True: a controller took the cut-short flows for complete ones.
    agent = agents(keys=keys, extra=("--test-bind", "127.0.0.1"))
    with agent.client() as c:
        port = c.prepare_server(17, "").port
        spec = dict(flow_id="h1-h1-1-0", test="TCP_STREAM", server="127.0.0.1", port=port, dur=30.0, interval=0.05)
        c.start_flows(17, [spec])
        assert wait_for(lambda: c.status(17).progress, timeout=10)
    agent.kill(sig)
    again = agents(keys=keys, datadir=agent.datadir, tag="again", extra=("--test-bind", "127.0.0.1"))
    with again.client() as c:
        st = c.status(17)
        assert st.failed == ["h1-h1-1-0"] and st.running == [] and st.finished, st
        assert "agent stopped while this flow ran" in st.errors["h1-h1-1-0"]
        got = c.fetch(17, tmp_path / "got")
        assert tmp_path / "got" / "flows" / "h1-h1-1-0.client.nflow" in got
        assert c.status(17).failed == []  # acknowledged: forgotten
        # and a flow that ends normally leaves nothing behind to report after a restart
        c.start_flows(18, [dict(spec, dur=0.3)])
        assert c.wait_flows(18, timeout=20).complete
    again.kill(signal.SIGKILL)
    third = agents(keys=keys, datadir=agent.datadir, tag="third")
    with third.client() as c:
        assert c.status(18).failed == []


def test_a_flow_engine_killed_mid_flow_is_reported_by_signal_and_its_data_kept(agents, keys, tmp_path):
    agent = agents(keys=keys, extra=("--test-bind", "127.0.0.1"))
    with agent.client() as c:
        port = c.prepare_server(19, "").port
        spec = dict(flow_id="h1-h1-1-0", test="TCP_STREAM", server="127.0.0.1", port=port, dur=30.0, interval=0.05)
        pid = c.start_flows(19, [spec]).pid
        assert wait_for(lambda: c.status(19).progress, timeout=10)
        os.kill(pid, signal.SIGKILL)
        st = c.wait_flows(19, timeout=20)
        assert st.complete and st.failed == ["h1-h1-1-0"]
        assert f"flow engine (pid {pid}) was killed by SIGKILL" in st.errors["h1-h1-1-0"]
        got = c.fetch(19, tmp_path / "got")
    assert tmp_path / "got" / "flows" / "h1-h1-1-0.client.nflow" in got


def _flow_in_flight(c, exp: int, dur: float) -> None:
    """Flow h1-h1-1-0 of ``exp`` through the agent's own tokened engine server, until its server end runs."""
    port = c.prepare_server(exp, f"tok{exp}").port
    c.start_flows(exp, [dict(flow_id="h1-h1-1-0", test="TCP_STREAM", server="127.0.0.1", port=port, dur=dur,
                             interval=0.05, token=f"tok{exp}")])
    assert wait_for(lambda: c.status(exp).server_running, timeout=10)


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
        assert st.complete and st.done == ["h1-h1-1-0"] and st.failed == [], st
        assert c.prepare_server(22, "").reused is False  # once they ended it restarts open


def test_a_server_end_whose_engine_worker_died_does_not_hold_the_experiment_forever(agents, keys, tmp_path):
    # A killed server worker never reports its flows' end: the agent said their server ends
    # were running forever, so status never finished and ack was refused for good.
    agent = agents(keys=keys, extra=("--test-bind", "127.0.0.1"))
    with agent.client() as c:
        _flow_in_flight(c, 23, 30.0)
        (server,) = [p for p in children(agent.proc.pid) if b"\x00server\x00" in open(f"/proc/{p}/cmdline", "rb").read()]
        for worker in children(server):
            os.kill(worker, signal.SIGKILL)
        st = c.wait_flows(23, timeout=20)
        assert st.complete and st.server_running == [] and st.failed == ["h1-h1-1-0"], st
        got = c.fetch(23, tmp_path / "got")
        assert tmp_path / "got" / "flows" / "h1-h1-1-0.server.nflow" in got
    assert not (agent.datadir / "23").exists()  # acknowledged
    assert agent.logged("server end of h1-h1-1-0 ended without reporting"), agent.log_text()[-2000:]


def test_pings_to_two_addresses_write_two_files(agents, keys):
    # Named after the target's first label, pings to 127.0.0.1 and 127.0.0.2 (start_flows'
    # ping=True names them by server address) both wrote ping/h1-127.nflow.
    agent = agents(keys=keys)
    with agent.client() as c:
        one = c.ping_start(26, "127.0.0.1", interval=0.05, duration=1.0).path
        two = c.ping_start(26, "127.0.0.2", interval=0.05, duration=1.0).path
        assert one == "ping/h1-127.0.0.1.nflow" and two == "ping/h1-127.0.0.2.nflow"
        with pytest.raises(AgentError, match=r"ping/h1-127\.0\.0\.1\.nflow already has data in experiment 26"):
            c.ping_start(26, "127.0.0.1", interval=0.05, duration=1.0)
        assert c.ping_start(26, "127.0.0.1", name="db1.lab", duration=1.0).path == "ping/h1-db1.nflow"
        with pytest.raises(AgentError, match=r"bad ping name '../x'"):
            c.ping_start(26, "127.0.0.1", name="../x", duration=1.0)
        c.stop(26)
        files = {f["path"] for f in c.request("fetch_list", {"exp": 26})["files"]}
    assert {"ping/h1-127.0.0.1.nflow", "ping/h1-127.0.0.2.nflow", "ping/h1-db1.nflow"} <= files


def test_flows_stopped_by_lease_expiry_say_so(agents, keys):
    agent = agents(keys=keys, extra=("--test-bind", "127.0.0.1", "--lease", "1"))
    with agent.client(heartbeat=0) as c:
        port = c.prepare_server(27, "").port
        spec = dict(flow_id="h1-h1-1-0", test="TCP_STREAM", server="127.0.0.1", port=port, dur=30.0, interval=0.05)
        c.start_flows(27, [spec])
        # Only an expiry after the flows started stops them: on a busy machine the lease may already
        # have lapsed once between prepare_server and start_flows (which renewed it).
        seen = len(agent.log_text())
        assert wait_for(lambda: "lease expired" in agent.log_text()[seen:], timeout=15)
        err = c.status(27).errors["h1-h1-1-0"]
        assert "stopped: the controller's lease expired (no request for 1 s)" in err, err
        c.start_flows(28, [dict(spec, dur=30.0)])
        c.stop(28)
        assert c.status(28).errors["h1-h1-1-0"] == "stopped by a stop request"


@pytest.mark.parametrize("flow_id", ["x/../../../../{outside}/pwned2", "{outside}/pwned", "..", "-oProxyCommand"])
def test_start_flows_refuses_flow_ids_that_name_paths(agents, keys, tmp_path, flow_id):
    # An authorized controller's ids "x/../../../../<elsewhere>/pwned2" and an absolute path made
    # the agent's engine write root-owned *.client.nflow files outside its data directory.
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    flow_id = flow_id.format(outside=str(outside).lstrip("/"))
    agent = agents(keys=keys, extra=("--test-bind", "127.0.0.1"))
    with agent.client() as c:
        port = c.prepare_server(21, "").port
        spec = dict(flow_id=flow_id, test="TCP_STREAM", server="127.0.0.1", port=port, dur=1.0, interval=0.05)
        with pytest.raises(AgentError, match=r"bad flow id") as info:
            c.start_flows(21, [spec])
        assert info.value.kind == "UsageError"
        assert c.status(21).running == []
    assert list(outside.rglob("*")) == []
    assert not list(Path("/").glob("pwned*")) and not list(agent.datadir.rglob("*pwned*"))
