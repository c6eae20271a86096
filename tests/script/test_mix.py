"""One meaning for each list: a comma runs one after another, a + runs together in one experiment."""

from __future__ import annotations

import pytest

from netesto.errors import ScriptError, SweepError
from netesto.script import plan
from netesto.script.actions import DoClient
from netesto.sweep.mix import Mix

SERVER = "DO_SERVER host=h1 exp=COUNTER start=1\n"


def clients(text: str, **kw: object) -> list[DoClient]:
    return [a for a in plan(text, **kw) if isinstance(a, DoClient)]


def test_a_plus_in_ca_puts_each_algorithm_in_the_experiment_as_its_own_group() -> None:
    got = clients(SERVER + "DO_CLIENT host=h2 server=h1 ca=bbr:2+cubic dur=30+20 delay=0+10 instances=3 test=TCP_STREAM")
    assert [(c.ca, c.instances, c.dur, c.delay, c.group, c.exp) for c in got] == [
        ("bbr", 2, 30.0, 0.0, 1, 1), ("cubic", 3, 20.0, 10.0, 2, 1)]
    # one dur for every group; an explicit group numbers them from it
    got = clients(SERVER + "DO_CLIENT host=h2 server=h1 ca=reno+cubic dur=5 group=4 test=TCP_STREAM")
    assert [(c.ca, c.dur, c.group) for c in got] == [("reno", 5.0, 4), ("cubic", 5.0, 5)]


def test_a_comma_on_a_run_line_runs_the_macro_once_per_value_as_the_original_did() -> None:
    text = "SOURCE inlib\nRUN InlibShortWaits\nRUN MServerStream servers=h1 clients=h2 ca=cubic,bbr+cubic dur=2\n"
    got = clients(text)
    assert [(c.exp, c.ca) for c in got] == [(1, "cubic"), (2, "bbr"), (2, "cubic")]  # two experiments, the 2nd a mix
    assert [c.group for c in got if c.exp == 2] == [1, 2]


@pytest.mark.parametrize(("line", "says"), [
    ("ca=bbr,cubic", "flows of several in one experiment are joined with + (ca=bbr+cubic)"),
    ("ca=bbr+cubic dur=1+2+3", "dur=1+2+3 has 3 values for 2 congestion control(s) of ca"),
    ("ca=bbr+cubic delay=x+1", "bad delay"),
    ("ca=bbr+", "bad congestion control ''"),
    ("ca=bbr:0", "bad ca"),
])
def test_a_mix_that_cannot_be_is_refused_where_it_is_written(line: str, says: str) -> None:
    with pytest.raises(ScriptError) as info:
        clients(SERVER + f"DO_CLIENT host=h2 server=h1 {line}")
    assert says in str(info.value) and info.value.line == 2


def test_a_mix_of_the_sweep_notebook_runs_each_group_from_its_own_host() -> None:
    mix = Mix.parse("bbr:2+cubic", dur="3", delay="0+1", flows=1)
    got = clients(mix.script("sweep"), defines=mix.defines())
    assert [(c.host, c.server, c.ca, c.instances, c.dur, c.delay, c.group) for c in got] == [
        ("h2", "h1", "bbr", 2, 3.0, 0.0, 1), ("h3", "h1", "cubic", 1, 3.0, 1.0, 2)]
    for bad, says in (("bbr,cubic", "a comma separates points"), ("bbr+", "no congestion control name")):
        with pytest.raises(SweepError, match=says):
            Mix.parse(bad)
    with pytest.raises(SweepError, match="3 values for 2 group"):
        Mix.parse("bbr+cubic", dur="1+2+3")
