"""Property: any script, random or a mutation of a real example, gives Actions or a
ScriptError - never another exception, never a hang (every loop is bounded)."""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from netesto.errors import ScriptError
from netesto.script import Interpreter, MemoryCounter, MemoryLoader
from netesto.script.actions import Action
from netesto.script.parser import COMMANDS

from tests.script.examples import LIB, SCRIPTS

WORDS = list(COMMANDS) + [
    "IN", "in", "DO", "do", "DONE", ":", "$", "$a", "$b", "$ca", "$servers", "$exp", "a=1",
    "b=$a", "a=$b", "host=h1", "server=h2", "exp=COUNTER", "exp=PREV", "ca=cubic,bbr",
    "1..3", "3..1,2", "1..99999999", "a,b", "MServerRR", "TwoFlowBaseStream", "lib", "\\",
    "#", "test=TCP_RR", "req=S", "dur=0.5", "x", "0", "1", "-1", "1e999", "BEGIN_COMMENT",
    "END_COMMENT", "net.ipv4.tcp_ecn=1", "qdisc=tbf", "rate=1g", "((1+2)", "a=9*9*9*9*9",
]

SETTINGS = settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=True,
)


def run_bounded(text: str) -> list[Action]:
    interp = Interpreter(
        loader=MemoryLoader({"lib": LIB, "self": text}),
        counter=MemoryCounter(),
        max_steps=20_000,
        max_actions=5_000,
        max_loops=5_000,
        max_expansion=20_000,
    )
    start = time.monotonic()
    try:
        actions = list(interp.run_text(text, file="prop.nts"))
    except ScriptError as err:
        assert err.line >= 0 and err.format_message()
        actions = []
    assert time.monotonic() - start < 5.0, "a single script took too long"
    return actions


line_strategy = st.lists(st.sampled_from(WORDS), min_size=0, max_size=8).map(" ".join)
script_strategy = st.lists(line_strategy, min_size=0, max_size=25).map("\n".join)


@SETTINGS
@given(script_strategy)
def test_random_word_scripts(text: str) -> None:
    run_bounded(text)


@SETTINGS
@given(st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=300))
def test_random_text(text: str) -> None:
    run_bounded(text)


@st.composite
def mutated(draw: st.DrawFn) -> str:
    name = draw(st.sampled_from(sorted(SCRIPTS)))
    lines = SCRIPTS[name].splitlines()
    for _ in range(draw(st.integers(1, 4))):
        if not lines:
            lines = [""]
        i = draw(st.integers(0, len(lines) - 1))
        op = draw(st.sampled_from(["delete", "duplicate", "swap", "char", "word", "insert"]))
        if op == "delete":
            del lines[i]
        elif op == "duplicate":
            lines.insert(i, lines[i])
        elif op == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "char":
            line = lines[i]
            pos = draw(st.integers(0, len(line)))
            ch = draw(st.sampled_from(list("$=:,.#\\ _-01xX9()*/\t")))
            cut = draw(st.booleans())
            lines[i] = line[:pos] + ("" if cut else ch) + line[pos + (1 if cut else 0):]
        elif op == "word":
            words = lines[i].split()
            if words:
                k = draw(st.integers(0, len(words) - 1))
                words[k] = draw(st.sampled_from(WORDS))
                lines[i] = " ".join(words)
        else:
            lines.insert(i, draw(line_strategy))
    text = "\n".join(lines)
    if name == "lib":
        text += "\nRUN MServerRR servers=a,b clients=c reqs=1K,1M ca=cubic,bbr dur=1\n"
    return text


@SETTINGS
@given(mutated())
def test_mutated_examples(text: str) -> None:
    run_bounded(text)


@pytest.mark.parametrize(
    "text",
    [
        "BEGIN m\nRUN m\nEND m\nRUN m",
        "FOR i IN 1..4000 DO\nFOR j IN 1..4000 DO\nDONE\nDONE",
        "BEGIN m\nEND m\nFOR i IN 1..5000 DO\nRUN m,5000\nDONE",
        "SET a=x\n" + "".join("SET a=$a$a\n" for _ in range(40)) + "ECHO $a",
        "SET a=$b\nSET b=$a\nECHO $b",
        "IF 1: " * 200 + "WAIT 1",
        "SOURCE self\nSOURCE self",
        "FOR i IN 1..100000 DO\nWAIT 1\nDONE",
        "SET a=xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\nFOR i IN 1..5000 DO\nSET a=$a$i\nDONE",
        "SET a=x\nFOR i IN 1..5000 DO\nSET a=xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx$a\nDONE",
    ],
)
def test_pathological_scripts_end_quickly(text: str) -> None:
    run_bounded(text)
