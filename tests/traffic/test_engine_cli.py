"""``netesto flow server|client`` on loopback: the human-readable front end of the engine."""

from __future__ import annotations

import json
import re
import subprocess
import sys

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
    server = subprocess.Popen([sys.executable, "-m", "netesto.traffic", "server", "--bind", "::1", "--port", "0",
                               "--datadir", str(tmp_path / "srv")], stdout=subprocess.PIPE, text=True)
    try:
        port = json.loads(server.stdout.readline())["port"]
        specs = tmp_path / "flows.json"
        specs.write_text(json.dumps([
            {"flow_id": f"v6-{t.lower()}", "test": t, "server": "::1", "port": port, "dur": 0.8, "ca": "reno"}
            for t in ("TCP_STREAM", "TCP_CRR", "UDP_RR")
        ]))
        proc = subprocess.run([sys.executable, "-m", "netesto.traffic", "client", "--specs", str(specs),
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
