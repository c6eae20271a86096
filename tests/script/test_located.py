"""The located argument view: a command's arguments, each with where it stands."""

from __future__ import annotations

import pytest

from netesto.errors import ScriptError
from netesto.script import validate as V
from netesto.script.evaluator import Evaluator
from netesto.script.frame import Frame
from netesto.script.located import Args, Site
from netesto.script.parser import Command, parse

TOP = Frame(None, (), None)


def command(text: str) -> Command:
    (node,) = parse(text, "t.nts")
    assert isinstance(node, Command)
    return node


def args(text: str, allowed: tuple[str, ...] | None = None, ev: Evaluator | None = None,
         frame: Frame = TOP) -> Args:
    return Args(ev or Evaluator({}), command(text), frame, allowed)


def test_keys_values_and_columns_in_the_order_written() -> None:
    a = args("DO_CLIENT host=c exp_name=x dur=5", ("host", "expName", "dur"))
    assert [(k, raw, tok.col) for k, raw, tok in a] == [("host", "c", 11), ("expName", "x", 18), ("dur", "5", 29)]
    assert "expName" in a and a.raw("dur") == "5" and a.col("dur") == 29 and a.col("nope") == 1


@pytest.mark.parametrize("text, allowed, col, message, hint", [
    ("DO_SERVER host", None, 11, "DO_SERVER: expected key=value, got 'host'", "key=value words"),
    ("DO_SERVER hots=a", ("host",), 11, "DO_SERVER: unknown argument 'hots'", "host"),
    ("DO_SERVER host=a host=b", ("host",), 18, "DO_SERVER: host given twice", "column 11"),
])
def test_bad_words_point_at_themselves(text: str, allowed: tuple[str, ...] | None, col: int,
                                       message: str, hint: str) -> None:
    with pytest.raises(ScriptError) as err:
        args(text, allowed)
    assert (err.value.file, err.value.line, err.value.column) == ("t.nts", 1, col)
    assert err.value.message == message and hint in err.value.hint


def test_values_are_converted_checked_and_cached() -> None:
    ev = Evaluator({})
    a = args("DO_CLIENT dur=5", ev=ev)
    assert a.get("dur", "20", V.to_float) == 5.0 and a.get("reply", "1M", V.to_size) == 2**20
    assert ev.value_cache[("DO_CLIENT", "dur", "5")] == 5.0
    with pytest.raises(ScriptError) as err:
        args("DO_CLIENT dur=soon", ev=ev).get("dur", "20", V.to_float)
    assert err.value.message == "DO_CLIENT: bad dur: expected a number, got 'soon'"
    assert err.value.column == 11


def test_variables_are_expanded_and_undefined_ones_refused_where_they_stand() -> None:
    ev = Evaluator({"d": "7"})
    assert args("DO_CLIENT dur=$d", ev=ev).get("dur", "20", V.to_float) == 7.0
    with pytest.raises(ScriptError) as err:
        args("DO_CLIENT host=h dur=$nope", ev=ev).get("dur", "20", V.to_float)
    assert err.value.message == "undefined variable $nope" and err.value.column == 22  # at the $


def test_errors_inside_a_macro_carry_the_run_chain() -> None:
    frame = Frame({}, ("RUN outer at a.nts:3", "RUN inner at b.nts:9"), None)
    site = Site(Evaluator({}), command("WAIT x"), frame)
    with pytest.raises(ScriptError) as err:
        site.convert("seconds", "x", 6, V.to_float)
    assert err.value.message == "WAIT: bad seconds: expected a number, got 'x'"
    assert "called from RUN inner at b.nts:9 <- RUN outer at a.nts:3" in err.value.hint
    assert site.loc.stack == frame.stack and (site.loc.line, site.loc.column) == (1, 1)
