"""A socket watch's files made flow ends: driver flows' 10 ms series, or watched sockets as flows of their own.

The watcher (:mod:`netesto.collectors.sockwatch`) leaves one ``.nflow`` per
socket under ``<exp>/sockets/``. At its end:

* a driver flow's end (a :class:`~netesto.collectors.sockwatch.FlowMatch`) is
  the matching socket that moved the most bytes (iperf3's control connection
  shares the test port and moves almost none). Its rows become
  ``flows/<flow_id>.<side>.nflow``; where the driver wrote that file from the
  tool's own report (iperf3's 0.1 s intervals), the new file keeps its header
  and summary (the tool's totals), adds the sampled socket's, and the tool's
  file goes to ``tool/``;
* a socket of a watch without flows (``DO_WATCH``) becomes a flow named
  ``<watch>:<lower port>:<higher port>`` (so both ends, on two hosts, name it
  alike) with ``driver`` ``watch``.

The sockets no flow took stay in ``sockets/``. ``sockets/<host>-<watch>.json``
says what went where and what the watch cost.
"""

from __future__ import annotations

import bisect
import json
import os
from array import array
from pathlib import Path
from typing import Any, Sequence

from netesto.collectors.watchspec import FlowMatch, WatchSpec
from netesto.errors import RawDataError
from netesto.raw.columns import FLOW_COLUMNS
from netesto.raw.nflow import FlowWriter, RawFlow, read_flow

Closed = tuple[Path, dict[str, Any]]


def _matches(flow: FlowMatch, summary: dict[str, Any]) -> bool:
    end = summary["remote"] if flow.side == "client" else summary["local"]
    return int(end[1]) == flow.port and (not flow.address or str(end[0]) == flow.address)


def _moved(summary: dict[str, Any]) -> int:
    return int(summary.get("bytes_tx", 0)) + int(summary.get("bytes_rx", 0))


def write_end(target: Path, rows: RawFlow, header: dict[str, Any], summary: dict[str, Any]) -> None:
    """``rows``' columns under a new header and summary, written whole then renamed into place."""
    tmp = target.with_name(target.name + ".tmp")
    writer = FlowWriter(tmp, FLOW_COLUMNS, header)
    n = rows.rows
    if n:
        writer.write_columns(n, {c.name: rows.columns[c.name].tobytes() for c in FLOW_COLUMNS})
    writer.close(summary)
    os.replace(tmp, target)


def _sampled_header(sampled: RawFlow) -> dict[str, Any]:
    keep = ("local", "remote", "interval", "sampled", "ca")
    return {k: sampled.header[k] for k in keep if k in sampled.header}


def _driver_end(spec: WatchSpec, flow: FlowMatch, path: Path, summary: dict[str, Any], exp_dir: Path) -> str:
    """The flow end ``flow`` from socket file ``path``; the tool's own file (if any) set aside."""
    sampled = read_flow(path)
    target = exp_dir / "flows" / f"{flow.flow_id}.{flow.side}.nflow"
    tool: RawFlow | None = None
    if target.exists():
        try:
            tool = read_flow(target)
        except RawDataError:
            tool = None
        aside = exp_dir / "tool" / target.name
        aside.parent.mkdir(parents=True, exist_ok=True)
        os.replace(target, aside)
    if tool is not None:
        carry_tool_rows(sampled, tool)
        header = {k: v for k, v in tool.header.items() if k not in ("type", "format", "columns", "byteorder")}
        header.update(_sampled_header(sampled), tool_file=f"tool/{target.name}", tool_interval=tool.header.get(
            "interval"))
        out = dict(tool.summary or {}, sampled=summary)
    else:
        driver = str(flow.header.get("driver", "builtin"))
        header = {"flow": flow.header, "side": flow.side, "host": spec.host, "driver": driver, "engine": driver,
                  "start_wall": summary["start_wall"], **_sampled_header(sampled)}
        out = dict(summary, test=flow.header.get("test", ""), driver=driver)
    target.parent.mkdir(parents=True, exist_ok=True)
    write_end(target, sampled, header, out)
    path.unlink()
    return str(target.relative_to(exp_dir))


CARRIED = ("transactions", "connections")  # cumulative counts only the tool knows
PER_ROW = ("lat_count", "lat_min", "lat_mean", "lat_max", "lat_p50", "lat_p90", "lat_p99", "lat_p999")


def carry_tool_rows(sampled: RawFlow, tool: RawFlow) -> None:
    """What only the tool counted into the sampled rows: its cumulative transactions as they stood at
    each sampled row, and each of its latency rows onto the first sampled row at or after it (so the
    latencies are counted once, on the 10 ms rows)."""
    t_rows, t_tool = sampled.columns["t_mono"], tool.columns.get("t_mono")
    if t_tool is None or not len(t_tool) or not any(any(tool.columns.get(c, ())) for c in CARRIED + PER_ROW):
        return
    at = [bisect.bisect_right(t_tool, t) - 1 for t in t_rows]  # the tool's last row at or before each
    for name in CARRIED:
        src = tool.columns.get(name)
        if src is not None and any(src):
            sampled.columns[name] = array(src.typecode, (src[k] if k >= 0 else 0 for k in at))
    for name in PER_ROW:
        src = tool.columns.get(name)
        if src is None or not any(src):
            continue
        out = array(src.typecode, bytes(len(t_rows) * src.itemsize))
        for k, t in enumerate(t_tool):
            row = bisect.bisect_left(t_rows, t)
            if row < len(out):
                out[row] = src[k]
        sampled.columns[name] = out


def watched_id(name: str, local: Sequence[Any], remote: Sequence[Any]) -> str:
    """The flow id both ends of a watched connection give it.

    >>> watched_id("socat", ["10.0.0.1", 43210], ["10.0.0.2", 5000])
    'socat:5000:43210'
    """
    low, high = sorted((int(local[1]), int(remote[1])))
    return f"{name}:{low}:{high}"


def _watched_end(spec: WatchSpec, path: Path, summary: dict[str, Any], exp_dir: Path) -> str:
    """A watched socket as a flow end of its own: ``<exp>/flows/<watch>:<port>:<port>.<side>.nflow``."""
    sampled = read_flow(path)
    side = str(sampled.header.get("side", "client"))
    flow_id = watched_id(spec.name, summary["local"], summary["remote"])
    target = exp_dir / "flows" / f"{flow_id}.{side}.nflow"
    k = 1
    while target.exists():  # the same ports again (a reused connection): another flow
        k += 1
        target = exp_dir / "flows" / f"{flow_id}+{k}.{side}.nflow"
    tx, rx = int(summary.get("bytes_tx", 0)), int(summary.get("bytes_rx", 0))
    sending = tx >= rx if side == "client" else rx >= tx  # the client end sends, as in TCP_STREAM
    remote_host = str(summary["remote"][0])
    flow = {"flow_id": target.name.rsplit(".", 2)[0], "test": "TCP_STREAM" if sending else "TCP_MAERTS",
            "driver": "watch", "ca": sampled.header.get("ca", ""),
            "port": summary["local"][1] if side == "server" else summary["remote"][1],
            "dur": summary.get("duration", 0.0), "interval": spec.interval, "watch": spec.name,
            ("host" if side == "client" else "server"): spec.host,
            ("server_address" if side == "client" else "client_address"): remote_host}
    header = {"flow": flow, "side": side, "host": spec.host, "driver": "watch", "engine": "sock_diag",
              "start_wall": summary["start_wall"], **_sampled_header(sampled)}
    target.parent.mkdir(parents=True, exist_ok=True)
    write_end(target, sampled, header, dict(summary, test=flow["test"], driver="watch"))
    path.unlink()
    return str(target.relative_to(exp_dir))


def finish(spec: WatchSpec, closed: Sequence[Closed], cost: dict[str, Any]) -> dict[str, Any]:
    """Make flow ends of the closed sockets (see the module docstring); the watch's summary."""
    exp_dir = Path(spec.datadir) / spec.exp
    ends: list[str] = []
    taken: set[Path] = set()
    for flow in spec.flows:
        candidates = [(p, s) for p, s in closed if p not in taken and _matches(flow, s)]
        if candidates:
            path, summary = max(candidates, key=lambda c: _moved(c[1]))
            taken.add(path)
            ends.append(_driver_end(spec, flow, path, summary, exp_dir))
    if not spec.flows:
        for path, summary in closed:
            ends.append(_watched_end(spec, path, summary, exp_dir))
            taken.add(path)
    for move in spec.moves:
        src = exp_dir / "flows" / move
        if src.exists():
            (exp_dir / "tool").mkdir(parents=True, exist_ok=True)
            os.replace(src, exp_dir / "tool" / move)
    found = {f"{f.flow_id}.{f.side}" for f in spec.flows if any(e.endswith(f"/{f.flow_id}.{f.side}.nflow")
                                                                 for e in ends)}
    summary = {"watch": spec.name, "host": spec.host, "interval": spec.interval, "flow_ends": ends,
               "sockets": len(closed), "left": sorted(str(p.relative_to(exp_dir)) for p, _ in closed if p not in taken),
               "missing": sorted(f"{f.flow_id}.{f.side}" for f in spec.flows if f"{f.flow_id}.{f.side}" not in found),
               "cost": cost}
    (exp_dir / "sockets").mkdir(parents=True, exist_ok=True)
    (exp_dir / "sockets" / f"{spec.host}-{spec.name}.json").write_text(json.dumps(summary, indent=1, sort_keys=True))
    return summary


__all__ = ["finish", "watched_id", "write_end"]
