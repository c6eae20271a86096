"""Real flows of every test type between two namespaces: both ends' files agree."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from netesto.raw.nflow import read_flow
from netesto.results.ticks import tick_stats

from netesto.engine.sampling.flowrecord import FLUSH_SECONDS

from .grid import assert_on_grid

pytestmark = pytest.mark.netns

ENGINE = [sys.executable, "-m", "netesto.engine"]


class Server:
    """The engine's server in a namespace, its port read from the first event line."""

    def __init__(self, pair, ns: str, addr: str, datadir: Path, *extra: str) -> None:
        self.proc = pair.popen(
            ns,
            [*ENGINE, "server", "--bind", addr, "--port", "0", "--datadir", str(datadir), *extra],
            stdout=subprocess.PIPE,
            text=True,
        )
        self.first = first = json.loads(self.proc.stdout.readline())
        assert first["event"] == "listening", first
        self.port = first["port"]
        self.addr = addr

        self.seen: list[dict] = []
        self._partial = b""

    def wait_done(self, n: int, timeout: float = 10.0) -> None:
        """Read events until ``n`` flows are done (or ``timeout``): a flow's server end
        writes its summary, then says "done"; a SIGTERM in between would lose the line.
        (Reads the pipe's fd: communicate() below reads it so too, past any buffer.)"""
        import select

        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while sum(e["event"] in ("done", "error") for e in self.seen) < n and time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.2)
            if not ready:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                return
            *lines, self._partial = (self._partial + chunk).split(b"\n")
            self.seen += [json.loads(line) for line in lines if line.strip()]

    def events(self) -> list[dict]:
        """Stop the server and return everything it reported."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        out, _ = self.proc.communicate(timeout=10)
        rest = self._partial.decode() + out
        return self.seen + [json.loads(line) for line in rest.splitlines() if line.strip()]


def run_client(pair, ns: str, tmp: Path, specs: list[dict], timeout: float = 60) -> tuple[int, list[dict]]:
    path = tmp / f"specs-{time.monotonic_ns()}.json"
    path.write_text(json.dumps(specs))
    proc = pair.run(ns, [*ENGINE, "client", "--specs", str(path), "--datadir", str(tmp / "cli")],
                    timeout=timeout)
    events = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    return proc.returncode, events


def start_client(pair, ns: str, tmp: Path, specs: list[dict]) -> subprocess.Popen:
    """The engine's client running ``specs`` in the background, its events on stdout."""
    path = tmp / f"specs-{time.monotonic_ns()}.json"
    path.write_text(json.dumps(specs))
    return pair.popen(ns, [*ENGINE, "client", "--specs", str(path), "--datadir", str(tmp / "cli")],
                      stdout=subprocess.PIPE, text=True)


def spec(server: Server, flow_id: str, test: str, **kw) -> dict:
    return dict(flow_id=flow_id, test=test, server=server.addr, port=server.port, **kw)


def ends(tmp: Path, flow_id: str, exp: int = 0):
    cli = read_flow(tmp / "cli" / str(exp) / "flows" / f"{flow_id}.client.nflow")
    srv = read_flow(tmp / "srv" / str(exp) / "flows" / f"{flow_id}.server.nflow")
    return cli, srv


def wait_started(client: subprocess.Popen, n: int) -> list[dict]:
    """Read the client's events until ``n`` flows have started (so a fault hits running flows)."""
    events: list[dict] = []
    while sum(e["event"] == "started" for e in events) < n:
        line = client.stdout.readline()
        assert line, events
        events.append(json.loads(line))
    return events


def wait_for_summary(path: Path, timeout: float = 10.0) -> None:
    """Until the file's writer has closed it (the other end may still be finishing)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and read_flow(path).summary is not None:
            return
        time.sleep(0.05)
    raise AssertionError(f"{path} has no summary after {timeout} s")


def start_lateness(started: dict) -> float:
    """How late a flow could not help starting: the time past its instant at which its client had
    connected and handshaken (a process that a loaded machine starts slowly is not ready by then)."""
    return max(0.0, started["ready"] - started["start_at"])


# How late past its instant a ready client may start when the suite's other xdist workers share the CPUs:
# one was preempted 0.26 s (test_engine_start), another 0.10 s (the ca test below). A start held back by
# anything else (the server, a lost marker) is seconds late, so the slack still tells the two apart.
LOADED_SLACK = 0.5


def terminal(events: list[dict]) -> dict[str, dict]:
    return {e["flow"]: e for e in events if e["event"] in ("done", "error")}


def test_every_test_type_both_ends_agree(veth_pair, tmp_path):
    pair = veth_pair
    server = Server(pair, pair.b, pair.addr_b, tmp_path / "srv")
    types = ["TCP_STREAM", "TCP_MAERTS", "TCP_BIDIR", "TCP_RR", "TCP_CRR", "UDP_STREAM", "UDP_RR"]
    specs = [
        spec(server, f"a-b-{i}-0", t, dur=1.5, ca="cubic", req=64 if t == "TCP_RR" else 1,
             reply=128 if t == "TCP_RR" else 1, rate=20_000_000 if t == "UDP_STREAM" else 0, exp=3)
        for i, t in enumerate(types)
    ]
    # large requests and replies span many segments and partial sends
    specs.append(spec(server, "a-b-bigrr-0", "TCP_RR", dur=1.5, req=100_000, reply=1_000_000, exp=3))
    # paced (SO_MAX_PACING_RATE, bits/s) with small buffers on both ends
    specs.append(spec(server, "a-b-paced-0", "TCP_STREAM", dur=1.5, ca="cubic", pacing=50_000_000,
                      local_buffer=262144, remote_buffer=262144, exp=3))
    code, events = run_client(pair, pair.a, tmp_path, specs)
    done = terminal(events)
    assert code == 0, [e for e in events if e["event"] == "error"]
    assert {e["flow"] for e in events if e["event"] == "started"} == {s["flow_id"] for s in specs}
    assert any(e["event"] == "progress" for e in events)
    for s in specs:
        fid, test = s["flow_id"], s["test"]
        assert done[fid]["event"] == "done"
        cli, srv = ends(tmp_path, fid, exp=3)
        cs, ss = cli.summary, srv.summary
        assert cs["status"] == "ok" and ss["status"] == "ok", (fid, cs["error"], ss["error"])
        assert cli.header["side"] == "client" and srv.header["side"] == "server"
        assert cli.header["flow"]["test"] == test and "token" not in cli.header["flow"]
        assert cli.rows >= 50 and srv.rows >= 50, (fid, cli.rows, srv.rows)
        # the last sample holds the final counters
        assert cli.columns["app_bytes_tx"][-1] == cs["bytes_tx"]
        assert srv.columns["app_bytes_rx"][-1] == ss["bytes_rx"]
        if test.startswith("TCP"):
            assert cs["bytes_tx"] == ss["bytes_rx"], fid
            assert cs["bytes_rx"] == ss["bytes_tx"], fid
        if fid == "a-b-paced-0":
            # the pace caps it; a loaded machine can hold the sender off its short capped backlog, never
            # past the cap
            assert 0.6 * 50e6 <= cs["rate_tx_bps"] <= 1.02 * 50e6, cs["rate_tx_bps"]
            assert 0 < max(cli.columns["pacing_rate"]) <= 50e6 / 8 * 1.01
        elif test in ("TCP_STREAM", "TCP_BIDIR"):
            assert cs["bytes_tx"] > 10_000_000
        if test in ("TCP_MAERTS", "TCP_BIDIR"):
            assert cs["bytes_rx"] > 10_000_000
        if test in ("TCP_RR", "TCP_CRR", "UDP_RR"):
            assert cs["transactions"] > 50, fid
            assert cs["latency_us"]["count"] == cs["transactions"]
            assert sum(cli.columns["lat_count"]) == cs["transactions"]
        if test == "TCP_RR":
            assert cs["transactions"] == ss["transactions"]
            assert cs["bytes_tx"] == s["req"] * cs["transactions"]
            assert cs["bytes_rx"] == s["reply"] * cs["transactions"]
        if test == "TCP_CRR":
            # one connection per transaction, seen by both ends
            assert cs["connections"] == cs["transactions"] == ss["connections"] == ss["transactions"]
            assert cli.columns["connections"][-1] == cs["connections"]
        if test == "UDP_STREAM":
            assert ss["udp_received"] + ss["udp_lost"] == cs["udp_sent"]
            assert 0.6 * 20e6 <= cs["rate_tx_bps"] <= 1.05 * 20e6, cs["rate_tx_bps"]
        if test == "UDP_RR":
            assert ss["transactions"] >= cs["transactions"]
    # samples on the requested interval's grid on both ends; the jitter is in t_mono
    cli, srv = ends(tmp_path, "a-b-0-0", exp=3)
    for flow in (cli, srv):
        assert_on_grid(flow)
        assert flow.summary["sample_spacing_us"]["count"] == flow.rows - 1
        assert max(flow.columns["snd_cwnd"]) > 0 and max(flow.columns["rtt"]) > 0
    server_events = server.events()
    assert sum(e["event"] == "done" for e in server_events) == len(specs)


def test_many_busy_senders_per_worker_are_sampled_at_the_interval(veth_pair, tmp_path):
    """64 stream senders on two client workers: one round of a worker's sends can take longer
    than the 10 ms interval, and the ticks still come on the grid (they used to wait for the
    round's end and skip grid points: 16 ms between samples on average)."""
    pair = veth_pair
    server = Server(pair, pair.b, pair.addr_b, tmp_path / "srv")
    specs = [spec(server, f"a-b-0-{i}", "TCP_STREAM", dur=1.5, interval=0.01, exp=4) for i in range(64)]
    path = tmp_path / "specs.json"
    path.write_text(json.dumps(specs))
    proc = pair.run(pair.a, [*ENGINE, "client", "--specs", str(path), "--datadir", str(tmp_path / "cli"),
                             "--workers", "2"], timeout=60)
    assert proc.returncode == 0, proc.stderr
    # on the grid: the bug this guards against held every tick to the end of a round of sends (16 ms
    # between samples on a quiet machine); a round's length is the machine's speed, so how close to
    # 10 ms the mean spacing comes is bench_sampling's to say, not this test's
    for s in specs:
        cli, _ = ends(tmp_path, s["flow_id"], exp=4)
        assert_on_grid(cli)
    server.events()


def test_congestion_control_is_what_was_asked(veth_pair, tmp_path):
    pair = veth_pair
    server = Server(pair, pair.b, pair.addr_b, tmp_path / "srv")
    start_at = time.time() + 1.5  # all three start together at an absolute time
    specs = [spec(server, f"a-b-{ca}-0", "TCP_STREAM", dur=1.0, ca=ca, interval=0.005, start_at=start_at)
             for ca in ("cubic", "bbr", "reno")]
    code, events = run_client(pair, pair.a, tmp_path, specs)
    assert code == 0, events
    started = [e for e in events if e["event"] == "started"]
    assert len(started) == 3
    for e in started:  # at the instant (or, on a machine too loaded to be ready by then, at once)
        assert e["start_at"] == start_at and 0 <= e["skew"] < start_lateness(e) + LOADED_SLACK, e
    for s in specs:
        cli, srv = ends(tmp_path, s["flow_id"])
        assert cli.header["start_wall"] >= start_at
        assert cli.header["ca"] == s["ca"] == cli.summary["ca"]
        assert srv.header["ca"] == s["ca"]  # the server side uses the same algorithm
        bbr_bw = max(cli.columns["bbr_bw"])
        if s["ca"] == "bbr":
            assert bbr_bw > 0 and max(cli.columns["bbr_min_rtt"]) > 0
            assert max(cli.columns["bbr_pacing_gain"]) > 0
        else:
            assert bbr_bw == 0


def test_rr_latency_consistent_with_rtt(veth_pair, tmp_path):
    pair = veth_pair
    server = Server(pair, pair.b, pair.addr_b, tmp_path / "srv")
    code, events = run_client(pair, pair.a, tmp_path,
                              [spec(server, "a-b-rr-0", "TCP_RR", dur=1.5, interval=0.001)])
    assert code == 0, events
    cli, srv = ends(tmp_path, "a-b-rr-0")
    for flow in (cli, srv):  # sampling down to 1 ms: a row for every point of a 1 ms grid (the rows a held
        # process owes follow at once, so on a loaded host the gaps between rows are not the interval)
        t = flow.columns["t_mono"]
        stats = tick_stats(flow)
        assert float(flow.header["interval"]) == 0.001 and stats.missed == 0, stats
        assert stats.ticks >= 0.9 * (t[-1] - t[0]) / 0.001, (stats, t[-1] - t[0])
    lat = cli.summary["latency_us"]
    min_rtt = min(v for v in cli.columns["min_rtt"] if v > 0)
    assert lat["min"] <= lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["p999"] <= lat["max"]
    # a transaction takes at least one round trip, and not absurdly more on an idle veth
    assert lat["p50"] >= min_rtt
    assert lat["p50"] <= max(100 * min_rtt, 10_000)
    tps = cli.summary["tps"]
    assert tps == pytest.approx(1e6 / lat["mean"], rel=0.3)


def test_udp_loss_behind_tbf(veth_pair, tmp_path):
    pair = veth_pair
    subprocess.run(["tc", "-n", pair.a, "qdisc", "add", "dev", "veth0", "root", "tbf",
                    "rate", "10mbit", "burst", "15k", "limit", "30k"], check=True)
    server = Server(pair, pair.b, pair.addr_b, tmp_path / "srv")
    code, events = run_client(pair, pair.a, tmp_path,
                              [spec(server, "a-b-udp-0", "UDP_STREAM", dur=1.5, rate=50_000_000)])
    assert code == 0, events
    cli, srv = ends(tmp_path, "a-b-udp-0")
    ss = srv.summary
    assert ss["udp_lost"] > 0 and cli.summary["udp_lost"] == ss["udp_lost"]
    assert ss["udp_received"] + ss["udp_lost"] == cli.summary["udp_sent"]
    # what got through is about the bottleneck rate
    assert ss["rate_rx_bps"] < 15e6
    assert srv.columns["udp_lost"][-1] == ss["udp_lost"]


def test_unknown_congestion_control_lists_available(veth_pair, tmp_path):
    pair = veth_pair
    server = Server(pair, pair.b, pair.addr_b, tmp_path / "srv")
    code, events = run_client(pair, pair.a, tmp_path,
                              [spec(server, "a-b-x-0", "TCP_STREAM", dur=1.0, ca="nosuchca")])
    assert code == 1
    (err,) = [e for e in events if e["event"] == "error"]
    assert "nosuchca" in err["message"]
    for name in open("/proc/sys/net/ipv4/tcp_available_congestion_control").read().split():
        assert name in err["message"]
    # the flow never ran: its CPU is what it used over its (tiny) span, not the worker's until then
    cpu = err["summary"]["cpu"]
    assert 0 <= cpu["seconds"] <= err["summary"]["duration"] + 0.0005, err["summary"]
    assert cpu["percent"] <= 105, err["summary"]


def test_unreachable_server_names_host_port(veth_pair, tmp_path):
    pair = veth_pair
    nobody = pair.addr_b.rsplit(".", 1)[0] + ".77"  # in the subnet, no such host
    specs = [
        dict(flow_id="a-b-refused-0", test="TCP_STREAM", server=pair.addr_b, port=9, dur=1.0),
        dict(flow_id="a-b-nohost-0", test="TCP_RR", server=nobody, port=12867, dur=1.0),
    ]
    t0 = time.monotonic()
    code, events = run_client(pair, pair.a, tmp_path, specs)
    took = time.monotonic() - t0
    assert code == 1
    done = terminal(events)
    assert f"{pair.addr_b}:9" in done["a-b-refused-0"]["message"]
    assert "refused" in done["a-b-refused-0"]["message"]
    assert f"{nobody}:12867" in done["a-b-nohost-0"]["message"]
    assert took < 8
    flow = read_flow(tmp_path / "cli" / "0" / "flows" / "a-b-nohost-0.client.nflow")
    assert flow.summary["status"] == "error"


def test_server_killed_mid_flow(veth_pair, tmp_path):
    pair = veth_pair
    server = Server(pair, pair.b, pair.addr_b, tmp_path / "srv")
    specs = [spec(server, "a-b-st-0", "TCP_STREAM", dur=3.0), spec(server, "a-b-rr-0", "TCP_RR", dur=3.0)]
    client = start_client(pair, pair.a, tmp_path, specs)
    early = wait_started(client, 2)
    time.sleep(1.0)
    server.proc.kill()
    out, _ = client.communicate(timeout=20)
    events = early + [json.loads(line) for line in out.splitlines()]
    assert client.returncode == 1
    done = terminal(events)
    for s in specs:
        ev = done[s["flow_id"]]
        assert ev["event"] == "error" and " after " in ev["message"], ev
        flow = read_flow(tmp_path / "cli" / "0" / "flows" / f"{s['flow_id']}.client.nflow")
        assert not flow.truncated and flow.summary["status"] == "error"
        assert flow.summary["error"] == ev["message"]
        assert flow.rows > 50  # what was measured before the kill is kept
        assert 0.8 < flow.summary["duration"] < 2.9


def test_garbage_on_the_test_port_does_not_disturb_flows(veth_pair, tmp_path):
    pair = veth_pair
    server = Server(pair, pair.b, pair.addr_b, tmp_path / "srv", "--token", "s3cret",
                    "--handshake-timeout", "0.5")
    specs = [spec(server, "a-b-st-0", "TCP_STREAM", dur=2.0, token="s3cret"),
             spec(server, "a-b-rr-0", "TCP_RR", dur=2.0, token="s3cret")]
    client = start_client(pair, pair.a, tmp_path, specs)
    wait_started(client, 2)
    # junk, a short hello that never completes, a hello with a wrong token, a flood of random bytes
    junk = (
        b"GET / HTTP/1.0\r\n\r\n",
        b"NTFL\x00\x01",
        None,
        b"RANDOM",
    )
    from netesto.engine.core import handshake as hs

    script = (
        "import os, socket, sys, time\n"
        f"payloads = {[p for p in junk]!r}\n"
        "bad = bytes.fromhex(sys.argv[1])\n"
        "socks = []\n"
        "for p in payloads:\n"
        f"    s = socket.create_connection(({server.addr!r}, {server.port}))\n"
        "    try:\n"
        "        s.sendall(bad if p is None else os.urandom(100_000) if p == b'RANDOM' else p)\n"
        "    except OSError:\n"
        "        pass  # the server resets a connection it drops with unread junk\n"
        "    socks.append(s)\n"
        "time.sleep(1.0)\n"
    )
    bad_hello = hs.encode_hello({"flow": "x-y-0-0", "exp": 0, "test": "TCP_RR", "req": 1, "reply": 1,
                                 "dur": 1.0, "interval": 0.01, "token": "wrong"})
    pair.run(pair.a, [sys.executable, "-c", script, bad_hello.hex()], timeout=20)
    out, _ = client.communicate(timeout=20)
    events = [json.loads(line) for line in out.splitlines()]
    assert client.returncode == 0, events
    for s in specs:
        cli, srv = ends(tmp_path, s["flow_id"])
        assert cli.summary["status"] == srv.summary["status"] == "ok"
        assert cli.summary["bytes_tx"] == srv.summary["bytes_rx"]
    server_events = server.events()
    reasons = [e["reason"] for e in server_events if e["event"] in ("dropped", "refused")]
    assert "unknown token" in reasons
    assert "handshake timeout" in reasons
    assert sum("magic" in r for r in reasons) >= 2
    assert not (tmp_path / "srv" / "0" / "flows" / "x-y-0-0.server.nflow").exists()


def test_multi_process_server_serves_crr_across_workers(veth_pair, tmp_path):
    pair = veth_pair
    server = Server(pair, pair.b, pair.addr_b, tmp_path / "srv", "--workers", "2")
    specs = [spec(server, f"a-b-crr-{i}", "TCP_CRR", dur=1.0) for i in range(2)]
    specs += [spec(server, f"a-b-st-{i}", "TCP_STREAM", dur=1.0) for i in range(2)]
    code, events = run_client(pair, pair.a, tmp_path, specs)
    assert code == 0, [e for e in events if e["event"] == "error"]
    pids = set()
    for s in specs:
        cli, srv = ends(tmp_path, s["flow_id"])
        pids.add(srv.header["pid"])
        if s["test"] == "TCP_CRR":
            # every transaction connection reached the flow's owner, whichever worker accepted it
            assert cli.summary["transactions"] == srv.summary["transactions"] == srv.summary["connections"] > 20
        else:
            assert cli.summary["bytes_tx"] == srv.summary["bytes_rx"]
    assert len(pids) == 2  # new flows are spread over both workers
    server.wait_done(len(specs))
    assert sum(e["event"] == "done" for e in server.events()) == len(specs)


def test_sigterm_ends_flows_with_their_data(veth_pair, tmp_path):
    pair = veth_pair
    server = Server(pair, pair.b, pair.addr_b, tmp_path / "srv")
    specs = [spec(server, "a-b-st-0", "TCP_STREAM", dur=10.0), spec(server, "a-b-rr-0", "TCP_RR", dur=10.0),
             spec(server, "a-b-late-0", "TCP_RR", dur=1.0, start_at=time.time() + 60)]
    client = start_client(pair, pair.a, tmp_path, specs)
    early = wait_started(client, 2)
    time.sleep(0.8)
    client.send_signal(signal.SIGTERM)
    out, _ = client.communicate(timeout=10)
    assert client.returncode == 1
    done = terminal(early + [json.loads(line) for line in out.splitlines()])
    assert "stopped by SIGTERM after" in done["a-b-st-0"]["message"]
    assert "before it started" in done["a-b-late-0"]["message"]
    for fid in ("a-b-st-0", "a-b-rr-0"):
        flow = read_flow(tmp_path / "cli" / "0" / "flows" / f"{fid}.client.nflow")
        assert not flow.truncated and flow.summary["status"] == "error" and flow.rows > 30
    # the server saw the connections close early and says so
    for fid in ("a-b-st-0", "a-b-rr-0"):
        wait_for_summary(tmp_path / "srv" / "0" / "flows" / f"{fid}.server.nflow")
    events = server.events()
    ended = {e["flow"]: e for e in events if e["event"] in ("done", "error")}
    for fid in ("a-b-st-0", "a-b-rr-0"):
        # a clean close reads as "ended the flow early"; unread data in flight makes it a reset
        message = ended[fid]["message"]
        assert ended[fid]["event"] == "error"
        assert "ended the flow after" in message or "reset by peer" in message, message
        srv = read_flow(tmp_path / "srv" / "0" / "flows" / f"{fid}.server.nflow")
        assert srv.summary["status"] == "error"


def test_crr_with_large_request_and_reply(veth_pair, tmp_path):
    pair = veth_pair
    server = Server(pair, pair.b, pair.addr_b, tmp_path / "srv")
    specs = [spec(server, "a-b-crr-0", "TCP_CRR", dur=1.0, req=2_000_000, reply=3_000_000)]
    code, events = run_client(pair, pair.a, tmp_path, specs)
    assert code == 0, events
    cli, srv = ends(tmp_path, "a-b-crr-0")
    assert cli.summary["transactions"] == srv.summary["transactions"] >= 5
    assert cli.summary["bytes_rx"] == srv.summary["bytes_tx"] == 3_000_000 * cli.summary["transactions"]
    assert cli.summary["bytes_tx"] == srv.summary["bytes_rx"]


def test_crash_keeps_what_was_flushed(veth_pair, tmp_path):
    pair = veth_pair
    server = Server(pair, pair.b, pair.addr_b, tmp_path / "srv")
    path = tmp_path / "specs.json"
    path.write_text(json.dumps([spec(server, "a-b-st-0", "TCP_STREAM", dur=5.0)]))
    client = pair.popen(pair.a, [*ENGINE, "client", "--specs", str(path), "--datadir", str(tmp_path / "cli")],
                        stdout=subprocess.PIPE, text=True)
    started = json.loads(client.stdout.readline())
    assert started["event"] == "started", started
    time.sleep(1.5)
    killed = time.monotonic()  # (one clock for every namespace)
    pids = subprocess.run(["ip", "netns", "pids", pair.a], capture_output=True, text=True).stdout.split()
    # the client and its workers: everything in our namespace a, workers first (a
    # parent killed first would have its workers stopped cleanly: PR_SET_PDEATHSIG)
    for pid in sorted(map(int, pids), key=lambda p: p == client.pid):
        os.kill(pid, signal.SIGKILL)
    client.wait(timeout=10)
    flow = read_flow(tmp_path / "cli" / "0" / "flows" / "a-b-st-0.client.nflow")
    assert flow.summary is None  # the writer died
    # a block goes out every FLUSH_SECONDS worth of rows: at most one block's rows are lost (a loaded machine
    # that skips ticks spreads a block's rows over more time: lost time is counted in the file's own spacing)
    block = round(FLUSH_SECONDS / 0.01)
    t = flow.columns["t_mono"]
    spacing = max(0.01, (t[-1] - t[0]) / (flow.rows - 1))
    assert flow.rows >= block, flow.rows
    assert killed - t[-1] < (block + 2) * spacing, (killed - t[-1], spacing)
    assert flow.columns["app_bytes_tx"][-1] > 0
