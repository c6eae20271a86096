"""Parsers of the host statistics files a snapshot writes (pure: text in, dicts out).

:mod:`netesto.collectors.hoststats` writes the files; these functions read
them back. :func:`summary_keys` computes the original's per-run keys (tso,
gso, lro, gro, rx-frames, tx-frames, adaptive-rx, tcpRmem, tcpWmem,
client-{rx,tx}-{packets,bytes}, client-{rx,tx}-packet-len) from a before and
an after snapshot.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Mapping

SECTION = "### "



def _int_or_text(text: str) -> int | float | str:
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


def parse_snmp(text: str) -> dict[str, dict[str, int | float | str]]:
    """/proc/net/snmp (and /proc/net/netstat): header/value line pairs per protocol.

    >>> parse_snmp("Tcp: RtoMin RetransSegs\\nTcp: 200 7\\n")["Tcp"]["RetransSegs"]
    7
    """
    out: dict[str, dict[str, int | float | str]] = {}
    pending: dict[str, list[str]] = {}
    for line in text.splitlines():
        proto, sep, rest = line.partition(":")
        if not sep or line.startswith(SECTION):
            continue
        fields = rest.split()
        if proto in pending:
            names = pending.pop(proto)
            out.setdefault(proto, {}).update(zip(names, (_int_or_text(f) for f in fields)))
        else:
            pending[proto] = fields
    return out


parse_netstat = parse_snmp


def parse_snmp6(text: str) -> dict[str, int]:
    """/proc/net/snmp6: ``Name value`` lines.

    >>> parse_snmp6("Ip6InReceives  \\t 12\\nUdp6InErrors 0\\n")
    {'Ip6InReceives': 12, 'Udp6InErrors': 0}
    """
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and not line.startswith(SECTION):
            try:
                out[parts[0]] = int(parts[1])
            except ValueError:
                continue
    return out


def parse_sysctl(text: str) -> dict[str, str]:
    """``key = value`` lines (this module's ``.sysctl`` files and ``sysctl -a``).

    >>> parse_sysctl("net.ipv4.tcp_rmem = 4096\\t131072\\t6291456\\n")["net.ipv4.tcp_rmem"]
    '4096\\t131072\\t6291456'
    """
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition(" = ")
        if sep:
            out[key.strip()] = value.strip()
    return out


def parse_proc_stat(text: str) -> dict[str, list[int]]:
    """/proc/stat lines as name -> integers (``cpu``, ``cpu0``, ``ctxt``, ``intr``...).

    >>> parse_proc_stat("cpu  1 2 3 4 5 6 7 8 9 10\\nctxt 99\\n")["ctxt"]
    [99]
    """
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if not parts or line.startswith(SECTION):
            continue
        try:
            out[parts[0]] = [int(p) for p in parts[1:]]
        except ValueError:
            continue
    return out


def parse_ifstat(text: str) -> dict[str, dict[str, int]]:
    """``<iface> <counter> <value>`` lines -> {iface: {counter: value}}."""
    out: dict[str, dict[str, int]] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 3:
            try:
                out.setdefault(parts[0], {})[parts[1]] = int(parts[2])
            except ValueError:
                continue
    return out


def split_sections(text: str) -> dict[str, str]:
    """A multi-interface ethtool file -> {iface: that interface's output}.

    An interface whose command failed maps to ``""``; text without section
    lines (plain ``ethtool`` output) maps to ``{"": text}``.
    """
    if not text.startswith(SECTION):
        return {"": text} if text.strip() else {}
    out: dict[str, str] = {}
    current: str | None = None
    lines: list[str] = []
    for line in text.splitlines():
        if line.startswith(SECTION):
            if current is not None:
                out[current] = "\n".join(lines)
            head = line[len(SECTION):].split()
            current = head[0] if head else ""
            lines = []
            if " error:" in line:
                out[current] = ""
                current = None
        elif current is not None:
            lines.append(line)
    if current is not None:
        out[current] = "\n".join(lines)
    return out


def section_errors(text: str) -> dict[str, str]:
    """{iface: error text} for sections whose command failed."""
    out = {}
    for line in text.splitlines():
        if line.startswith(SECTION) and " error: " in line:
            head, _, err = line[len(SECTION):].partition(" error: ")
            out[head.split()[0] if head.split() else ""] = err
    return out


def parse_ethtool_k(text: str) -> dict[str, str]:
    """``ethtool -k`` of one interface -> {feature: "on"|"off"} (``[fixed]`` dropped).

    >>> parse_ethtool_k("Features for eth0:\\ntcp-segmentation-offload: on\\n\\ttx-tcp-segmentation: on\\nlarge-receive-offload: off [fixed]\\n")
    {'tcp-segmentation-offload': 'on', 'tx-tcp-segmentation': 'on', 'large-receive-offload': 'off'}
    """
    out = {}
    for line in text.splitlines():
        name, sep, value = line.strip().partition(":")
        if not sep or line.startswith("Features for"):
            continue
        words = value.split()
        if words and words[0] in ("on", "off"):
            out[name] = words[0]
    return out


def parse_ethtool_c(text: str) -> dict[str, int | str]:
    """``ethtool -c`` of one interface -> {parameter: int or text}.

    ``Adaptive RX: off  TX: n/a`` becomes ``adaptive-rx``/``adaptive-tx``;
    ``n/a`` values are dropped.

    >>> parse_ethtool_c("Coalesce parameters for eth0:\\nAdaptive RX: off  TX: n/a\\nrx-frames: 1\\nrx-usecs-irq: n/a\\n")
    {'adaptive-rx': 'off', 'rx-frames': 1}
    """
    out: dict[str, int | str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("Coalesce parameters"):
            continue
        pairs = re.findall(r"([A-Za-z][\w -]*?):\s*(\S+)", line)
        if line.startswith("Adaptive") or line.startswith("CQE mode"):
            prefix = "adaptive" if line.startswith("Adaptive") else "cqe-mode"
            for name, value in pairs:
                key = name.split()[-1].lower()
                if value != "n/a":
                    out[f"{prefix}-{key}"] = value
            continue
        m = re.match(r"^([a-z][\w-]*):\s*(\S+)$", line)
        if m and m.group(2) != "n/a":
            converted = _int_or_text(m.group(2))
            out[m.group(1)] = converted if not isinstance(converted, float) else m.group(2)
    return out


def parse_ethtool_s(text: str) -> dict[str, int]:
    """``ethtool -S`` of one interface -> {counter: value}.

    >>> parse_ethtool_s("NIC statistics:\\n     rx_packets: 10\\n     peer_ifindex: 5\\n")
    {'rx_packets': 10, 'peer_ifindex': 5}
    """
    out = {}
    for line in text.splitlines():
        name, sep, value = line.strip().rpartition(":")
        if sep and name and not line.startswith("NIC statistics"):
            try:
                out[name.strip()] = int(value)
            except ValueError:
                continue
    return out


def parse_sections(text: str, parser: Any) -> dict[str, Any]:
    """Apply a per-interface parser to each section of a multi-interface file."""
    return {iface: parser(body) for iface, body in split_sections(text).items()}


# ---- helpers for results ----


def delta(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, Any]:
    """after - before for every numeric value present in both (nested maps recurse).

    >>> delta({"Tcp": {"OutSegs": 5, "RtoAlgorithm": "x"}}, {"Tcp": {"OutSegs": 9, "RtoAlgorithm": "x"}})
    {'Tcp': {'OutSegs': 4}}
    """
    out: dict[str, Any] = {}
    for key, b in before.items():
        if key not in after:
            continue
        a = after[key]
        if isinstance(b, Mapping) and isinstance(a, Mapping):
            out[key] = delta(b, a)
        elif isinstance(b, list) and isinstance(a, list) and len(a) == len(b):
            if all(isinstance(x, (int, float)) for x in a + b):
                out[key] = [x - y for x, y in zip(a, b)]
        elif isinstance(b, (int, float)) and isinstance(a, (int, float)) and not isinstance(a, bool):
            out[key] = a - b
    return out


def offload_summary(
    ethtool_k: Mapping[str, Mapping[str, str]],
    ethtool_c: Mapping[str, Mapping[str, Any]],
    interface: str | None = None,
) -> dict[str, Any]:
    """The original's tso/gso/lro/gro (on/off) and rx-frames/tx-frames/adaptive-rx.

    Takes parsed multi-interface files (:func:`parse_sections`); reads
    ``interface`` or the first interface that has the values. Missing = "".
    """
    names = (("tso", "tcp-segmentation-offload"), ("gso", "generic-segmentation-offload"),
             ("lro", "large-receive-offload"), ("gro", "generic-receive-offload"))
    out: dict[str, Any] = {key: "" for key, _ in names}
    out.update({"rx-frames": "", "tx-frames": "", "adaptive-rx": ""})
    for iface in _pick(ethtool_k, interface):
        feats = ethtool_k[iface]
        if feats:
            out.update({key: feats.get(name, "") for key, name in names})
            break
    for iface in _pick(ethtool_c, interface):
        coal = ethtool_c[iface]
        if coal:
            for key in ("rx-frames", "tx-frames", "adaptive-rx"):
                out[key] = coal.get(key, "")
            break
    return out


def _pick(parsed: Mapping[str, Any], interface: str | None) -> list[str]:
    if interface is not None:
        return [interface] if interface in parsed else []
    return list(parsed)


def traffic_counters(
    ifstat_before: Mapping[str, Mapping[str, int]],
    ifstat_after: Mapping[str, Mapping[str, int]],
    interface: str | None = None,
) -> dict[str, int]:
    """client-{rx,tx}-{packets,bytes} and client-{rx,tx}-packet-len between two snapshots.

    The original took the first ``rx_packets``-like line of ``ethtool -S``
    (eth0); drivers name those counters differently (veth has none), so this
    uses the kernel's interface counters: ``interface`` or the sum over
    every interface in both snapshots. packet-len = bytes // packets (0 if none).
    """
    d = delta(ifstat_before, ifstat_after)
    ifaces = [interface] if interface is not None else sorted(d)
    totals = {"rx_packets": 0, "tx_packets": 0, "rx_bytes": 0, "tx_bytes": 0}
    for iface in ifaces:
        for name in totals:
            totals[name] += int(d.get(iface, {}).get(name, 0))
    out = {
        "client-rx-packets": totals["rx_packets"],
        "client-tx-packets": totals["tx_packets"],
        "client-rx-bytes": totals["rx_bytes"],
        "client-tx-bytes": totals["tx_bytes"],
    }
    out["client-tx-packet-len"] = totals["tx_bytes"] // totals["tx_packets"] if totals["tx_packets"] else 0
    out["client-rx-packet-len"] = totals["rx_bytes"] // totals["rx_packets"] if totals["rx_packets"] else 0
    return out


def tcp_mem_max(sysctls: Mapping[str, str], name: str) -> int | str:
    """The max (third) value of ``net.ipv4.tcp_rmem``/``tcp_wmem``, or "" if absent.

    >>> tcp_mem_max({"net.ipv4.tcp_rmem": "4096\\t131072\\t6291456"}, "tcp_rmem")
    6291456
    """
    parts = sysctls.get(f"net.ipv4.{name}", "").split()
    return int(parts[2]) if len(parts) == 3 and parts[2].isdigit() else ""


def load(snap_dir: str | os.PathLike[str], host: str) -> dict[str, Any]:
    """Parse every file of one host's snapshot in ``snap_dir`` (missing files -> {})."""
    base = Path(snap_dir)

    def text(suffix: str) -> str:
        try:
            return (base / f"{host}.{suffix}").read_text()
        except OSError:
            return ""

    info_text = text("info")
    try:
        info = json.loads(info_text) if info_text else {}
    except ValueError:
        info = {}
    return {
        "snmp": parse_snmp(text("snmp")),
        "snmp6": parse_snmp6(text("snmp6")),
        "netstat": parse_netstat(text("netstat")),
        "sysctl": parse_sysctl(text("sysctl")),
        "stat": parse_proc_stat(text("stat")),
        "ifstat": parse_ifstat(text("ifstat")),
        "ethtool-S": parse_sections(text("ethtool-S"), parse_ethtool_s),
        "ethtool-k": parse_sections(text("ethtool-k"), parse_ethtool_k),
        "ethtool-c": parse_sections(text("ethtool-c"), parse_ethtool_c),
        "info": info,
        "tc": text("tc"),
    }


def summary_keys(
    before_dir: str | os.PathLike[str],
    after_dir: str | os.PathLike[str] | None,
    host: str,
    interface: str | None = None,
) -> dict[str, Any]:
    """The original's per-client keys from ``0/`` (before) and ``1/`` (after) snapshots.

    tcpRmem/tcpWmem from the after snapshot (before if there is none);
    offloads and coalescing from before; client counters are after - before
    (0 when the after snapshot is missing, as in the original).
    """
    before = load(before_dir, host)
    after = load(after_dir, host) if after_dir is not None else None
    end = after if after and after["sysctl"] else before
    out: dict[str, Any] = {
        "tcpRmem": tcp_mem_max(end["sysctl"], "tcp_rmem"),
        "tcpWmem": tcp_mem_max(end["sysctl"], "tcp_wmem"),
    }
    out.update(offload_summary(before["ethtool-k"], before["ethtool-c"], interface))
    if after and after["ifstat"]:
        out.update(traffic_counters(before["ifstat"], after["ifstat"], interface))
    else:
        out.update(traffic_counters({}, {}, interface))
    return out


__all__ = [
    "delta",
    "load",
    "offload_summary",
    "parse_ethtool_c",
    "parse_ethtool_k",
    "parse_ethtool_s",
    "parse_ifstat",
    "parse_netstat",
    "parse_proc_stat",
    "parse_sections",
    "parse_snmp",
    "parse_snmp6",
    "parse_sysctl",
    "section_errors",
    "summary_keys",
    "tcp_mem_max",
    "traffic_counters",
]
