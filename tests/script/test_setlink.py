"""SET_LINK at plan time: values at times, named shapes, traces; every bad input refused where it stands."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from netesto.errors import ScriptError
from netesto.linkshape import parse_shape, value_at
from netesto.script import plan
from netesto.script.actions import SetLink

FLOWS = "DO_SERVER host=h1 exp=COUNTER start=1\nDO_CLIENT host=h2 server=h1 test=TCP_STREAM dur=4\n"


def steps(script: str) -> list[tuple[float, str, float]]:
    links = [a for a in plan(script + FLOWS) if isinstance(a, SetLink)]
    return [(s.at, s.param, s.value) for a in links for s in a.steps()]


def test_values_at_times_and_shapes_become_steps() -> None:
    assert steps("SET_LINK host=h1 rate=50mbit\nSET_LINK host=h1 at=2 rate=10mbit delay=30ms loss=1%\n") == [
        (0.0, "rate", 50e6), (2.0, "rate", 10e6), (2.0, "delay", 30.0), (2.0, "loss", 1.0)]
    assert steps("SET_LINK host=h1 rate=step(50mbit,10mbit,at=2) buffer=steps(250k,100k@1.5,50k@3)\n") == [
        (0.0, "rate", 50e6), (2.0, "rate", 10e6), (0.0, "buffer", 250e3), (1.5, "buffer", 100e3), (3.0, "buffer", 50e3)]
    ramp = steps("SET_LINK host=h1 delay=ramp(10,30,at=1,to=2,every=250ms)\n")
    assert ramp == [(0.0, "delay", 10.0), (1.25, "delay", 15.0), (1.5, "delay", 20.0), (1.75, "delay", 25.0),
                    (2.0, "delay", 30.0)]
    square = steps("SET_LINK host=h1 loss=square(0,5,period=1,until=2)\n")
    assert square == [(0.0, "loss", 0.0), (0.5, "loss", 5.0), (1.0, "loss", 0.0), (1.5, "loss", 5.0), (2.0, "loss", 0.0)]


def test_the_colon_spelling_is_the_same_shape_and_passes_as_one_define() -> None:
    """A sweep hands a shape to the script as one word (no parentheses or commas): -D rate=step:..."""
    script = "SET_LINK host=h1 rate=$shape\n" + FLOWS
    by_colon = [a for a in plan(script, defines={"shape": "step:50mbit:10mbit:at=2"}) if isinstance(a, SetLink)]
    assert by_colon[0].steps() == parse_shape("rate", "step(50mbit,10mbit,at=2)")
    assert value_at(by_colon[0].steps(), "rate", 2.5) == 10e6


def test_a_trace_names_a_shipped_file_or_the_users(tmp_path) -> None:
    (tmp_path / "mine.trace").write_text("5\n10\n")
    script = tmp_path / "t.nts"
    script.write_text("SET_LINK host=h1 trace=cellular buffer=100pkt delay=20\nSET_LINK host=h2 trace=mine.trace\n"
                      + FLOWS)
    from netesto.script import Interpreter

    links = [a for a in Interpreter().run_file(script) if isinstance(a, SetLink)]
    assert links[0].trace == "cellular" and links[0].trace_file.endswith("netesto/data/traces/cellular.trace")
    assert links[0].buffer == "100pkt" and [s.param for s in links[0].steps()] == ["delay"]
    assert links[1].trace_file == str((tmp_path / "mine.trace").resolve())


def _error(script: str, tmp_path: Path | None = None) -> ScriptError:
    with pytest.raises(ScriptError) as info:
        plan(script + FLOWS)
    return info.value


@pytest.mark.parametrize("line, column, message", [
    ("SET_LINK host=h1 rte=10mbit", 18, "unknown argument 'rte'"),
    ("SET_LINK host=h1", 1, "nothing to set"),
    ("SET_LINK host=h1 rate=1kbit", 18, "rate 1kbit is outside 10kbit..10gbit"),
    ("SET_LINK host=h1 delay=-3", 18, "expected a one-way delay"),
    ("SET_LINK host=h1 loss=120", 18, "loss 120 is outside 0%..100%"),
    ("SET_LINK host=h1 buffer=100", 18, "buffer 100 is outside 3000B"),
    ("SET_LINK host=h1 at=soon rate=10mbit", 18, "bad at: expected a time in seconds"),
    ("SET_LINK host=h1 rate=stpe(50mbit,10mbit,at=2)", 18, "unknown shape 'stpe'; did you mean step or steps?"),
    ("SET_LINK host=h1 rate=step(50mbit,10mbit)", 18, "step: at= is required"),
    ("SET_LINK host=h1 rate=step(50mbit,10mbit,at=2,every=1)", 18, "unknown option every="),
    ("SET_LINK host=h1 rate=ramp(50mbit,10mbit,at=2,to=1)", 18, "to=1 must come after at=2"),
    ("SET_LINK host=h1 rate=ramp(50mbit,10mbit,at=0,to=9,every=0.001)", 18, "finer than 0.01 s"),
    ("SET_LINK host=h1 delay=steps(10,20@3,30@2)", 18, "time goes back to 2 s after 3 s"),
    ("SET_LINK host=h1 at=2 rate=step(50mbit,10mbit,at=3)", 18, "a shape carries its own times"),
    ("SET_LINK host=h1 at=3 rate=10mbit\nSET_LINK host=h1 at=2 rate=20mbit", 18, "time goes back to 2 s after 3 s"),
    ("SET_LINK host=h1 at=2 rate=10mbit\nSET_LINK host=h1 at=2 rate=20mbit", 18, "time repeats 2 s"),
    ("SET_LINK host=h1 rate=step(50mbit,10mbit,at=3)\nSET_LINK host=h1 rate=ramp(5mbit,1mbit,at=1,to=2)", 18,
     "time goes back to 0 s after 3 s"),
    ("SET_LINK host=h1 trace=celular", 18, "trace 'celular' not found"),
    ("SET_LINK host=h1 trace=cellular rate=10mbit", 33, "a trace link has no rate="),
    ("SET_LINK host=h1 trace=cellular jitter=2", 33, "a trace link has no jitter="),
    ("SET_LINK host=h1 trace=cellular at=1", 33, "at= is for values"),
    ("SET_LINK host=h1 rate=10mbit\nSET_LINK host=h1 trace=cellular", 18, "has a rate (from <script>:1)"),
    ("SET_LINK host=h1 trace=cellular\nSET_LINK host=h1 trace=onoff", 18, "already has a trace"),
    ("SET_LINK host=h1 buffer=100pkt", 18, "a queue in packets is for a trace link"),
])
def test_bad_input_is_refused_where_it_stands(line: str, column: int, message: str) -> None:
    err = _error(line + "\n")
    assert message in str(err), str(err)
    assert err.line == line.count("\n") + 1 and err.column == column, err.where


def test_did_you_mean_for_arguments_and_traces() -> None:
    assert "did you mean rate?" in _error("SET_LINK host=h1 rte=10mbit\n").hint
    assert "did you mean cellular?" in str(_error("SET_LINK host=h1 trace=celular\n"))


def test_a_trace_file_that_does_not_parse_is_refused_at_its_line(tmp_path) -> None:
    (tmp_path / "bad.trace").write_text("1\n2\nthree\n")
    script = tmp_path / "t.nts"
    script.write_text("SET_LINK host=h1 trace=bad.trace\n" + FLOWS)
    from netesto.script import Interpreter

    with pytest.raises(ScriptError) as info:
        list(Interpreter().run_file(script))
    assert f"{tmp_path / 'bad.trace'}:3: 'three' is not a timestamp" in str(info.value)
    assert (info.value.file, info.value.line, info.value.column) == (str(script), 1, 18)


def test_a_set_link_that_no_flows_follow_is_an_error_at_its_line() -> None:
    with pytest.raises(ScriptError) as info:
        plan("SET_LINK host=h1 rate=10mbit\nWAIT 1\n")
    assert "no DO_CLIENT follows" in str(info.value) and info.value.line == 1
    # a DO_CLIENT starts the schedule; the next SET_LINK waits for the next flows
    with pytest.raises(ScriptError) as info:
        plan("SET_LINK host=h1 rate=10mbit\n" + FLOWS + "SET_LINK host=h1 rate=20mbit\n")
    assert info.value.line == 4


def test_each_batch_starts_its_own_schedule() -> None:
    """A later SET_LINK's times are its own flows': going 'back' after a DO_CLIENT is fine."""
    script = "SET_LINK host=h1 at=3 rate=10mbit\n" + FLOWS + "SET_LINK host=h1 at=1 rate=20mbit\n" \
             "DO_CLIENT host=h2 server=h1 test=TCP_STREAM dur=2 group=2\n"
    assert [a.at for a in plan(script) if isinstance(a, SetLink)] == [3.0, 1.0]


def test_plan_lines_show_file_line_and_what_was_written(tmp_path) -> None:
    script = tmp_path / "step.nts"
    script.write_text("SET_LINK host=h1 rate=step(50mbit,10mbit,at=2)\nSET_LINK host=h1 at=1 delay=30\n" + FLOWS)
    out = subprocess.run([sys.executable, "-m", "netesto", "plan", str(script)], capture_output=True, text=True,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "step.nts:1  h1  SET_LINK exp=0 rate=step(50mbit,10mbit,at=2)"
    assert lines[1] == "step.nts:2  h1  SET_LINK exp=0 at=1 delay=30"
    js = subprocess.run([sys.executable, "-m", "netesto", "plan", str(script), "--json"], capture_output=True,
                        text=True, cwd=tmp_path)
    first = json.loads(js.stdout)["actions"][0]
    assert first["action"] == "SET_LINK" and first["rate"] == "step(50mbit,10mbit,at=2)"
    assert first["loc"].endswith("step.nts:1")


def test_shapes_pass_a_sweeps_parameter_checks_and_plan_as_each_points_define() -> None:
    """docs/links.md's sweep: -p shape=... values (one word each), typed by the notebook's default, then
    handed to the script as -D shape=...: each point's SET_LINK is its shape."""
    from netesto.sweep.grid import parse_grid
    from netesto.sweep.values import checked

    grid = parse_grid(["shape=step:50mbit:10mbit:at=2,ramp:50mbit:10mbit:at=1:to=3:every=1"])
    default = "step:100mbit:100mbit:at=0"  # the notebook's parameters cell
    script = "SET_LINK host=h1 rate=$shape\n" + FLOWS
    got = []
    for value in grid["shape"]:
        (link,) = [a for a in plan(script, defines={"shape": checked("shape", value, default)})
                   if isinstance(a, SetLink)]
        got.append([(s.at, s.value) for s in link.steps()])
    assert got == [[(0.0, 50e6), (2.0, 10e6)], [(0.0, 50e6), (2.0, 30e6), (3.0, 10e6)]]
