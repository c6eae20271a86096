"""Agents inside network namespaces: sysctl/qdisc set and restore, leases, flows between two agents."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from netesto.raw.nflow import read_flow
from tests.agent.agentproc import REPO, run_in_ns, wait_for

pytestmark = pytest.mark.netns


def prelude(keys) -> str:
    """Client setup code, indented like the test snippets so the whole can be dedented at once."""
    return textwrap.indent(textwrap.dedent(f"""
        import json, sys, time
        from netesto.controller.client import AgentClient
        from netesto.errors import NetestoError
        def show(value):  # replies are dataclasses: their fields as JSON (the absent ones left out)
            print(json.dumps(value, default=lambda o: {{k: v for k, v in vars(o).items() if v is not None}}))
        def client(name, addr, port, **kw):
            return AgentClient(name, addr, port, server_key={str(keys.agent_public)!r},
                               client_keys={str(keys.dir / 'controller.key_secret')!r}, **kw)
        """), " " * 8)


def two_agents(veth_pair, agents, keys, *extra: str):
    """Agent h1 in the pair's namespace a, h2 (with its test server on its address) in b."""
    a = agents(keys=keys, netns=veth_pair.a, bind=veth_pair.addr_a, tag="a", extra=("--name", "h1", *extra))
    b = agents(keys=keys, netns=veth_pair.b, bind=veth_pair.addr_b, tag="b",
               extra=("--name", "h2", *extra, "--test-bind", veth_pair.addr_b))
    return a, b


def clients(veth_pair, a, b, options: str = "") -> str:
    """Snippet lines making clients ``ca`` of h1 and ``cb`` of h2 (after :func:`prelude`)."""
    more = f", {options}" if options else ""
    return f"""
        ca = client("h1", {veth_pair.addr_a!r}, {a.port}{more})
        cb = client("h2", {veth_pair.addr_b!r}, {b.port}{more})"""


def ns_read(ns: str, path: str) -> str:
    return subprocess.run(["ip", "netns", "exec", ns, "cat", path], capture_output=True, text=True).stdout.strip()


def ns_qdisc(ns: str) -> str:
    return subprocess.run(["tc", "-n", ns, "qdisc", "show", "dev", "veth0", "root"], capture_output=True,
                          text=True).stdout


def test_sysctl_and_qdisc_set_then_restore_inside_a_namespace(veth_pair, agents, keys, tmp_path):
    ns = veth_pair.a
    agent = agents(keys=keys, netns=ns, bind=veth_pair.addr_a)
    before = ns_read(ns, "/proc/sys/net/ipv4/tcp_wmem")
    out = run_in_ns(ns, prelude(keys) + f"""
        c = client("h1", {veth_pair.addr_a!r}, {agent.port})
        r = {{}}
        r["sysctl"] = c.set_sysctl({{"net.ipv4.tcp_wmem": "4096 32768 8388608"}})
        r["wmem"] = open("/proc/sys/net/ipv4/tcp_wmem").read().split()
        r["htb"] = c.set_qdisc("veth0", "htb", rate="100mbit", burst="15k", limit="300000")
        import subprocess
        r["tc_htb"] = subprocess.run(["tc", "qdisc", "show", "dev", "veth0"], capture_output=True, text=True).stdout
        r["tbf"] = c.set_qdisc("veth0", "tbf", rate="50mbit", burst="15k", limit="100000")
        r["tc_tbf"] = subprocess.run(["tc", "qdisc", "show", "dev", "veth0"], capture_output=True, text=True).stdout
        try:
            c.set_sysctl({{"net.ipv4.tcp_allowed_congestion_control": "reno bbr cubic"}})
        except NetestoError as e:
            r["allowed_cc"] = str(e)
        try:
            c.set_sysctl({{"net.core.wmem_max": "4194304"}})
        except NetestoError as e:
            r["wmem_max"] = str(e)
        r["restore"] = c.restore()
        r["wmem_after"] = open("/proc/sys/net/ipv4/tcp_wmem").read().split()
        c.close()
        show(r)
    """)
    assert out["wmem"] == ["4096", "32768", "8388608"]
    assert "htb" in out["tc_htb"] and "bfifo" in out["tc_htb"] and "limit 300000b" in out["tc_htb"]
    assert "tbf" in out["tc_tbf"] and "rate 50Mbit" in out["tc_tbf"]
    assert "read-only" in out["allowed_cc"] or "refused" in out["allowed_cc"]
    assert "wmem_max" in out["wmem_max"]
    assert out["wmem_after"] == before.split()
    assert "tbf" not in ns_qdisc(ns) and "htb" not in ns_qdisc(ns)
    assert ns_read(ns, "/proc/sys/net/ipv4/tcp_wmem").split() == before.split()


def test_restore_journal_survives_an_agent_crash(veth_pair, agents, keys, tmp_path):
    ns = veth_pair.a
    agent = agents(keys=keys, netns=ns, bind=veth_pair.addr_a, tag="one")
    run_in_ns(ns, prelude(keys) + f"""
        c = client("h1", {veth_pair.addr_a!r}, {agent.port})
        c.set_qdisc("veth0", "tbf", rate="20mbit", burst="15k", limit="30000")
        c.set_sysctl({{"net.ipv4.tcp_ecn": "1"}})
        c.close()
        print("{{}}")
    """)
    assert "tbf" in ns_qdisc(ns)
    agent.kill()  # SIGKILL: no chance to restore
    assert "tbf" in ns_qdisc(ns) and ns_read(ns, "/proc/sys/net/ipv4/tcp_ecn") == "1"
    again = agents(keys=keys, netns=ns, bind=veth_pair.addr_a, tag="two", datadir=agent.datadir)
    # (the journal's entries are put back one after another: the qdisc gone says nothing of the sysctl yet)
    assert wait_for(lambda: "tbf" not in ns_qdisc(ns), timeout=5)
    assert wait_for(lambda: ns_read(ns, "/proc/sys/net/ipv4/tcp_ecn") == "2", timeout=5)  # the namespace default
    assert again.logged("restore journal not empty at start"), again.log_text()[-2000:]


def test_netem_is_unavailable_here_then_uses_the_fallback_hook(veth_pair, agents, keys, tmp_path):
    ns = veth_pair.a
    calls = tmp_path / "delayline.log"
    agent = agents(keys=keys, netns=ns, bind=veth_pair.addr_a, tag="plain")
    out = run_in_ns(ns, prelude(keys) + f"""
        c = client("h1", {veth_pair.addr_a!r}, {agent.port})
        try:
            c.set_netem("veth0", delay=20, loss=0.5)
            show("netem worked")
        except NetestoError as e:
            show(str(e))
    """)
    if out == "netem worked":
        pytest.skip("this kernel has netem")
    assert "netem is unavailable on this host" in out
    hooked = agents(keys=keys, netns=ns, bind=veth_pair.addr_a, tag="hooked",
                    env={"NETESTO_NETEM_FALLBACK": "tests.agent.fake_delayline:netem_fallback",
                         "FAKE_DELAYLINE_LOG": str(calls)})
    out = run_in_ns(ns, prelude(keys) + f"""
        c = client("h1", {veth_pair.addr_a!r}, {hooked.port})
        r = c.set_netem("veth0", delay=20, jitter=1, loss=0.5, limit=500)
        c.restore()
        show(r)
    """)
    assert out["fallback"].endswith(":netem_fallback") and out["result"] == {"delay_ms": 20}
    lines = [json.loads(x) for x in calls.read_text().splitlines()]
    assert lines[0] == ["veth0", 20, 1, 0.5, 0, 500] and lines[1][1] == 0  # restore removes the delay


def test_netem_via_the_fallback_leaves_the_existing_htb_on_restore(veth_pair, agents, keys, tmp_path):
    """The fallback did the work, so restore calls it with delay 0 and keeps the testbed's htb root."""
    ns = veth_pair.a
    calls = tmp_path / "delayline.log"
    subprocess.run(["tc", "-n", ns, "qdisc", "add", "dev", "veth0", "root", "handle", "1:", "htb", "default", "1"],
                   check=True)
    subprocess.run(["tc", "-n", ns, "class", "add", "dev", "veth0", "parent", "1:", "classid", "1:1", "htb",
                    "rate", "100mbit"], check=True)
    agent = agents(keys=keys, netns=ns, bind=veth_pair.addr_a,
                   env={"NETESTO_NETEM_FALLBACK": "tests.agent.fake_delayline:netem_fallback",
                        "FAKE_DELAYLINE_LOG": str(calls)})
    out = run_in_ns(ns, prelude(keys) + f"""
        c = client("h1", {veth_pair.addr_a!r}, {agent.port})
        r = {{"netem": c.set_netem("veth0", delay=15)}}
        r["journal"] = json.load(open({str(agent.datadir / ".agent" / "journal.json")!r}))
        r["restore"] = c.restore()
        c.close()
        show(r)
    """)
    if "fallback" not in out["netem"]:
        pytest.skip("this kernel has netem")
    assert out["journal"]["qdisc"] == {} and "veth0" in out["journal"]["netem_fallback"], out
    assert out["restore"]["errors"] == [] and "qdisc on veth0" not in out["restore"]["restored"], out
    assert "htb" in ns_qdisc(ns)  # the bottleneck that was there before is still there
    lines = [json.loads(x) for x in calls.read_text().splitlines()]
    assert [x[1] for x in lines] == [15, 0]  # delay set, then removed by restore


def test_snapshot_covers_the_interfaces_that_are_up(veth_pair, agents, keys, tmp_path):
    ns = veth_pair.a
    subprocess.run(["ip", "-n", ns, "link", "add", "ntdown0", "type", "ifb"], check=True)  # stays down
    agent = agents(keys=keys, netns=ns, bind=veth_pair.addr_a)
    out = run_in_ns(ns, prelude(keys) + f"""
        c = client("h1", {veth_pair.addr_a!r}, {agent.port})
        show(c.snapshot(8, 0, "h1"))
    """)
    assert "0/h1.info" in out["files"]
    info = json.loads((agent.datadir / "8" / "0" / "h1.info").read_text())
    assert info["interfaces"] == ["veth0"], info
    assert "ntdown0" not in (agent.datadir / "8" / "0" / "h1.ethtool-S").read_text()


def test_a_controller_from_an_address_not_allowed_is_refused_and_logged(veth_pair, agents, keys, tmp_path):
    allow = tmp_path / "clients.txt"
    allow.write_text(f"# the controller inside the agent's namespace only\n{veth_pair.addr_a}\n")
    agent = agents(keys=keys, netns=veth_pair.a, bind=veth_pair.addr_a, extra=("--allow", str(allow)))
    code = prelude(keys) + f"""
        c = client("h1", {veth_pair.addr_a!r}, {agent.port}, timeout=1.0, heartbeat=0)
        try:
            show(c.hello().protocol)
        except NetestoError as e:
            show("refused: " + str(e))
    """
    refused = run_in_ns(veth_pair.b, code)  # from addr_b
    assert refused.startswith("refused: ") and "refused our CURVE key" in refused, refused  # seen at once
    assert wait_for(lambda: f"refused connection from {veth_pair.addr_b}: Address not allowed" in agent.log_text())
    assert run_in_ns(veth_pair.a, code) == "1.0"  # from addr_a, the allowed one
    assert agent.logged(f"accepted connection from {veth_pair.addr_a}"), agent.log_text()[-2000:]


def test_tcpdump_start_stop_writes_a_pcap(veth_pair, agents, keys, tmp_path):
    ns = veth_pair.a
    agent = agents(keys=keys, netns=ns, bind=veth_pair.addr_a)
    out = run_in_ns(ns, prelude(keys) + f"""
        import subprocess
        c = client("h1", {veth_pair.addr_a!r}, {agent.port})
        try:
            r = c.tcpdump_start(3, "veth0", {veth_pair.addr_b!r}, 100)
        except NetestoError as e:
            show({{"error": str(e)}}); sys.exit(0)
        time.sleep(1.0)
        subprocess.run(["ping", "-c", "3", "-i", "0.2", {veth_pair.addr_b!r}], capture_output=True)
        c.tcpdump_stop(3)
        show(r)
    """)
    if "error" in out:
        assert "tcpdump is not installed" in out["error"]
        return
    pcap = agent.datadir / "3" / out["path"]
    assert out["path"] == f"h1-{veth_pair.addr_b}.pcap"
    assert pcap.exists() and pcap.stat().st_size > 24  # more than the pcap file header


def test_flows_between_two_agents_and_fetch_both_ends(veth_pair, agents, keys, tmp_path):
    a, b = two_agents(veth_pair, agents, keys)
    out = run_in_ns(veth_pair.a, prelude(keys) + clients(veth_pair, a, b) + f"""
        events = []
        ca.on_event(lambda e: events.append(e.event))
        port = cb.prepare_server(1, "tok1").port
        again = cb.prepare_server(1, "tok1")
        off, rtt = ca.clock_offset()
        spec = dict(flow_id="h1-h2-1-0", test="TCP_STREAM", server={veth_pair.addr_b!r}, port=port, dur=2.0,
                    token="tok1", exp=1, ca="cubic", interval=0.05)
        started = ca.start_flows(1, [spec], at=time.time() + off + 0.3, ping=True)
        done = ca.wait_flows(1, timeout=20)
        ga = ca.fetch(1, {str(tmp_path / 'ctl' / '1')!r})
        server_done = cb.wait_flows(1, timeout=10)
        gb = cb.fetch(1, {str(tmp_path / 'ctl' / '1')!r})
        show({{"port": port, "reused": again.reused, "started": started, "done": done,
                          "files": sorted(str(p) for p in ga + gb), "events": events,
                          "server_done": server_done}})
    """)
    assert out["reused"] is True and out["started"]["flows"] == ["h1-h2-1-0"]
    assert out["done"]["complete"] and out["done"]["done"] == ["h1-h2-1-0"], out["done"]
    names = {os.path.basename(p) for p in out["files"]}
    assert {"h1-h2-1-0.client.nflow", "h1-h2-1-0.server.nflow", f"h1-{veth_pair.addr_b}.nflow"} <= names  # + ping
    client = read_flow(tmp_path / "ctl" / "1" / "flows" / "h1-h2-1-0.client.nflow")
    server = read_flow(tmp_path / "ctl" / "1" / "flows" / "h1-h2-1-0.server.nflow")
    assert client is not None and server is not None
    assert "flows_done" in out["events"]
    assert out["server_done"]["complete"] and out["server_done"]["server_running"] == []
    assert not (a.datadir / "1").exists() and not (b.datadir / "1").exists()  # acknowledged, deleted


def test_controller_killed_mid_flow_lease_expires_agent_restores_and_keeps_data(veth_pair, agents, keys, tmp_path):
    a, b = two_agents(veth_pair, agents, keys, "--lease", "2")
    wmem = ns_read(veth_pair.a, "/proc/sys/net/ipv4/tcp_wmem")
    code = prelude(keys) + clients(veth_pair, a, b, "heartbeat=0.5") + f"""
        ca.set_qdisc("veth0", "tbf", rate="200mbit", burst="30k", limit="200000")
        ca.set_sysctl({{"net.ipv4.tcp_wmem": "4096 65536 8388608"}})
        port = cb.prepare_server(5, "t5").port
        spec = dict(flow_id="h1-h2-1-0", test="TCP_STREAM", server={veth_pair.addr_b!r}, port=port, dur=30.0,
                    token="t5", exp=5, interval=0.05)
        ca.start_flows(5, [spec])
        print("started", flush=True)
        time.sleep(600)
    """
    ctl = subprocess.Popen(["ip", "netns", "exec", veth_pair.a, sys.executable, "-c", textwrap.dedent(code)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env={**os.environ, "PYTHONPATH": str(REPO)})
    logs = lambda: f"\n--- agent a:\n{a.log_text()}\n--- agent b:\n{b.log_text()}"  # noqa: E731
    try:
        line = ctl.stdout.readline().strip()
        if line != "started":
            ctl.kill()
            pytest.fail(f"controller snippet failed: {line!r} {ctl.stderr.read()}{logs()}")
        time.sleep(1.0)  # flows running, heartbeats holding the lease
        assert "tbf" in ns_qdisc(veth_pair.a), logs()
        assert "lease expired" not in a.log_text(), logs()
        ctl.send_signal(signal.SIGKILL)
        ctl.wait(timeout=10)
    finally:
        if ctl.poll() is None:
            ctl.kill()
            ctl.wait()
    assert wait_for(lambda: "lease expired" in a.log_text(), timeout=8), logs()
    assert wait_for(lambda: "tbf" not in ns_qdisc(veth_pair.a), timeout=5), logs()
    assert ns_read(veth_pair.a, "/proc/sys/net/ipv4/tcp_wmem").split() == wmem.split(), logs()
    flows = a.datadir / "5" / "flows" / "h1-h2-1-0.client.nflow"
    assert flows.exists(), logs()  # data kept
    out = run_in_ns(veth_pair.a, prelude(keys) + f"""
        ca = client("h1", {veth_pair.addr_a!r}, {a.port})
        hello = ca.hello()
        st = ca.status(5)
        got = ca.fetch(5, {str(tmp_path / 'new' / '5')!r})
        show({{"unfetched": hello.unfetched, "status": st, "files": [str(p) for p in got]}})
    """)
    assert "5" in out["unfetched"], (out, logs())
    assert out["status"]["running"] == [] and out["status"]["finished"], (out, logs())
    assert any(p.endswith("h1-h2-1-0.client.nflow") for p in out["files"])
    flow = read_flow(tmp_path / "new" / "5" / "flows" / "h1-h2-1-0.client.nflow")
    assert flow is not None


def test_iperf3_driver_between_two_agents(veth_pair, agents, keys, tmp_path):
    import shutil

    if shutil.which("iperf3") is None:
        pytest.skip("iperf3 not installed")
    a, b = two_agents(veth_pair, agents, keys)
    out = run_in_ns(veth_pair.a, prelude(keys) + clients(veth_pair, a, b) + f"""
        srv = cb.prepare_server(7, "", driver="iperf3", ports=[5399])
        spec = dict(flow_id="h1-h2-1-0", test="TCP_STREAM", server={veth_pair.addr_b!r}, port=5399, dur=1.0,
                    exp=7, driver="iperf3", interval=0.1)
        ca.start_flows(7, [spec])
        done = ca.wait_flows(7, timeout=20)
        got = ca.fetch(7, {str(tmp_path / 'ctl' / '7')!r})
        show({{"srv": srv, "done": done, "files": [str(p) for p in got]}})
    """)
    assert out["srv"]["ports"] == [5399] and out["srv"]["driver"] == "iperf3"
    assert out["done"]["done"] == ["h1-h2-1-0"], out["done"]
    assert any(p.endswith("h1-h2-1-0.client.nflow") for p in out["files"])


def test_agent_killed_mid_flow_then_restarted_offers_the_data(veth_pair, agents, keys, tmp_path):
    a, b = two_agents(veth_pair, agents, keys)
    out = run_in_ns(veth_pair.a, prelude(keys) + clients(veth_pair, a, b) + f"""
        port = cb.prepare_server(6, "t6").port
        spec = dict(flow_id="h1-h2-1-0", test="TCP_STREAM", server={veth_pair.addr_b!r}, port=port, dur=20.0,
                    token="t6", exp=6, interval=0.05)
        r = ca.start_flows(6, [spec])
        time.sleep(1.5)
        show(r)
    """)
    engine_pid = out["pid"]
    a.kill()  # SIGKILL mid-flow
    assert wait_for(lambda: not os.path.exists(f"/proc/{engine_pid}"), timeout=10)  # the engine died with it
    again = agents(keys=keys, netns=veth_pair.a, bind=veth_pair.addr_a, tag="a2", datadir=a.datadir,
                   extra=("--name", "h1"))
    got = run_in_ns(veth_pair.a, prelude(keys) + f"""
        ca = client("h1", {veth_pair.addr_a!r}, {again.port})
        hello = ca.hello()
        files = ca.fetch(6, {str(tmp_path / 'ctl' / '6')!r})
        show({{"unfetched": hello.unfetched, "files": [str(p) for p in files]}})
    """)
    assert "6" in got["unfetched"]
    path = tmp_path / "ctl" / "6" / "flows" / "h1-h2-1-0.client.nflow"
    assert str(path) in got["files"]
    flow = read_flow(path)  # complete blocks kept even if the writer was cut short
    assert flow is not None
