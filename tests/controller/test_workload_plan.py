"""A drawn workload's DO_CLIENT on a lab: its seed, its Poisson arrivals from the bottleneck's rate, its streams;
load= with no rate to take a share of is refused before anything runs, at the script's line."""

from __future__ import annotations

import pytest

from netesto.controller import Lab, run
from netesto.controller.plan import check_actions
from netesto.controller.schedule import expand_do_client
from netesto.errors import ScriptError
from netesto.script import plan
from netesto.script.actions import DoClient
from netesto.workload import SIZE, TIME, parse, seed_of

HOSTS = {"h1": {"control": "127.0.0.1", "port": 1}, "h2": {"control": "127.0.0.2", "port": 1}}


def lab(**testbed: object) -> Lab:
    return Lab.from_dict({"lab": {"name": "t", "insecure": True}, "hosts": HOSTS,
                          **({"testbed": testbed} if testbed else {})})


def do_client(args: str) -> DoClient:
    (a,) = [a for a in plan("DO_CLIENT host=h1 server=h2 dur=2 " + args, file="w.nts") if isinstance(a, DoClient)]
    return a


def test_the_load_of_the_testbeds_bottleneck_becomes_poisson_arrivals_per_instance() -> None:
    a = do_client("test=TCP_CRR req=cdf(websearch,scale=0.01) reply=1 load=0.5 instances=2")
    specs = expand_do_client(a, client="h1", server="h2", server_address="10.0.0.2", port=1, run_seed=11,
                             link_bps=30_000_000)
    mean = parse(a.req_dist, SIZE).mean
    for i, s in enumerate(specs):
        assert s.open_loop and s.stream == i and s.link_bps == 30_000_000 and s.load == 0.5
        assert s.seed == seed_of(11, a.exp, a.group)  # no seed=: the run's, recorded in each spec
        # both instances together: 0.5 x 30 Mbit/s of transactions of the CDF's mean size
        assert 2 / parse(s.gap, TIME).mean * mean * 8 == pytest.approx(0.5 * 30e6, rel=1e-6)
    mine = do_client("test=TCP_CRR req=1K load=0.2 bottleneck=10mbit seed=4")
    (s,) = expand_do_client(mine, client="h1", server="h2", server_address="x", port=1, link_bps=30_000_000)
    assert s.link_bps == 10_000_000 and s.seed == 4  # bottleneck= wins over the testbed's
    assert 1 / parse(s.gap, TIME).mean * 1024 * 8 == pytest.approx(0.2 * 10e6, rel=1e-6)


def test_a_load_with_no_rate_is_refused_at_its_line() -> None:
    actions = plan("SET x=1\nDO_CLIENT host=h1 server=h2 test=TCP_CRR req=1K load=0.5 dur=1\n", file="w.nts")
    with pytest.raises(ScriptError) as info:
        check_actions(actions, lab())
    err = info.value
    assert (err.file, err.line) == ("w.nts", 2) and "needs the bottleneck's rate" in err.message
    assert "bottleneck=" in err.hint
    check_actions(actions, lab(bw=10_000_000, rtt=10.0))  # a testbed's rate will do
    check_actions(plan("DO_CLIENT host=h1 server=h2 test=TCP_CRR req=1K load=0.5 bottleneck=1mbit"), lab())


def test_run_refuses_it_before_touching_any_host(tmp_path) -> None:
    """Nothing is contacted (the lab's agents do not exist): the refusal comes first, with no experiment made."""
    with pytest.raises(ScriptError, match="needs the bottleneck's rate"):
        run("DO_SERVER host=h2 exp=COUNTER start=1\nDO_CLIENT host=h1 server=h2 test=TCP_CRR req=1K load=0.5 dur=1",
            lab=lab(), workdir=tmp_path / "w")
    assert not any((tmp_path / "w").glob("*/experiment.json"))


def test_constant_flows_stay_as_they_were() -> None:
    (s,) = expand_do_client(do_client("test=TCP_RR req=1K reply=2K"), client="h1", server="h2", server_address="x",
                            port=1, run_seed=3, link_bps=1)
    assert not s.workload and (s.req_dist, s.seed, s.link_bps, s.stream) == ("", 0, 0, 0)
