"""Read the host stats snapshots (``<exp>/0|1/<host>.*``) into flat counters.

The collectors write the files (``.snmp``, ``.netstat``, ``.ifstat``,
``.sysctl``, ``.ethtool-S/-k/-c``, ``.info``). These are small pure parsers
of those files' text; a missing or unreadable file gives empty results, never
an error (the original leaves such values blank).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

_NUM = re.compile(r"^-?\d+$")


def parse_proc_table(text: str) -> dict[str, int]:
    """``/proc/net/snmp`` or ``/proc/net/netstat``: header/value line pairs.

    >>> parse_proc_table("Tcp: RtoMin RetransSegs\\nTcp: 200 7\\n")
    {'Tcp.RtoMin': 200, 'Tcp.RetransSegs': 7}
    """
    out: dict[str, int] = {}
    lines = [ln.split() for ln in text.splitlines() if ln.strip()]
    for names, values in zip(lines[::2], lines[1::2]):
        if not names or names[0] != values[0]:
            continue
        section = names[0].rstrip(":")
        for n, v in zip(names[1:], values[1:]):
            if _NUM.match(v):
                out[f"{section}.{n}"] = int(v)
    return out


_DEV_FIELDS = ("rx_bytes", "rx_packets", "rx_errs", "rx_drop", "rx_fifo", "rx_frame",
               "rx_compressed", "rx_multicast", "tx_bytes", "tx_packets", "tx_errs",
               "tx_drop", "tx_fifo", "tx_colls", "tx_carrier", "tx_compressed")


def parse_proc_dev(text: str) -> dict[str, int]:
    """``/proc/net/dev``: ``if.<dev>.<field>`` counters plus ``if.all.*`` totals."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        if ":" not in line or "|" in line:
            continue
        dev, _, rest = line.partition(":")
        values = rest.split()
        if len(values) < len(_DEV_FIELDS):
            continue
        for name, v in zip(_DEV_FIELDS, values):
            out[f"if.{dev.strip()}.{name}"] = int(v)
            out[f"if.all.{name}"] = out.get(f"if.all.{name}", 0) + int(v)
    return out


def parse_colon_pairs(text: str) -> dict[str, str]:
    """``ethtool -S/-k/-c`` style ``name: value`` lines (first occurrence wins)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        name, sep, value = line.partition(":")
        name = name.strip()
        if sep and name and name not in out:
            out[name] = value.strip()
    return out


def parse_sysctl(text: str) -> dict[str, str]:
    """``sysctl -a`` output: ``key = value``."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key.strip()] = " ".join(value.split())
    return out


@dataclass
class HostSnapshot:
    """What one ``<order>/<host>.*`` snapshot holds, parsed."""

    counters: dict[str, int] = field(default_factory=dict)
    sysctl: dict[str, str] = field(default_factory=dict)
    offloads: dict[str, str] = field(default_factory=dict)
    coalesce: dict[str, str] = field(default_factory=dict)
    ethtool_stats: dict[str, str] = field(default_factory=dict)
    info: dict[str, object] = field(default_factory=dict)


def _read(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return None


def read_snapshot(directory: Path, host: str) -> HostSnapshot:
    """Parse ``<directory>/<host>.*``; missing files leave their part empty."""
    snap = HostSnapshot()
    for suffix in (".snmp", ".netstat", ".snmp6"):
        text = _read(directory / f"{host}{suffix}")
        if text is not None:
            if suffix == ".snmp6":
                for line in text.splitlines():
                    parts = line.split()
                    if len(parts) == 2 and _NUM.match(parts[1]):
                        snap.counters[f"Ip6.{parts[0]}"] = int(parts[1])
            else:
                snap.counters.update(parse_proc_table(text))
    text = _read(directory / f"{host}.ifstat")
    if text is not None:
        snap.counters.update(parse_proc_dev(text))
    text = _read(directory / f"{host}.ethtool-S")
    if text is not None:
        snap.ethtool_stats = parse_colon_pairs(text)
        for k, v in snap.ethtool_stats.items():
            if _NUM.match(v):
                snap.counters[f"ethtool.{k}"] = int(v)
    text = _read(directory / f"{host}.sysctl")
    if text is not None:
        snap.sysctl = parse_sysctl(text)
    text = _read(directory / f"{host}.ethtool-k")
    if text is not None:
        snap.offloads = {k: v.split()[0] if v else "" for k, v in parse_colon_pairs(text).items()}
    text = _read(directory / f"{host}.ethtool-c")
    if text is not None:
        snap.coalesce = parse_colon_pairs(text)
        m = re.search(r"Adaptive RX:\s*(\w+)", text)
        if m:
            snap.coalesce["adaptive-rx"] = m.group(1)
    text = _read(directory / f"{host}.info")
    if text is not None:
        try:
            info = json.loads(text)
            snap.info = info if isinstance(info, dict) else {}
        except ValueError:
            snap.info = {}
    return snap


def nic_counter(snap: HostSnapshot, name: str) -> int | None:
    """``rx_packets``/``tx_packets``/``rx_bytes``/``tx_bytes`` of a host.

    As the original: the first ``ethtool -S`` line matching the name; without
    ``ethtool -S`` (veths, loopback) the sum over all interfaces of
    ``/proc/net/dev``. ``None`` when neither file was collected.
    """
    for key, value in snap.ethtool_stats.items():
        if name in key and _NUM.match(value):
            return int(value)
    return snap.counters.get(f"if.all.{name}")


_OFFLOAD_NAMES = {
    "tso": "tcp-segmentation-offload",
    "gso": "generic-segmentation-offload",
    "lro": "large-receive-offload",
    "gro": "generic-receive-offload",
}


def offload(snap: HostSnapshot, short: str) -> str:
    """``on``/``off`` of tso/gso/lro/gro from ``ethtool -k`` ("" if unknown)."""
    return snap.offloads.get(_OFFLOAD_NAMES[short], "")


__all__ = [
    "HostSnapshot",
    "nic_counter",
    "offload",
    "parse_colon_pairs",
    "parse_proc_dev",
    "parse_proc_table",
    "parse_sysctl",
    "read_snapshot",
]
