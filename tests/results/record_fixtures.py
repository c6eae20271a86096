"""Record the results layer's test fixtures from REAL TCP flows (no invented numbers).

A tiny recorder of our own (real sockets, ``getsockopt(TCP_INFO)`` every
10 ms, :class:`~netesto.traffic.rawformat.FlowWriter`) that lays files out as
the controller runner does::

    <out>/<exp>/experiment.json
    <out>/<exp>/flows/<flow_id>.client.nflow  and  .server.nflow
    <out>/<exp>/ping/<client>-<server>.nflow          (real ``ping -D`` output)
    <out>/<exp>/0/<host>.*  and  <out>/<exp>/1/<host>.*  (real /proc, sysctl, ethtool)

Usage::

    python tests/results/record_fixtures.py all --out tests/results/data
    python tests/results/record_fixtures.py server --bind A --port P --out D --exp N
    python tests/results/record_fixtures.py client --server A --port P --out D --exp N [--ping]

``all`` runs both ends over loopback in one process (what produced the
committed fixtures); ``server``/``client`` run the ends in two network
namespaces (the netns test). Once the flow engine is used for recording,
this script remains the fallback that needs nothing but the kernel.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from netesto.traffic.columns import FLOW_COLUMNS, PING_COLUMNS  # noqa: E402
from netesto.traffic.rawformat import FlowWriter  # noqa: E402

INTERVAL = 0.01
TCP_CC_INFO = 26
# struct tcp_info (linux/tcp.h) up to snd_wnd; "=" so no padding is inserted.
_TCP_INFO = struct.Struct("=8B24I4Q6I4Q2I2Q4I")
_TI_NAMES = (
    "state ca_state retransmits probes backoff options wscale flags "
    "rto ato snd_mss rcv_mss unacked sacked lost retrans fackets "
    "last_data_sent last_ack_sent last_data_recv last_ack_recv "
    "pmtu rcv_ssthresh rtt rttvar snd_ssthresh snd_cwnd advmss reordering "
    "rcv_rtt rcv_space total_retrans pacing_rate max_pacing_rate bytes_acked bytes_received "
    "segs_out segs_in notsent_bytes min_rtt data_segs_in data_segs_out "
    "delivery_rate busy_time rwnd_limited sndbuf_limited delivered delivered_ce "
    "bytes_sent bytes_retrans dsack_dups reord_seen rcv_ooopack snd_wnd"
).split()

_STREAM = {"test": "TCP_STREAM", "dur": 1.0, "req": 0, "reply": 0, "instance": 0}
# plan name -> flows (group, instance, ca, ...); "mixed" = cubic + bbr streams and one RR.
PLANS: dict[str, list[dict[str, Any]]] = {
    "mixed": [
        dict(_STREAM, group=1, ca="cubic"),
        dict(_STREAM, group=2, ca="bbr"),
        {"group": 3, "instance": 0, "test": "TCP_RR", "ca": "cubic", "dur": 1.0,
         "req": 1000, "reply": 100},
    ],
    "cubic2": [dict(_STREAM, group=1, ca="cubic", instance=i) for i in (0, 1)],
    "bbr2": [dict(_STREAM, group=1, ca="bbr", instance=i) for i in (0, 1)],
}


def tcp_info(sock: socket.socket) -> dict[str, int]:
    raw = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _TCP_INFO.size)
    raw = raw.ljust(_TCP_INFO.size, b"\0")
    return dict(zip(_TI_NAMES, _TCP_INFO.unpack(raw)))


def bbr_info(sock: socket.socket) -> tuple[int, int, int, int]:
    try:
        raw = sock.getsockopt(socket.IPPROTO_TCP, TCP_CC_INFO, 20)
    except OSError:
        return (0, 0, 0, 0)
    if len(raw) < 20:
        return (0, 0, 0, 0)
    lo, hi, min_rtt, pgain, cgain = struct.unpack("=5I", raw)
    return ((hi << 32) | lo, min_rtt, pgain, cgain)


def _pct(sorted_vals: list[float], q: float) -> float:
    if not sorted_vals:
        return 0.0
    return sorted_vals[min(len(sorted_vals) - 1, int(q * len(sorted_vals)))]


def _lat_stats(vals: list[float]) -> list[float]:
    if not vals:
        return [0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    s = sorted(vals)
    return [len(s), s[0], sum(s) / len(s), s[-1], _pct(s, 0.5), _pct(s, 0.9), _pct(s, 0.99), _pct(s, 0.999)]


class Counters:
    """Application counters shared between a flow's I/O loop and its sampler."""

    def __init__(self) -> None:
        self.tx = 0
        self.rx = 0
        self.transactions = 0
        self.lat: list[float] = []  # latencies (us) since the last sample
        self.all_lat: list[float] = []
        self.done = False
        self.lock = threading.Lock()


def sampler(sock: socket.socket, c: Counters, writer: FlowWriter, ca: str) -> None:
    """Sample TCP_INFO + app counters every INTERVAL until the flow ends."""
    next_t = time.monotonic()
    while True:
        try:
            ti = tcp_info(sock)
            cc = bbr_info(sock) if ca == "bbr" else (0, 0, 0, 0)
        except OSError:
            break
        with c.lock:
            lat, c.lat = c.lat, []
        row = [time.time(), time.monotonic(), c.tx, c.rx, c.transactions, 1, 0, 0]
        row += [ti[col.name] for col in FLOW_COLUMNS[8:34]]
        row += list(cc) + _lat_stats(lat)
        writer.append(row)
        if c.done:
            break
        next_t += INTERVAL
        time.sleep(max(0.0, next_t - time.monotonic()))


def _writer(path: Path, flow: dict[str, Any], side: str, host: str) -> FlowWriter:
    meta = {"flow": flow, "side": side, "host": host, "start_wall": time.time(),
            "start_mono": time.monotonic(), "interval": INTERVAL, "engine": "record_fixtures"}
    path.parent.mkdir(parents=True, exist_ok=True)
    return FlowWriter(path, FLOW_COLUMNS, meta, flush_rows=32)


def _recv_exact(sock: socket.socket, n: int, buf: bytearray) -> int:
    got = 0
    view = memoryview(buf)
    while got < n:
        k = sock.recv_into(view[: min(len(buf), n - got)])
        if k == 0:
            return got
        got += k
    return got


def run_server_conn(conn: socket.socket, datadir: Path, exp: int, host: str) -> None:
    """Serve one flow: read its JSON line, then sink (stream) or echo replies (RR)."""
    hdr = b""
    while not hdr.endswith(b"\n"):
        ch = conn.recv(1)
        if not ch:
            return
        hdr += ch
    flow = json.loads(hdr)
    c = Counters()
    path = datadir / str(exp) / "flows" / f"{flow['flow_id']}.server.nflow"
    writer = _writer(path, flow, "server", host)
    t = threading.Thread(target=sampler, args=(conn, c, writer, "cubic"))
    t.start()
    cpu0, w0 = time.thread_time(), time.monotonic()
    buf = bytearray(max(65536, flow["req"]))
    reply = b"r" * flow["reply"]
    while True:
        if flow["test"] == "TCP_RR":
            k = _recv_exact(conn, flow["req"], buf)
            c.rx += k
            if k < flow["req"]:
                break
            conn.sendall(reply)
            c.tx += len(reply)
            c.transactions += 1
        else:
            k = conn.recv_into(buf)
            if k == 0:
                break
            c.rx += k
    elapsed = time.monotonic() - w0
    c.done = True
    t.join()
    writer.close({"status": "ok", "elapsed": elapsed, "bytes_tx": c.tx, "bytes_rx": c.rx,
                  "transactions": c.transactions,
                  "cpu_percent": 100.0 * (time.thread_time() - cpu0) / max(elapsed, 1e-9)})
    conn.close()


def serve(bind: str, port: int, datadir: Path, exp: int, host: str, nflows: int) -> None:
    lsock = socket.create_server((bind, port), reuse_port=False)
    threads = []
    for _ in range(nflows):
        conn, _addr = lsock.accept()
        t = threading.Thread(target=run_server_conn, args=(conn, datadir, exp, host))
        t.start()
        threads.append(t)
    lsock.close()
    for t in threads:
        t.join()


def run_client_flow(flow: dict[str, Any], server: str, port: int, datadir: Path, exp: int) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, flow["ca"].encode())
    sock.connect((server, port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.sendall(json.dumps(flow).encode() + b"\n")
    c = Counters()
    path = datadir / str(exp) / "flows" / f"{flow['flow_id']}.client.nflow"
    writer = _writer(path, flow, "client", flow["host"])
    t = threading.Thread(target=sampler, args=(sock, c, writer, flow["ca"]))
    t.start()
    cpu0, w0 = time.thread_time(), time.monotonic()
    deadline = w0 + flow["dur"]
    chunk = b"x" * 65536
    rbuf = bytearray(max(65536, flow["reply"]))
    req = b"q" * flow["req"]
    while time.monotonic() < deadline:
        if flow["test"] == "TCP_RR":
            t0 = time.perf_counter()
            sock.sendall(req)
            c.tx += len(req)
            k = _recv_exact(sock, flow["reply"], rbuf)
            c.rx += k
            lat = (time.perf_counter() - t0) * 1e6
            with c.lock:
                c.lat.append(lat)
            c.all_lat.append(lat)
            c.transactions += 1
        else:
            c.tx += sock.send(chunk)
    sock.shutdown(socket.SHUT_WR)
    while sock.recv(65536):
        pass
    elapsed = time.monotonic() - w0
    c.done = True
    t.join()
    summary: dict[str, Any] = {
        "status": "ok", "elapsed": elapsed, "bytes_tx": c.tx, "bytes_rx": c.rx,
        "transactions": c.transactions,
        "cpu_percent": 100.0 * (time.thread_time() - cpu0) / max(elapsed, 1e-9)}
    if c.all_lat:
        names = ["count", "min", "mean", "max", "p50", "p90", "p99", "p999"]
        summary["latency"] = dict(zip(names, _lat_stats(c.all_lat)))
    writer.close(summary)
    sock.close()


def record_ping(target: str, dest: Path, dur: float) -> None:
    """Real ``ping -D`` to ``target``; replies go to a PING_COLUMNS .nflow file."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    out = subprocess.run(["ping", "-D", "-n", "-i", "0.2", "-w", str(max(1, round(dur))), target],
                         capture_output=True, text=True).stdout
    with FlowWriter(dest, PING_COLUMNS, {"side": "client", "target": target,
                                          "interval": 0.2, "start_wall": time.time()}) as w:
        for line in out.splitlines():
            if "icmp_seq=" not in line or "time=" not in line:
                continue
            stamp = float(line[1 : line.index("]")])
            seq = int(line.split("icmp_seq=")[1].split()[0])
            rtt_ms = float(line.split("time=")[1].split()[0])
            w.append([stamp, 0.0, seq, rtt_ms * 1000.0])


def snapshot(dest: Path, host: str) -> None:
    """Real host stats in the collectors' file names (<host>.snmp, .netstat, ...)."""
    dest.mkdir(parents=True, exist_ok=True)
    for suffix, src in ((".snmp", "/proc/net/snmp"), (".netstat", "/proc/net/netstat"),
                        (".ifstat", "/proc/net/dev")):
        try:
            (dest / f"{host}{suffix}").write_text(Path(src).read_text())
        except OSError:
            pass
    lines = []
    for key in ("net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem", "net.ipv4.tcp_congestion_control",
                "net.core.default_qdisc"):
        try:
            value = Path("/proc/sys/" + key.replace(".", "/")).read_text().split()
        except OSError:
            continue
        lines.append(f"{key} = {chr(9).join(value)}")
    (dest / f"{host}.sysctl").write_text("\n".join(lines) + "\n")
    for flag in ("-k", "-c", "-S"):
        proc = subprocess.run(["ethtool", flag, "lo"], capture_output=True, text=True)
        if proc.returncode == 0:
            (dest / f"{host}.ethtool{flag}").write_text(proc.stdout)
    info = {"host": host, "hostname": socket.gethostname(), "kernel": platform.release(),
            "time": time.time()}
    (dest / f"{host}.info").write_text(json.dumps(info))


def flow_dicts(client: str, server: str, exp: int, plan: str = "mixed") -> list[dict[str, Any]]:
    out = []
    flows = PLANS[plan]
    for f in flows:
        n = sum(1 for g in flows if g["group"] == f["group"])
        d = dict(f, host=client, server=server, instances=n, delay=0.0,
                 driver="builtin", local_buffer=0, remote_buffer=0, pacing=0, rate=0,
                 interval=INTERVAL, exp_name=f"{plan}{len(flows)}", exp=exp)
        d["flow_id"] = f"{client}-{server}-{f['group']}-{f['instance']}"
        out.append(d)
    return out


def write_experiment_json(datadir: Path, exp: int, flows: list[dict[str, Any]],
                          hosts: list[str], skew: float) -> None:
    doc = {
        "schema": 1, "exp": exp, "exp_name": flows[0]["exp_name"],
        "script": "# recorded by tests/results/record_fixtures.py\n", "desc": "fixture",
        "other": [["testNote", "recorded"]], "netesto_version": "0.1.0",
        "flows": [dict(f, start_at=None, start_skew=skew) for f in flows],
        "hosts": {h: {"kernel": platform.release(), "hostname": socket.gethostname(),
                      "agent_version": "record_fixtures", "clock_offset": 0.0,
                      "clock_rtt": 0.0, "address": "127.0.0.1"} for h in hosts},
        "actions": [],
    }
    (datadir / str(exp) / "experiment.json").write_text(json.dumps(doc, indent=1))


def run_clients(flows: list[dict[str, Any]], server: str, port: int, datadir: Path, exp: int,
                ping: bool) -> None:
    threads = [threading.Thread(target=run_client_flow, args=(f, server, port, datadir, exp))
               for f in flows]
    if ping:
        client, srv = flows[0]["host"], flows[0]["server"]
        threads.append(threading.Thread(
            target=record_ping,
            args=(server, datadir / str(exp) / "ping" / f"{client}-{srv}.nflow", 1.2)))
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def record_all(datadir: Path, exp: int = 1, port: int = 0, plan: str = "mixed") -> Path:
    """Both ends over loopback in this process; returns ``<datadir>/<exp>``."""
    lsock = socket.create_server(("127.0.0.1", port))
    port = lsock.getsockname()[1]
    lsock.close()
    flows = flow_dicts("h1", "h2", exp, plan)
    for h in ("h1", "h2"):
        snapshot(datadir / str(exp) / "0", h)
    srv = threading.Thread(target=serve, args=("127.0.0.1", port, datadir, exp, "h2", len(flows)))
    srv.start()
    time.sleep(0.2)
    run_clients(flows, "127.0.0.1", port, datadir, exp, ping=True)
    srv.join()
    for h in ("h1", "h2"):
        snapshot(datadir / str(exp) / "1", h)
    write_experiment_json(datadir, exp, flows, ["h1", "h2"], 0.0)
    return datadir / str(exp)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("mode", choices=["all", "server", "client"])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--exp", type=int, default=1)
    p.add_argument("--bind", default="127.0.0.1")
    p.add_argument("--server", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--ping", action="store_true")
    p.add_argument("--plan", choices=sorted(PLANS), default="mixed")
    a = p.parse_args(argv)
    if a.mode == "all":
        print(record_all(a.out, a.exp, a.port, a.plan))
    elif a.mode == "server":
        snapshot(a.out / str(a.exp) / "0", "h2")
        serve(a.bind, a.port, a.out, a.exp, "h2", len(PLANS[a.plan]))
        snapshot(a.out / str(a.exp) / "1", "h2")
    else:
        flows = flow_dicts("h1", "h2", a.exp, a.plan)
        snapshot(a.out / str(a.exp) / "0", "h1")
        run_clients(flows, a.server, a.port, a.out, a.exp, ping=a.ping)
        snapshot(a.out / str(a.exp) / "1", "h1")
        write_experiment_json(a.out, a.exp, flows, ["h1", "h2"], 0.0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
