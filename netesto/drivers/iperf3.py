"""The iperf3 driver: runs ``iperf3 -c ... -J`` for a FlowSpec and writes its ``.nflow`` files.

Test types map to iperf3 as TCP_STREAM (plain), TCP_MAERTS (``-R``),
TCP_BIDIR (``--bidir``) and UDP_STREAM (``-u -b rate``; rate 0 = unlimited);
request/response tests have no iperf3 equivalent and raise
:class:`~netesto.errors.TrafficError`.

The client file ``<datadir>/<exp>/flows/<flow_id>.client.nflow`` has one row
per iperf3 interval (``-i``, at least 0.1 s) with FLOW_COLUMNS: cumulative
application bytes, and from the sending stream ``snd_cwnd`` (packets: iperf3
reports bytes, divided by the MSS), ``rtt``/``rttvar`` (us), ``pmtu`` and
``total_retrans`` (cumulative); every other column is 0. With
``--get-server-output`` iperf3 also returns the server's intervals, which
are written to ``<flow_id>.server.nflow`` the same way.

iperf3 3.12 prints its JSON only at the end (``--json-stream`` is 3.17+), so
rows appear when the flow ends, and interval times are placed from the wall
clock at which iperf3 was started (the connection set-up, a few ms on a
LAN, is the error of that placement).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import threading
import time
from typing import Any, Sequence

from netesto.errors import TrafficError
from netesto.protocol.flowspec import FlowSpec
from netesto.drivers.toolrun import (Emit, check_test, finish, flow_file, flow_meta, run_timed, spawn_server,
                                     stop_server, write_nflow)

SUPPORTED = ("TCP_STREAM", "TCP_MAERTS", "TCP_BIDIR", "UDP_STREAM")
MIN_INTERVAL = 0.1
NOT_FOUND = "iperf3 not found on PATH; install it (apt-get install iperf3) or use driver=builtin"


def _require_tool() -> str:
    path = shutil.which("iperf3")
    if path is None:
        raise TrafficError(NOT_FOUND)
    return path


def check_spec(spec: FlowSpec) -> None:
    """Raise :class:`TrafficError` for what iperf3 cannot run."""
    check_test(spec, "iperf3", SUPPORTED)


def iperf3_argv(spec: FlowSpec, *, server_output: bool = True) -> list[str]:
    """The iperf3 client command line for ``spec``.

    >>> iperf3_argv(FlowSpec("c-s-1-0", "TCP_MAERTS", "10.0.0.2", 5201, dur=2, interval=0.01))
    ['iperf3', '-c', '10.0.0.2', '-p', '5201', '-t', '2', '-J', '-i', '0.1', '--get-server-output', '-C', 'cubic', '-R']
    """
    check_spec(spec)
    argv = ["iperf3", "-c", spec.server, "-p", str(spec.port), "-t", f"{spec.dur:g}", "-J",
            "-i", f"{max(MIN_INTERVAL, spec.interval):g}"]
    if server_output:
        argv.append("--get-server-output")
    if spec.test == "UDP_STREAM":
        argv += ["-u", "-b", str(spec.rate)]
    else:
        argv += ["-C", spec.ca]
        if spec.rate:
            argv += ["-b", str(spec.rate)]
    if spec.test == "TCP_MAERTS":
        argv.append("-R")
    elif spec.test == "TCP_BIDIR":
        argv.append("--bidir")
    buffer = spec.local_buffer or spec.remote_buffer
    if buffer:
        argv += ["-w", str(buffer)]
    if spec.pacing:
        argv += ["--fq-rate", str(spec.pacing)]
    return argv


def interval_rows(
    intervals: Sequence[dict[str, Any]], t0_wall: float, mono_offset: float, mss: int
) -> list[dict[str, float]]:
    """FLOW_COLUMNS rows (as dicts of the non-zero columns) from iperf3 ``intervals``.

    Streams with ``sender: true`` count as sent bytes, the others as
    received; TCP state comes from the first sending stream that has it.
    """
    rows = []
    tx = rx = retrans = 0
    for interval in intervals:
        streams = interval.get("streams") or []
        if not streams:
            continue
        end = max(float(s.get("end", 0.0)) for s in streams)
        row: dict[str, float] = {"t_wall": t0_wall + end, "t_mono": t0_wall + end + mono_offset}
        info = None
        for s in streams:
            if s.get("sender", True):
                tx += int(s.get("bytes", 0))
                retrans += int(s.get("retransmits", 0) or 0)
                if info is None and "snd_cwnd" in s:
                    info = s
            else:
                rx += int(s.get("bytes", 0))
        row.update(app_bytes_tx=tx, app_bytes_rx=rx, total_retrans=retrans)
        if info is not None:
            row["snd_cwnd"] = math.ceil(int(info["snd_cwnd"]) / mss) if mss > 0 else 0
            row["rtt"] = int(info.get("rtt", 0))
            row["rttvar"] = int(info.get("rttvar", 0))
            row["pmtu"] = int(info.get("pmtu", 0))
            row["snd_mss"] = mss
        rows.append(row)
    return rows


def _sum_bytes(end: dict[str, Any], *keys: str) -> int:
    return sum(int((end.get(k) or {}).get("bytes", 0)) for k in keys)


def client_summary(doc: dict[str, Any], spec: FlowSpec) -> dict[str, Any]:
    """Totals of a client's iperf3 JSON, named like the built-in engine's summary."""
    end = doc.get("end") or {}
    start = doc.get("start") or {}
    test = spec.test
    if test == "TCP_MAERTS":
        tx, rx = 0, _sum_bytes(end, "sum_received")
    elif test == "TCP_BIDIR":
        tx, rx = _sum_bytes(end, "sum_sent"), _sum_bytes(end, "sum_received_bidir_reverse")
    else:
        tx, rx = _sum_bytes(end, "sum_sent"), 0
    dur = float((end.get("sum_sent") or end.get("sum") or {}).get("seconds", 0.0) or 0.0)
    cpu = end.get("cpu_utilization_percent") or {}
    out: dict[str, Any] = {
        "status": "error" if doc.get("error") else "ok",
        "error": doc.get("error", ""),
        "side": "client",
        "test": test,
        "driver": "iperf3",
        "tool_version": start.get("version", ""),
        "ca": end.get("sender_tcp_congestion", spec.ca if not test.startswith("UDP") else ""),
        "ca_receiver": end.get("receiver_tcp_congestion", ""),
        "duration": dur,
        "bytes_tx": tx,
        "bytes_rx": rx,
        "rate_tx_bps": tx * 8 / dur if dur > 0 else 0.0,
        "rate_rx_bps": rx * 8 / dur if dur > 0 else 0.0,
        "retransmits": int((end.get("sum_sent") or {}).get("retransmits", 0) or 0),
        "transactions": 0,
        "connections": 1,
        "cpu": {
            "scope": "iperf3 process",
            "percent": float(cpu.get("host_total", 0.0)),
            "remote_percent": float(cpu.get("remote_total", 0.0)),
        },
    }
    if test == "UDP_STREAM":
        udp = end.get("sum") or {}
        out.update(
            udp_sent=int((end.get("sum_sent") or udp).get("packets", udp.get("packets", 0)) or 0),
            udp_lost=int(udp.get("lost_packets", 0) or 0),
            udp_lost_pct=float(udp.get("lost_percent", 0.0) or 0.0),
            jitter_ms=float(udp.get("jitter_ms", 0.0) or 0.0),
        )
    return out


def run_flow(
    spec: FlowSpec,
    datadir: str | os.PathLike[str],
    emit: Emit | None = None,
    *,
    argv_prefix: Sequence[str] = (),
    timeout: float | None = None,
) -> bool:
    """Run one flow with iperf3; write its files; return True if it ended OK.

    Waits for ``spec.start_at``. ``argv_prefix`` runs iperf3 through another
    command (e.g. ``["ip", "netns", "exec", "ns1"]``). A missing iperf3 or an
    unsupported test raises :class:`TrafficError`; a failed run (refused,
    killed, bad output) is reported through ``emit`` and the files, and
    returns False.
    """
    _require_tool()
    send: Emit = emit or (lambda event: None)
    run = run_timed(spec, [*argv_prefix, *iperf3_argv(spec)], "iperf3", send, timeout)
    stdout, stderr, rc = run.stdout, run.stderr, run.returncode
    t0_wall, mono_offset = run.t0_wall, run.mono_offset
    try:
        doc = json.loads(stdout) if stdout.strip() else {}
    except ValueError:
        doc = {}
    error = ""
    if not doc:
        error = stderr.strip() or f"iperf3 printed no JSON (exit status {rc})"
    elif doc.get("error"):
        error = str(doc["error"])
    elif rc != 0:
        error = stderr.strip() or f"iperf3 exit status {rc}"
    if error:
        error = f"flow {spec.flow_id} to {spec.server}:{spec.port}: {error}"
        doc["error"] = error
    start = doc.get("start") or {}
    mss = int(start.get("tcp_mss_default") or start.get("tcp_mss") or 0)
    meta = flow_meta(spec, run, "iperf3", max(MIN_INTERVAL, spec.interval),
                     tool_version=start.get("version", ""), mss=mss)
    rows = interval_rows(doc.get("intervals") or [], t0_wall, mono_offset, mss or 1448)
    summary = client_summary(doc, spec)
    summary.update(start_wall=t0_wall, end_wall=rows[-1]["t_wall"] if rows else t0_wall,
                   samples=len(rows), interval=meta["interval"])
    if spec.test == "UDP_STREAM" and rows:
        rows[-1]["udp_lost"] = summary["udp_lost"]  # iperf3 reports loss only at the end
    write_nflow(flow_file(datadir, spec, "client"), rows, meta, summary)
    server_doc = doc.get("server_output_json")
    if isinstance(server_doc, dict) and server_doc.get("intervals"):
        server_rows = interval_rows(server_doc["intervals"], t0_wall, mono_offset, mss or 1448)
        server_meta = dict(meta, side="server", argv=["iperf3", "-s"], note="from --get-server-output")
        server_end = server_doc.get("end") or {}
        server_summary = {
            "status": summary["status"], "error": summary["error"], "side": "server",
            "test": spec.test, "driver": "iperf3",
            "bytes_tx": server_rows[-1]["app_bytes_tx"] if server_rows else 0,
            "bytes_rx": server_rows[-1]["app_bytes_rx"] if server_rows else 0,
            "cpu": {"scope": "iperf3 process",
                    "percent": float((server_end.get("cpu_utilization_percent") or {})
                                     .get("host_total", 0.0))},
            "samples": len(server_rows),
        }
        write_nflow(flow_file(datadir, spec, "server"), server_rows, server_meta, server_summary)
    return finish(spec, "iperf3", send, summary, error)


def start_server(
    port: int,
    bind: str | None = None,
    *,
    argv_prefix: Sequence[str] = (),
    interval: float = 0.1,
    ready_timeout: float = 5.0,
    die_with_parent: bool = False,
) -> subprocess.Popen[str]:
    """Start ``iperf3 -s -J -i interval -p port [-B bind]`` and return once it listens.

    ``-J`` makes the server hand its own JSON intervals to clients that ask
    with ``--get-server-output`` (the ``.server.nflow`` file). iperf3 serves
    one test at a time: give each concurrent flow its own port.
    ``die_with_parent``: the server gets SIGTERM when the calling process dies
    (even by SIGKILL), as the agent wants for everything it starts.
    """
    tool = _require_tool()
    argv = [*argv_prefix, tool if not argv_prefix else "iperf3", "-s", "-J",
            "-i", f"{max(MIN_INTERVAL, interval):g}", "-p", str(port)]
    if bind:
        argv += ["-B", bind]
    if shutil.which("ss") is not None and _listening(port, argv_prefix):
        raise TrafficError(f"iperf3 server: TCP port {port} is already in use")
    proc = spawn_server(argv, die_with_parent=die_with_parent, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                        text=True)
    tail: list[str] = []

    def drain() -> None:
        # keep reading so the server never blocks on a full pipe (one JSON per test)
        assert proc.stdout is not None
        for line in proc.stdout:
            tail.append(line.rstrip())
            del tail[:-20]

    threading.Thread(target=drain, daemon=True).start()
    deadline = time.monotonic() + ready_timeout
    while not _listening(port, argv_prefix):
        if proc.poll() is not None or time.monotonic() > deadline:
            stop_server(proc)
            time.sleep(0.05)
            detail = "; ".join(line for line in tail if line.strip())[-300:] or "no output"
            raise TrafficError(f"iperf3 server on port {port} did not start: {detail}")
        time.sleep(0.02)
    return proc


def _listening(port: int, argv_prefix: Sequence[str]) -> bool:
    """Whether a TCP socket listens on ``port`` (checked with ``ss`` where the server runs)."""
    if shutil.which("ss") is None:
        time.sleep(0.3)  # no way to look: give iperf3 the time it needs to bind
        return True
    out = subprocess.run([*argv_prefix, "ss", "-Hltn", f"sport = :{port}"],
                         capture_output=True, text=True)
    return out.returncode == 0 and bool(out.stdout.strip())


__all__ = [
    "SUPPORTED",
    "check_spec",
    "client_summary",
    "interval_rows",
    "iperf3_argv",
    "run_flow",
    "start_server",
    "stop_server",
]
