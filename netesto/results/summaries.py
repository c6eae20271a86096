"""The original's key:value summaries: per-group ``<hsn>.exp.out`` and ``all.exp.out``.

Keys and meanings follow the original (reference section 3), computed from the
experiment Dataset, with its bugs fixed: every per-instance value is
aggregated over the group's instances (sums for retransmits, means for CPU,
cwnd and rtt, min/max/count-weighted means for latencies) instead of "the
last instance wins"; ``retransPkts%`` is ``100 x retransmitted packets /
packets sent`` from the flows' own TCP counters (never the constant 0.00);
``adaptive-rx`` is numeric (on=1, off=0). Missing inputs give blank values.
``rate`` is the group's summed goodput and ``rateMin``/``rateMax`` its slowest and
fastest flow's rate (the original's meaning: the dataset's per-flow
``rate_window_min``/``rate_window_max`` are another thing, 1-second windows of one
flow). netesto adds ``rwndLimited%``, ``sndbufLimited%`` and ``netLimited%``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import xarray as xr

from netesto.results.fairness import jain_index
from netesto.results.hostfiles import HostSnapshot, nic_counter, offload, tcp_mem_max
from netesto.results.load import ExperimentRaw

SEPARATOR = "-----"
# all.exp.out's (and exp.csv's, after the original's 58 fields) limit shares, percent: netesto's own keys
LIMIT_KEYS = (("rwndLimited%", "rwnd_limited_share"), ("sndbufLimited%", "sndbuf_limited_share"),
              ("netLimited%", "network_limited_share"))
# Keys of a group file that all.exp.out recomputes over the whole experiment.
_EXPERIMENT_WIDE = ("retransPkts%", "jain")


@dataclass(frozen=True)
class GroupSummary:
    """One DO_CLIENT group's summary: file stem ``hsn`` and ordered items."""

    hsn: str
    group: int
    items: tuple[tuple[str, str], ...]

    def as_dict(self) -> dict[str, str]:
        return dict(self.items)

    def text(self) -> str:
        return "".join(f"{k}:{v}\n" for k, v in self.items) + SEPARATOR + "\n"


def fmt(value: Any, decimals: int = 1) -> str:
    """Number -> text with ``decimals`` places; NaN/None -> "" (blank)."""
    if value is None:
        return ""
    try:
        v = float(value)
    except (TypeError, ValueError):
        return str(value)
    if not math.isfinite(v):
        return ""
    if decimals == 0:
        return str(int(round(v)))
    return f"{v:.{decimals}f}"


def short_name(host: str) -> str:
    """The original's ``hn``: host name up to the first char outside [a-z0-9]."""
    m = re.match(r"[a-z0-9]*", host.lower())
    return m.group(0) if m and m.group(0) else host


def _nanfn(fn: Any, values: np.ndarray) -> float:
    v = values[np.isfinite(values)]
    return float(fn(v)) if v.size else math.nan


def _count(value: Any, default: int) -> int:
    """A positive whole number from experiment.json, else ``default``."""
    try:
        n = float(value)
    except (TypeError, ValueError):
        return default
    return int(n) if math.isfinite(n) and n >= 1 else default


def _snap(snaps: dict[str, HostSnapshot], host: str) -> HostSnapshot | None:
    return snaps.get(host) or snaps.get(host.split(".", 1)[0])


def _nic_delta(raw: ExperimentRaw, host: str, name: str) -> float:
    """after - before of an interface counter summed over the interfaces
    present in both snapshots (interfaces that came, went or were recreated
    in between - other labs' veths on a shared host - are left out)."""
    b, a = _snap(raw.before, host), _snap(raw.after, host)
    if a is None or b is None or nic_counter(a, name) is None or nic_counter(b, name) is None:
        return math.nan
    total = 0
    suffix = f".{name}"
    for key, vb in b.counters.items():
        if key.startswith("if.") and not key.startswith("if.all.") and key.endswith(suffix):
            va = a.counters.get(key)
            if va is not None and va >= vb:
                total += va - vb
    return float(total)


def _on_off(value: str) -> str:
    return {"on": "1", "off": "0"}.get(value.strip().lower(), value)


def retrans_percent(retrans: float, packets: float) -> float:
    """100 x retransmitted / sent packets (0 packets -> NaN, shown blank)."""
    if not math.isfinite(retrans) or not math.isfinite(packets) or packets <= 0:
        return math.nan
    return 100.0 * retrans / packets


def _host_info(raw: ExperimentRaw, host: str) -> dict[str, Any]:
    hosts = raw.record.hosts
    info = hosts.get(host) or hosts.get(host.split(".", 1)[0]) or {}
    return info if isinstance(info, dict) else {}


def _merged_latency(raw: ExperimentRaw, flow_ids: list[str]) -> dict[str, float] | None:
    """Latency summary (us) of the union of the flows' transactions, from the
    engine's mergeable histograms (None if any flow lacks one or none has data)."""
    from netesto.raw.histogram import Histogram

    by_id = {rec.flow_id: rec for rec in raw.flows}
    total: Histogram | None = None
    for fid in flow_ids:
        rec = by_id.get(fid)
        data = (rec.client.summary or {}).get("latency_hist") if rec and rec.client else None
        if not isinstance(data, dict):
            return None
        try:
            h = Histogram.from_dict(data)
        except (ValueError, KeyError, TypeError):
            return None
        if total is None:
            total = h
        else:
            total.merge(h)
    if total is None or total.count == 0:
        return None
    return {k: float(v) for k, v in total.summary(0.001).to_dict().items()}


def group_summaries(ds: xr.Dataset, raw: ExperimentRaw) -> list[GroupSummary]:
    """One summary per (client, server, group), in group order."""
    out: list[GroupSummary] = []
    if ds.sizes.get("flow", 0) == 0:
        return out
    keys = sorted(
        {(str(h), str(s), int(g)) for h, s, g in zip(ds.host.values, ds.server.values, ds.group.values)},
        key=lambda k: (k[2], k[0], k[1]),
    )
    full = {rec.flow_id: rec.meta for rec in raw.flows}
    for host, server, group in keys:
        sel = (ds.host.values == host) & (ds.server.values == server) & (ds.group.values == group)
        g = ds.isel(flow=np.nonzero(sel)[0])
        first = full.get(str(g.flow.values[0]), {})
        rates = g.rate.values
        hsn = f"{short_name(host)}-{short_name(server)}-{group}"
        b = _snap(raw.before, host)
        a = _snap(raw.after, host)
        info = _host_info(raw, host)
        kernel = info.get("kernel") or (b.info.get("kernel") if b else "") or ""
        counts = g.lat_count.values
        with np.errstate(invalid="ignore"):
            has = np.isfinite(counts) & (counts > 0)

        merged = _merged_latency(raw, [str(f) for f in g.flow.values])

        def weighted(name: str) -> float:
            if merged is not None:
                return float(merged[name.removeprefix("lat_").removesuffix("_total")])
            v = g[name].values
            if not has.any():
                return math.nan
            return float((v[has] * counts[has]).sum() / counts[has].sum())

        rx_p = _nic_delta(raw, host, "rx_packets")
        tx_p = _nic_delta(raw, host, "tx_packets")
        rx_b = _nic_delta(raw, host, "rx_bytes")
        tx_b = _nic_delta(raw, host, "tx_bytes")
        retrans = _nanfn(np.sum, g.retrans_total.values)
        packets = _nanfn(np.sum, g.packets_sent.values)
        items: list[tuple[str, str]] = [
            ("exp", f"{raw.exp}.{group}"),
            ("expName", str(first.get("exp_name") or ds.attrs.get("exp_name", ""))),
            ("test", str(g.test.values[0])),
            ("host", short_name(host)),
            ("fullHost", str(first.get("host", host))),
            ("server", short_name(server)),
            ("fullServer", str(first.get("server", server))),
            ("group", str(group)),
            ("kernel", str(kernel)),
            ("instances", str(_count(first.get("instances"), g.sizes["flow"]))),
            ("instance", "all"),
            ("dur", fmt(first.get("dur", g.dur.values[0]), 0) if float(g.dur.values[0]).is_integer() else fmt(g.dur.values[0], 3)),
            ("delay", fmt(g.delay.values[0], 0) if float(np.nan_to_num(g.delay.values[0])).is_integer() else fmt(g.delay.values[0], 3)),
            ("req", str(int(g.req.values[0]))),
            ("reply", str(int(g.reply.values[0]))),
            ("ca", "/".join(dict.fromkeys(str(c) for c in g.ca.values))),
            ("localCpu", fmt(_nanfn(np.mean, g.local_cpu.values))),
            ("remoteCpu", fmt(_nanfn(np.mean, g.remote_cpu.values))),
            ("rate", fmt(_nanfn(np.sum, rates))),
            ("rateMin", fmt(_nanfn(np.min, rates))),
            ("rateMax", fmt(_nanfn(np.max, rates))),
            ("localRetrans", fmt(_nanfn(np.sum, g.local_retrans.values), 0)),
            ("remoteRetrans", fmt(_nanfn(np.sum, g.remote_retrans.values), 0)),
            ("minLatency", fmt(_nanfn(np.min, g.lat_min_total.values[has]) if has.any() else math.nan)),
            ("maxLatency", fmt(_nanfn(np.max, g.lat_max_total.values[has]) if has.any() else math.nan)),
            # mean and percentiles: exact over all instances' transactions when
            # the engine's histograms are there, else count-weighted means.
            ("meanLatency", fmt(weighted("lat_mean_total"))),
            ("p50Latency", fmt(weighted("lat_p50_total"))),
            ("p90Latency", fmt(weighted("lat_p90_total"))),
            ("p99Latency", fmt(weighted("lat_p99_total"))),
            ("p999Latency", fmt(weighted("lat_p999_total"))),
            ("cwnd", fmt(_nanfn(np.mean, g.mean_cwnd.values))),
            ("rtt", fmt(_nanfn(np.mean, g.mean_rtt.values))),
            ("pingRtt", fmt(_nanfn(np.mean, g.ping_rtt_mean.values), 0)),
            ("tcpRmem", tcp_mem_max(a if a is not None and a.sysctl else b, "tcp_rmem")),
            ("tcpWmem", tcp_mem_max(a if a is not None and a.sysctl else b, "tcp_wmem")),
            ("tso", offload(b, "tso") if b else ""),
            ("lro", offload(b, "lro") if b else ""),
            ("gso", offload(b, "gso") if b else ""),
            ("gro", offload(b, "gro") if b else ""),
            ("rx-frames", offload(b, "rx-frames") if b else ""),
            ("tx-frames", offload(b, "tx-frames") if b else ""),
            ("adaptive-rx", _on_off(offload(b, "adaptive-rx")) if b else ""),
            ("client-rx-packets", fmt(rx_p, 0)),
            ("client-tx-packets", fmt(tx_p, 0)),
            ("client-rx-bytes", fmt(rx_b, 0)),
            ("client-tx-bytes", fmt(tx_b, 0)),
            ("client-tx-packet-len", fmt(tx_b / tx_p if tx_p > 0 else math.nan, 0)),
            ("client-rx-packet-len", fmt(rx_b / rx_p if rx_p > 0 else math.nan, 0)),
            ("lost", fmt(_nanfn(np.sum, g.lost_max.values), 0)),
            ("retrans_total", fmt(retrans, 0)),
            ("packetsSent", fmt(packets, 0)),
            # netesto's: the share of the flows' lives (mean over the group) their senders were limited by
            # the receiver's window, their own send buffer, the network (limits.py)
            *((key, fmt(_nanfn(np.mean, g[var].values) if var in g else math.nan))
              for key, var in LIMIT_KEYS),
            ("retransPkts%", fmt(retrans_percent(retrans, packets), 2)),
            ("jain", fmt(jain_index(rates), 3)),
        ]
        out.append(GroupSummary(hsn, group, tuple(items)))
    return out


def all_summary(ds: xr.Dataset, exp: int, groups: Iterable[GroupSummary]) -> list[tuple[str, str]]:
    """``all.exp.out`` items: every group's lines (exp = ``N.0``), then the
    experiment-wide ``retransPkts%`` and ``jain`` (one record, no separators
    inside, as the original). ``client-*`` NIC counters appear once per host."""
    items: list[tuple[str, str]] = []
    hosts_seen: set[str] = set()
    for gs in groups:
        host = gs.as_dict().get("host", "")
        first_of_host = host not in hosts_seen
        hosts_seen.add(host)
        for k, v in gs.items:
            if k in _EXPERIMENT_WIDE:
                continue
            # Host-wide NIC counters: once per host, not once per group (the
            # original summed the same counters once per DO_CLIENT).
            if k.startswith("client-") and not first_of_host:
                continue
            items.append((k, f"{exp}.0" if k == "exp" else v))
    retrans = _nanfn(np.sum, ds.retrans_total.values) if "retrans_total" in ds else math.nan
    packets = _nanfn(np.sum, ds.packets_sent.values) if "packets_sent" in ds else math.nan
    items.append(("retransPkts%", fmt(retrans_percent(retrans, packets), 2)))
    if "rate" in ds:
        items.append(("jain", fmt(jain_index(ds.rate.values), 3)))
    return items


def render(items: Iterable[tuple[str, str]]) -> str:
    """key:value lines ending with the ``-----`` separator."""
    return "".join(f"{k}:{v}\n" for k, v in items) + SEPARATOR + "\n"


def parse_exp_out(text: str) -> list[list[tuple[str, str]]]:
    """Records of a ``.exp.out`` file: ``key:value`` lines, a ``---`` line ends
    a record. Values may contain ':' (only the first splits)."""
    records: list[list[tuple[str, str]]] = []
    cur: list[tuple[str, str]] = []
    for line in text.splitlines():
        if line.startswith("---"):
            records.append(cur)
            cur = []
            continue
        key, sep, value = line.partition(":")
        if sep:
            cur.append((key.strip(), value.strip()))
    if cur:
        records.append(cur)
    return records


def write_text_atomic(path: Path, text: str) -> None:
    """Write via a temporary file and rename (readers never see half a file)."""
    import os

    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


__all__ = [
    "GroupSummary",
    "LIMIT_KEYS",
    "SEPARATOR",
    "all_summary",
    "fmt",
    "group_summaries",
    "parse_exp_out",
    "render",
    "retrans_percent",
    "short_name",
    "write_text_atomic",
]
