"""Traces and socket watches run by real agents in namespaces: started armed, their data held until they end."""

from __future__ import annotations

import os
import subprocess

import pytest

from netesto.collectors.tracefs import tracefs_root
from netesto.raw.ntrace import read_trace
from tests.agent.agentproc import run_in_ns
from tests.agent.test_agent_netns import clients, prelude, two_agents

pytestmark = pytest.mark.netns

OBSERVED = """
        from netesto.protocol.commands import TraceStartArgs, TraceStopArgs, WatchStartArgs, WatchStopArgs, AckArgs
        from netesto.protocol.commands import FetchListArgs
        from netesto.protocol.replies import (TraceStartReply, TraceStopReply, WatchStartReply, WatchStopReply,
                                              FetchListReply, AckReply)
        port = cb.prepare_server(1, "tok1").port
        r = {{}}
        r["trace"] = ca.call(TraceStartReply, TraceStartArgs(1, [port]))
        r["trace_b"] = cb.call(TraceStartReply, TraceStartArgs(1, [port]))
        r["watch"] = ca.call(WatchStartReply, WatchStartArgs(1, "eng", 0.01, remote_ports=[port]))
        try:
            ca.call(WatchStartReply, WatchStartArgs(1, "bad", 0.01))
        except NetestoError as e:
            r["bad_watch"] = str(e)
        off, rtt = ca.clock_offset()
        spec = dict(flow_id="h1-h2-1-0", test="TCP_STREAM", server={addr!r}, port=port, dur=1.0, token="tok1", exp=1,
                    ca="bbr", interval=0.01)
        ca.start_flows(1, [spec], at=time.time() + off + 0.3)
        ca.wait_flows(1, timeout=20)
        cb.wait_flows(1, timeout=20)
        r["running"] = ca.call(FetchListReply, FetchListArgs(1)).flows_running
        try:
            ca.call(AckReply, AckArgs(1))
        except NetestoError as e:
            r["ack"] = str(e)
        for c, key in ((ca, "stop_a"), (cb, "stop_b")):
            for _ in range(100):
                got = c.call(TraceStopReply, TraceStopArgs(1))
                if got.done:
                    break
            r[key] = got
        r["watch_stop"] = ca.call(WatchStopReply, WatchStopArgs(1))
        r["after"] = ca.call(FetchListReply, FetchListArgs(1)).flows_running
        ga = ca.fetch(1, {dest!r})
        gb = cb.fetch(1, {dest!r})
        r["files"] = sorted(str(p) for p in ga + gb)
        show(r)
"""


def test_an_agent_traces_and_watches_an_experiment_and_holds_its_data_until_they_end(veth_pair, agents, keys,
                                                                                     tmp_path) -> None:
    a, b = two_agents(veth_pair, agents, keys)
    dest = tmp_path / "ctl" / "1"
    out = run_in_ns(veth_pair.a, prelude(keys) + clients(veth_pair, a, b) + OBSERVED.format(
        addr=veth_pair.addr_b, dest=str(dest)), timeout=120)
    trace = out["trace"]["observers"][0]
    assert trace["kind"] == "trace" and trace["state"] == "running"
    assert "give ports, addresses, a cgroup or a pid" in out["bad_watch"]
    # while they run, the data is not complete: listed as running, not deleted on ack
    assert any(s.startswith("trace netesto-") for s in out["running"]) and any(
        s.startswith("watch eng") for s in out["running"])
    assert "still has a running trace or watch" in out["ack"]
    assert out["after"] == []
    for key in ("stop_a", "stop_b"):
        stopped = out[key]["observers"][0]
        assert out[key]["done"] and stopped["state"] == "done", stopped
        assert stopped["summary"]["host_dropped"] == 0
        assert not (tracefs_root() / "instances" / stopped["name"]).exists()
    names = {os.path.basename(p) for p in out["files"]}
    assert {"h1-h2-1-0.client.ntrace", "h1-h2-1-0.server.ntrace", "h1.json", "h2.json"} <= names
    client = read_trace(dest / "flows" / "h1-h2-1-0.client.ntrace")
    assert client.rows("probe") > 50 and client.header["flow_id"] == "h1-h2-1-0"
    watched = out["watch_stop"]["observers"][0]["summary"]
    assert watched["sockets"] == 1 and watched["cost"]["socket_samples"] > 50
    assert not (a.datadir / "1").exists() and not (b.datadir / "1").exists()  # acknowledged after they ended


def test_a_lapsed_lease_ends_the_traces_and_keeps_their_files(veth_pair, agents, keys, tmp_path) -> None:
    a = agents(keys=keys, netns=veth_pair.a, bind=veth_pair.addr_a, tag="a", extra=("--name", "h1", "--lease", "2"))
    out = run_in_ns(veth_pair.a, prelude(keys) + f"""
        from netesto.collectors.tracefs import tracefs_root
        from netesto.protocol.commands import TraceStartArgs
        from netesto.protocol.replies import TraceStartReply
        c = client("h1", {veth_pair.addr_a!r}, {a.port})
        got = c.call(TraceStartReply, TraceStartArgs(5, [47555], 256))
        name = got.observers[0]["name"]
        show({{"name": name, "pid": got.observers[0]["pid"],
               "there": (tracefs_root() / "instances" / name).exists()}})
    """)
    # (seen at once, before the 2 s lease can lapse: on a busy machine this process may get here later)
    assert out["there"]
    assert a.logged("lease expired", timeout=20)
    def gone() -> bool:
        return not os.path.exists(f"/proc/{out['pid']}") and not (tracefs_root() / "instances" / out["name"]).exists()
    from tests.agent.agentproc import wait_for
    assert wait_for(gone, timeout=20)
    assert (a.datadir / "5" / "traces" / "h1.json").exists()  # ended, written, kept for a controller


def test_an_instance_left_by_a_killed_agent_is_removed_when_an_agent_starts(veth_pair, agents, keys) -> None:
    """...and one whose agent still runs is kept: agents of two test runs, or of two pytest-xdist
    workers, on one host never take each other's traces away."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    alive = subprocess.Popen(["sleep", "60"])  # the pid of an agent that still runs
    left = tracefs_root() / "instances" / f"netesto-{dead.pid}-9-1"
    kept = tracefs_root() / "instances" / f"netesto-{alive.pid}-9-1"
    try:
        for inst in (left, kept):
            inst.mkdir()
            (inst / "events" / "tcp" / "tcp_probe" / "enable").write_text("1")
        a = agents(keys=keys, netns=veth_pair.a, bind=veth_pair.addr_a, tag="a", extra=("--name", "h1"))
        from tests.agent.agentproc import wait_for

        # gone once an agent has started: this one, or any other agent starting on the machine meanwhile
        # (another test run's does the same), which is why its log line is not required
        assert wait_for(lambda: not left.exists(), timeout=10), a.log_text()
        assert kept.exists() and (kept / "events" / "tcp" / "tcp_probe" / "enable").read_text().strip() == "1"
    finally:
        alive.kill()
        alive.wait()
        for inst in (left, kept):
            if inst.exists():
                (inst / "events" / "tcp" / "tcp_probe" / "enable").write_text("0")
                inst.rmdir()
