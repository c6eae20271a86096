"""Table-driven tests: each command's arguments, defaults and resolved Actions."""

from __future__ import annotations

from typing import Any

import pytest

from netesto.errors import ScriptError
from netesto.script import plan
from netesto.script import actions as A


def only(text: str) -> Any:
    acts = plan(text)
    assert len(acts) == 1, acts
    return acts[0]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("DO_SERVER host=h1", A.DoServer(host="h1", exp=1, exp_name="Exp", order=0, start=0)),
        ("DO_SERVER host=h1 exp=7 expName=e order=1 start=1",
         A.DoServer(host="h1", exp=7, exp_name="e", order=1, start=1)),
        ("DO_SERVER host=h1 exp_name=e", A.DoServer(host="h1", exp=1, exp_name="e")),
        ("DO_CLIENT host=c server=s",
         A.DoClient(host="c", exp=1, server="s", ca="reno", dur=20.0, delay=0.0, instances=1,
                  req=1048576, req_text="1M", reply=1, stats=0, test="TCP_RR", group=1)),
        ("DO_CLIENT host=c server=s ca=bbr dur=2.5 delay=1 instances=4 req=10K reply=100 "
         "stats=1 localBuffer=64K remoteBuffer=1m test=TCP_RR group=9 expName=x",
         A.DoClient(host="c", exp=1, exp_name="x", server="s", ca="bbr", dur=2.5, delay=1.0,
                  instances=4, req=10240, req_text="10K", reply=100, stats=1,
                  local_buffer=65536, remote_buffer=1000000, group=9)),
        ("DO_CLIENT host=c server=s local_buffer=1K remote_buffer=2K",
         A.DoClient(host="c", exp=1, server="s", local_buffer=1024, remote_buffer=2048)),
        ("DO_CLIENT host=c server=s test=TCP_RR req=STREAM",
         A.DoClient(host="c", exp=1, server="s", test="TCP_STREAM", req=0, req_text="S")),
        ("DO_CLIENT host=c server=s req=s",
         A.DoClient(host="c", exp=1, server="s", test="TCP_STREAM", req=0, req_text="S")),
        ("DO_CLIENT host=c server=s test=TCP_STREAM",
         A.DoClient(host="c", exp=1, server="s", test="TCP_STREAM", req=0, req_text="S")),
        ("DO_CLIENT host=c server=s test=tcp_maerts",
         A.DoClient(host="c", exp=1, server="s", test="TCP_MAERTS", req=0, req_text="S")),
        ("DO_CLIENT host=c server=s test=TCP_BIDIR pacing=100M",
         A.DoClient(host="c", exp=1, server="s", test="TCP_BIDIR", req=0, req_text="S",
                  pacing=100_000_000)),
        ("DO_CLIENT host=c server=s test=TCP_CRR req=100 reply=10K",
         A.DoClient(host="c", exp=1, server="s", test="TCP_CRR", req=100, req_text="100",
                  reply=10240)),
        ("DO_CLIENT host=c server=s test=TCP_CRR req=100 crr_close=server",
         A.DoClient(host="c", exp=1, server="s", test="TCP_CRR", req=100, req_text="100", crr_close="server")),
        ("DO_CLIENT host=c server=s test=tcp_crr crr_close=client",
         A.DoClient(host="c", exp=1, server="s", test="TCP_CRR", crr_close="client")),
        ("DO_CLIENT host=c server=s test=UDP_STREAM rate=50mbit",
         A.DoClient(host="c", exp=1, server="s", test="UDP_STREAM", req=1472, req_text="1472",
                  rate=50_000_000)),
        ("DO_CLIENT host=c server=s test=UDP_RR req=64 reply=64 driver=netperf interval=0.5",
         A.DoClient(host="c", exp=1, server="s", test="UDP_RR", req=64, req_text="64", reply=64,
                  driver="netperf", interval=0.5)),
        ("DO_CLIENT host=c server=s driver=iperf3 test=TCP_STREAM",
         A.DoClient(host="c", exp=1, server="s", test="TCP_STREAM", req=0, req_text="S",
                  driver="iperf3")),
        ("GET_DATA host=h exp=3", A.GetData(host="h", exp=3)),
        ("SET_SYSCTL host=h net.ipv4.tcp_wmem=10000,262144,20971520 net.ipv4.tcp_ecn=1",
         A.SetSysctl(host="h", settings=(("net.ipv4.tcp_wmem", ("10000", "262144", "20971520")),
                                       ("net.ipv4.tcp_ecn", ("1",))))),
        ("SET_SYSCTL host=h net.core.rmem.max=4000000 net.ipv4.tcp_congestion_control=bbr",
         A.SetSysctl(host="h", settings=(("net.core.rmem_max", ("4000000",)),
                                       ("net.ipv4.tcp_congestion_control", ("bbr",))))),
        ("SET_MODULE_PARAMS host=h module=tcp_cubic hystart=0 fast_convergence=1",
         A.SetModuleParams(host="h", module="tcp_cubic",
                         params=(("hystart", "0"), ("fast_convergence", "1")))),
        ("SET_NETEM host=h netem_delay=10", A.SetNetem(host="h", delay=10.0, limit=1000, loss=0.0)),
        ("SET_NETEM host=h netem_delay=20 limit=500 loss=0.01 jitter=2 rate=1g",
         A.SetNetem(host="h", delay=20.0, limit=500, loss=0.01, jitter=2.0, rate=1_000_000_000)),
        ("SET_QDISC host=r qdisc=tbf rate=100mbit burst=32k limit=100kb",
         A.SetQdisc(host="r", qdisc="tbf", rate="100mbit", burst="32k", limit="100kb")),
        ("SET_QDISC host=r qdisc=fq_codel action=replace other=target,5ms",
         A.SetQdisc(host="r", qdisc="fq_codel", action="replace", other="target 5ms")),
        ("DO_TCPDUMP host=h server=s", A.DoTcpdump(host="h", exp=1, server="s", packets=10000)),
        ("DO_TCPDUMP host=h server=X packets=50", A.DoTcpdump(host="h", exp=1, server="X", packets=50)),
        ("WAIT 3", A.Wait(seconds=3.0)),
        ("WAIT 0.25", A.Wait(seconds=0.25)),
        ("RAND_WAIT 2", A.RandWait(low=0.0, high=2.0)),
        ("RAND_WAIT 1 4.5", A.RandWait(low=1.0, high=4.5)),
        ("ECHO hello   world", A.Echo(text="hello   world")),
        ("DEBUG 1", A.Debug(enabled=True)),
        ("DEBUG F", A.Debug(enabled=False)),
        ("PROCESS_EXP exp=5", A.ProcessExp(exp=5)),
    ],
)
def test_command_actions(text: str, expected: Any) -> None:
    assert only(text) == expected


def test_local_commands_yield_nothing() -> None:
    kinds = [a.kind for a in plan("SET a=1\nSET_EXP b=1+1\nHOST_SUFFIX x.com\nDESC d\nOTHER a=1\n"
                                  "NEXT_COUNTER\nCLOSE\nEXIT host=h\nDEBUG_DISABLE\nDEBUG_RESTORE")]
    assert kinds == ["DEBUG", "DEBUG"]


def test_debug_disable_restore() -> None:
    acts = plan("DEBUG 1\nDEBUG_DISABLE\nDEBUG_RESTORE\nDEBUG 0\nDEBUG_RESTORE")
    assert [a.enabled for a in acts] == [True, False, True, False, True]


def test_desc_and_other_reach_process_exp() -> None:
    acts = plan("SET bw=100mbit\nDESC two flows, $bw\nOTHER netem=10,bw=$bw\n"
                "DO_SERVER host=h\nPROCESS_EXP\nOTHER x=1\nPROCESS_EXP exp=PREV")
    first, second = acts[1], acts[2]
    assert first == A.ProcessExp(exp=1, desc="two flows, 100mbit", other=(("netem", "10"), ("bw", "100mbit")))
    assert second == A.ProcessExp(exp=1, desc="two flows, 100mbit", other=(("x", "1"),))


@pytest.mark.parametrize(
    "text, col, fragment, hint",
    [
        ("DO_CLIENT host=c", 1, "server= is required", "DO_CLIENT host=h1"),
        ("DO_CLIENT host=c server=s durr=3", 27, "unknown argument 'durr'", "dur"),
        ("DO_CLIENT host=c server=s test=TCP_STREEM", 27, "unknown test", "TCP_STREAM"),
        ("DO_CLIENT host=c server=s driver=iperf", 27, "unknown driver", "iperf3"),
        ("DO_CLIENT host=c server=s dur=abc", 27, "bad dur", ""),
        ("DO_CLIENT host=c server=s dur=0", 27, "bad dur", ""),
        ("DO_CLIENT host=c server=s interval=100", 27, "bad interval", ""),
        ("DO_CLIENT host=c server=s req=lots", 27, "bad req", ""),
        ("DO_CLIENT host=c server=s pacing=fast", 27, "bad pacing", ""),
        ("DO_CLIENT host=c server=s test=UDP_STREAM req=1M", 43, "UDP datagram", ""),
        ("DO_CLIENT host=c server=s instances", 27, "expected key=value", ""),
        ("DO_CLIENT host=c server=s test=TCP_CRR crr_close=serve", 40, "unknown crr_close 'serve'", "server"),
        ("DO_CLIENT host=c server=s test=TCP_CRR crr_close=fin", 40, "unknown crr_close 'fin'",
         "rst, client, server"),
        ("DO_CLIENT host=c server=s test=TCP_RR crr_close=server", 39, "crr_close=server is for test=TCP_CRR, "
         "not TCP_RR", ""),
        ("DO_CLIENT host=c server=s crr_close=rst", 27, "crr_close=rst is for test=TCP_CRR, not TCP_RR", ""),
        ("DO_SERVER host=h order=2", 18, "bad order", ""),
        ("DO_SERVER", 1, "host= is required", ""),
        ("DO_SERVER host=a;rm", 11, "bad host", ""),
        ("SET_SYSCTL host=h net.ipv4.tcp_wmen=1", 19, "not allowed", "net.ipv4.tcp_wmem"),
        ("SET_SYSCTL host=h net.ipv4.tcp_wmem=1,2", 19, "expected 3 value(s), got 2", ""),
        ("SET_SYSCTL host=h net.core.wmem_max=100", 19, "100 is outside 2621440..67108864", ""),
        ("SET_SYSCTL host=h", 1, "no sysctl=value", ""),
        ("SET_MODULE_PARAMS host=h module=tcp_cubik hystart=0", 26, "not allowed", "tcp_cubic"),
        ("SET_MODULE_PARAMS host=h module=tcp_cubic hystat=0", 43, "not allowed", "hystart"),
        ("SET_MODULE_PARAMS host=h module=tcp_nv", 1, "no parameter", "nv_pad"),
        ("SET_NETEM host=h loss=1", 1, "netem_delay= is required", ""),
        ("SET_NETEM host=h netem_delay=10 loss=200", 33, "bad loss", ""),
        ("SET_QDISC host=h", 1, "qdisc= is required", ""),
        ("SET_QDISC host=h qdisc=tbff", 18, "unknown qdisc", "tbf"),
        ("SET_QDISC host=h qdisc=tbf rate=fast", 28, "bad rate", ""),
        ("SET_QDISC host=h qdisc=tbf burst=1x", 28, "bad burst", ""),
        ("SET_QDISC host=h qdisc=tbf action=explode", 28, "bad action", ""),
        ("SET_QDISC host=h qdisc=tbf other=a;b", 28, "bad other", ""),
        ("DO_TCPDUMP host=h", 1, "server= is required", ""),
        ("WAIT", 1, "WAIT takes one", ""),
        ("WAIT -1", 6, "below the minimum", ""),
        ("WAIT 1s", 6, "expected a number", ""),
        ("RAND_WAIT 5 1", 13, "below min", ""),
        ("DEBUG maybe", 7, "DEBUG takes", ""),
        ("SET a", 1, "SET takes one name=value", ""),
        ("SET a=1 b=2", 9, "SET takes one name=value", ""),
        ("SET a-b=1", 5, "bad variable name", ""),
        ("SET_EXP a=1+", 13, "expected a number", ""),
        ("SET_EXP a=4/0", 12, "division by zero", ""),
        ("SET_EXP a=2^3", 12, "unexpected character", ""),
        ("SET_EXP a=nope*2", 11, "undefined variable 'nope'", ""),
        ("OTHER a=1,b", 1, "OTHER: expected key=value", ""),
        ("PROCESS_EXP", 1, "no experiment to process", ""),
        ("GET_DATA host=h exp=PREV", 17, "no previous experiment", ""),
        ("SOURCE nosuchfile_xyz", 8, "not found", "searched"),
        ("RUN", 1, "RUN needs a macro name", ""),
        ("ECHO $nosuch", 6, "undefined variable $nosuch", ""),
        ("CLOSE hots=a", 7, "unknown argument", "host"),
    ],
)
def test_command_errors(text: str, col: int, fragment: str, hint: str) -> None:
    with pytest.raises(ScriptError) as exc:
        plan(text, file="t.nts")
    err = exc.value
    assert (err.file, err.line, err.column) == ("t.nts", 1, col), err.format_message()
    assert fragment in err.message, err.format_message()
    assert hint in err.hint
    assert err.text == text
    assert "t.nts:1:" in err.format_message()
