"""``netesto flow server|client`` on loopback: the human-readable front end of the engine."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time

import pytest

NETESTO = [sys.executable, "-m", "netesto"]


def test_flow_cli_runs_and_summarises(tmp_path):
    server = subprocess.Popen([*NETESTO, "flow", "server", "--bind", "127.0.0.1", "--port", "0",
                               "--datadir", str(tmp_path / "srv")], stdout=subprocess.PIPE, text=True)
    try:
        first = server.stdout.readline()
        m = re.match(r"listening on 127\.0\.0\.1:(\d+)", first)
        assert m, first
        port = int(m.group(1))
        specs = tmp_path / "flows.json"
        specs.write_text(json.dumps([
            {"flow_id": "lo-lo-0-0", "test": "TCP_RR", "server": "127.0.0.1", "port": port, "dur": 1.0,
             "ca": "reno"},
            {"flow_id": "lo-lo-1-0", "test": "TCP_STREAM", "server": "127.0.0.1", "port": port, "dur": 1.0,
             "ca": "reno"},
        ]))
        proc = subprocess.run([*NETESTO, "flow", "client", "--specs", str(specs), "--datadir",
                               str(tmp_path / "cli")], capture_output=True, text=True, timeout=30)
        assert proc.returncode == 0, proc.stderr
        out = proc.stdout
        assert "lo-lo-0-0: done" in out and "lo-lo-1-0: done" in out
        assert re.search(r"\d+ transactions \(\d+/s\)  latency us: min [\d.]+ mean", out)
        assert re.search(r"TCP_STREAM ca=reno [\d.]+ s  tx \d+ B \([\d.]+ [GM]bit/s\)", out)
        assert (tmp_path / "cli" / "0" / "flows" / "lo-lo-0-0.client.nflow").exists()
        # a bad spec file is a clean error, not a traceback
        bad = subprocess.run([*NETESTO, "flow", "client", "--specs", str(tmp_path / "nope.json"),
                              "--datadir", str(tmp_path)], capture_output=True, text=True, timeout=30)
        assert bad.returncode == 1 and "cannot read flow specs" in bad.stderr
        assert "Traceback" not in bad.stderr
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert (tmp_path / "srv" / "0" / "flows" / "lo-lo-1-0.server.nflow").exists()


def test_engine_over_ipv6_loopback(tmp_path):
    server = subprocess.Popen([sys.executable, "-m", "netesto.engine", "server", "--bind", "::1", "--port", "0",
                               "--datadir", str(tmp_path / "srv")], stdout=subprocess.PIPE, text=True)
    try:
        port = json.loads(server.stdout.readline())["port"]
        specs = tmp_path / "flows.json"
        specs.write_text(json.dumps([
            {"flow_id": f"v6-{t.lower()}", "test": t, "server": "::1", "port": port, "dur": 0.8, "ca": "reno"}
            for t in ("TCP_STREAM", "TCP_CRR", "UDP_RR")
        ]))
        proc = subprocess.run([sys.executable, "-m", "netesto.engine", "client", "--specs", str(specs),
                               "--datadir", str(tmp_path / "cli")], capture_output=True, text=True, timeout=30)
        events = [json.loads(line) for line in proc.stdout.splitlines()]
        assert proc.returncode == 0, events
        done = {e["flow"]: e["summary"] for e in events if e["event"] == "done"}
        assert done["v6-tcp_stream"]["bytes_tx"] > 0 and done["v6-udp_rr"]["transactions"] > 0
        assert done["v6-tcp_crr"]["connections"] == done["v6-tcp_crr"]["transactions"] > 0
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_flow_client_takes_one_flow_from_the_command_line(tmp_path):
    """``-H host -t ... -P n`` instead of a spec file, as netperf and iperf3 users type it."""
    server = subprocess.Popen([*NETESTO, "flow", "server", "--bind", "127.0.0.1", "--port", "0",
                               "--datadir", str(tmp_path / "srv")], stdout=subprocess.PIPE, text=True)
    data = tmp_path / "cli"
    try:
        port = re.match(r"listening on 127\.0\.0\.1:(\d+)", server.stdout.readline()).group(1)
        quick = [*NETESTO, "flow", "client", "--datadir", str(data), "-H", "127.0.0.1", "-p", port]
        proc = subprocess.run([*quick, "--json", "-t", "tcp_rr", "-l", "1", "-P", "2", "--ca", "reno",
                               "--req", "1K", "--reply", "64"], capture_output=True, text=True, timeout=30)
        assert proc.returncode == 0, proc.stderr
        done = {e["flow"]: e["summary"] for e in map(json.loads, proc.stdout.splitlines())
                if e["event"] == "done"}
        assert len(done) == 2
        for flow_id, summary in done.items():
            assert flow_id.endswith(("-127_0_0_1-1-0", "-127_0_0_1-1-1"))
            assert summary["test"] == "TCP_RR" and summary["ca"] == "reno"
            # 1K requests, 64-byte replies: the bytes per transaction say the sizes arrived
            assert 1024 <= summary["bytes_tx"] / summary["transactions"] < 1025
            assert 64 <= summary["bytes_rx"] / summary["transactions"] < 65
            assert (data / "1" / "flows" / f"{flow_id}.client.nflow").exists()
        # the next run takes the next experiment number, and says where its data went
        again = subprocess.run([*quick, "-l", "0.5"], capture_output=True, text=True, timeout=30)
        assert again.returncode == 0, again.stderr
        assert f"raw data in {data / '2' / 'flows'}" in again.stdout
        # several RR flows: their total too (it printed per-flow rates only)
        rr = subprocess.run([*quick, "-t", "tcp_rr", "-l", "0.5", "-P", "4"], capture_output=True, text=True, timeout=30)
        assert rr.returncode == 0, rr.stderr
        total = re.search(r"total of 4 flows: tx .*  (\d+) transactions \((\d+)/s\)", rr.stdout)
        assert total, rr.stdout
        per_flow = [int(n) for n in re.findall(r"^    (\d+) transactions", rr.stdout, re.M)]
        assert len(per_flow) == 4 and int(total.group(1)) == sum(per_flow)
        # how CRR connections end, as each peer ends them: a reset leaves no TIME_WAIT, a client close leaves
        # one per connection on the client's side (netperf's server-first close, on the server's)
        for close in ("rst", "client"):
            n, added = _crr_time_waits(tmp_path / close, close)
            # (the flow's own hello connection ends as a stream's does: one more)
            assert added <= 1 if close == "rst" else added >= n, (close, n, added)
        bad = subprocess.run([*quick, "-t", "tcp_crr", "--crr-close", "fin"], capture_output=True, text=True)
        assert bad.returncode == 2 and "invalid choice: 'fin'" in bad.stderr
        # bad input: both or neither way of giving flows, a bad size
        for argv, what in (([*quick, "--specs", "x.json"], "--specs FILE or -H HOST"),
                           ([*NETESTO, "flow", "client"], "--specs FILE or -H HOST"),
                           ([*quick, "--req", "1Q"], "--req: expected a size")):
            bad = subprocess.run(argv, capture_output=True, text=True, timeout=30)
            assert bad.returncode == 2 and what in bad.stderr, bad.stderr
            assert "Traceback" not in bad.stderr
    finally:
        server.terminate()
        server.wait(timeout=10)


def _crr_time_waits(datadir, close: str) -> tuple[int, int]:
    """A 0.3 s CRR flow ended ``close``'s way to a server of its own: (its transactions, the TIME_WAITs it left).

    A server of its own, so the ports its connections take have no TIME_WAIT of earlier flows: on loopback
    (tcp_tw_reuse=2) a connection may take over one that is a second old, and which of the two is left is
    not told apart by ss's whole-second timers. The connections are counted, not their number's change
    (older ones may end meanwhile)."""
    server = subprocess.Popen([*NETESTO, "flow", "server", "--bind", "127.0.0.1", "--port", "0",
                               "--datadir", str(datadir / "srv")], stdout=subprocess.PIPE, text=True)
    try:
        port = re.match(r"listening on 127\.0\.0\.1:(\d+)", server.stdout.readline()).group(1)

        def time_waits() -> dict[tuple[str, str], int]:
            """(local, peer) -> seconds left of each TIME_WAIT to the server's port."""
            out = subprocess.run(["ss", "-Htano", "state", "time-wait", "dport", "=", f":{port}"],
                                 capture_output=True, text=True, timeout=10).stdout
            return {(m[1], m[2]): int(m[3] or 0) for m in re.finditer(r"(\S+)\s+(\S+)\s+timer:\(timewait,(\d*)", out)}

        before = time_waits()
        crr = subprocess.run([*NETESTO, "flow", "client", "--datadir", str(datadir / "cli"), "-H", "127.0.0.1",
                              "-p", port, "--json", "-t", "tcp_crr", "-l", "0.3", "--crr-close", close],
                             capture_output=True, text=True, timeout=30)
        assert crr.returncode == 0, crr.stderr
        (summary,) = [e["summary"] for e in map(json.loads, crr.stdout.splitlines()) if e["event"] == "done"]
        n = summary["transactions"]
        assert n > 0
        # (the last connection's close may still wait for the server's FIN: the count settles in a moment)
        deadline = time.monotonic() + 5
        while True:
            added = sum(left > before.get(conn, -1) for conn, left in time_waits().items())
            if close == "rst" or added >= n or time.monotonic() > deadline:
                return n, added
            time.sleep(0.1)
    finally:
        server.terminate()
        server.wait(timeout=10)


def _start(argv, **kw):
    # a session of its own: Ctrl-C reaches a whole process group, as from a terminal
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, **kw)


def test_ctrl_c_ends_server_and_client_cleanly_and_keeps_the_data(tmp_path):
    """SIGINT to the process group (what Ctrl-C does) reaches every worker twice: from the
    terminal and forwarded by its parent. The second must not cut the orderly end short, and
    whichever copy a worker sees first, its flows name the signal sent: a SIGINT to the
    parent alone (``kill -INT``) reaches the workers only through the parent."""
    import os
    import signal
    import time

    from netesto.raw.nflow import read_flow

    clients = {0: os.killpg, 1: os.kill}  # how each attempt with a client sends its SIGINT
    for attempt in range(3):  # the double signal was a race: try it a few times
        server = _start([*NETESTO, "flow", "server", "--bind", "127.0.0.1", "--port", "0", "--workers", "2",
                         "--datadir", str(tmp_path / f"srv{attempt}")])
        try:
            port = re.match(r"listening on 127\.0\.0\.1:(\d+)", server.stdout.readline()).group(1)
            client = None
            if attempt in clients:
                client = _start([*NETESTO, "flow", "client", "--datadir", str(tmp_path / f"cli{attempt}"),
                                 "-H", "127.0.0.1", "-p", port, "-l", "20", "-P", "2", "--pacing", "50M"])
                assert "started" in client.stdout.readline()
                time.sleep(1.0)
                clients[attempt](client.pid, signal.SIGINT)
                out, err = client.communicate(timeout=20)
                assert client.returncode == 1, err
                assert "Traceback" not in err, err
                assert out.count("stopped by SIGINT after") == 2, out
            else:
                time.sleep(0.3)
            os.killpg(server.pid, signal.SIGINT)
            out, err = server.communicate(timeout=20)
            assert server.returncode == 0, err
            assert "Traceback" not in err and "ended with" not in err, err
        finally:
            for proc in (server, client):
                if proc is not None and proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
    # what was measured before the stop is kept, with the summary, on both ends
    for attempt in clients:
        for side, where in (("client", f"cli{attempt}"), ("server", f"srv{attempt}")):
            files = sorted((tmp_path / where / "1" / "flows").glob(f"*.{side}.nflow"))
            assert len(files) == 2, files
            for path in files:
                flow = read_flow(path)
                assert flow.summary is not None and flow.rows > 50 and not flow.truncated
                assert flow.summary["bytes_tx" if side == "client" else "bytes_rx"] > 1_000_000


def test_a_datadir_that_cannot_hold_raw_files_is_an_error_before_any_flow(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    for role, extra in (("server", ["--port", "0"]), ("client", ["-H", "127.0.0.1", "-p", "9", "-l", "1"])):
        proc = subprocess.run([*NETESTO, "flow", role, "--datadir", str(blocker / "d"), *extra],
                              capture_output=True, text=True, timeout=30)
        assert proc.returncode == 1, proc
        assert f"cannot keep raw files in {blocker / 'd'}: not a directory" in proc.stderr
        assert "listening" not in proc.stdout and "started" not in proc.stdout
    from netesto.errors import TrafficError
    from netesto.engine.serve.server import serve

    for kw in ({"port": 99999}, {"port": 0, "workers": -2}):  # what the command line refuses, the API too
        with pytest.raises(TrafficError, match="port must be 0..65535|workers must be >= 0"):
            serve("127.0.0.1", datadir=str(tmp_path / "srv"), **kw)
