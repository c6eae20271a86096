"""Host stats snapshots (``<exp>/0|1/<host>.*``) as flat counters and summary values.

The collectors write and parse the files (:mod:`netesto.collectors.hoststats`);
this adapts their parsed form to what results need: one flat
``section.name -> int`` counter map per snapshot (for the Dataset's
``host_before``/``host_after``/``host_delta``), the sysctls, and the
original's offload/coalescing values. Missing files give empty parts, never
an error (the original leaves such values blank).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from netesto.raw import hoststats


@dataclass
class HostSnapshot:
    """One parsed ``<order>/<host>.*`` snapshot."""

    counters: dict[str, int] = field(default_factory=dict)
    sysctl: dict[str, str] = field(default_factory=dict)
    offloads: dict[str, Any] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    has_ifstat: bool = False
    qdiscs: str = ""  # the qdisc lines of `tc -s qdisc show` (their configuration, not the counters)


def _flatten(parsed: dict[str, Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for group in ("snmp", "netstat"):
        for section, values in parsed.get(group, {}).items():
            for name, v in values.items():
                if isinstance(v, int) and not isinstance(v, bool):
                    out[f"{section}.{name}"] = v
    for name, v in parsed.get("snmp6", {}).items():
        out[f"snmp6.{name}"] = v
    for iface, values in parsed.get("ifstat", {}).items():
        for name, v in values.items():
            out[f"if.{iface}.{name}"] = v
            out[f"if.all.{name}"] = out.get(f"if.all.{name}", 0) + v
    return out


def read_snapshot(directory: Path, host: str) -> HostSnapshot:
    """Parse ``<directory>/<host>.*`` (missing files leave their part empty)."""
    parsed = hoststats.load(directory, host)
    return HostSnapshot(
        counters=_flatten(parsed),
        sysctl=dict(parsed.get("sysctl", {})),
        offloads=hoststats.offload_summary(parsed.get("ethtool-k", {}), parsed.get("ethtool-c", {})),
        info=dict(parsed.get("info", {}) or {}),
        has_ifstat=bool(parsed.get("ifstat")),
        qdiscs="\n".join(line for line in str(parsed.get("tc", "")).splitlines() if line.startswith("qdisc ")),
    )


def nic_counter(snap: HostSnapshot, name: str) -> int | None:
    """``rx_packets``/``tx_packets``/``rx_bytes``/``tx_bytes`` summed over the
    host's interfaces (the collectors' choice: veths have no ``ethtool -S``
    packet counters); None when the snapshot has no interface counters."""
    if not snap.has_ifstat:
        return None
    return snap.counters.get(f"if.all.{name}", 0)


def offload(snap: HostSnapshot, key: str) -> str:
    """tso/gso/lro/gro (on/off), rx-frames, tx-frames, adaptive-rx ("" if unknown)."""
    value = snap.offloads.get(key, "")
    return "" if value is None else str(value)


def tcp_mem_max(snap: HostSnapshot | None, name: str) -> str:
    """Max (third) value of ``net.ipv4.tcp_rmem``/``tcp_wmem`` ("" if unknown)."""
    if snap is None:
        return ""
    return str(hoststats.tcp_mem_max(snap.sysctl, name))


__all__ = ["HostSnapshot", "nic_counter", "offload", "read_snapshot", "tcp_mem_max"]
