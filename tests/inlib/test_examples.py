"""Every example script (the paper's and the README's) plans to the right actions."""

from __future__ import annotations

import pytest

from netesto.script import estimate_seconds

from netesto.script.actions import DoTcpdump

from .planning import EXAMPLES, experiments, plan

K, M = 1024, 1024 * 1024
ALL = sorted(p.name for p in EXAMPLES.glob("*.nts"))


def example(name: str):
    path = EXAMPLES / name
    return plan(path.read_text(encoding="utf-8"), file=str(path))


def test_there_are_examples():
    assert len(ALL) >= 12


@pytest.mark.parametrize("name", ALL)
def test_every_example_plans(name):
    actions = example(name)
    exps = experiments(actions)  # each experiment closed by its own PROCESS_EXP
    assert exps and all(e.clients for e in exps)
    assert len({e.number for e in exps}) == len(exps)


def test_two_flow_bbr_sample():
    (exp,) = experiments(example("two_flow_bbr.nts"))
    assert exp.name == "1s2c1fs"
    flows = [(c.host, c.server, c.ca, c.test, c.dur, c.delay) for c in exp.clients]
    # "the 2nd flow starts 23 seconds after the 1st one and only lasts 20 seconds"
    assert flows == [
        ("host2.mynetwork.com", "host1.mynetwork.com", "bbr", "TCP_STREAM", 60.0, 0.0),
        ("host3.mynetwork.com", "host1.mynetwork.com", "bbr", "TCP_STREAM", 20.0, 23.0)]
    assert [s.host for s in exp.starts] == ["host1.mynetwork.com"]
    assert sorted(exp.fetched) == sorted(["host1.mynetwork.com", "host2.mynetwork.com",
                                          "host3.mynetwork.com"])
    assert exp.waits == [60.0, 10.0, 5.0, 10.0, 15.0]


def test_paper_mserver_rr_example():
    (exp,) = experiments(example("mserver_rr.nts"))
    assert exp.name == "2s3c3fr"
    short = [(c.host.split(".")[0], c.server.split(".")[0], c.req) for c in exp.clients]
    assert short == [(c, s, r) for c in ("host2", "host3", "host4") for s in ("host1", "host2")
                     for r in (10 * K, 100 * K, M)]
    assert [c.group for c in exp.clients] == list(range(1, 19))
    assert {(c.ca, c.dur, c.reply, c.test) for c in exp.clients} == {("cubic", 60.0, 1, "TCP_RR")}
    # host2 is a server and a client: fetched once
    assert [h.split(".")[0] for h in exp.fetched] == ["host1", "host2", "host3", "host4"]


def test_library_examples():
    exps = experiments(example("library_examples.nts"))
    assert [e.name for e in exps] == ["1s1c1fr", "1s2c1fr", "1s2c1fr", "1s2c1fs", "1s2c1fs",
                                      "1s2c4frv"]
    assert [{c.ca for c in e.clients} for e in exps] == [
        {"cubic"}, {"cubic"}, {"bbr"}, {"cubic"}, {"bbr"}, {"cubic", "bbr"}]
    rr = exps[1]
    assert [(c.server.split(".")[0], c.req, c.reply) for c in rr.clients] == [
        ("host1", 10 * K, 100), ("host1", M, 100), ("host2", 10 * K, 100), ("host2", M, 100)]
    vs = exps[5]
    assert [(c.host.split(".")[0], c.ca, c.instances) for c in vs.clients] == [
        ("host2", "cubic", 4), ("host3", "bbr", 4)]


def test_readme_scripts():
    (one,) = experiments(example("readme_one_flow.nts"))
    (c,) = one.clients
    assert (c.host, c.server, c.req, c.reply, c.ca, c.dur) == (
        "hostname1.dc1.mynetwork.com", "hostname2.dc1.mynetwork.com", M, 1, "cubic", 60.0)
    sizes, stream, four, square = experiments(example("readme_variants.nts"))
    assert [c.req for c in sizes.clients] == [M, 100 * K, 10 * K, K]
    assert [c.test for c in stream.clients] == ["TCP_STREAM"]
    assert [c.instances for c in four.clients] == [4]
    assert [(c.host[:9], c.server[:9]) for c in square.clients] == [
        ("hostname1", "hostname3"), ("hostname1", "hostname4"),
        ("hostname2", "hostname3"), ("hostname2", "hostname4")]


def test_readme_one_flow_macro_uses_experiment_100():
    actions = example("readme_one_flow_macro.nts")
    (exp,) = experiments(actions)
    assert exp.number == 100 and exp.name == "1flhr"
    assert {a.exp for a in actions if hasattr(a, "exp")} == {100}
    (c,) = exp.clients
    assert (c.host, c.server, c.test, c.req) == (
        "kerneltest002.dc1.mynetwork.com", "kerneltest001.dc1.mynetwork.com", "TCP_RR", M)


def test_readme_rate_test_rate3p():
    exps = experiments(example("rate_test.nts"))
    assert [(e.name, {c.instances for c in e.clients}) for e in exps] == [
        ("1s3c01.pfr", {1}), ("1s3c02.pfr", {2}), ("1s3c04.pfr", {4}),
        ("1s3c08.pfr", {8}), ("1s3c08.pfr", {8}), ("1s3c16.pfr", {16}), ("1s3c16.pfr", {16}),
        ("1s3c32.pfr", {32}), ("1s3c32.pfr", {32})]
    for e in exps:
        assert [(c.host.split(".")[0], c.req) for c in e.clients] == [
            (h, r) for h in ("hostname1", "hostname2", "hostname3") for r in (M, 10 * K)]
        assert {c.server for c in e.clients} == {"hostname4.dc1.mynetwork.com"}


def test_for_loop_example():
    (exp,) = experiments(example("for_loop.nts"))
    assert [(c.host[:5], c.server[:5]) for c in exp.clients] == [
        ("host3", "host1"), ("host3", "host2"), ("host4", "host1"), ("host4", "host2")]
    assert [s.exp for s in exp.starts] == [exp.number, exp.number]


def test_if_example_runs_only_the_enabled_test():
    actions = example("if_flags.nts")
    (exp,) = experiments(actions)
    assert exp.name == "1h1fr" and [c.test for c in exp.clients] == ["TCP_RR"]
    assert [(a.host[:5], a.settings[0][0]) for a in actions if a.kind == "SET_SYSCTL"] == [
        ("host1", "net.ipv4.tcp_rmem"), ("host2", "net.ipv4.tcp_wmem")]
    assert not [a for a in actions if a.kind == "ECHO"]


def test_other_features_example():
    actions = example("other_features.nts")
    assert [a.kind for a in actions[:4]] == ["SET_NETEM", "SET_QDISC", "SET_SYSCTL", "DO_SERVER"]
    assert [(a.host[:5], a.server[:5]) for a in actions if isinstance(a, DoTcpdump)] == [
        ("host1", "host1"), ("host2", "host1")]
    assert actions[-1].kind == "SET_NETEM" and actions[-1].delay == 0
    (exp,) = experiments(actions)
    assert [a.other for a in exp.actions if a.kind == "PROCESS_EXP"] == [
        (("netem", "10"), ("bw", "100mbit"))]


def test_vs_and_ca_examples():
    assert len(experiments(example("vs_test.nts"))) == 16
    ca = experiments(example("ca_test.nts"))
    assert len(ca) == 2 + 2 * 3 * 2  # baseline pair, then 3 pairs per tested ca


def test_testbed_example_is_short():
    actions = example("testbed_two_flow.nts")
    (exp,) = experiments(actions)
    assert [c.host for c in exp.clients] == ["h2", "h3"]
    assert estimate_seconds(actions) < 5


def test_netesto_plan_cli_on_an_example_with_short_waits(tmp_path):
    import json
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "netesto", "plan", str(EXAMPLES / "two_flow_bbr.nts"), "--json",
         "-D", "settleWait=0", "-D", "statsWait=0", "-D", "dataWait=0", "-D", "expWait=0"],
        capture_output=True, text=True, cwd=tmp_path, timeout=60, check=True)
    doc = json.loads(out.stdout)
    waits = [a["seconds"] for a in doc["actions"] if a["action"] == "WAIT"]
    assert waits == [60.0, 0.0, 0.0, 0.0, 0.0]
    assert doc["estimate_s"] == pytest.approx(60.05)
