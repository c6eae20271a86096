"""A real agent's host control on loopback: sysctls, modules, snapshots, tcpdump, restore, journal."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import time
from pathlib import Path

import pytest

from netesto.errors import AgentError, PolicyError
from netesto.proctable import alive
from tests.agent.agentproc import wait_for


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
        with pytest.raises(AgentError, match="module tcp_nv is not loaded on this host") as info:
            c.set_module_params("tcp_nv", {"nv_pad": 2})
        assert info.value.kind == "Unavailable"


def test_snapshot_writes_host_stats_under_the_order_directory(agents, keys):
    agent = agents(keys=keys)
    with agent.client() as c:
        out = c.snapshot(2, 0, "h1")
    assert "0/h1.info" in out.files and "0/h1.snmp" in out.files
    assert (agent.datadir / "2" / "0" / "h1.snmp").read_text().startswith("Ip:")


@pytest.mark.parametrize("host", ["../../../escaped", "/tmp/netesto-h-agent-escaped", "a/b", ".."])
def test_snapshot_host_cannot_write_outside_the_experiment(agents, keys, tmp_path, host):
    # The host name becomes a file name (<exp>/<order>/<host>.snmp): a path in it
    # would write the host's statistics wherever the controller asked.
    agent = agents(keys=keys)
    with agent.client() as c:
        with pytest.raises(AgentError, match="bad host name") as info:
            c.snapshot(1, 0, host)
        assert info.value.kind == "UsageError" and "h1" in str(info.value)
        assert c.hello().protocol == "1.0"
    assert not list(tmp_path.glob("escaped*")) and not list(tmp_path.parent.glob("escaped*"))
    assert not list(Path("/tmp").glob("netesto-h-agent-escaped*"))
    assert not (agent.datadir / "1" / "0").exists() or not any((agent.datadir / "1" / "0").rglob("*"))


needs_tcpdump = pytest.mark.skipif(shutil.which("tcpdump") is None or os.geteuid() != 0, reason="tcpdump as root")


@needs_tcpdump
def test_tcpdump_that_fails_at_once_is_reported_naming_the_cause(agents, keys):
    agent = agents(keys=keys)
    with agent.client() as c:
        with pytest.raises(AgentError, match=r"tcpdump .*exited.*unknown host 'no-such-host\.invalid'") as info:
            c.tcpdump_start(8, "lo", "no-such-host.invalid", 10)
        assert info.value.kind == "ToolError" and "h1" in str(info.value)
        assert c.tcpdump_stop(8).stopped == []  # nothing left to stop
        assert c.hello().protocol == "1.0"


@needs_tcpdump
def test_tcpdump_captures_from_the_moment_tcpdump_start_returns(agents, keys):
    # The runner starts flows right after tcpdump_start: packets sent then must be in the pcap.
    agent = agents(keys=keys)
    mark = f"netesto-mark-{os.getpid()}".encode()
    with agent.client() as c:
        path = c.tcpdump_start(9, "lo", "X", 100000).path
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
        path = c.tcpdump_start(10, "lo", "X", 100000).path
        c.fetch(10, tmp_path / "early")
        assert (agent.datadir / "10" / path).exists()
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.sendto(mark, ("127.0.0.1", 9))
        time.sleep(0.2)
        c.tcpdump_stop(10)
        got = c.fetch(10, tmp_path / "late")
    assert mark in (tmp_path / "late" / path).read_bytes()
    assert tmp_path / "late" / path in got and not (agent.datadir / "10").exists()


def test_a_restore_that_cannot_run_tc_is_reported_and_the_agent_keeps_serving(agents, keys, tmp_path):
    # A journal left by a killed agent, on a host where tc cannot run now: the restores at
    # start and at lease expiry fail; the agent says why, keeps the entry and keeps serving.
    datadir = tmp_path / "agent-data"
    (datadir / ".agent").mkdir(parents=True)
    (datadir / ".agent" / "journal.json").write_text('{"qdisc": {"lo": "noqueue"}}')
    agent = agents(keys=keys, datadir=datadir, extra=("--lease", "1"), env={"PATH": str(tmp_path / "empty-bin")})
    with agent.client(heartbeat=0) as c:
        assert c.hello().journal_pending
    assert wait_for(lambda: "lease expired" in agent.log_text(), timeout=10), agent.log_text()
    time.sleep(0.3)
    assert agent.proc.poll() is None, agent.log_text()[-2000:]
    assert agent.logged("qdisc on lo: ", "tc is not installed"), agent.log_text()[-2000:]
    with agent.client() as c:
        assert c.hello().journal_pending  # kept for a restore that can work
        out = c.restore()
        assert out.restored == [] and "qdisc on lo" in out.errors[0] and "tc is not installed" in out.errors[0]


@needs_tcpdump
def test_tcpdumps_for_two_address_servers_write_two_pcaps_and_never_share_one(agents, keys):
    # The pcap was named after the server's first label: 127.0.0.1 and 127.0.0.2 both
    # became h1-127.pcap, the second tcpdump truncating the first one's capture.
    # (addresses no other test talks to: a capture of 127.0.0.1 filled its packet count and ended
    # within the test on a busy runner)
    agent = agents(keys=keys)
    with agent.client() as c:
        one = c.tcpdump_start(24, "lo", "127.0.0.201", 1000).path
        two = c.tcpdump_start(24, "lo", "127.0.0.202", 1000).path
        assert one == "h1-127.0.0.201.pcap" and two == "h1-127.0.0.202.pcap"
        with pytest.raises(AgentError, match=r"a tcpdump writing h1-127\.0\.0\.201\.pcap in experiment 24 is running"):
            c.tcpdump_start(24, "lo", "127.0.0.201", 1000)
        assert len(c.tcpdump_stop(24).stopped) == 2
        assert c.tcpdump_start(25, "lo", "localhost", 10).path == "h1-localhost.pcap"  # names: the first label
        c.tcpdump_stop(25)
    assert (agent.datadir / "24" / one).exists() and (agent.datadir / "24" / two).exists()


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
        assert "3" in c.hello().unfetched  # the agent serves its data
    assert (datadir / ".agent" / "journal.json.bad").read_text() == text  # the evidence is kept
    assert agent.logged("journal.json is unreadable", "journal.json.bad"), agent.log_text()[-2000:]


@needs_tcpdump
def test_tcpdump_dies_with_a_sigkilled_agent(agents, keys):
    # tcpdump switched to its own user after opening the capture, and a change of user
    # clears the parent-death signal: it outlived a killed agent, capturing on.
    agent = agents(keys=keys)
    with agent.client() as c:
        pid = c.tcpdump_start(29, "lo", "X", 100000).pid
    agent.kill(signal.SIGKILL)

    def gone() -> bool:
        return not alive(pid)  # a zombie has ended

    try:
        assert wait_for(gone, timeout=10)
    finally:
        if not gone():
            os.kill(pid, signal.SIGKILL)
    assert (agent.datadir / "29" / "h1-X.pcap").stat().st_size >= 24  # the capture so far is kept


@pytest.mark.parametrize("target", ["-f", "--help", "../x"])
def test_ping_and_tcpdump_never_take_an_option_from_a_name(agents, keys, target):
    agent = agents(keys=keys, extra=("--test-bind", "127.0.0.1"))
    with agent.client() as c:
        with pytest.raises(AgentError, match=r"bad ping (target|name)"):
            c.ping_start(22, target)
        with pytest.raises(AgentError, match=r"bad tcpdump server"):
            c.tcpdump_start(22, "lo", target, 10)


def test_the_netem_fallback_comes_from_the_option_or_the_environment(monkeypatch):
    # The agent reads no environment past its command line: the option's default is the variable.
    from netesto.agent.cli import build_parser

    monkeypatch.delenv("NETESTO_NETEM_FALLBACK", raising=False)
    assert build_parser().parse_args([]).netem_fallback == ""
    monkeypatch.setenv("NETESTO_NETEM_FALLBACK", "tests.agent.fake_delayline:netem_fallback")
    assert build_parser().parse_args([]).netem_fallback == "tests.agent.fake_delayline:netem_fallback"
    assert build_parser().parse_args(["--netem-fallback", "m:f"]).netem_fallback == "m:f"
