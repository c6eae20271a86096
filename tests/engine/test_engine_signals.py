"""Engine processes never outlive their parent for more than a moment: the client's workers, the server, its workers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from netesto.engine.core.loop import STOP_GRACE
from netesto.raw.nflow import read_flow
from tests.leftovers import BLOCK_TERM, alive, children, status, tied_to_a_parent

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
    assert client.pid not in pids and all(alive(p) for p in pids)
    return client, pids


def _kill_alive(pids: list[int]) -> None:
    for p in pids:
        if alive(p):
            os.kill(p, signal.SIGKILL)


def _wait_gone(pids: list[int], within: float) -> float:
    t0 = time.monotonic()
    while any(alive(p) for p in pids):
        if time.monotonic() - t0 > within:
            _kill_alive(pids)
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
        _kill_alive(pids)


# The server: its workers never outlive it, nor it its parent, by more than a moment.

def _catches_term(pid: int) -> bool:
    return bool(int(status(pid)["SigCgt"], 16) >> (signal.SIGTERM - 1) & 1)


def _server_workers(server: subprocess.Popen, n: int) -> list[int]:
    """The server's ``n`` workers, once it has forked them all and handles SIGTERM (passes it on)."""
    deadline = time.monotonic() + 15
    while len(found := children(server.pid)) < n or not _catches_term(server.pid):
        assert server.poll() is None and time.monotonic() < deadline, "the server's workers did not start"
        time.sleep(0.02)
    return found


def _server(tmp_path: Path, workers: int, preexec=None) -> subprocess.Popen:
    server = subprocess.Popen([*ENGINE, "server", "--bind", "127.0.0.1", "--port", "0", "--workers", str(workers),
                               "--datadir", str(tmp_path / "srv")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, preexec_fn=preexec)
    assert json.loads(server.stdout.readline())["event"] == "listening"
    return server


def test_a_server_worker_stuck_in_its_stop_is_killed_after_the_grace(tmp_path):
    # The server waited for its workers with no bound: one that never ended kept it (and the agent
    # waiting for it) forever.
    server = _server(tmp_path, 2)
    workers = _server_workers(server, 2)
    os.kill(workers[0], signal.SIGSTOP)  # cannot act on the forwarded SIGTERM
    try:
        t0 = time.monotonic()
        server.send_signal(signal.SIGTERM)
        _, err = server.communicate(timeout=STOP_GRACE + 8)
        assert time.monotonic() - t0 < STOP_GRACE + 5
        assert server.returncode == 1
        assert f"worker {workers[0]} ended with signal SIGKILL" in err
        assert f"worker {workers[1]}" not in err  # the other one stopped as asked
        _wait_gone(workers, 1.0)
    finally:
        _kill_alive([server.pid, *workers])


def test_server_workers_whose_server_is_gone_stop_though_its_death_signal_never_came(tmp_path):
    # SIGTERM blocked (a stand-in for however a death signal is lost): killed, the server left its
    # workers running with no parent. They check that it is there and stop when it is not.
    from netesto.engine.serve.server import PARENT_CHECK

    block = lambda: exec(BLOCK_TERM)  # noqa: E731 (inherited through exec and fork)
    server = _server(tmp_path, 2, preexec=block)
    workers = _server_workers(server, 2)
    try:
        server.kill()
        server.wait()
        _wait_gone(workers, PARENT_CHECK + 5)
    finally:
        _kill_alive(workers)


def _end(starter: subprocess.Popen, procs: list[int]) -> None:
    if starter.poll() is None:
        starter.kill()
        starter.wait()
    _kill_alive(procs)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_server_whose_parent_is_gone_stops_though_its_death_signal_never_came(tmp_path, workers):
    # The agent starts its server with PR_SET_PDEATHSIG: once, under load, a killed agent left its
    # server and two workers running with no parent. A server that was promised a death signal
    # (here blocked) stops when it finds its parent gone, its workers with it.
    from netesto.engine.serve.server import PARENT_CHECK

    starter, pid = tied_to_a_parent([*ENGINE, "server", "--bind", "127.0.0.1", "--port", "0", "--workers",
                                      str(workers), "--datadir", str(tmp_path / "srv")])
    procs = [pid]
    try:
        listening = json.loads(starter.stdout.readline())  # the server's own first line, on the same pipe
        assert listening["event"] == "listening" and listening["pid"] == pid
        deadline = time.monotonic() + 15
        while len(children(pid)) < (workers if workers > 1 else 0) and time.monotonic() < deadline:
            time.sleep(0.02)
        procs += children(pid)
        starter.kill()
        starter.wait()
        _wait_gone(procs, PARENT_CHECK + STOP_GRACE + 5)
    finally:
        _end(starter, procs)


def test_a_client_whose_parent_is_gone_stops_its_flows_though_its_death_signal_never_came(tmp_path,
                                                                                         loopback_server):
    # As the server: a client of 30 s flows whose agent died ran them to their end with nobody to
    # fetch them. It stops them instead: its workers, deaf to SIGTERM here too, are killed after the grace.
    specs = [dict(flow_id=f"a-b-{i}-0", test="TCP_RR", server="127.0.0.1", port=loopback_server, dur=30.0)
             for i in range(2)]
    (tmp_path / "specs.json").write_text(json.dumps(specs))
    starter, pid = tied_to_a_parent([*ENGINE, "client", "--specs", str(tmp_path / "specs.json"), "--datadir",
                                      str(tmp_path / "cli"), "--workers", "2"])
    procs = [pid]
    try:
        started = 0
        while started < 2:
            line = starter.stdout.readline()
            assert line, "the client ended early"
            started += json.loads(line)["event"] == "started"
        procs += children(pid)
        assert len(procs) == 3
        starter.kill()
        starter.wait()
        _wait_gone(procs, STOP_GRACE + 5)  # not the flows' 30 s
    finally:
        _end(starter, procs)
