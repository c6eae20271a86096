"""inlib.vsTest (ExpVs, ExpVsOne) and inlib.caTest (tcpCA23)."""

from __future__ import annotations

import pytest

from netesto.script.actions import Echo

from .planning import experiments, plan

HOSTS = "SET servers1=srv\nSET client1=a\nSET client2=b\nSET client3=c\n"
MIXES = (  # (expName end, sizes or None for streams)
    ("2frvs", ("1M", "10K")),
    ("2frvs", ("8M", "10K")),
    ("2fsvs", None),
    ("3frvs", ("1M", "1M", "10K")),
    ("5frvs", ("1M",) * 4 + ("10K",)),
    ("9frvs", ("1M",) * 8 + ("10K",)),
    ("17frvs", ("1M",) * 16 + ("10K",)),
    ("9fRvs", ("8M",) * 8 + ("10K",)),
)


def _vs_flows(clients2: tuple[str, ...], sizes) -> list[tuple[str, str, str]]:
    """(host, ca, req_text) in MServerRRvs / MServerStreamVs order."""
    if sizes is None:
        return [("a", "cubic", "S")] + [(c, "bbr", "S") for c in clients2]
    return [flow for size in sizes
            for flow in [("a", "cubic", size)] + [(c, "bbr", size) for c in clients2]]


def test_exp_vs_two_then_three_clients():
    exps = experiments(plan(HOSTS + "SOURCE inlib.vsTest\nSET dur=9\n"
                            "RUN ExpVs ca1=cubic ca2=bbr\n"))
    assert len(exps) == 16
    expected = [(prefix + end, _vs_flows(clients2, sizes))
                for prefix, clients2 in (("1s2c", ("b",)), ("1s3c", ("b", "c")))
                for end, sizes in MIXES]
    assert [(e.name, [(c.host, c.ca, c.req_text) for c in e.clients]) for e in exps] == expected
    for exp in exps:
        assert [s.host for s in exp.starts] == ["srv"]
        assert {c.server for c in exp.clients} == {"srv"}
        assert exp.waits == [9.0, 60.0, 5.0, 10.0, 15.0]
    assert [e.number for e in exps] == list(range(1, 17))


def test_exp_vs_one_stops_only_exp_vs():
    actions = plan(HOSTS + "SOURCE inlib.vsTest\nSET dur=9\nSET ca1=cubic\nSET ca2=bbr\n"
                   "SET ExpVsOne=1\nRUN ExpVs\nECHO still running\n"
                   "RUN MServerStream servers=srv clients=a ca=reno dur=1\n")
    exps = experiments(actions)
    assert [e.name for e in exps] == ["1s2c2frvs", "Exp"]
    assert [(c.host, c.req_text) for c in exps[0].clients] == [("a", "1M"), ("b", "1M"),
                                                               ("a", "10K"), ("b", "10K")]
    assert [a.text for a in actions if isinstance(a, Echo)] == ["still running"]


def test_exp_vs_one_zero_runs_everything():
    exps = experiments(plan(HOSTS + "SOURCE inlib.vsTest\nSET ExpVsOne=0\n"
                            "RUN ExpVs ca1=reno ca2=bbr dur=3\n"))
    assert len(exps) == 16 and {c.dur for e in exps for c in e.clients} == {3.0}


CA_SETUP = ("SET server1=srv\nSET client1=a\nSET client2=b\nSET client3=c\n"
            "SOURCE inlib.caTest\nSET baselineCA=cubic\nSET testCA=reno,bbr\n")


def _pairs(exps) -> list[tuple[str, tuple[str, ...]]]:
    return [(e.name, tuple(c.ca for c in e.clients)) for e in exps]


@pytest.mark.parametrize("flags,expected", [
    (("baseline",), [("cubic",) * 3]),
    (("test",), [("reno",) * 3, ("bbr",) * 3]),
    (("vs1",), [("cubic", "reno", "reno"), ("cubic", "bbr", "bbr")]),
    (("vs2",), [("reno", "cubic", "cubic"), ("bbr", "cubic", "cubic")]),
    (("baseline", "test", "vs1", "vs2"),
     [("cubic",) * 3, ("reno",) * 3, ("cubic", "reno", "reno"), ("reno", "cubic", "cubic"),
      ("bbr",) * 3, ("cubic", "bbr", "bbr"), ("bbr", "cubic", "cubic")]),
])
def test_tcp_ca23_pairs(flags, expected):
    text = CA_SETUP + "".join(f"SET tcpCA23_{f}=1\n" for f in flags) + "RUN tcpCA23\n"
    exps = experiments(plan(text))
    want = []
    for cas in expected:  # each pair: a 2 -> 1 then a 3 -> 1 experiment
        want += [("1s2cmid.vs", cas[:2]), ("1s3cmid.vs", cas)]
    assert _pairs(exps) == want
    descs = [a.desc for e in exps for a in e.actions if a.kind == "PROCESS_EXP"]
    assert descs == [f"{cas[0]}:{cas[1]}" for cas in expected for _ in range(2)]


def test_tcp_ca23_stagger_from_dur():
    exps = experiments(plan(CA_SETUP + "SET dur=30\nSET tcpCA23_baseline=1\nRUN tcpCA23\n"))
    two, three = exps
    assert [(c.host, c.server, c.dur, c.delay, c.test) for c in two.clients] == [
        ("a", "srv", 30.0, 0.0, "TCP_STREAM"), ("b", "srv", 10.0, 13.0, "TCP_STREAM")]
    assert [(c.host, c.dur, c.delay) for c in three.clients] == [
        ("a", 30.0, 0.0), ("b", 20.0, 8.0), ("c", 10.0, 15.0)]
    assert two.waits[0] == 30.0 and three.waits[0] == 30.0
    # the default duration is the original's 60 s
    default = experiments(plan(CA_SETUP + "SET tcpCA23_baseline=1\nRUN tcpCA23\n"))
    assert [(c.dur, c.delay) for c in default[0].clients] == [(60.0, 0.0), (20.0, 23.0)]


def test_tcp_ca23_netem_only_with_a_delay():
    plain = plan(CA_SETUP + "SET tcpCA23_baseline=1\nRUN tcpCA23\n")
    assert not [a for a in plain if a.kind == "SET_NETEM"]
    actions = plan(CA_SETUP + "SET netemDelay=10\nSET tcpCA23_baseline=1\nRUN tcpCA23\n")
    netem = [a for a in actions if a.kind == "SET_NETEM"]
    assert [(a.host, a.delay, a.limit) for a in netem] == [("srv", 10.0, 20000), ("srv", 0.0, 1000)]
    assert actions[0] is netem[0] and actions[-1] is netem[1]
    # the original's variable name for the delay still works
    old = plan(CA_SETUP + "SET delay=5\nSET tcpCA23_test=1\nRUN tcpCA23\n")
    assert [a.delay for a in old if a.kind == "SET_NETEM"] == [5.0, 0.0]


def test_exp_vs_first_group_only():
    actions = plan(HOSTS + "SOURCE inlib.vsTest\nSET ExpVsFirstGroup=1\n"
                   "RUN ExpVs ca1=cubic ca2=bbr dur=3\nECHO done\n")
    exps = experiments(actions)
    assert [e.name for e in exps] == ["1s2c" + end for end, _ in MIXES]
    assert {c.host for e in exps for c in e.clients} == {"a", "b"}
    assert actions[-1] == Echo(text="done")
