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
