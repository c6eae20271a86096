"""netperf driver: parsing real netperf 2.7.1 output (captured samples), command lines, absence."""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
from pathlib import Path

import pytest

from netesto.errors import TrafficError
from netesto.drivers import netperf
from netesto.raw.nflow import read_flow
from netesto.protocol.flowspec import FlowSpec

DATA = Path(__file__).parents[1] / "data"


def text(name: str) -> str:
    return (DATA / name).read_text()


def spec(test: str = "TCP_STREAM", **kw) -> FlowSpec:
    kw.setdefault("dur", 5)
    return FlowSpec("a-b-1-0", test, kw.pop("server", "10.93.0.2"), kw.pop("port", 31850), **kw)


def test_keyval_interim_stream():
    final, interim = netperf.parse_keyval(text("np_demo_tcp_stream_keyval.txt"))
    assert final == {"THROUGHPUT": "7219.20", "THROUGHPUT_UNITS": "10^6bits/s"}
    assert len(interim) == 25
    assert interim[0] == netperf.Interim(6429.62, "10^6bits/s", 0.201, 1795322386.556)
    assert interim[-1].interval == 0.011
    endings = [i.ending for i in interim]
    assert endings == sorted(endings)
    rows = netperf.interim_rows(interim, spec(), 0.0)
    elapsed = sum(i.interval for i in interim)
    assert elapsed == pytest.approx(5.0, abs=0.05)
    # cumulative bytes from the interim rates agree with netperf's own average
    assert rows[-1]["app_bytes_tx"] == pytest.approx(7219.20e6 / 8 * elapsed, rel=0.05)
    assert all(r["app_bytes_rx"] == 0 for r in rows)


@pytest.mark.parametrize(
    "name, test, n, final_rate",
    [
        ("np_demo_tcp_stream.txt", "TCP_STREAM", 24, 5097.37e6),
        ("np_demo_tcp_rr.txt", "TCP_RR", 24, 11745.37),
    ],
)
def test_human_interim_lines(name, test, n, final_rate):
    interim = netperf.parse_interim_lines(text(name))
    assert len(interim) == n
    rows = netperf.interim_rows(interim, spec(test, req=1, reply=1), 10.0)
    assert rows[0]["t_mono"] == pytest.approx(rows[0]["t_wall"] + 10.0)
    elapsed = sum(i.interval for i in interim)
    if test == "TCP_RR":
        assert rows[-1]["transactions"] == pytest.approx(final_rate * elapsed, rel=0.05)
        assert rows[-1]["app_bytes_tx"] == rows[-1]["transactions"]  # 1-byte requests
    else:
        assert rows[-1]["app_bytes_tx"] == pytest.approx(final_rate / 8 * elapsed, rel=0.05)


def test_csv_interim_from_manual():
    interim = netperf.parse_interim_lines("2978.81,MBytes/s,1.25,1327962298.035\n")
    assert interim == [netperf.Interim(2978.81, "MBytes/s", 1.25, 1327962298.035)]
    rows = netperf.interim_rows(interim, spec("TCP_MAERTS"), 0.0)
    assert rows[0]["app_bytes_rx"] == int(2978.81 * 2**20 * 1.25)
    assert rows[0]["app_bytes_tx"] == 0


@pytest.mark.parametrize("name", ["np_omni_send_j_keyval.txt", "np_tcp_stream_omni_keyval.run1.txt"])
def test_stream_summary(name):
    final, interim = netperf.parse_keyval(text(name))
    assert interim == []
    s = netperf.netperf_summary(final, spec(ca="bbr"))
    assert s["status"] == "ok" and s["driver"] == "netperf"
    assert s["rate_tx_bps"] == pytest.approx(float(final["LOCAL_SEND_THROUGHPUT"]) * 1e6)
    assert s["bytes_tx"] == int(s["rate_tx_bps"] * 5.0 / 8)
    assert s["retransmits"] == int(final["LOCAL_TRANSPORT_RETRANS"]) > 0
    assert s["ca"] == s["ca_remote"] == "bbr"
    assert s["latency_us"]["p50"] == float(final["P50_LATENCY"])
    assert s["latency_us"]["mean"] == float(final["MEAN_LATENCY"])
    assert "p90" not in s["latency_us"]


def test_rr_summary():
    final, _ = netperf.parse_keyval(text("np_tcp_rr_1b_j_keyval.run1.txt"))
    s = netperf.netperf_summary(final, spec("TCP_RR"))
    assert s["tps"] == pytest.approx(8672.898)
    assert s["latency_us"] == {"p50": 69.0, "p90": 287.0, "p99": 428.0}
    assert s["rate_tx_bps"] == 0.0  # THROUGHPUT is in Trans/s for RR
    assert s["transactions"] == 0  # no ELAPSED_TIME selected: unknown, not guessed


def test_negative_values_are_not_measured():
    s = netperf.netperf_summary({"LOCAL_CPU_UTIL": "-1.00", "ELAPSED_TIME": "2.0",
                                 "TRANSACTION_RATE": "10"}, spec("TCP_CRR"))
    assert s["cpu"]["percent"] == 0.0 and s["connections"] == 20


def test_units():
    assert netperf.rate_per_second(1.0, "10^9bits/s") == ("bits", 1e9)
    assert netperf.rate_per_second(1.0, "Mbits/s") == ("bits", 1e6)
    with pytest.raises(TrafficError, match="unknown units"):
        netperf.rate_per_second(1.0, "furlongs")


@pytest.mark.parametrize(
    "test, kw, expected",
    [
        ("TCP_STREAM", {}, ["-K", "cubic,cubic", "-P", ",31850"]),
        ("TCP_MAERTS", {"ca": "bbr"}, ["-K", "bbr,bbr", "-P", ",31850"]),
        ("TCP_CRR", {"req": 100, "reply": 2048}, ["-r", "100,2048"]),
        ("UDP_RR", {}, ["-r", "1,1", "-P", ",31850"]),
        ("TCP_STREAM", {"local_buffer": 1000, "remote_buffer": 2000}, ["-s", "1000", "-S", "2000"]),
    ],
)
def test_argv_like_the_original(test, kw, expected):
    argv = netperf.netperf_argv(spec(test, interval=0.2, **kw))
    assert argv[:12] == ["netperf", "-H", "10.93.0.2", "-l", "5", "-t", test, "-D", "0.2,", "-j", "-c", "-C"]
    assert argv[12:14] == ["--", "-k"] and argv[14] == ",".join(netperf.SELECTORS)
    assert " ".join(expected) in " ".join(argv)
    if test == "UDP_RR":
        assert "-K" not in argv


def test_control_port_from_meta():
    argv = netperf.netperf_argv(spec(meta=(("netserver_port", "12999"),)))
    assert argv[3:5] == ["-p", "12999"]


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"test": "TCP_BIDIR"}, "driver netperf does not support TCP_BIDIR"),
        ({"test": "UDP_STREAM", "rate": 10**6}, "cannot limit the rate"),
        ({"pacing": 10**6}, "cannot set a pacing rate"),
    ],
)
def test_unsupported(kw, match):
    with pytest.raises(TrafficError, match=match):
        netperf.netperf_argv(spec(kw.pop("test", "TCP_STREAM"), **kw))


def test_netperf_absent_is_clear(tmp_path, monkeypatch):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    monkeypatch.setenv("PATH", str(bindir))
    assert shutil.which("netperf") is None
    with pytest.raises(TrafficError, match="netperf not found on PATH.*Debian main.*non-free") as exc:
        netperf.run_flow(spec(), tmp_path)
    assert "driver=builtin" in str(exc.value)
    with pytest.raises(TrafficError, match="netserver not found on PATH"):
        netperf.start_server()
    assert not (tmp_path / "0").exists()  # nothing half-written


def test_samples_parse_without_error():
    for path in sorted(DATA.glob("np_*.txt")):
        final, interim = netperf.parse_keyval(path.read_text())
        lines = netperf.parse_interim_lines(path.read_text())
        assert not (interim and lines), path.name  # one form or the other
        for item in interim + lines:
            assert not math.isnan(item.value) and item.interval > 0


def _replay_tool(bindir: Path, name: str, stdout_file: str, rc: int = 0, stderr: str = "") -> Path:
    """An executable that replays recorded real netperf output and logs its argv.

    netperf cannot be installed here (Debian non-free), so run_flow's process
    handling, parsing and file writing are exercised on recorded output.
    """
    log = bindir / f"{name}.argv"
    script = bindir / name
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, sys\n"
        f"open({str(log)!r}, 'w').write(json.dumps(sys.argv[1:]))\n"
        "if sys.argv[1:] == ['-V']:\n"
        "    print('Netperf version 2.7.1'); sys.exit(0)\n"
        f"sys.stdout.write(open({str(DATA / stdout_file)!r}).read() if {stdout_file!r} else '')\n"
        f"sys.stderr.write({stderr!r})\n"
        f"sys.exit({rc})\n"
    )
    script.chmod(0o755)
    return log


def test_run_flow_on_replayed_output(tmp_path, monkeypatch):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log = _replay_tool(bindir, "netperf", "np_demo_tcp_stream_keyval.txt")
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    events: list[dict] = []
    s = spec(exp=4, interval=0.2)
    assert netperf.run_flow(s, tmp_path, events.append)
    assert json.loads(log.read_text()) == netperf.netperf_argv(s)[1:]
    assert [e["event"] for e in events] == ["started", "done"]
    flow = read_flow(tmp_path / "4" / "flows" / "a-b-1-0.client.nflow")
    assert flow.rows == 25 and flow.header["tool_version"] == "Netperf version 2.7.1"
    assert flow.header["driver"] == "netperf"
    assert flow.columns["t_wall"][0] == 1795322386.556
    assert flow.summary["rate_tx_bps"] == pytest.approx(7219.20e6)
    assert flow.columns["app_bytes_tx"][-1] == pytest.approx(7219.20e6 / 8 * 5.0, rel=0.05)


def test_run_flow_reports_netperf_failure(tmp_path, monkeypatch):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    msg = ("establish control: are you sure there is a netserver listening on 10.93.0.2 at port 12865?\n"
           "establish_control could not establish the control connection from 0.0.0.0 port 0 "
           "address family AF_UNSPEC to 10.93.0.2 port 12865 address family AF_INET\n")
    _replay_tool(bindir, "netperf", "", rc=1, stderr=msg)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    events: list[dict] = []
    assert not netperf.run_flow(spec(), tmp_path, events.append)
    assert events[-1]["event"] == "error"
    assert "10.93.0.2:12865" in events[-1]["message"] and "control connection" in events[-1]["message"]
    flow = read_flow(tmp_path / "0" / "flows" / "a-b-1-0.client.nflow")
    assert flow.summary["status"] == "error" and flow.rows == 0
