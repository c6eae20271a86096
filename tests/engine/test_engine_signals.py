"""The client's worker processes never outlive the client parent for more than a moment."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from netesto.engine.serve.workers import STOP_GRACE
from netesto.raw.nflow import read_flow

ENGINE = [sys.executable, "-m", "netesto.engine"]


@pytest.fixture
def loopback_server(tmp_path):
    proc = subprocess.Popen([*ENGINE, "server", "--bind", "127.0.0.1", "--port", "0", "--datadir",
                             str(tmp_path / "srv")], stdout=subprocess.PIPE, text=True)
    try:
        first = json.loads(proc.stdout.readline())
        yield first["port"]
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _start(tmp_path: Path, port: int) -> tuple[subprocess.Popen, list[int]]:
    """A client with two workers running long flows; returns it and its workers' pids."""
    specs = [dict(flow_id=f"a-b-{i}-0", test="TCP_RR", server="127.0.0.1", port=port, dur=30.0)
             for i in range(2)]
    path = tmp_path / "specs.json"
    path.write_text(json.dumps(specs))
    client = subprocess.Popen([*ENGINE, "client", "--specs", str(path), "--datadir", str(tmp_path / "cli"),
                               "--workers", "2"], stdout=subprocess.PIPE, text=True)
    started = 0
    while started < 2:
        line = client.stdout.readline()
        assert line, "client ended early"
        started += json.loads(line)["event"] == "started"
    pids = [read_flow(tmp_path / "cli" / "0" / "flows" / f"a-b-{i}-0.client.nflow").header["pid"]
            for i in range(2)]
    assert client.pid not in pids and all(_alive(p) for p in pids)
    return client, pids


def _wait_gone(pids: list[int], within: float) -> float:
    t0 = time.monotonic()
    while any(_alive(p) for p in pids):
        if time.monotonic() - t0 > within:
            for p in pids:
                if _alive(p):
                    os.kill(p, signal.SIGKILL)
            pytest.fail(f"workers {pids} still alive {within} s after their parent")
        time.sleep(0.02)
    return time.monotonic() - t0


def test_workers_die_with_a_killed_parent(tmp_path, loopback_server):
    client, pids = _start(tmp_path, loopback_server)
    client.kill()  # SIGKILL: no forwarding; PR_SET_PDEATHSIG stops the workers
    client.wait()
    _wait_gone(pids, 3.0)
    # they still ended their flows and closed their files
    for i in range(2):
        flow = read_flow(tmp_path / "cli" / "0" / "flows" / f"a-b-{i}-0.client.nflow")
        assert flow.summary is not None and flow.summary["status"] == "error"


def test_a_stuck_worker_is_killed_after_the_grace(tmp_path, loopback_server):
    client, pids = _start(tmp_path, loopback_server)
    os.kill(pids[0], signal.SIGSTOP)  # cannot act on the forwarded SIGTERM
    try:
        t0 = time.monotonic()
        client.send_signal(signal.SIGTERM)
        client.communicate(timeout=STOP_GRACE + 8)
        assert time.monotonic() - t0 < STOP_GRACE + 5
        assert client.returncode == 1
        _wait_gone(pids, 1.0)
    finally:
        for p in pids:
            if _alive(p):
                os.kill(p, signal.SIGKILL)
