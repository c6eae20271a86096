"""The tcp_probe recorder on real flows between namespaces: kernel-filtered, split per connection, drops told."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from netesto.collectors.tracefs import tracefs_root
from netesto.raw.ntrace import read_trace
from tests.agent.agentproc import REPO

pytestmark = pytest.mark.netns

SENDER = """
import socket, sys, time, json
port, other, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
t0 = time.time()
a = socket.create_connection((sys.argv[4], port)); b = socket.create_connection((sys.argv[4], other))
sent = 0
end = time.monotonic() + seconds
while time.monotonic() < end:
    sent += a.send(b"x" * 65536)
    b.send(b"y" * 65536)
a.close(); b.close()
print(json.dumps({"t0": t0, "t1": time.time(), "sent": sent}))
"""

SINK = """
import socket, sys, threading
def sink(port):
    srv = socket.create_server(("0.0.0.0", port))
    while True:
        c, _ = srv.accept()
        threading.Thread(target=lambda c=c: [None for _ in iter(lambda: c.recv(1 << 20), b"")], daemon=True).start()
for p in sys.argv[1:]:
    threading.Thread(target=sink, args=(int(p),), daemon=True).start()
print("up", flush=True)
threading.Event().wait()
"""


def _recorder(ns: str, tmp: Path, port: int, buffer_kb: int = 4096) -> tuple[subprocess.Popen[str], str]:
    instance = f"netesto-test{os.getpid()}-{port}"
    spec = {"exp": "1", "datadir": str(tmp), "host": "h1", "instance": instance, "ports": [port],
            "spool": str(tmp / "spool"), "buffer_kb": buffer_kb}
    (tmp / "1").mkdir(exist_ok=True)
    (tmp / "spec.json").write_text(json.dumps(spec))
    proc = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-m", "netesto.collectors.tcpprobe",
                             "--spec", str(tmp / "spec.json")], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.stdout is not None
    assert json.loads(proc.stdout.readline())["event"] == "ready"
    return proc, instance


def _stop(proc: subprocess.Popen[str]) -> dict:
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=120)
    last = json.loads(out.strip().splitlines()[-1])
    assert last["event"] == "done", last
    return last["summary"]


def _flows(pair, seconds: float, port: int = 47400, other: int = 47401) -> dict:
    sink = pair.popen(pair.b, [sys.executable, "-c", SINK, str(port), str(other)], stdout=subprocess.PIPE, text=True)
    assert sink.stdout is not None and sink.stdout.readline().strip() == "up"
    done = pair.run(pair.a, [sys.executable, "-c", SENDER, str(port), str(other), str(seconds), pair.addr_b])
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_port_s_events_are_recorded_split_per_connection_on_the_wall_clock(veth_pair, tmp_path) -> None:
    proc, instance = _recorder(veth_pair.a, tmp_path, 47400)
    try:
        run = _flows(veth_pair, 0.5)
    finally:
        summary = _stop(proc)
    # the instance is gone: its buffers freed, its events off
    assert not (tracefs_root() / "instances" / instance).exists()
    assert summary["host_dropped"] == 0 and summary["host_missed_in_pages"] == 0
    files = summary["files"]
    assert len(files) == 1 and files[0].startswith("traces/h1-") and files[0].endswith("_47400.ntrace")
    trace = read_trace(tmp_path / "1" / files[0])
    # only the port's connection: the other port's flow, as busy, never reached the buffer
    assert trace.header["remote"][1] == 47400 and trace.header["filter"] == "sport == 47400 || dport == 47400"
    n = trace.rows("probe")
    assert n > 100
    # the receiving socket, in the other namespace on the same kernel, was seen and left out
    assert sum(summary["events"].values()) == sum(trace.summary["events"].values()) + summary["foreign_events"]
    assert summary["foreign_events"] > 0
    t_wall = trace.tables["probe"]["t_wall"]
    assert run["t0"] - 0.05 <= t_wall[0] and t_wall[-1] <= run["t1"] + 0.05  # the kernel's stamps, mapped
    assert list(t_wall) == sorted(t_wall)
    assert all(0 < c < 100000 for c in trace.tables["probe"]["snd_cwnd"])


def test_events_a_full_buffer_refused_are_counted_not_lost_silently(veth_pair, tmp_path) -> None:
    proc, _ = _recorder(veth_pair.a, tmp_path, 47400, buffer_kb=64)
    try:
        os.kill(proc.pid, signal.SIGSTOP)  # a reader that cannot keep up: the 64 KiB buffer fills
        try:
            _flows(veth_pair, 0.8)
        finally:
            os.kill(proc.pid, signal.SIGCONT)
    finally:
        summary = _stop(proc)
    dropped = summary["host_dropped"]
    assert dropped > 0 and sum(summary["dropped"].values()) + sum(summary["overrun"].values()) == dropped
    trace = read_trace(tmp_path / "1" / summary["files"][0])
    assert trace.summary["host_dropped"] == dropped  # every flow end's file says so
    assert trace.rows("probe") < 2000  # what a 64 KiB buffer per CPU holds, not the whole flow
