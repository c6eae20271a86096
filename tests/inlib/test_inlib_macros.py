"""inlib: every macro plans to the original's experiment shape (servers, clients, tail)."""

from __future__ import annotations

import pytest

from netesto.errors import ScriptError

from netesto.script import actions as A

from .planning import experiments, kinds, plan, run

MACROS = (
    "MServerRR", "MServerRR_1", "MServerRR_client3_req3", "MServerRR2", "MServerRR2r",
    "MServerRR3", "MServerRRvs", "MServerStream", "MServerStreamRR", "MServerStreamVs",
    "TwoFlowBaseRR", "TwoFlowBaseStream", "ThreeFlowBaseRR", "ThreeFlowBaseStream",
    "FourFlowStreamOne", "OneFlowRR", "OneFlowStream",
)
K, M = 1024, 1024 * 1024


def test_every_macro_is_defined():
    _, interp = run("SOURCE inlib\n")
    assert set(MACROS) <= set(interp.macros)
    assert interp.variables["randDelay"] == "0.1"


def test_mserver_rr_two_by_two_by_two_per_ca():
    actions = plan(
        "SOURCE inlib\n"
        "RUN MServerRR servers=h1,h2 clients=h3,h4 reqs=10K,1M ca=cubic,bbr "
        "expName=2s2c2fr dur=30 instances=3 reply=100\n",
        start=41,
    )
    exps = experiments(actions)
    assert [e.number for e in exps] == [42, 43]  # COUNTER, once per ca value
    for exp, ca in zip(exps, ("cubic", "bbr")):
        starts = exp.starts
        assert [(s.host, s.exp, s.start) for s in starts] == [("h1", exp.number, 1),
                                                               ("h2", exp.number, 1)]
        assert [s.host for s in exp.ends] == ["h1", "h2"]
        clients = exp.clients
        assert len(clients) == 8
        assert [(c.host, c.server, c.req) for c in clients] == [
            (c, s, r) for c in ("h3", "h4") for s in ("h1", "h2") for r in (10 * K, M)]
        assert [c.group for c in clients] == list(range(1, 9))
        assert {(c.test, c.ca, c.dur, c.delay, c.instances, c.reply, c.stats, c.exp)
                for c in clients} == {("TCP_RR", ca, 30.0, 0.0, 3, 100, 1, exp.number)}
        assert exp.name == "2s2c2fr"
        assert exp.fetched == ["h1", "h2", "h3", "h4"]  # servers, then clients
        assert exp.processed == 1
        # the original's canonical tail: dur, 10, then 5, 10, 15
        assert exp.waits == [30.0, 10.0, 5.0, 10.0, 15.0]
        assert [w.high for w in exp.of(A.RandWait)] == [0.1] * 8


def test_canonical_timeline_order():
    actions = plan("SOURCE inlib\nRUN MServerStream servers=s clients=c ca=reno dur=7\n")
    assert kinds(actions) == [
        "DO_SERVER", "DO_CLIENT", "RAND_WAIT", "WAIT", "WAIT", "DO_SERVER", "WAIT",
        "GET_DATA", "GET_DATA", "WAIT", "PROCESS_EXP", "WAIT"]
    (exp,) = experiments(actions)
    assert exp.starts[0].exp == 1 and exp.ends[0].exp == 1
    assert exp.clients[0].test == "TCP_STREAM" and exp.clients[0].req == 0
    assert exp.fetched == ["s", "c"]


@pytest.mark.parametrize("how", ["defines", "set_before", "set_after", "run_args", "short"])
def test_tail_waits_can_be_shrunk(how):
    run_line = "RUN MServerStream servers=s clients=c ca=reno dur=2"
    short = {"settleWait": "1", "statsWait": "0", "dataWait": "0", "expWait": "0"}
    sets = "".join(f"SET {k}={v}\n" for k, v in short.items())
    args = " ".join(f"{k}={v}" for k, v in short.items())
    defines = None
    if how == "defines":
        text, defines = f"SOURCE inlib\n{run_line}\n", short
    elif how == "set_before":
        text = f"{sets}SOURCE inlib\n{run_line}\n"
    elif how == "set_after":
        text = f"SOURCE inlib\n{sets}{run_line}\n"
    elif how == "run_args":
        text = f"SOURCE inlib\n{run_line} {args}\n"
    else:
        text = f"SOURCE inlib\nRUN InlibShortWaits\n{run_line}\n"
    (exp,) = experiments(plan(text, defines=defines))
    assert exp.waits == [2.0, 1.0, 0.0, 0.0, 0.0]


def test_vs_macros_wait_sixty_unless_told():
    text = "SOURCE inlib\nRUN MServerStreamVs servers=s clients1=a clients2=b ca1=cubic ca2=bbr dur=3\n"
    assert experiments(plan(text))[0].waits == [3.0, 60.0, 5.0, 10.0, 15.0]
    short = experiments(plan(text, defines={"vsSettleWait": "2"}))[0]
    assert short.waits == [3.0, 2.0, 5.0, 10.0, 15.0]


def test_rand_delay_default_and_override():
    line = "RUN MServerStream servers=s clients=c ca=reno dur=2"
    assert plan(f"SOURCE inlib\n{line}\n")[2] == A.RandWait(low=0.0, high=0.1)
    assert plan(f"SET randDelay=0.5\nSOURCE inlib\n{line}\n")[2] == A.RandWait(low=0.0, high=0.5)
    assert plan(f"SOURCE inlib\n{line} randDelay=0\n")[2] == A.RandWait(low=0.0, high=0.0)


def test_pre_server_and_pre_client_hooks_run_per_host():
    actions = plan(
        "SOURCE inlib\n"
        "BEGIN preServer\nSET_SYSCTL host=$host net.ipv4.tcp_rmem=10000,262144,20971520\nEND preServer\n"
        "BEGIN preClient\nSET_SYSCTL host=$host net.ipv4.tcp_wmem=10000,262144,20971520\nEND preClient\n"
        "RUN MServerRR servers=s1,s2 clients=c1 reqs=1M ca=cubic dur=5\n")
    seq = [(a.kind, a.host) for a in actions if a.kind in ("SET_SYSCTL", "DO_SERVER", "DO_CLIENT")]
    assert seq[:6] == [("SET_SYSCTL", "s1"), ("DO_SERVER", "s1"), ("SET_SYSCTL", "s2"),
                       ("DO_SERVER", "s2"), ("SET_SYSCTL", "c1"), ("DO_CLIENT", "c1")]
    sysctls = [a for a in actions if a.kind == "SET_SYSCTL"]
    assert sysctls[0].settings == (("net.ipv4.tcp_rmem", ("10000", "262144", "20971520")),)
    assert sysctls[2].settings[0][0] == "net.ipv4.tcp_wmem"


def test_tcpdump_on_servers_and_per_client_server_pair():
    actions = plan("SOURCE inlib\nSET tcpDump=500\n"
                   "RUN MServerRR servers=s1,s2 clients=c1 reqs=1M,10K ca=reno dur=5\n")
    dumps = [(a.host, a.server, a.packets) for a in actions if isinstance(a, A.DoTcpdump)]
    assert dumps == [("s1", "s1", 500), ("s2", "s2", 500), ("c1", "s1", 500), ("c1", "s2", 500)]
    assert not [a for a in plan("SOURCE inlib\nRUN MServerRR servers=s1 clients=c1 reqs=1M "
                                "ca=reno dur=5\n") if isinstance(a, A.DoTcpdump)]


def test_exp_counter_argument_keeps_one_number_per_experiment():
    # The original gave every server its own number when RUN passed exp=COUNTER.
    actions = plan("SOURCE inlib\nRUN MServerRR,2 exp=COUNTER servers=a,b,c clients=d "
                   "reqs=1M ca=reno dur=5\n", start=9)
    assert [e.number for e in experiments(actions)] == [10, 11]
    assert {a.exp for a in experiments(actions)[0].actions if hasattr(a, "exp")} == {10}


def test_exp_number_argument_is_used_as_is():
    (exp,) = experiments(plan("SOURCE inlib\nRUN MServerStream exp=300 servers=a,b clients=c "
                              "ca=reno dur=5\n"))
    assert exp.number == 300 and [s.exp for s in exp.starts] == [300, 300]


def test_mserver_rr_1_gives_client1_its_own_sizes():
    (exp,) = experiments(plan("SOURCE inlib\nRUN MServerRR_1 servers=s clients=a,b client1=x "
                              "reqs=10K req1=1M,8M ca=reno dur=5\n"))
    assert [(c.host, c.req) for c in exp.clients] == [("a", 10 * K), ("b", 10 * K),
                                                      ("x", M), ("x", 8 * M)]
    assert exp.fetched == ["s", "a", "b", "x"] and len(exp.ends) == 1


def test_mserver_rr_client3_req3_sizes_per_set_and_stream():
    (exp,) = experiments(plan(
        "SOURCE inlib\nRUN MServerRR_client3_req3 servers=s clients1=a clients2=b,c "
        "clients3=d reqs1=1M reqs2=10K,50K reqs3=S ca=reno dur=5\n"))
    assert [(c.host, c.test, c.req) for c in exp.clients] == [
        ("a", "TCP_RR", M), ("b", "TCP_RR", 10 * K), ("b", "TCP_RR", 50 * K),
        ("c", "TCP_RR", 10 * K), ("c", "TCP_RR", 50 * K), ("d", "TCP_STREAM", 0)]
    assert exp.fetched == ["s", "a", "b", "c", "d"]


def test_mserver_rr2_and_rr2r_pair_sets_with_their_ca():
    (rr2,) = experiments(plan(
        "SOURCE inlib\nRUN MServerRR2 servers1=s1 servers2=s2 clients1=a clients2=b "
        "ca1=cubic ca2=bbr reqs=1M,10K dur=5\n"))
    assert [s.host for s in rr2.starts] == ["s1", "s2"]
    assert {s.exp for s in rr2.starts} == {rr2.number}
    assert [(c.host, c.server, c.ca, c.req) for c in rr2.clients] == [
        ("a", "s1", "cubic", M), ("a", "s1", "cubic", 10 * K),
        ("b", "s2", "bbr", M), ("b", "s2", "bbr", 10 * K)]
    (rr2r,) = experiments(plan(
        "SOURCE inlib\nRUN MServerRR2r servers1=s1 servers2=s2 clients1=a clients2=b "
        "ca1=cubic ca2=bbr req1=1M req2=10K dur=5\n"))
    assert [(c.host, c.ca, c.req) for c in rr2r.clients] == [("a", "cubic", M), ("b", "bbr", 10 * K)]
    assert rr2r.fetched == ["s1", "s2", "a", "b"]


def test_mserver_rr3_three_sets():
    (exp,) = experiments(plan(
        "SOURCE inlib\nRUN MServerRR3 servers1=s1 servers2=s2 servers3=s3 clients1=a "
        "clients2=b clients3=c ca1=reno ca2=cubic ca3=bbr reqs=1M dur=5\n"))
    assert [s.host for s in exp.starts] == ["s1", "s2", "s3"]
    assert [(c.host, c.server, c.ca) for c in exp.clients] == [
        ("a", "s1", "reno"), ("b", "s2", "cubic"), ("c", "s3", "bbr")]
    assert exp.fetched == ["s1", "s2", "s3", "a", "b", "c"]


def test_mserver_rr_vs_loops_sizes_outermost():
    (exp,) = experiments(plan(
        "SOURCE inlib\nRUN MServerRRvs servers=s clients1=a clients2=b,c expName=1s3cvs "
        "ca1=cubic ca2=bbr dur=5 instances=4 reqs=1M,10K reply=1\n"))
    assert [(c.host, c.ca, c.req) for c in exp.clients] == [
        ("a", "cubic", M), ("b", "bbr", M), ("c", "bbr", M),
        ("a", "cubic", 10 * K), ("b", "bbr", 10 * K), ("c", "bbr", 10 * K)]
    assert {c.instances for c in exp.clients} == {4}
    assert exp.waits == [5.0, 60.0, 5.0, 10.0, 15.0]


def test_mserver_stream_rr_one_stream_then_rr_per_size():
    actions = plan("SOURCE inlib\nRUN MServerStreamRR servers=s clients=a,b reqs=1M,10K "
                   "ca=reno dur=5\n")
    (exp,) = experiments(actions)
    assert [(c.host, c.test, c.req) for c in exp.clients] == [
        ("a", "TCP_STREAM", 0), ("a", "TCP_RR", M), ("a", "TCP_RR", 10 * K),
        ("b", "TCP_STREAM", 0), ("b", "TCP_RR", M), ("b", "TCP_RR", 10 * K)]
    # a RAND_WAIT after each RR and one more after each pair
    assert len(exp.of(A.RandWait)) == 6


def test_two_flow_base_rr_and_stream():
    for macro, test, extra in (("TwoFlowBaseRR", "TCP_RR", " req=10K reply=2"),
                               ("TwoFlowBaseStream", "TCP_STREAM", "")):
        (exp,) = experiments(plan(
            f"SOURCE inlib\nRUN {macro} server=s client1=a client2=b expName=x ca1=cubic "
            f"ca2=bbr dur1=30 dur2=10 delay2=13 instances=2{extra}\n"))
        flows = [(c.host, c.server, c.ca, c.dur, c.delay, c.instances, c.test, c.group)
                 for c in exp.clients]
        assert flows == [("a", "s", "cubic", 30.0, 0.0, 2, test, 1),
                         ("b", "s", "bbr", 10.0, 13.0, 2, test, 2)]
        if test == "TCP_RR":
            assert {(c.req, c.reply) for c in exp.clients} == {(10 * K, 2)}
        assert exp.waits[0] == 30.0  # the tail follows dur1
        assert exp.fetched == ["s", "a", "b"]
        assert [s.host for s in exp.starts + exp.ends] == ["s", "s"]


def test_three_flow_base_stream_and_rr():
    for macro, req in (("ThreeFlowBaseStream", ""), ("ThreeFlowBaseRR", " req=1M")):
        (exp,) = experiments(plan(
            f"SOURCE inlib\nRUN {macro} server=s client1=a client2=b client3=c expName=x "
            f"ca1=reno ca2=cubic ca3=bbr dur1=60 dur2=40 dur3=20 delay2=13 delay3=25{req}\n"))
        assert [(c.host, c.ca, c.dur, c.delay) for c in exp.clients] == [
            ("a", "reno", 60.0, 0.0), ("b", "cubic", 40.0, 13.0), ("c", "bbr", 20.0, 25.0)]
        assert len(exp.of(A.RandWait)) == 2
        assert exp.fetched == ["s", "a", "b", "c"]


def test_four_flow_stream_one():
    (exp,) = experiments(plan(
        "SOURCE inlib\nRUN FourFlowStreamOne server=s client1=a client2=b client3=c "
        "client4=d expName=x ca=bbr dur=10 instances=4\n"))
    assert [(c.host, c.instances, c.test, c.ca) for c in exp.clients] == [
        ("a", 4, "TCP_STREAM", "bbr"), ("b", 1, "TCP_STREAM", "bbr"),
        ("c", 1, "TCP_STREAM", "bbr"), ("d", 1, "TCP_STREAM", "bbr")]
    assert exp.fetched == ["s", "a", "b", "c", "d"]


def test_one_flow_macros():
    (rr,) = experiments(plan("SOURCE inlib\nRUN OneFlowRR server=s client=c ca=cubic dur=5 "
                             "req=64K reply=8\n"))
    (c,) = rr.clients
    assert (c.host, c.server, c.test, c.req, c.reply, c.instances) == ("c", "s", "TCP_RR",
                                                                       64 * K, 8, 1)
    # without req, the RR macros use DO_CLIENT's own default request size
    for macro in ("OneFlowRR server=s client=c ca=cubic dur=5",
                  "TwoFlowBaseRR server=s client1=a client2=b delay2=1 ca1=reno ca2=bbr dur1=5 dur2=5"):
        (exp,) = experiments(plan(f"SOURCE inlib\nRUN {macro}\n"))
        assert {(c.test, c.req, c.reply) for c in exp.clients} == {("TCP_RR", 1024 * K, 1)}
    (st,) = experiments(plan("SOURCE inlib\nRUN OneFlowStream server=s client=c ca=bbr "
                             "dur=5 instances=2\n"))
    assert [(c.test, c.instances, c.ca) for c in st.clients] == [("TCP_STREAM", 2, "bbr")]
    # a ca list makes one experiment per value, as with every macro
    assert len(experiments(plan("SOURCE inlib\nRUN OneFlowStream server=s client=c "
                                "ca=bbr,cubic,reno dur=5\n"))) == 3


def test_host_suffix_applies_inside_macros():
    (exp,) = experiments(plan("HOST_SUFFIX lab.example\nSOURCE inlib\n"
                              "RUN MServerStream servers=s clients=c,10.0.0.9 ca=reno dur=5\n"))
    assert [(c.host, c.server) for c in exp.clients] == [("c.lab.example", "s.lab.example"),
                                                         ("10.0.0.9", "s.lab.example")]


def test_missing_argument_is_a_script_error_naming_it():
    with pytest.raises(ScriptError) as info:
        plan("SOURCE inlib\nRUN MServerRR servers=s clients=c ca=reno dur=5\n")
    assert "reqs" in str(info.value)


def test_other_commands_between_experiments_use_the_last_experiment():
    actions = plan("SOURCE inlib\nRUN MServerStream servers=s clients=c ca=reno dur=5\n"
                   "SET_NETEM host=s netem_delay=0\n")
    assert actions[-1].kind == "SET_NETEM" and actions[-1].exp == 1
    assert isinstance(actions[-2], A.Wait)
    assert not [a for a in actions if isinstance(a, A.ProcessExp) and a.exp != 1]
    assert [a.host for a in actions if isinstance(a, A.GetData)] == ["s", "c"]
    assert all(isinstance(a, (A.DoServer, A.DoClient, A.GetData)) or not hasattr(a, "host")
               for a in actions[:-1])


def test_every_macro_is_documented():
    import re

    from .planning import REPO

    doc = (REPO / "docs" / "macro-libraries.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^\| `(\w+)` \|", doc, flags=re.M))
    documented |= set(re.findall(r"^## .*: `(\w+)`$", doc, flags=re.M))
    _, interp = run("SOURCE inlib.rateTest\nSOURCE inlib.vsTest\nSOURCE inlib.caTest\n")
    internal = {"ExpVsGroup", "tcpCA23Pair"}  # described in the text of their sections
    assert set(interp.macros) - internal <= documented
    assert set(MACROS) <= documented
