"""Nothing guesses: undefined variables, macro parameters (declared or inferred), RUN's checks."""

from __future__ import annotations

import pytest

from netesto.errors import ScriptError
from netesto.script import Interpreter, plan
from netesto.script.actions import Echo
from netesto.script.parser import Macro, parse


def echoes(text: str, **kw: object) -> list[str]:
    return [a.text for a in plan(text, **kw) if isinstance(a, Echo)]


def error_of(text: str, **kw: object) -> ScriptError:
    with pytest.raises(ScriptError) as exc:
        plan(text, file="t.nts", **kw)
    return exc.value


def where(err: ScriptError) -> tuple[str, int, int, str]:
    return err.file, err.line, err.column, err.message


# ----- an undefined $name is an error where it stands


def test_a_typo_is_refused_even_when_a_global_of_another_name_is_set() -> None:
    # The issue: dur1=$xyz was dropped from the RUN and the macro read the global dur.
    lib = "BEGIN two dur1\nDO_CLIENT host=a server=b dur=$dur1\nEND two\n"
    err = error_of(lib + "SET dur=20\nRUN two dur1=$xyz\n")
    assert where(err) == ("t.nts", 5, 14, "undefined variable $xyz")


@pytest.mark.parametrize("line, col, name", [
    ("SET a=x$nope", 8, "$nope"),
    ("DESC two flows of $nope", 19, "$nope"),
    ("ECHO  a $nope", 9, "$nope"),
    ("OTHER bw=$nope", 10, "$nope"),
    ("FOR i IN a,$nope DO\nDONE", 12, "$nope"),
    ("IF $one$nope: ECHO x", 8, "$nope"),
    ("DO_CLIENT host=a server=$nope", 25, "$nope"),
    ("WAIT $nope", 6, "$nope"),
])
def test_every_command_refuses_an_undefined_variable_at_its_column(line: str, col: int, name: str) -> None:
    err = error_of(f"SET one=1\n{line}\n")
    assert where(err) == ("t.nts", 2, col, f"undefined variable {name}")


def test_if_on_a_lone_undefined_variable_is_false_as_in_the_original() -> None:
    assert echoes("IF $flag: ECHO on\nSET flag=1\nIF $flag: ECHO set") == ["set"]


def test_set_keeps_the_value_of_the_moment() -> None:
    assert echoes("SET b=2\nSET a=$b\nSET b=3\nECHO $a $b") == ["2 3"]


# ----- declared parameters


LIB = """\
BEGIN m a b=2 c?=3 d? e=$a$b
ECHO $a $b $c $e
IF_DEF $d: ECHO d=$d
END m
"""


def test_the_four_forms_of_a_declared_parameter() -> None:
    text = LIB + "RUN m a=1\nSET c=30\nSET d=40\nRUN m a=1 b=20\nRUN m a=1 c=300 d=400 e=x\n"
    assert echoes(text) == ["1 2 3 12", "1 20 30 120", "d=40", "1 2 300 x", "d=400"]


def test_a_missing_required_argument_is_named_at_the_run() -> None:
    err = error_of(LIB + "SET a=global\nRUN m b=1\n")  # a global of that name stands in for nothing
    assert where(err) == ("t.nts", 6, 5, "RUN m: missing argument a")
    assert "pass a=..." in err.hint and "BEGIN m at t.nts:1" in err.hint
    two = error_of("BEGIN m x y\nEND m\nRUN m\n")
    assert two.message == "RUN m: missing arguments x, y"


def test_an_unknown_argument_is_refused_with_did_you_mean() -> None:
    err = error_of("BEGIN two client1 client2\nEND two\nRUN two clinet1=h2 client2=h3\n")
    assert where(err) == ("t.nts", 3, 9, "RUN two: unknown argument 'clinet1'")
    assert err.hint == "did you mean client1?"
    err = error_of("BEGIN two client1 client2\nEND two\nRUN two client1=a client2=b zzz=1\n")
    assert err.hint.startswith("two takes client1, client2 (BEGIN two at t.nts:1)")


def test_the_suggestion_prefers_an_argument_the_run_lacks() -> None:
    err = error_of("BEGIN f ca1 ca2\nEND f\nRUN f ca=cubic ca2=bbr\n")
    assert where(err)[1:] == (3, 7, "RUN f: unknown argument 'ca'")
    assert err.hint == "did you mean ca1?"


def test_an_optional_parameter_left_unset_is_named_at_the_run_when_used() -> None:
    err = error_of(LIB.replace("IF_DEF $d: ", "") + "RUN m a=1\n")
    assert where(err) == ("t.nts", 5, 5, "RUN m: missing argument d")
    assert "declares d? and reads it at t.nts:3:8" in err.hint


def test_a_default_reading_an_unset_global_names_the_parameter() -> None:
    err = error_of("BEGIN m n=$instances\nEND m\nRUN m\n")
    assert where(err) == ("t.nts", 3, 5, "RUN m: missing argument n (its default, $instances, is not set)")
    assert echoes("BEGIN m n=$instances\nECHO $n\nEND m\nSET instances=4\nRUN m\nRUN m n=1") == ["4", "1"]


def test_only_a_ca_list_the_run_gives_splits_the_run() -> None:
    text = "BEGIN m ca=cubic,bbr\nECHO $ca\nEND m\nRUN m\nRUN m ca=x,y\n"
    assert echoes(text) == ["cubic,bbr", "x", "y"]


@pytest.mark.parametrize("begin, col, message", [
    ("BEGIN m a a=1", 11, "parameter a declared twice"),
    ("BEGIN m a-b", 9, "bad macro parameter 'a-b'"),
    ("BEGIN m =1", 9, "bad macro parameter '=1'"),
    ("BEGIN m ?", 9, "bad macro parameter '?'"),
])
def test_bad_declarations_are_refused_where_they_stand(begin: str, col: int, message: str) -> None:
    with pytest.raises(ScriptError) as exc:
        parse(f"{begin}\nEND m\n", "lib")
    assert where(exc.value) == ("lib", 1, col, message)


def test_declared_parameters_survive_into_the_next_script_of_a_session() -> None:
    first = Interpreter()
    list(first.run_text("BEGIN m a b=2\nECHO $a$b\nEND m\n"))
    second = Interpreter(state=first.state())
    assert [a.text for a in second.run_text("RUN m a=1\n")] == ["12"]
    with pytest.raises(ScriptError, match="unknown argument 'c'"):
        list(second.run_text("RUN m a=1 c=3\n"))


# ----- parameters inferred from the body


def test_a_macro_that_declares_nothing_takes_the_names_its_body_reads() -> None:
    (macro,) = parse("BEGIN m\nSET_EXP h=dur/2\nIF $x: ECHO $y.$z\nIF_DEF $w: ECHO\nEND m\n")
    assert isinstance(macro, Macro) and macro.params is None
    assert macro.uses == {"dur", "x", "y", "z", "w"}
    err = error_of("BEGIN hook\nSET_SYSCTL host=h1 net.ipv4.tcp_ecn=1\nEND hook\nRUN hook host=h2\n")
    assert where(err) == ("t.nts", 4, 10, "RUN hook: unknown argument 'host'")
    assert "hook never reads $host" in err.hint and "BEGIN hook at t.nts:1" in err.hint


def test_a_variable_an_undeclared_macro_reads_is_asked_for_at_the_run() -> None:
    err = error_of("BEGIN m\nWAIT 1\nWAIT $secs\nEND m\nRUN m\n")
    assert where(err) == ("t.nts", 5, 5, "RUN m: missing argument secs")
    assert err.hint == "m reads $secs at t.nts:3:6: pass secs=... to RUN, or SET secs first"
    assert echoes("BEGIN m\nECHO $secs\nEND m\nSET secs=2\nRUN m\nRUN m secs=3") == ["2", "3"]


def test_the_example_of_the_language_reference_plans_as_it_says() -> None:
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "script-language.md").read_text(encoding="utf-8")
    block = doc.split("## Macro parameters", 1)[1].split("```\n", 2)[1]
    acts = plan(block, file="doc")
    flows = [(a.exp, a.host, a.dur, a.delay, a.instances) for a in acts if a.kind == "DO_CLIENT"]
    assert flows == [(1, "h2", 10.0, 0.0, 2), (1, "h3", 10.0, 0.0, 2), (2, "h2", 10.0, 0.0, 2),
                     (2, "h3", 5.0, 3.0, 2)]
