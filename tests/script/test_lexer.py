"""Lexer and parser: comments, continuation, comment blocks, columns, block structure."""

from __future__ import annotations

import pytest

from netesto.errors import ScriptError
from netesto.script.lexer import logical_lines
from netesto.script.parser import Command, End, For, If, IfDef, Macro, parse


def lines(text: str) -> list[tuple[int, str]]:
    return [(ln.lineno, ln.text.strip()) for ln in logical_lines(text, "f")]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("SET a=1\n", [(1, "SET a=1")]),
        ("# comment\n\n   \nSET a=1 # trailing\n", [(4, "SET a=1")]),
        ("SET a=1#x\n", [(1, "SET a=1")]),
        ("DO_CLIENT host=a \\\n   server=b \\\n   dur=3\nWAIT 1", [(1, "DO_CLIENT host=a server=b dur=3"), (4, "WAIT 1")]),
        ("DO_CLIENT host=a \\ # comment then continuation\nserver=b", [(1, "DO_CLIENT host=a server=b")]),
        ("BEGIN_COMMENT\nWAIT 1\nnonsense here\nEND_COMMENT\nWAIT 2", [(5, "WAIT 2")]),
        ("  # indented comment\n\tWAIT 3", [(2, "WAIT 3")]),
        ("WAIT 1 \\", [(1, "WAIT 1")]),
    ],
)
def test_logical_lines(text: str, expected: list[tuple[int, str]]) -> None:
    assert lines(text) == expected


def test_columns_are_one_based() -> None:
    (line,) = logical_lines("  SET  a=1", "f")
    assert [(t.text, t.col) for t in line.tokens] == [("SET", 3), ("a=1", 8)]


def test_unterminated_comment_block() -> None:
    with pytest.raises(ScriptError) as exc:
        list(logical_lines("WAIT 1\nBEGIN_COMMENT\nWAIT 2\n", "f"))
    assert exc.value.line == 2


def test_block_structure() -> None:
    nodes = parse(
        "BEGIN m\nFOR a IN 1,2 DO\n FOR b in x,y do\n  WAIT 1\n DONE\nDONE\nEND m\n"
        "IF $x: IF 1: WAIT 2\nIF_DEF m: RUN m\nEND\nthis is never parsed\n",
        "f",
    )
    assert [type(n) for n in nodes] == [Macro, If, IfDef, End]
    macro = nodes[0]
    assert isinstance(macro, Macro) and macro.name == "m"
    outer = macro.body[0]
    assert isinstance(outer, For) and outer.var == "a" and outer.items.text == "1,2"
    inner = outer.body[0]
    assert isinstance(inner, For) and inner.var == "b"
    assert isinstance(nodes[1], If) and isinstance(nodes[1].body, If)
    assert isinstance(nodes[1].body.body, Command)


def test_host_suffix_equals_form() -> None:
    (node,) = parse("HOST_SUFFIX=dc1.mynetwork.com", "f")
    assert isinstance(node, Command) and node.name == "HOST_SUFFIX"
    assert node.args[0].text == "dc1.mynetwork.com" and node.args[0].col == 13


@pytest.mark.parametrize(
    "text, line, col, fragment",
    [
        ("WAIT 1\nFOR a IN 1,2\nDONE", 2, 1, "malformed FOR"),
        ("FOR a IN 1,2 DO\nWAIT 1\n", 1, 1, "FOR without a matching DONE"),
        ("DONE", 1, 1, "DONE without a matching FOR"),
        ("BEGIN m\nWAIT 1\n", 1, 1, "BEGIN m without a matching END m"),
        ("BEGIN m\nEND n", 2, 5, "END n does not match BEGIN m"),
        ("BEGIN m\nBEGIN n\nEND n\nEND m", 2, 1, "nested"),
        ("FOR a IN 1 DO\nBEGIN n\nEND n\nDONE", 2, 1, "nested"),
        ("BEGIN WAIT\nEND WAIT", 1, 7, "command name"),
        ("END foo", 1, 5, "without a matching BEGIN"),
        ("IF $a WAIT 1", 1, 1, "condition: command"),
        ("IF $a:", 1, 6, "expected a command"),
        ("IF a b: WAIT 1", 1, 6, "one condition"),
        ("IF 1: FOR a IN 1 DO", 1, 7, "cannot follow IF"),
        ("    DO_CLENT host=a", 1, 5, "unknown command 'DO_CLENT'"),
    ],
)
def test_syntax_errors(text: str, line: int, col: int, fragment: str) -> None:
    with pytest.raises(ScriptError) as exc:
        parse(text, "x.nts")
    err = exc.value
    assert (err.file, err.line, err.column) == ("x.nts", line, col), err.format_message()
    assert fragment in err.message


@pytest.mark.parametrize("sep", ["\x0c", "\x0b", "\x1c", "\x85", "\u2028", "\u2029"])
def test_only_newlines_end_lines(sep: str) -> None:
    # str.splitlines() also broke lines at form feeds, U+2028 and other separators,
    # so every later error was reported a line below where editors show it.
    text = f"DESC page{sep}\nECHO a{sep}b\r\nSETT y=1\n"
    lines = list(logical_lines(text))
    assert [(ln.lineno, ln.tokens[0].text) for ln in lines] == [(1, "DESC"), (2, "ECHO"), (3, "SETT")]
    with pytest.raises(ScriptError) as err:
        parse(text, "f.nts")
    assert err.value.line == 3
    assert [ln.lineno for ln in logical_lines("A 1\rB 2\r\nC 3\n")] == [1, 2, 3]  # old Mac, DOS, Unix
