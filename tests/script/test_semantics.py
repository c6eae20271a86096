"""Language semantics: variables, macros, FOR/IF, experiments, hosts, groups, END."""

from __future__ import annotations

import pytest

from netesto.errors import ScriptError
from netesto.script import Interpreter, MemoryCounter, MemoryLoader, estimate_seconds, plan
from netesto.script.actions import DoClient, Echo


def echoes(text: str, **kw: object) -> list[str]:
    return [a.text for a in plan(text, **kw) if isinstance(a, Echo)]


# ----- variables


@pytest.mark.parametrize(
    "text, expected",
    [
        ("SET a=1\nECHO $a", ["1"]),
        ("SET a=1\nSET b=$a$a\nECHO $b-x", ["11-x"]),
        ("SET a=x=y\nECHO $a", ["x=y"]),
        ("SET b=2\nSET a=$b\nSET b=3\nECHO $a $b", ["2 3"]),  # SET keeps the value of the moment
        ("SET a=\nECHO [$a]", ["[]"]),
        ("SET dur=60\nSET_EXP dur2=dur/3\nSET_EXP delay2=$dur2+3\nECHO $dur2 $delay2", ["20 23"]),
        ("SET_EXP a=(1+2)*3-7/2\nECHO $a", ["6"]),
        ("SET_EXP a=-7/2\nECHO $a", ["-4"]),
        ("SET a=1\nBEGIN m\nECHO $a\nSET a=2\nECHO $a\nEND m\nRUN m a=arg\nECHO $a", ["arg", "arg", "2"]),
        ("BEGIN m\nECHO $x\nRUN n\nEND m\nBEGIN n\nIF_DEF $x: ECHO leaked\nECHO n\nEND n\nRUN m x=1", ["1", "n"]),
        ("SET forLoopPrint=0\nIF_DEF $forLoopPrint: ECHO set\nECHO ok", ["ok"]),
    ],
)
def test_variables(text: str, expected: list[str]) -> None:
    assert echoes(text) == expected


def test_defines_seed_globals() -> None:
    assert echoes("ECHO $a $b", defines={"a": "1", "b": "two"}) == ["1 two"]


def test_self_reference_is_an_error_not_a_hang() -> None:
    # Only -D values are kept unexpanded: a SET expands its value at once.
    with pytest.raises(ScriptError, match=r"refers to itself \(\$a -> \$b -> \$c -> \$b\)"):
        plan("ECHO $a", defines={"a": "$b", "b": "$c", "c": "$b"})


def test_an_undefined_variable_in_a_value_is_named_with_the_variable_holding_it() -> None:
    with pytest.raises(ScriptError) as err:
        plan("SET x=1\nECHO [$x $a]", defines={"a": "$b"}, file="t.nts")
    assert err.value.message == "undefined variable $b (in the value of $a)"
    assert (err.value.file, err.value.line, err.value.column) == ("t.nts", 2, 10)


def test_self_reference_from_defines() -> None:
    with pytest.raises(ScriptError, match=r"\$a -> \$a"):
        plan("ECHO $a", defines={"a": "x$a"})


def test_exponential_expansion_is_capped() -> None:
    text = "SET v30=x\n" + "".join(f"SET v{i}=$v{i + 1}$v{i + 1}\n" for i in reversed(range(30))) + "ECHO $v0"
    with pytest.raises(ScriptError, match="expansion exceeds"):
        plan(text)


# ----- FOR and IF (the paper/README examples)


@pytest.mark.parametrize(
    "header, expected",
    [
        ("a,b,c", ["a", "b", "c"]),
        ("1..4", ["1", "2", "3", "4"]),
        ("0..10,5", ["0", "5", "10"]),
        ("5..1,2", ["5", "3", "1"]),
        ("3..3", ["3"]),
        ("x", ["x"]),
        ("$lo..$hi", ["2", "3"]),
        ("$lo,$hi", ["2", "3"]),
        ("$list", ["p", "q"]),
        ("a,,b", ["a", "b"]),
    ],
)
def test_for_lists(header: str, expected: list[str]) -> None:
    text = f"SET lo=2\nSET hi=3\nSET list=p,q\nFOR i IN {header} DO\nECHO $i\nDONE"
    assert echoes(text) == expected


def test_for_lists_inside_macros_resolve_at_run_time() -> None:
    text = ("BEGIN m\nFOR i IN $a..$b DO\nECHO r$i\nDONE\nFOR j IN $a,$b DO\nECHO l$j\nDONE\nEND m\n"
            "RUN m a=1 b=2\nSET a=7\nSET b=8\nRUN m")
    assert echoes(text) == ["r1", "r2", "l1", "l2", "r7", "r8", "l7", "l8"]


def test_for_variable_is_global_and_empty_list_runs_nothing() -> None:
    assert echoes("SET e=\nFOR i IN $e DO\nECHO no\nDONE\nFOR i IN a,b DO\nDONE\nECHO $i") == ["b"]


def test_for_loop_print() -> None:
    assert echoes("SET forLoopPrint=1\nFOR i IN a,b DO\nDONE") == ["FOR i=a", "FOR i=b"]


@pytest.mark.parametrize(
    "cond, runs",
    [("1", True), ("0", False), ("0.0", False), ("2.5", True), ("-1", True), ("$one", True),
     ("$zero", False), ("$undefined", False), ("$text", True), ("$empty", False), ("yes", True)],
)
def test_if(cond: str, runs: bool) -> None:
    text = f"SET one=1\nSET zero=0\nSET text=abc\nSET empty=\nIF {cond}: ECHO ran"
    assert echoes(text) == (["ran"] if runs else [])


def test_if_forms() -> None:
    text = ("SET tcpDump=100\nIF $tcpDump: DO_TCPDUMP host=c server=s packets=$tcpDump\n"
            "IF $x : ECHO spaced\nIF 1:ECHO attached\nIF 1: IF 0: ECHO nested\nIF 1: IF 2: ECHO both")
    acts = plan(text)
    assert acts[0].kind == "DO_TCPDUMP" and acts[0].packets == 100
    assert [a.text for a in acts[1:]] == ["attached", "both"]


def test_if_def() -> None:
    text = ("IF_DEF preServer: RUN preServer host=h\nBEGIN preServer\nECHO pre $host\nEND preServer\n"
            "IF_DEF preServer: RUN preServer host=h\nIF_DEF $v: ECHO v\nSET v=0\nIF_DEF $v: ECHO v0")
    assert echoes(text) == ["pre h", "v0"]


# ----- macros


def test_a_run_argument_from_an_undefined_variable_is_an_error_where_it_stands() -> None:
    # It used to be left out, so that the macro read a global of the same name instead.
    text = "BEGIN m\nECHO in\nIF $opt: ECHO opt\nEND m\nSET opt=1\nRUN m opt=$opt\nRUN m opt=$nope"
    with pytest.raises(ScriptError) as err:
        plan(text, file="t.nts")
    assert (err.value.line, err.value.column, err.value.message) == (7, 11, "undefined variable $nope")
    assert echoes(text.rsplit("\n", 1)[0]) == ["in", "opt"]


def test_run_reps_and_ca_list() -> None:
    text = "BEGIN m\nECHO $ca $n\nEND m\nRUN m,2 ca=cubic,bbr n=1\nSET r=0\nRUN m,$r ca=x"
    assert echoes(text) == ["cubic 1", "bbr 1", "cubic 1", "bbr 1"]


def test_run_ca_list_runs_the_body_per_value() -> None:
    lib = ("BEGIN TwoFlows\nSET exp=COUNTER\nDO_SERVER host=$server exp=$exp start=1\n"
           "DO_CLIENT host=$client server=$server ca=$ca test=TCP_STREAM\nWAIT 1\n"
           "GET_DATA host=$client\nPROCESS_EXP\nEND TwoFlows\n")
    acts = plan("SOURCE lib\nRUN TwoFlows server=s client=c ca=cubic,bbr",
                loader=MemoryLoader({"lib": lib}))
    clients = [a for a in acts if isinstance(a, DoClient)]
    assert [(a.ca, a.exp, a.group) for a in clients] == [("cubic", 1, 1), ("bbr", 2, 1)]
    assert [a.exp for a in acts if a.kind == "PROCESS_EXP"] == [1, 2]


def test_macro_redefinition_and_stack() -> None:
    text = "BEGIN m\nECHO 1\nEND m\nBEGIN m\nRUN n\nEND m\nBEGIN n\nWAIT 1\nEND n\nRUN m"
    (wait,) = plan(text, file="s.nts")
    assert wait.loc.line == 8 and wait.loc.file == "s.nts"
    assert wait.loc.stack == ("RUN m at s.nts:10", "RUN n at s.nts:5")


def test_end_inside_macro_ends_cleanly() -> None:
    counter = MemoryCounter(13)
    acts = plan("BEGIN m\nECHO a\nIF 1: END\nECHO b\nEND m\nRUN m\nECHO c", counter=counter)
    assert [a.text for a in acts] == ["a"]
    assert counter.value == 20  # END does NEXT_COUNTER


def test_top_level_end_stops_reading() -> None:
    assert echoes("ECHO a\nEND\nthis line is not even parsed $$$") == ["a"]


def test_source_once_and_relative(tmp_path) -> None:
    (tmp_path / "lib").write_text("ECHO lib\nSET fromlib=1\n")
    (tmp_path / "main.nts").write_text("SOURCE lib\nSOURCE lib\nECHO $fromlib\n")
    interp = Interpreter()
    assert [a.text for a in interp.run_file(tmp_path / "main.nts")] == ["lib", "1"]


def test_dynamic_command_name() -> None:
    assert echoes("SET cmd=ECHO\n$cmd hi") == ["hi"]
    with pytest.raises(ScriptError, match="not a command"):
        plan("SET cmd=NOPE\n$cmd hi")


# ----- experiments, hosts, groups


def test_exp_counter_prev_and_defaults() -> None:
    counter = MemoryCounter(41)
    text = ("DO_SERVER host=s exp=COUNTER\nDO_CLIENT host=c server=s\nSET exp=COUNTER\n"
            "DO_SERVER host=s2 exp=$exp\nSET exp=PREV\nDO_SERVER host=s3 exp=$exp\n"
            "DO_CLIENT server=s3\nDO_SERVER host=x exp=counter\nGET_DATA exp=prev")
    acts = plan(text, counter=counter)
    assert [(a.kind, a.host, a.exp) for a in acts] == [
        ("DO_SERVER", "s", 42), ("DO_CLIENT", "c", 42), ("DO_SERVER", "s2", 43),
        ("DO_SERVER", "s3", 43), ("DO_CLIENT", "s3", 43), ("DO_SERVER", "x", 44),
        ("GET_DATA", "x", 44)]
    assert counter.value == 44


def test_first_command_takes_counter_but_settings_do_not() -> None:
    counter = MemoryCounter(5)
    acts = plan("SET_SYSCTL host=h net.ipv4.tcp_ecn=1\nSET_NETEM netem_delay=5\n"
                "SET_QDISC qdisc=fq\nDO_SERVER\nSET_NETEM netem_delay=0", counter=counter)
    assert [a.exp for a in acts] == [0, 0, 0, 6, 6]
    assert counter.value == 6


def test_exp_name_and_host_defaults() -> None:
    acts = plan("DO_SERVER host=a expName=one\nDO_CLIENT server=a\nDO_CLIENT host=b server=a expName=two\n"
                "GET_DATA\nDO_SERVER host=a")
    assert [(a.host, a.exp_name) for a in acts] == [("a", "one"), ("a", "one"), ("b", "two"),
                                                    ("b", "two"), ("a", "two")]


def test_group_numbering_resets_on_process_exp_and_new_exp() -> None:
    text = ("DO_CLIENT host=c server=s exp=1\nDO_CLIENT server=s\nDO_CLIENT server=s group=7\n"
            "DO_CLIENT server=s\nPROCESS_EXP\nDO_CLIENT server=s2\nDO_CLIENT server=s exp=2\n"
            "DO_CLIENT server=s")
    groups = [a.group for a in plan(text) if isinstance(a, DoClient)]
    assert groups == [1, 2, 7, 3, 1, 1, 2]


def test_get_data_repeat_is_skipped_until_next_do() -> None:
    text = ("DO_SERVER host=a exp=1\nGET_DATA host=a\nGET_DATA host=a\nGET_DATA host=b\n"
            "DO_CLIENT host=a server=b\nGET_DATA host=a")
    assert [(a.kind, a.host) for a in plan(text)] == [
        ("DO_SERVER", "a"), ("GET_DATA", "a"), ("GET_DATA", "b"), ("DO_CLIENT", "a"), ("GET_DATA", "a")]


@pytest.mark.parametrize(
    "suffix_line, host, expected",
    [
        ("", "h1", "h1"),
        ("HOST_SUFFIX mynetwork.com", "h1", "h1.mynetwork.com"),
        ("HOST_SUFFIX=dc1.mynetwork.com", "h1", "h1.dc1.mynetwork.com"),
        ("HOST_SUFFIX .lab", "h1", "h1.lab"),
        ("HOST_SUFFIX lab", "h1.other", "h1.other"),
        ("HOST_SUFFIX lab", "10.0.0.1", "10.0.0.1"),
        ("HOST_SUFFIX lab", "fd00::1", "fd00::1"),
        ("HOST_SUFFIX lab\nHOST_SUFFIX", "h1", "h1"),
        ("HOST_SUFFIX lab\nHOST_SUFFIX NONE", "h1", "h1"),
    ],
)
def test_host_suffix(suffix_line: str, host: str, expected: str) -> None:
    acts = plan(f"{suffix_line}\nDO_CLIENT host={host} server={host}\nDO_TCPDUMP server=X")
    assert acts[0].host == expected and acts[0].server == expected
    assert acts[1].server == "X"


def test_estimate_seconds() -> None:
    acts = plan("WAIT 10\nRAND_WAIT 2\nRAND_WAIT 1 3\nDO_SERVER host=a\nWAIT 0.5")
    assert estimate_seconds(acts) == pytest.approx(10 + 1 + 2 + 0.5)


def test_generator_is_lazy() -> None:
    counter = MemoryCounter()
    stream = Interpreter(counter=counter).run_text(
        "DO_SERVER host=a exp=COUNTER\nDO_SERVER host=a exp=COUNTER\nDO_SERVER host=a exp=COUNTER")
    assert counter.value == 0
    next(stream)
    assert counter.value == 1
    next(stream)
    assert counter.value == 2


def test_actions_are_immutable() -> None:
    (a,) = plan("DO_CLIENT host=a server=b")
    with pytest.raises(AttributeError):
        a.host = "x"  # type: ignore[misc]
    d = a.to_dict()
    assert d["action"] == "DO_CLIENT" and d["loc"] == "<script>:1" and d["server"] == "b"


def test_host_suffix_option_and_override() -> None:
    acts = list(Interpreter(host_suffix="lab.example").run_text(
        "DO_SERVER host=h1\nHOST_SUFFIX other\nDO_SERVER host=h2"))
    assert [a.host for a in acts] == ["h1.lab.example", "h2.other"]


@pytest.mark.parametrize("text, seconds", [
    ("DO_CLIENT host=a server=b dur=30\nGET_DATA host=a", 30.0),  # GET_DATA waits for the flow
    ("DO_CLIENT host=a server=b dur=30 delay=5\nWAIT 10\nGET_DATA host=b", 35.0),  # the server's too
    ("DO_CLIENT host=a server=b dur=30\nWAIT 3", 30.0),  # the run's end fetches (and waits)
    ("DO_CLIENT host=a server=b dur=30\nDO_SERVER host=b order=1\nWAIT 2", 32.0),  # "after" stats wait
    ("DO_CLIENT host=a server=b dur=30\nGET_DATA host=c\nWAIT 2", 30.0),  # c is not in that flow
    ("DO_CLIENT host=a server=b dur=5\nRAND_WAIT 1\nWAIT 10\nGET_DATA host=a", 10.5),
])
def test_estimate_counts_the_waits_the_runner_makes_for_flows(text: str, seconds: float) -> None:
    # The estimate used to add up WAIT/RAND_WAIT only: "DO_CLIENT dur=30 / GET_DATA"
    # planned as 0 s while the run takes 30 s (GET_DATA waits for the flows).
    from netesto.script import estimate_seconds

    assert estimate_seconds(plan(text)) == pytest.approx(seconds)


def test_tcpdump_server_x_is_never_suffixed() -> None:
    # The runner takes X and x as "no host filter"; HOST_SUFFIX turned x into x.lab,
    # which the lab then reported as an unknown host.
    acts = plan("HOST_SUFFIX lab\nDO_TCPDUMP host=h1 server=x\nDO_TCPDUMP host=h1 server=X\nDO_TCPDUMP host=h1 server=h2")
    assert [a.server for a in acts] == ["x", "X", "h2.lab"]
