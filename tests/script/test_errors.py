"""Error reporting (where, what, did-you-mean, RUN chain) and the caps that prevent hangs."""

from __future__ import annotations

import pytest

import netesto.script
from netesto.errors import ScriptError, UsageError
from netesto.script import Interpreter, MemoryLoader, plan


def error_of(text: str, **kw: object) -> ScriptError:
    with pytest.raises(ScriptError) as exc:
        plan(text, **kw)
    return exc.value


def test_error_inside_macro_names_the_run_chain() -> None:
    # inner declares x: $nope is not a parameter it lacks but a global nobody SET.
    lib = "BEGIN outer\nRUN inner x=$y\nEND outer\nBEGIN inner x\n  DO_CLIENT host=a server=b ca=$x dur=$nope\nEND inner\n"
    err = error_of("SOURCE lib\nSET y=cubic\nRUN outer", loader=MemoryLoader({"lib": lib}), file="main.nts")
    assert (err.file, err.line, err.column) == ("lib", 5, 39)  # at $nope
    assert err.message == "undefined variable $nope"
    assert "called from RUN inner at lib:2 <- RUN outer at main.nts:3" in err.hint
    text = err.format_message()
    assert text.splitlines()[0] == "lib:5:39: error: undefined variable $nope"
    assert text.splitlines()[2].index("^") == 4 + 38


@pytest.mark.parametrize(
    "text, message, hint",
    [
        ("SETT a=1", "unknown command 'SETT'", "did you mean SET"),
        ("set a=1", "unknown command 'set'", "did you mean SET"),
        ("DO CLIENT host=a", "unknown command 'DO'", "did you mean DO_CLIENT (with an underscore)?"),
        ("PROCESS EXP", "unknown command 'PROCESS'", "PROCESS_EXP"),
        ("RAND WAIT 1", "unknown command 'RAND'", "RAND_WAIT"),
        ("BEGIN MServerRR\nEND MServerRR\nRUN MserverRR", "unknown macro 'MserverRR'", "did you mean MServerRR?"),
        ("BEGIN TwoFlowBaseStream\nEND TwoFlowBaseStream\nRUN twoFlowBaseStream,1",
         "unknown macro 'twoFlowBaseStream'", "did you mean TwoFlowBaseStream?"),
        ("BEGIN a\nEND a\nRUN OneFlowRR", "unknown macro 'OneFlowRR'", "defined macros: a"),
        ("DO_SERVER host=a ordr=1", "unknown argument 'ordr'", "did you mean order?"),
        ("DO_CLIENT host=a server=b expname=x instance=2", "unknown argument 'instance'", "instances"),
        ("DO_CLIENT host=a server=b test=TCP_RRR", "unknown test", "TCP_RR"),
        ("SET ca=cubic\nDO_CLIENT host=a server=b ca=$caa", "undefined variable $caa", "did you mean ca?"),
    ],
)
def test_did_you_mean(text: str, message: str, hint: str) -> None:
    err = error_of(text)
    assert message in err.message
    assert hint in err.hint, err.format_message()


def test_caps(monkeypatch: pytest.MonkeyPatch) -> None:
    def run(text: str, **kw: object) -> ScriptError:
        with pytest.raises(ScriptError) as exc:
            list(Interpreter(**kw).run_text(text))  # type: ignore[arg-type]
        return exc.value

    assert "1000 FOR iterations in total" in run(
        "FOR i IN 1..50 DO\nFOR j IN 1..50 DO\nDONE\nDONE", max_loops=1000).message
    assert "1000 FOR iterations in total" in run(
        "FOR i IN 1..50 DO\nFOR j IN a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q,r,s,t,u DO\nDONE\nDONE",
        max_loops=1000).message
    assert "more than 100 actions" in run("FOR i IN 1..500 DO\nWAIT 1\nDONE", max_actions=100).message
    assert "more than 1000 commands" in run(
        "BEGIN m\nEND m\nFOR i IN 1..100 DO\nRUN m,100\nDONE", max_steps=1000).message
    assert "nested more than 8 deep" in run("BEGIN r\nRUN r\nEND r\nRUN r", max_depth=8).message
    assert "expansion exceeds 1000" in run(
        "SET a=xxxxxxxxxx\nSET b=$a$a$a$a$a$a$a$a$a$a\nSET c=$b$b$b$b$b$b$b$b$b$b\nECHO $c",
        max_expansion=1000).message
    err = run("BEGIN r\nRUN r\nEND r\nRUN r", max_depth=20)
    assert "more ..." in err.hint  # a long RUN chain is shortened


def test_end_stops_only_the_current_text() -> None:
    interp = Interpreter()
    assert [a.text for a in interp.run_text("ECHO a\nEND\nECHO b")] == ["a"]
    assert [a.text for a in interp.run_text("ECHO c")] == ["c"]


def test_public_api() -> None:
    assert netesto.script.__all__ == sorted(netesto.script.__all__)
    for name in ("Interpreter", "plan", "FileLoader", "MemoryLoader", "FileCounter",
                 "MemoryCounter", "estimate_seconds", "parse_defines"):
        assert name in netesto.script.__all__
        assert hasattr(netesto.script, name)
    import doctest

    from netesto.script import lexer, store

    for module in (netesto.script, lexer, store):
        failed, tried = doctest.testmod(module)
        assert failed == 0 and tried > 0, module.__name__
    with pytest.raises(UsageError, match="'novalue': expected VAR=VALUE"):
        netesto.script.parse_defines(["a=1", "novalue"])


@pytest.mark.parametrize(
    "text, lines",
    [
        ("SET a=1\nDO_CLIENT host=c server=s instances",
         ["m.nts:2:27: error: DO_CLIENT: expected key=value, got 'instances'",
          "    DO_CLIENT host=c server=s instances",
          "                              ^",
          "    arguments are key=value words without spaces"]),
        ("FOR x IN a,b\nDONE",
         ["m.nts:1:1: error: malformed FOR", "    FOR x IN a,b", "    ^",
          "    expected: FOR var IN a,b,c DO  or  FOR var IN 1..10[,step] DO"]),
        ("  SETT a=1",
         ["m.nts:1:3: error: unknown command 'SETT'", "      SETT a=1", "      ^",
          "    did you mean SET or SET_NETEM?"]),
    ],
)
def test_message_has_where_the_line_a_caret_and_what_was_expected(text: str, lines: list[str]) -> None:
    assert error_of(text, file="m.nts").format_message().splitlines() == lines


@pytest.mark.parametrize("text, col", [
    ("DO_SERVER host=a exp=99999999999999999999999", 18),
    ("DO_SERVER host=a exp=2147483648", 18),
    ("SET e=1e30\nDO_SERVER host=a exp=$e", 18),
])
def test_an_experiment_number_the_wire_cannot_carry_is_a_script_error(text: str, col: int) -> None:
    # The original's exp is a 32-bit integer; a bigger one used to pass the plan and
    # then fail in the run with "cannot encode Request" naming neither file nor host.
    err = error_of(text, file="m.nts")
    assert err.column == col and "above the maximum 2147483647" in err.message, err.format_message()
    assert plan("DO_SERVER host=a exp=2147483647")[0].exp == 2**31 - 1


def test_a_counter_past_the_largest_experiment_number_is_a_script_error() -> None:
    err = error_of("DO_SERVER host=a\n", file="m.nts", counter=netesto.script.MemoryCounter(2**31 - 1))
    assert (err.line, err.column) == (1, 1) and "experiment number 2147483648" in err.message


def test_too_many_nested_fors_is_an_error_at_the_for() -> None:
    text = "".join(f"FOR v{i} IN 1 DO\n" for i in range(101)) + "ECHO deep\n" + "DONE\n" * 101
    err = error_of(text, file="deep.nts")
    assert (err.file, err.line, err.column) == ("deep.nts", 101, 1)
    assert "nested more than 100 deep" in err.message
    ok = "".join(f"FOR v{i} IN 1 DO\n" for i in range(100)) + "ECHO deep\n" + "DONE\n" * 100
    assert [a.text for a in plan(ok)] == ["deep"]


def test_python_recursion_limit_is_reported_where_the_script_was() -> None:
    # Nesting allowed by each cap (RUN depth, FOR depth) can still multiply past
    # Python's recursion limit; that used to be "<script>:0:0: script nests too deeply".
    macros = "".join(
        f"BEGIN m{i}\n" + "FOR v IN 1 DO\n" * 40 + f"RUN m{i + 1}\n" + "DONE\n" * 40 + f"END m{i}\n"
        for i in range(60))
    err = error_of(macros + "BEGIN m60\nECHO bottom\nEND m60\nRUN m0\n", file="deep.nts")
    assert err.file == "deep.nts" and err.line > 1 and "nests too deeply" in err.message
    assert "called from RUN" in err.hint


@pytest.mark.parametrize("name", ["m,2", "$m", "a$b"])
def test_a_macro_name_that_run_cannot_call_is_refused_at_begin(name: str) -> None:
    # RUN splits "name,reps" and substitutes $variables, so such a macro could be
    # defined but never run ("RUN m,2" looked for m and said "defined macros: m,2").
    err = error_of(f"BEGIN {name}\nECHO hi\nEND {name}\nRUN {name}\n", file="m.nts")
    assert (err.line, err.column) == (1, 7) and "bad macro name" in err.message
    assert [a.text for a in plan("BEGIN my-macro.2\nECHO hi\nEND my-macro.2\nRUN my-macro.2,2")] == ["hi", "hi"]


@pytest.mark.parametrize("var", ["ä", "x²", "a-b"])
def test_a_for_variable_that_dollar_cannot_name_is_refused(var: str) -> None:
    # $name is ASCII letters, digits and _; "FOR ä IN 1,2 DO" used to loop with a
    # variable no $ could reach (ECHO $ä printed "$ä").
    err = error_of(f"FOR {var} IN 1,2 DO\nECHO $x\nDONE\n", file="m.nts")
    assert (err.line, err.column) == (1, 5) and f"bad FOR variable name {var!r}" in err.message


@pytest.mark.parametrize("items", ["1..1000000000000000000000000000000000000000", "1..5," + "9" * 5000])
def test_a_long_range_is_still_a_range(items: str) -> None:
    # A range text of 40+ characters used to be taken as one list item (one
    # iteration with x = "1..1000...") instead of a range over the cap.
    err = error_of(f"FOR x IN {items} DO\nECHO $x\nDONE\n", file="m.nts")
    assert (err.line, err.column) == (1, 10) and "FOR range" in err.message


@pytest.mark.parametrize("text, line", [
    ("DO_CLIENT host=h2 server=h1 group=1\nDO_CLIENT host=h2 server=h1 test=TCP_STREAM", 2),
    ("DO_CLIENT host=h2 server=h1 exp=1\nPROCESS_EXP\nWAIT 1\nDO_CLIENT host=h2 server=h1", 4),
    ("DO_CLIENT host=h2 server=h1 instances=3 group=2\nDO_CLIENT host=h2 server=h1 group=2", 2),
])
def test_two_do_clients_with_the_same_flow_ids_are_an_error(text: str, line: int) -> None:
    # Flow ids are <client>-<server>-<group>-<instance>: a second DO_CLIENT with the
    # same pair and group in one experiment replaced the first one's flows (one ran,
    # experiment.json listed both, the data of one was lost).
    err = error_of(text, file="m.nts")
    assert (err.line, err.column) == (line, 1)
    assert "flows h2-h1-" in err.message and "m.nts:1" in err.message and "group=" in err.hint
    fine = plan("DO_CLIENT host=h2 server=h1\nDO_CLIENT host=h2 server=h1\nDO_CLIENT host=h3 server=h1 group=1\n"
                "DO_CLIENT host=h2 server=h1 exp=COUNTER")
    assert [(a.exp, a.group) for a in fine] == [(1, 1), (1, 2), (1, 1), (2, 1)]


def test_set_netem_with_both_spellings_of_the_delay_is_an_error() -> None:
    # netem_delay=10 delay=20 used to apply 10 ms and drop the 20 without a word.
    err = error_of("SET_NETEM host=h1 netem_delay=10 delay=20", file="m.nts")
    assert (err.line, err.column) == (1, 34) and "netem_delay= or delay=, not both" in err.message


@pytest.mark.parametrize("text, col", [
    ("DO_CLIENT host=h1 server=h2 dur=5 dur=7", 35),
    ("DO_SERVER host=h1 order=0 host=h2", 27),
    ("SET_SYSCTL host=h1 net.ipv4.tcp_ecn=1 net.ipv4.tcp_ecn=2", 39),
    ("DO_CLIENT host=h1 server=h2 expName=a exp_name=b", 39),  # one argument, two spellings
    ("BEGIN m\nECHO $x\nEND m\nRUN m x=1 x=2", 11),
])
def test_an_argument_given_twice_is_an_error(text: str, col: int) -> None:
    # The last one used to win silently (dur=5 dur=7 ran 7 s), hiding a typo or a
    # copy-paste slip; which value was meant is not knowable.
    err = error_of(text, file="m.nts")
    assert err.column == col and "given twice" in err.message, err.format_message()


@pytest.mark.parametrize("text, col", [("NEXT_COUNTER 5", 14), ("DEBUG_DISABLE now", 15), ("DEBUG_RESTORE x=1", 15)])
def test_commands_without_arguments_refuse_them(text: str, col: int) -> None:
    # "NEXT_COUNTER 5" (meaning "set it to 5"?) was accepted and the 5 ignored.
    err = error_of(text, file="m.nts")
    assert err.column == col and "takes no arguments" in err.message


def test_a_script_over_the_size_limit_is_refused_at_once() -> None:
    # 1.57 M SET lines took 1.4 GB and 34 s with no output; a 50 MB qdisc name 2.3 GB.
    from netesto.script.parser import MAX_SCRIPT_CHARS

    text = "SET_QDISC host=h1 qdisc=" + "x" * MAX_SCRIPT_CHARS + "\n"
    with pytest.raises(ScriptError, match=r"MiB: more than the 4 MiB a script may be") as info:
        plan(text)
    assert len(info.value.format_message()) < 300


@pytest.mark.parametrize("line, message", [
    ("DO_CLIENT host=a server=b dur=604800", r"dur.*86400"),
    ("SET_QDISC host=a qdisc=bfifo other=mpu,$(x)", r"not a tc word"),
])
def test_the_plan_refuses_what_the_agent_would(line: str, message: str) -> None:
    # dur=604800 and bad qdisc words passed the plan and failed on the hosts.
    with pytest.raises(ScriptError, match=message):
        plan(line)


def test_qdisc_other_words_reach_the_agent_as_tc_words() -> None:
    (action,) = plan("SET_QDISC host=a qdisc=bfifo other=mpu,64")
    assert action.other == "mpu 64"  # the agent takes space-separated words: "mpu,64" was refused there
