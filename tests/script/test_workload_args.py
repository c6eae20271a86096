"""DO_CLIENT's drawn workloads in the language: what they plan into, and every bad input refused where it stands."""

from __future__ import annotations

from pathlib import Path

import pytest

from netesto.errors import ScriptError
from netesto.script import FileLoader, MemoryLoader, plan
from netesto.script.actions import DoClient
from netesto.workload import SIZE, TIME, parse

HEAD = "DO_CLIENT host=h1 server=h2 dur=2 "


def client(args: str, **kw: object) -> DoClient:
    (a,) = [a for a in plan(HEAD + args, **kw) if isinstance(a, DoClient)]
    return a


def error_of(args: str, **kw: object) -> ScriptError:
    with pytest.raises(ScriptError) as info:
        plan(HEAD + args, file="w.nts", **kw)
    return info.value


def test_a_closed_loop_rr_workload() -> None:
    a = client("test=TCP_RR req=lognormal(mean=10K,sigma=1) reply=exp(20K) gap=exp(mean=5ms) seed=3")
    assert a.req_dist == "lognormal(mean=10240,sigma=1)" and a.reply_dist == "exp(mean=20480)"
    assert a.gap == "exp(mean=5ms)" and not a.open_loop and a.seed == 3
    assert (a.req, a.reply) == (10240, 20480)  # the means, for the columns that show one size
    assert a.req_text == "lognormal(mean=10K,sigma=1)"  # as written, for the plan


def test_an_open_loop_fct_workload() -> None:
    a = client("test=TCP_CRR req=cdf(websearch,scale=0.01) reply=1 load=0.5 bottleneck=30mbit")
    assert a.open_loop and a.load == 0.5 and a.bottleneck == 30_000_000 and a.gap == ""
    assert a.req_dist.startswith("cdf(label=websearch,scale=0.01,points=0:0;10000:0.15;")
    assert a.seed == -1  # the run's: derived by the controller and recorded
    b = client("test=TCP_CRR req=1K arrivals=exp(mean=2ms)")
    assert b.open_loop and b.gap == "exp(mean=2ms)" and b.req_dist == ""


def test_constant_sizes_and_gaps_keep_the_fast_path() -> None:
    a = client("test=TCP_RR req=10K reply=const(1K)")
    assert not a.workload and (a.req, a.reply) == (10240, 1024)
    assert not client("test=TCP_RR req=1K gap=0").workload


def test_a_user_cdf_file_next_to_the_script(tmp_path: Path) -> None:
    (tmp_path / "sizes.cdf").write_text("# mine\n100 0\n1K 0.9\n64K 1\n")
    script = tmp_path / "w.nts"
    script.write_text(HEAD + "test=TCP_CRR req=cdf(file=sizes.cdf) load=0.3 bottleneck=10mbit\n")
    (a,) = [a for a in plan(script.read_text(), file=str(script), loader=FileLoader()) if isinstance(a, DoClient)]
    d = parse(a.req_dist, SIZE)
    assert d.points == ((100, 0), (1024, 0.9), (65536, 1.0)) and d.label == "sizes.cdf"


@pytest.mark.parametrize("args, col_of, message, hint", [
    ("test=TCP_RR req=lognormal", "req=", "DO_CLIENT: bad req: lognormal needs its parameters", "lognormal(mean="),
    ("test=TCP_RR req=lognormal(mean=1K)", "req=", "lognormal needs sigma=", "e.g. lognormal"),
    ("test=TCP_RR reply=lognorm(mean=1K,sigma=1)", "reply=", "unknown distribution 'lognorm'", "did you mean lognormal"),
    ("test=TCP_RR gap=exponentail(5ms)", "gap=", "unknown distribution", "did you mean exponential"),
    ("test=TCP_RR req=exp:10K", "req=", "written name(value)", "did you mean exp(10K)?"),
    ("test=TCP_CRR req=cdf(websearc) load=0.5", "req=", "no packaged CDF named 'websearc'", "did you mean websearch"),
    ("test=TCP_CRR req=cdf(file=nope.cdf) load=0.5", "req=", "file 'nope.cdf' not found", ""),
    ("test=TCP_CRR req=1K load=1.5", "load=", "a load is a share of the bottleneck in (0, 1], got '1.5'", ""),
    ("test=TCP_CRR req=1K load=0", "load=", "in (0, 1], got '0'", ""),
    ("test=TCP_CRR req=1K load=-0.2", "load=", "in (0, 1]", ""),
    ("test=TCP_CRR req=exp(1K) seed=1.5", "seed=", "bad seed: expected a whole number", ""),
    ("test=TCP_CRR req=exp(1K) seed=x", "seed=", "bad seed: expected a whole number", ""),
    ("test=TCP_RR seed=2", "seed=", "draws none", "req=exp(mean=10K) seed=1"),
    ("test=TCP_RR req=exp(1K) load=0.5", "load=", "open-loop arrivals) is for test=TCP_CRR", "a connection of its own"),
    ("test=TCP_STREAM req=exp(1K)", "req=", "draws sizes: for test=TCP_RR or TCP_CRR", ""),
    ("test=UDP_RR reply=exp(1K)", "reply=", "draws sizes", ""),
    ("test=TCP_CRR req=1K gap=1ms load=0.5", "gap=", "gap= is the closed loop's pause", "give one of them"),
    ("test=TCP_CRR req=1K arrivals=exp(1ms) load=0.5", "load=", "arrivals= or load=, not both", ""),
    ("test=TCP_CRR req=1K arrivals=0", "arrivals=", "mean above 0", ""),
    ("test=TCP_CRR req=1K bottleneck=10mbit", "bottleneck=", "the rate load= is a share of", ""),
    ("test=TCP_RR req=exp(1K) driver=netperf", "driver=", "need driver=builtin", ""),
])
def test_bad_workload_arguments_are_refused_at_their_column(args: str, col_of: str, message: str,
                                                             hint: str) -> None:
    err = error_of(args)
    line = HEAD + args
    assert (err.file, err.line, err.column) == ("w.nts", 1, line.index(col_of) + 1), err.format_message()
    assert message in err.message
    assert hint in err.hint


def test_a_cdf_file_that_is_not_one_is_refused_naming_its_line() -> None:
    files = {"bad.cdf": "0 0\n10K 0.6\n5K 1\n", "pct.cdf": "0 0\n10K 50\n20K 100\n", "empty.cdf": "# none\n"}
    for name, message in (("bad.cdf", "bad.cdf:3: value 5120 after 10240"),
                          ("pct.cdf", "percentages?"), ("empty.cdf", "no points")):
        err = error_of(f"test=TCP_CRR req=cdf(file={name}) load=0.5", loader=MemoryLoader(files))
        assert message in err.message and err.column == len(HEAD) + len("test=TCP_CRR ") + 1


def test_a_missing_cdf_file_suggests_the_near_one() -> None:
    err = error_of("test=TCP_CRR req=cdf(file=sizez.cdf) load=0.5", loader=MemoryLoader({"sizes.cdf": "0 0\n1 1\n"}))
    assert "not found" in err.message and "did you mean sizes.cdf" in err.hint


def test_the_plan_shows_the_workload() -> None:
    from netesto.commands.plan import format_action

    a = client("test=TCP_RR req=exp(mean=2K) gap=exp(mean=1ms) seed=9")
    line = format_action(a)
    assert "req=exp(mean=2K)" in line and "gap=exp(mean=1ms)" in line and "seed=9" in line
    assert parse(a.gap, TIME).mean == pytest.approx(0.001)
