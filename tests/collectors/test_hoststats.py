"""Host statistics: parsers on real captured output; real snapshots inside namespaces."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from netesto.collectors import hoststats as collect
from netesto.raw import hoststats as hs

DATA = Path(__file__).parents[1] / "data"
ROOT = Path(__file__).resolve().parents[2]
SUFFIXES = ("snmp", "snmp6", "netstat", "sysctl", "stat", "ifstat",
            "ethtool-S", "ethtool-k", "ethtool-c", "tc", "info")


def read(name: str) -> str:
    return (DATA / name).read_text()


@pytest.mark.parametrize(
    "proto, field, expected",
    [("Ip", "Forwarding", 2), ("Tcp", "RtoMin", 200), ("Tcp", "MaxConn", -1), ("Udp", "InErrors", 0)],
)
def test_parse_snmp_real(proto, field, expected):
    assert hs.parse_snmp(read("proc-net-snmp.txt"))[proto][field] == expected


def test_parse_snmp_has_every_protocol_and_counter():
    parsed = hs.parse_snmp(read("proc-net-snmp.txt"))
    assert {"Ip", "Icmp", "IcmpMsg", "Tcp", "Udp", "UdpLite"} <= set(parsed)
    assert {"RetransSegs", "OutSegs", "InSegs", "ActiveOpens"} <= set(parsed["Tcp"])


def test_parse_netstat_real():
    parsed = hs.parse_netstat(read("proc-net-netstat.txt"))
    assert {"TcpExt", "IpExt", "MPTcpExt"} & set(parsed) >= {"TcpExt", "IpExt"}
    assert isinstance(parsed["TcpExt"]["TCPTimeouts"], int)
    assert len(parsed["TcpExt"]) > 100


def test_parse_snmp6_real():
    parsed = hs.parse_snmp6(read("proc-net-snmp6.txt"))
    assert "Ip6InReceives" in parsed and "Udp6InErrors" in parsed
    assert all(isinstance(v, int) for v in parsed.values())


def test_parse_proc_stat_real():
    parsed = hs.parse_proc_stat(read("proc-stat.txt"))
    assert len(parsed["cpu"]) >= 8 and "cpu0" in parsed and "cpu1" in parsed
    assert parsed["ctxt"][0] > 0


@pytest.mark.parametrize(
    "name, feature, value",
    [
        ("veth.ethtool-k.txt", "tcp-segmentation-offload", "on"),
        ("veth.ethtool-k.txt", "generic-receive-offload", "off"),
        ("veth.ethtool-k.txt", "large-receive-offload", "off"),  # "off [fixed]"
        ("veth.ethtool-k.txt", "tx-checksum-ipv4", "off"),  # indented sub-feature
        ("eth0.ethtool-k.txt", "generic-segmentation-offload", "on"),
    ],
)
def test_parse_ethtool_k_real(name, feature, value):
    assert hs.parse_ethtool_k(read(name))[feature] == value


def test_parse_ethtool_c_real():
    parsed = hs.parse_ethtool_c(read("eth0.ethtool-c.txt"))
    assert parsed["adaptive-rx"] == "off"
    assert parsed["rx-frames"] == 1 and parsed["tx-frames"] == 1 and parsed["rx-usecs"] == 0
    assert "adaptive-tx" not in parsed and "rx-usecs-irq" not in parsed  # n/a dropped


def test_parse_ethtool_c_unsupported_is_empty():
    assert hs.parse_ethtool_c(read("veth.ethtool-c.txt")) == {}


@pytest.mark.parametrize(
    "name, counter, value",
    [("veth.ethtool-S.txt", "peer_ifindex", 5), ("veth.ethtool-S.txt", "rx_queue_0_drops", 0),
     ("eth0.ethtool-S.txt", "rx_drops", 0)],
)
def test_parse_ethtool_s_real(name, counter, value):
    assert hs.parse_ethtool_s(read(name))[counter] == value


def test_sections_and_errors():
    text = (
        "### veth0 ethtool -k\n" + read("veth.ethtool-k.txt")
        + "### eth0 ethtool -c\n" + read("eth0.ethtool-c.txt")
        + "### lo ethtool -c error: netlink error: Operation not supported\n"
    )
    sections = hs.split_sections(text)
    assert set(sections) == {"veth0", "eth0", "lo"} and sections["lo"] == ""
    assert hs.section_errors(text) == {"lo": "netlink error: Operation not supported"}
    coal = hs.parse_sections(text, hs.parse_ethtool_c)
    assert coal["eth0"]["rx-frames"] == 1 and coal["lo"] == {}


def test_offload_summary_picks_interface():
    k = {"veth0": hs.parse_ethtool_k(read("veth.ethtool-k.txt")),
         "eth0": hs.parse_ethtool_k(read("eth0.ethtool-k.txt"))}
    c = {"veth0": {}, "eth0": hs.parse_ethtool_c(read("eth0.ethtool-c.txt"))}
    out = hs.offload_summary(k, c)
    assert (out["tso"], out["gso"], out["lro"], out["gro"]) == ("on", "on", "off", "off")
    assert (out["rx-frames"], out["tx-frames"], out["adaptive-rx"]) == (1, 1, "off")
    assert hs.offload_summary(k, c, interface="veth0")["rx-frames"] == ""
    assert hs.offload_summary({}, {})["tso"] == ""


def test_traffic_counters_and_delta():
    before = {"veth0": {"rx_packets": 10, "tx_packets": 20, "rx_bytes": 1000, "tx_bytes": 3000}}
    after = {"veth0": {"rx_packets": 14, "tx_packets": 30, "rx_bytes": 1400, "tx_bytes": 18000}}
    out = hs.traffic_counters(before, after)
    assert out == {"client-rx-packets": 4, "client-tx-packets": 10, "client-rx-bytes": 400,
                   "client-tx-bytes": 15000, "client-tx-packet-len": 1500, "client-rx-packet-len": 100}
    assert hs.traffic_counters({}, {})["client-rx-packet-len"] == 0
    assert hs.delta({"cpu": [1, 2], "x": "a"}, {"cpu": [4, 6], "x": "a"}) == {"cpu": [3, 4]}


def test_sysctl_round_trip_from_this_host(tmp_path):
    pairs = collect.read_sysctls()
    text = "".join(f"{k} = {v}\n" for k, v in pairs)
    parsed = hs.parse_sysctl(text)
    assert len(parsed) == len(pairs) > 50
    raw = Path("/proc/sys/net/ipv4/tcp_rmem").read_text().split()
    assert hs.tcp_mem_max(parsed, "tcp_rmem") == int(raw[2])
    assert parsed["net.ipv4.tcp_congestion_control"] == Path(
        "/proc/sys/net/ipv4/tcp_congestion_control").read_text().strip()
    assert "net.ipv4.tcp_available_congestion_control" in parsed
    assert "net.core.rmem_max" in parsed and "net.core.wmem_max" in parsed


def _snapshot_in(ns: str, dest: Path, host: str, env_path: str | None = None) -> list[str]:
    code = ("import sys, json; from netesto.collectors.hoststats import snapshot; "
            "print(json.dumps([p.name for p in snapshot(sys.argv[1], sys.argv[2])]))")
    env = {"PYTHONPATH": str(ROOT), "PATH": env_path or "/usr/sbin:/usr/bin:/sbin:/bin"}
    out = subprocess.run([shutil.which("ip") or "ip", "netns", "exec", ns, sys.executable, "-c", code, str(dest), host],
                         capture_output=True, text=True, timeout=30, env=env)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.netns
def test_snapshot_in_namespace(veth_pair, tmp_path):
    names = _snapshot_in(veth_pair.a, tmp_path / "0", "a")
    assert sorted(names) == sorted(f"a.{s}" for s in SUFFIXES)
    # some traffic between the snapshots: 20 pings of 1000 bytes
    veth_pair.run(veth_pair.a, ["ping", "-c", "20", "-i", "0.01", "-s", "1000", "-q", veth_pair.addr_b])
    _snapshot_in(veth_pair.a, tmp_path / "1", "a")
    snap = hs.load(tmp_path / "0", "a")
    assert snap["info"]["interfaces"] == ["veth0"]  # lo is left out by default
    assert snap["info"]["host"] == "a" and snap["info"]["kernel"]
    assert "Tcp" in snap["snmp"] and "TcpExt" in snap["netstat"]
    assert snap["ethtool-k"]["veth0"]["tcp-segmentation-offload"] in ("on", "off")
    assert "peer_ifindex" in snap["ethtool-S"]["veth0"]
    assert "noqueue" in (tmp_path / "0" / "a.tc").read_text()
    # veth has no coalescing: recorded as an error section, not fatal
    assert "veth0" in hs.section_errors((tmp_path / "0" / "a.ethtool-c").read_text())
    keys = hs.summary_keys(tmp_path / "0", tmp_path / "1", "a")
    assert keys["tso"] in ("on", "off") and keys["rx-frames"] == ""
    assert isinstance(keys["tcpRmem"], int) and isinstance(keys["tcpWmem"], int)
    packets = keys["client-tx-packets"]
    assert 20 <= packets < 40 and 20 <= keys["client-rx-packets"] < 40
    # 20 echoes of 1042 bytes, plus the small ARP and IPv6 neighbour/router packets a new link sends
    # (more of them the longer a loaded machine takes between the snapshots)
    extra = packets - 20
    assert 20 * 1042 <= keys["client-tx-bytes"] <= 20 * 1042 + extra * 200
    assert keys["client-tx-packet-len"] == keys["client-tx-bytes"] // packets
    icmp = hs.delta(snap["snmp"], hs.load(tmp_path / "1", "a")["snmp"])["Icmp"]
    assert icmp["InEchoReps"] == 20


@pytest.mark.netns
def test_snapshot_without_ethtool_or_tc(veth_pair, tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    names = _snapshot_in(veth_pair.a, tmp_path / "s", "a", env_path=str(bindir))
    assert len(names) == len(SUFFIXES)
    errs = hs.section_errors((tmp_path / "s" / "a.ethtool-k").read_text())
    assert errs == {"veth0": "ethtool not found on PATH"}
    assert "tc not found on PATH" in (tmp_path / "s" / "a.tc").read_text()
    assert hs.summary_keys(tmp_path / "s", None, "a")["client-tx-packets"] == 0


def test_snapshot_bad_dest_is_traffic_error(tmp_path):
    from netesto.errors import TrafficError

    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(TrafficError, match="cannot create"):
        collect.snapshot(blocker / "sub", "h")
