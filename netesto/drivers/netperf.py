"""The netperf driver: runs netperf for a FlowSpec, as the original Netesto did, and writes ``.nflow``.

The command line follows the original's (see :func:`netperf_argv`)::

    netperf -H <server> -l <dur> -t <TEST> -D <interval>, -j -c -C
            -- -k <selectors> -K <ca>,<ca> [-r <req>,<reply>] -P ,<port> [-s <buf>] [-S <buf>]

``-D`` interim results need a netperf built with ``--enable-demo``; with
``-k`` they come as ``NETPERF_INTERIM_RESULT[n]``/``NETPERF_UNITS[n]``/
``NETPERF_INTERVAL[n]``/``NETPERF_ENDING[n]`` keyvals, turned into one row
per interim result (cumulative bytes or transactions from rate x interval;
``t_wall`` is netperf's own "ending at" time). TCP state is not reported by
netperf: those columns are 0. The summary holds the final keyvals
(throughput, latency percentiles, CPU, retransmissions, congestion control).

netperf is not in Debian main (non-free): when ``netperf``/``netserver`` are
not on PATH this driver raises :class:`~netesto.errors.TrafficError` saying so.
TCP_BIDIR, UDP rate limits and pacing have no netperf equivalent and are
refused the same way.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from typing import Any, Sequence

from netesto.errors import TrafficError
from netesto.protocol.flowspec import FlowSpec
from netesto.vocab import RR_TESTS
from netesto.drivers.toolrun import (Emit, check_test, finish, flow_file, flow_meta, run_timed, spawn_server,
                                     stop_server, write_nflow)

SUPPORTED = ("TCP_STREAM", "TCP_MAERTS", "TCP_RR", "TCP_CRR", "UDP_STREAM", "UDP_RR")
CONTROL_PORT = 12865
MIN_INTERVAL = 0.1

# The original's netperf.fields (section 3 of the behavioural spec).
SELECTORS = (
    "ELAPSED_TIME", "THROUGHPUT", "THROUGHPUT_UNITS", "REQUEST_SIZE", "RESPONSE_SIZE",
    "LOCAL_CPU_UTIL", "REMOTE_CPU_UTIL", "LOCAL_CPU_METHOD", "REMOTE_CPU_METHOD",
    "TRANSACTION_RATE", "RT_LATENCY", "LOCAL_TRANSPORT_RETRANS", "REMOTE_TRANSPORT_RETRANS",
    "TRANSPORT_MSS", "LOCAL_SEND_THROUGHPUT", "REMOTE_RECV_THROUGHPUT", "LOCAL_CPU_BIND",
    "LOCAL_CPU_COUNT", "SOURCE_PORT", "DEST_PORT", "LOCAL_BYTES_PER_RECV", "LOCAL_BYTES_PER_SEND",
    "LOCAL_BYTES_SENT", "LOCAL_BYTES_RECVD", "REMOTE_BYTES_SENT", "REMOTE_BYTES_RECVD",
    "MIN_LATENCY", "MAX_LATENCY", "P50_LATENCY", "P90_LATENCY", "P99_LATENCY", "P999_LATENCY",
    "MEAN_LATENCY", "LOCAL_CONG_CONTROL", "REMOTE_CONG_CONTROL", "COMMAND_LINE",
)

NETPERF_MISSING = (
    "netperf not found on PATH: netperf is not packaged in Debian main (it is in non-free); "
    "install it or build netperf 2.7 with --enable-demo --enable-histogram, or use "
    "driver=builtin or driver=iperf3"
)
NETSERVER_MISSING = NETPERF_MISSING.replace("netperf not found", "netserver not found", 1)

_KEYVAL = re.compile(r"^(?P<key>[A-Z][A-Z0-9_]*)(?:\[(?P<index>\d+)\])?=(?P<value>.*)$")
_INTERIM = re.compile(
    r"^Interim result:\s*(?P<value>[-\d.]+)\s+(?P<units>\S+)\s+over\s+(?P<interval>[\d.]+)\s+"
    r"seconds ending at\s+(?P<ending>[\d.]+)"
)
_INTERIM_CSV = re.compile(r"^(?P<value>[-\d.]+),(?P<units>[^,]+/s),(?P<interval>[\d.]+),(?P<ending>\d+\.\d+)$")


@dataclass(frozen=True)
class Interim:
    """One ``-D`` interim result: rate in ``units`` over ``interval`` s ending at ``ending``."""

    value: float
    units: str
    interval: float
    ending: float


def parse_keyval(text: str) -> tuple[dict[str, str], list[Interim]]:
    """``-k`` output -> (final keyvals, interim results in index order).

    Lines that are not ``KEY=value`` (the test banner) are skipped.

    >>> final, interim = parse_keyval("NETPERF_INTERIM_RESULT[0]=5.5\\nNETPERF_UNITS[0]=10^6bits/s\\n"
    ...     "NETPERF_INTERVAL[0]=0.2\\nNETPERF_ENDING[0]=100.5\\nTHROUGHPUT=5.50\\n")
    >>> final, interim
    ({'THROUGHPUT': '5.50'}, [Interim(value=5.5, units='10^6bits/s', interval=0.2, ending=100.5)])
    """
    final: dict[str, str] = {}
    indexed: dict[int, dict[str, str]] = {}
    for line in text.splitlines():
        m = _KEYVAL.match(line.strip())
        if not m:
            continue
        if m.group("index") is not None:
            indexed.setdefault(int(m.group("index")), {})[m.group("key")] = m.group("value")
        else:
            final[m.group("key")] = m.group("value")
    interim = []
    for index in sorted(indexed):
        fields = indexed[index]
        try:
            interim.append(Interim(
                float(fields["NETPERF_INTERIM_RESULT"]),
                fields.get("NETPERF_UNITS", ""),
                float(fields["NETPERF_INTERVAL"]),
                float(fields["NETPERF_ENDING"]),
            ))
        except (KeyError, ValueError):
            continue  # the last one may be cut short if netperf was killed
    return final, interim


def parse_interim_lines(text: str) -> list[Interim]:
    """Interim results in netperf's human (``Interim result: ...``) or ``-o`` CSV form.

    >>> parse_interim_lines("Interim result: 4015.02 Trans/s over 0.246 seconds ending at 1795322380.588")
    [Interim(value=4015.02, units='Trans/s', interval=0.246, ending=1795322380.588)]
    """
    out = []
    for line in text.splitlines():
        m = _INTERIM.match(line.strip()) or _INTERIM_CSV.match(line.strip())
        if m:
            out.append(Interim(float(m.group("value")), m.group("units"),
                               float(m.group("interval")), float(m.group("ending"))))
    return out


def rate_per_second(value: float, units: str) -> tuple[str, float]:
    """A netperf rate as ("bits", bits/s) or ("trans", transactions/s).

    >>> rate_per_second(5.0, "10^6bits/s"), rate_per_second(2.0, "KBytes/s"), rate_per_second(9.0, "Trans/s")
    (('bits', 5000000.0), ('bits', 16384.0), ('trans', 9.0))
    """
    u = units.strip()
    if u.lower().startswith("trans"):
        return "trans", value
    m = re.match(r"^10\^(\d+)bits/s(?:ec)?$", u)
    if m:
        return "bits", value * 10 ** int(m.group(1))
    m = re.match(r"^([KMG]?)Bytes/s(?:ec)?$", u)
    if m:
        return "bits", value * 8 * {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}[m.group(1)]
    m = re.match(r"^([kmg]?)bits/s(?:ec)?$", u, re.IGNORECASE)
    if m:
        return "bits", value * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(1).lower()]
    raise TrafficError(f"netperf: unknown units {units!r}")


def interim_rows(interims: Sequence[Interim], spec: FlowSpec, mono_offset: float) -> list[dict[str, float]]:
    """FLOW_COLUMNS rows (non-zero columns only) from interim results, cumulative counters."""
    rows = []
    tx = rx = trans = 0.0
    for item in interims:
        kind, rate = rate_per_second(item.value, item.units)
        amount = max(rate, 0.0) * item.interval
        row: dict[str, float] = {"t_wall": item.ending, "t_mono": item.ending + mono_offset}
        if kind == "trans":
            trans += amount
            tx += amount * spec.req
            rx += amount * spec.reply
            row["transactions"] = int(trans)
            if spec.test == "TCP_CRR":
                row["connections"] = int(trans)
        elif spec.test == "TCP_MAERTS":
            rx += amount / 8
        else:
            tx += amount / 8
        row["app_bytes_tx"] = int(tx)
        row["app_bytes_rx"] = int(rx)
        rows.append(row)
    return rows


def _num(final: dict[str, str], key: str) -> float | None:
    """A keyval as a number; netperf's negative "not measured" values become None."""
    try:
        value = float(final[key])
    except (KeyError, ValueError):
        return None
    return None if value < 0 or math.isnan(value) else value


def netperf_summary(final: dict[str, str], spec: FlowSpec) -> dict[str, Any]:
    """The final keyvals as a summary named like the built-in engine's."""
    elapsed = _num(final, "ELAPSED_TIME") or 0.0
    units = final.get("THROUGHPUT_UNITS", "10^6bits/s")

    def bps(key: str) -> float:
        value = _num(final, key)
        if value is None:
            return 0.0
        kind, rate = rate_per_second(value, units)
        return rate if kind == "bits" else 0.0

    tps = _num(final, "TRANSACTION_RATE") or 0.0
    if spec.test in RR_TESTS and not tps and units.lower().startswith("trans"):
        tps = _num(final, "THROUGHPUT") or 0.0
    sent = _num(final, "LOCAL_BYTES_SENT")
    recvd = _num(final, "LOCAL_BYTES_RECVD")
    rate_tx = bps("LOCAL_SEND_THROUGHPUT") or (bps("THROUGHPUT") if spec.test in ("TCP_STREAM", "UDP_STREAM") else 0.0)
    rate_rx = bps("THROUGHPUT") if spec.test == "TCP_MAERTS" else 0.0
    latency = {name: _num(final, f"{key}_LATENCY") for name, key in (
        ("min", "MIN"), ("mean", "MEAN"), ("max", "MAX"), ("p50", "P50"), ("p90", "P90"),
        ("p99", "P99"), ("p999", "P999"))}
    out: dict[str, Any] = {
        "status": "ok",
        "error": "",
        "side": "client",
        "test": spec.test,
        "driver": "netperf",
        "ca": final.get("LOCAL_CONG_CONTROL", spec.ca),
        "ca_remote": final.get("REMOTE_CONG_CONTROL", ""),
        "duration": elapsed,
        "bytes_tx": int(sent) if sent is not None else int(rate_tx * elapsed / 8),
        "bytes_rx": int(recvd) if recvd is not None else int(rate_rx * elapsed / 8),
        "rate_tx_bps": rate_tx,
        "rate_rx_bps": rate_rx,
        "transactions": int(tps * elapsed),
        "tps": tps,
        "connections": int(tps * elapsed) if spec.test == "TCP_CRR" else 1,
        "latency_us": {k: v for k, v in latency.items() if v is not None},
        "retransmits": int(_num(final, "LOCAL_TRANSPORT_RETRANS") or 0),
        "remote_retransmits": int(_num(final, "REMOTE_TRANSPORT_RETRANS") or 0),
        "cpu": {
            "scope": "netperf (percent of all CPUs)",
            "percent": _num(final, "LOCAL_CPU_UTIL") or 0.0,
            "remote_percent": _num(final, "REMOTE_CPU_UTIL") or 0.0,
        },
        "keyval": dict(final),
    }
    return out


def check_spec(spec: FlowSpec) -> None:
    """Raise :class:`TrafficError` for what netperf cannot run."""
    check_test(spec, "netperf", SUPPORTED)
    if spec.pacing:
        raise TrafficError(f"flow {spec.flow_id}: driver netperf cannot set a pacing rate; use driver=builtin or iperf3")
    if spec.rate:
        raise TrafficError(f"flow {spec.flow_id}: driver netperf cannot limit the rate; use driver=builtin or iperf3")


def control_port(spec: FlowSpec) -> int:
    """netserver's control port: ``meta`` ``netserver_port`` or netperf's default 12865."""
    for key, value in spec.meta:
        if key == "netserver_port":
            return int(value)
    return CONTROL_PORT


def netperf_argv(spec: FlowSpec, selectors: Sequence[str] = SELECTORS) -> list[str]:
    """The netperf command line for ``spec`` (``spec.port`` is the remote data port).

    >>> netperf_argv(FlowSpec("c-s-1-0", "TCP_RR", "10.0.0.2", 31850, dur=5, req=1, reply=1024,
    ...     interval=0.2), selectors=["THROUGHPUT"])  # doctest: +NORMALIZE_WHITESPACE
    ['netperf', '-H', '10.0.0.2', '-l', '5', '-t', 'TCP_RR', '-D', '0.2,', '-j', '-c', '-C',
     '--', '-k', 'THROUGHPUT', '-K', 'cubic,cubic', '-r', '1,1024', '-P', ',31850']
    """
    check_spec(spec)
    argv = ["netperf", "-H", spec.server]
    port = control_port(spec)
    if port != CONTROL_PORT:
        argv += ["-p", str(port)]
    argv += ["-l", str(max(1, math.ceil(spec.dur))), "-t", spec.test,
             "-D", f"{max(MIN_INTERVAL, spec.interval):g},", "-j", "-c", "-C",
             "--", "-k", ",".join(selectors)]
    if spec.test.startswith("TCP"):
        argv += ["-K", f"{spec.ca},{spec.ca}"]
    if spec.test in RR_TESTS:
        argv += ["-r", f"{spec.req},{spec.reply}"]
    argv += ["-P", f",{spec.port}"]
    if spec.local_buffer:
        argv += ["-s", str(spec.local_buffer)]
    if spec.remote_buffer:
        argv += ["-S", str(spec.remote_buffer)]
    return argv


def _version(argv_prefix: Sequence[str]) -> str:
    try:
        out = subprocess.run([*argv_prefix, "netperf", "-V"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout.strip().splitlines()[0] if out.stdout.strip() else ""


def run_flow(
    spec: FlowSpec,
    datadir: str | os.PathLike[str],
    emit: Emit | None = None,
    *,
    argv_prefix: Sequence[str] = (),
    timeout: float | None = None,
) -> bool:
    """Run one flow with netperf; write its client file; return True if it ended OK.

    Same contract as :func:`netesto.drivers.iperf3.run_flow`.
    """
    if shutil.which("netperf") is None:
        raise TrafficError(NETPERF_MISSING)
    argv = [*argv_prefix, *netperf_argv(spec)]
    send: Emit = emit or (lambda event: None)
    version = _version(argv_prefix)
    run = run_timed(spec, argv, "netperf", send, timeout)
    stdout, stderr, rc = run.stdout, run.stderr, run.returncode
    final, interim = parse_keyval(stdout)
    if not interim:
        interim = parse_interim_lines(stdout)
    summary = netperf_summary(final, spec)
    error = ""
    if rc != 0 or not final:
        detail = (stderr.strip() or stdout.strip()).splitlines()
        error = (f"flow {spec.flow_id} to {spec.server}:{control_port(spec)}: "
                 f"{detail[-1] if detail else f'netperf exit status {rc}'}")
        summary.update(status="error", error=error)
    rows = interim_rows(interim, spec, run.mono_offset)
    meta = flow_meta(spec, run, "netperf", max(MIN_INTERVAL, spec.interval), tool_version=version)
    summary.update(tool_version=version, start_wall=run.t0_wall, samples=len(rows),
                   end_wall=rows[-1]["t_wall"] if rows else run.t0_wall, interval=meta["interval"])
    write_nflow(flow_file(datadir, spec, "client"), rows, meta, summary)
    return finish(spec, "netperf", send, summary, error)


def start_server(
    port: int = CONTROL_PORT, bind: str | None = None, *, argv_prefix: Sequence[str] = (),
    die_with_parent: bool = False,
) -> subprocess.Popen[bytes]:
    """Start ``netserver -D -p port [-L bind]`` in the foreground (``-D``: do not daemonize).

    ``die_with_parent``: netserver gets SIGTERM when the calling process dies (even by SIGKILL).
    """
    if shutil.which("netserver") is None:
        raise TrafficError(NETSERVER_MISSING)
    argv = [*argv_prefix, "netserver", "-D", "-p", str(port)]
    if bind:
        argv += ["-L", bind]
    proc = spawn_server(argv, die_with_parent=die_with_parent, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.2)  # netserver prints nothing useful when ready; give it time to bind
    if proc.poll() is not None:
        raise TrafficError(f"netserver on port {port} exited at once (status {proc.returncode})")
    return proc


__all__ = [
    "Interim",
    "SELECTORS",
    "SUPPORTED",
    "check_spec",
    "interim_rows",
    "netperf_argv",
    "netperf_summary",
    "parse_interim_lines",
    "parse_keyval",
    "rate_per_second",
    "run_flow",
    "start_server",
    "stop_server",
]
