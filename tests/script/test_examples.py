"""The paper's and README's examples plan into the actions they describe."""

from __future__ import annotations

from netesto.script import MemoryCounter, MemoryLoader, estimate_seconds, plan
from netesto.script.actions import DoClient, DoServer

from tests.script.examples import LIB, MISC, PAPER_MSERVERRR, PAPER_SAMPLE, README_FOR


def test_paper_two_flow_bbr_sample() -> None:
    acts = plan(PAPER_SAMPLE, loader=MemoryLoader({"lib": LIB}), counter=MemoryCounter(100))
    clients = [a for a in acts if isinstance(a, DoClient)]
    assert [(c.host, c.server, c.ca, c.dur, c.delay, c.test) for c in clients] == [
        ("host2.mynetwork.com", "host1.mynetwork.com", "bbr", 60.0, 0.0, "TCP_STREAM"),
        ("host3.mynetwork.com", "host1.mynetwork.com", "bbr", 20.0, 23.0, "TCP_STREAM"),
    ]
    assert {a.exp for a in acts if hasattr(a, "exp")} == {101}
    assert [c.group for c in clients] == [1, 2]
    assert [a.host for a in acts if a.kind == "GET_DATA"] == [
        "host2.mynetwork.com", "host3.mynetwork.com", "host1.mynetwork.com"]
    assert estimate_seconds(acts) == 60 + 10 + 5 + 10 + 15 + 0.05


def test_paper_mserverrr_example() -> None:
    acts = plan(PAPER_MSERVERRR, loader=MemoryLoader({"lib": LIB}))
    servers = [a for a in acts if isinstance(a, DoServer)]
    assert [(s.host, s.order, s.start) for s in servers] == [
        ("host1", 0, 1), ("host2", 0, 1), ("host1", 1, 0), ("host2", 1, 0)]
    clients = [a for a in acts if isinstance(a, DoClient)]
    assert len(clients) == 3 * 2 * 3
    assert [c.req for c in clients[:3]] == [10240, 102400, 1048576]
    assert [c.group for c in clients] == list(range(1, 19))
    # host2 is a server and a client: its second GET_DATA is skipped like the original.
    assert [a.host for a in acts if a.kind == "GET_DATA"] == ["host1", "host2", "host3", "host4"]
    assert [a.kind for a in acts].count("PROCESS_EXP") == 1


def test_readme_for_and_if_example() -> None:
    acts = plan(README_FOR)
    assert [(a.host, a.server) for a in acts if a.kind == "DO_CLIENT"] == [
        ("c1", "s1"), ("c2", "s1"), ("c3", "s1")]
    assert acts[-1].kind == "DO_TCPDUMP" and acts[-1].packets == 1000
    clients = [a for a in acts if isinstance(a, DoClient)]
    assert all(a.instances == 2 and a.stats == 1 and a.dur == 30 and a.test == "TCP_RR" for a in clients)
    assert [a.kind for a in acts].count("RAND_WAIT") == 3
    # Nested loops: the inner FOR runs fully per outer value.
    acts = plan(README_FOR.replace("SET servers=s1\n", "SET servers=s1,s2\n"))
    assert [(a.host, a.server) for a in acts if a.kind == "DO_CLIENT"] == [
        ("c1", "s1"), ("c1", "s2"), ("c2", "s1"), ("c2", "s2"), ("c3", "s1"), ("c3", "s2")]


def test_misc_example() -> None:
    acts = plan(MISC)
    kinds = [a.kind for a in acts]
    assert kinds[:4] == ["SET_QDISC", "SET_NETEM", "SET_SYSCTL", "SET_MODULE_PARAMS"]
    udp = [a for a in acts if isinstance(a, DoClient)]
    assert [(u.exp, u.dur, u.rate, u.test) for u in udp] == [
        (1, 2.0, 10_000_000, "UDP_STREAM"), (2, 4.0, 10_000_000, "UDP_STREAM"),
        (3, 6.0, 10_000_000, "UDP_STREAM")]
    assert acts[0].rate == "100mbit"
