"""Parser: logical lines -> an AST of commands, IFs, FOR loops and macro definitions.

Only the block structure (FOR/DONE, BEGIN/END, IF prefixes) is decided here;
``$variables`` are substituted when a node runs, so a FOR list or a command's
arguments may come from variables set at run time.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Union

from netesto.errors import ScriptError
from netesto.script.lexer import Line, Token, logical_lines, tokenize
from netesto.script.params import Param, parse_params, uses

SIMPLE_COMMANDS = (
    "SET",
    "SET_EXP",
    "HOST_SUFFIX",
    "SOURCE",
    "DESC",
    "OTHER",
    "WAIT",
    "RAND_WAIT",
    "ECHO",
    "DEBUG",
    "DEBUG_DISABLE",
    "DEBUG_RESTORE",
    "NEXT_COUNTER",
    "PROCESS_EXP",
    "RUN",
    "DO_SERVER",
    "DO_CLIENT",
    "GET_DATA",
    "SET_SYSCTL",
    "SET_MODULE_PARAMS",
    "SET_NETEM",
    "SET_QDISC",
    "SET_LINK",
    "DO_TCPDUMP",
    "DO_TRACE",
    "DO_WATCH",
    "CLOSE",
    "EXIT",
)
BLOCK_COMMANDS = ("IF", "IF_DEF", "FOR", "DONE", "BEGIN", "END")
COMMANDS = SIMPLE_COMMANDS + BLOCK_COMMANDS


@dataclass(frozen=True, slots=True)
class Located:
    """Where a node starts: its logical line and the 1-based column of its first word."""

    line: Line
    col: int


@dataclass(frozen=True, slots=True)
class Command(Located):
    """A simple command; ``name`` may be a ``$variable`` resolved when it runs."""

    name: str
    args: tuple[Token, ...]
    rest: str  # raw text after the command word (DESC, OTHER, ECHO keep it whole)


@dataclass(frozen=True, slots=True)
class If(Located):
    """``IF cond: command`` - run ``body`` when the substituted ``cond`` is true."""

    cond: Token
    body: "Node"


@dataclass(frozen=True, slots=True)
class IfDef(Located):
    """``IF_DEF name: command`` (macro defined) or ``IF_DEF $var: command`` (variable defined)."""

    name: Token
    body: "Node"


@dataclass(frozen=True, slots=True)
class For(Located):
    """``FOR var IN list DO`` ... ``DONE``; ``items`` is substituted at run time."""

    var: str
    items: Token
    body: tuple["Node", ...]


@dataclass(frozen=True, slots=True)
class Macro(Located):
    """``BEGIN name [params]`` ... ``END name``: defines the macro when executed.

    ``params`` are those the BEGIN line declares (None: it declares none), ``uses``
    every variable the body reads (the parameters of a macro that declares none).
    """

    name: str
    body: tuple["Node", ...]
    params: tuple[Param, ...] | None = None
    uses: frozenset[str] = frozenset()

    def takes(self, name: str) -> bool:
        """Whether RUN may pass ``name`` to this macro."""
        if self.params is None:
            return name in self.uses
        return any(p.name == name for p in self.params)

    def accepted(self) -> list[str]:
        """The argument names RUN may pass, in declaration order (sorted when inferred)."""
        if self.params is None:
            return sorted(self.uses)
        return [p.name for p in self.params]


@dataclass(frozen=True, slots=True)
class End(Located):
    """A bare ``END``: advance the counter to the next ten and stop the script."""


Node = Union[Command, If, IfDef, For, Macro, End]


def error_at(line: Line, col: int, message: str, hint: str = "") -> ScriptError:
    """A ScriptError pointing at ``col`` of ``line``."""
    return ScriptError(
        message, file=line.file, line=line.lineno, column=col, text=line.text, hint=hint
    )


def suggest(word: str, choices: "list[str] | tuple[str, ...]") -> str:
    """A "did you mean" hint for ``word`` among ``choices`` ('' if nothing is close)."""
    by_upper = {c.upper(): c for c in choices}
    close = difflib.get_close_matches(word.upper(), list(by_upper), n=3, cutoff=0.6)
    if not close:
        return ""
    names = [by_upper[c] for c in close]
    if len(names) == 1:
        return f"did you mean {names[0]}?"
    return "did you mean " + ", ".join(names[:-1]) + f" or {names[-1]}?"


def _unknown_command(line: Line, tokens: tuple[Token, ...]) -> ScriptError:
    word = tokens[0].text
    hint = ""
    if len(tokens) > 1 and f"{word}_{tokens[1].text}" in COMMANDS:
        hint = f"did you mean {word}_{tokens[1].text} (with an underscore)?"
    else:
        hint = suggest(word, COMMANDS)
    return error_at(line, tokens[0].col, f"unknown command {word!r}", hint)


class _Block:
    __slots__ = ("kind", "line", "col", "name", "var", "items", "body", "params", "lines")

    def __init__(self, kind: str, line: Line, col: int, name: str = "",
                 var: str = "", items: Token | None = None,
                 params: tuple[Param, ...] | None = None) -> None:
        self.kind = kind
        self.line = line
        self.col = col
        self.name = name
        self.var = var
        self.items = items
        self.params = params
        self.body: list[Node] = []
        self.lines: list[Line] = []  # a macro's body lines: what it reads


_VARNAME = re.compile(r"^[A-Za-z0-9_]+$")
MAX_IF_CHAIN = 32
MAX_NESTING = 100  # nested FORs in one file; deeper ones would exhaust Python's stack


def _parse_single(line: Line, tokens: tuple[Token, ...], depth: int = 0) -> Node:
    """Parse a one-line command (top level, in a block, or after an IF ``:``)."""
    first = tokens[0]
    if depth > MAX_IF_CHAIN:
        raise error_at(line, first.col, f"more than {MAX_IF_CHAIN} IFs chained on one line")
    word = first.text
    if word.startswith("HOST_SUFFIX="):
        # The paper and old README write HOST_SUFFIX=name.
        value = word[len("HOST_SUFFIX="):]
        args = (Token(value, first.col + len("HOST_SUFFIX=")),) if value else ()
        return Command(line, first.col, "HOST_SUFFIX", args + tokens[1:], value)
    if word in ("IF", "IF_DEF"):
        return _parse_if(line, tokens, depth)
    if word in ("FOR", "DONE", "BEGIN"):
        raise error_at(line, first.col, f"{word} cannot follow IF ... : on the same line")
    if word == "END":
        if len(tokens) > 1:
            raise error_at(line, tokens[1].col, f"END {tokens[1].text} without a matching BEGIN")
        return End(line, first.col)
    if word.startswith("$") or word in SIMPLE_COMMANDS:
        rest_start = first.col - 1 + len(word)
        return Command(line, first.col, word, tokens[1:], line.text[rest_start:].strip())
    raise _unknown_command(line, tokens)


def _parse_if(line: Line, tokens: tuple[Token, ...], depth: int) -> Node:
    first = tokens[0]
    start = first.col - 1 + len(first.text)
    colon = line.text.find(":", start)
    if colon < 0 or len(tokens) < 2:
        raise error_at(line, first.col, f"{first.text} needs 'condition: command'",
                       f"e.g. {first.text} $tcpDump: DO_TCPDUMP host=h1 server=h2")
    cond_tokens = tokenize(line.text[start:colon], start)
    if len(cond_tokens) != 1:
        col = cond_tokens[1].col if len(cond_tokens) > 1 else first.col
        raise error_at(line, col, f"{first.text} takes one condition word before ':'")
    inner_tokens = tokenize(line.text[colon + 1:], colon + 1)
    if not inner_tokens:
        raise error_at(line, colon + 1, f"{first.text} condition: expected a command after ':'")
    body = _parse_single(line, inner_tokens, depth + 1)
    if first.text == "IF":
        return If(line, first.col, cond_tokens[0], body)
    return IfDef(line, first.col, cond_tokens[0], body)


MAX_SCRIPT_CHARS = 4 << 20  # the paper's longest scripts are a few KB; this bounds memory and time


def parse(text: str, file: str = "<script>") -> tuple[Node, ...]:
    """Parse a whole script; a bare top-level END stops parsing (like the original)."""
    if len(text) > MAX_SCRIPT_CHARS:
        raise ScriptError(f"the script is {len(text) / 2**20:.1f} MiB: more than the {MAX_SCRIPT_CHARS >> 20} MiB "
                          "a script may be", file=file)
    top: list[Node] = []
    stack: list[_Block] = []
    for line in logical_lines(text, file):
        tokens = line.tokens
        first = tokens[0]
        word = first.text
        target = stack[-1].body if stack else top
        if stack and stack[0].kind == "macro" and not (word == "END" and len(tokens) >= 2):
            stack[0].lines.append(line)
        if word == "FOR":
            if len(tokens) != 5 or tokens[2].text.upper() != "IN" or tokens[4].text.upper() != "DO":
                raise error_at(line, first.col, "malformed FOR",
                               "expected: FOR var IN a,b,c DO  or  FOR var IN 1..10[,step] DO")
            var = tokens[1].text
            if not _VARNAME.match(var):  # what $name can reach: ASCII letters, digits, _
                raise error_at(line, tokens[1].col, f"bad FOR variable name {var!r}",
                               "letters, digits and _ only")
            if len(stack) >= MAX_NESTING:
                raise error_at(line, first.col, f"FOR nested more than {MAX_NESTING} deep")
            stack.append(_Block("for", line, first.col, var=var, items=tokens[3]))
            continue
        if word == "DONE":
            if not stack or stack[-1].kind != "for":
                where = f" (inside BEGIN {stack[-1].name})" if stack else ""
                raise error_at(line, first.col, f"DONE without a matching FOR{where}")
            if len(tokens) > 1:
                raise error_at(line, tokens[1].col, "DONE takes no arguments")
            block = stack.pop()
            assert block.items is not None
            loop = For(block.line, block.col, block.var, block.items, tuple(block.body))
            (stack[-1].body if stack else top).append(loop)
            continue
        if word == "BEGIN":
            if stack:
                inner = stack[-1]
                what = f"FOR (line {inner.line.lineno})" if inner.kind == "for" else f"BEGIN {inner.name}"
                raise error_at(line, first.col, f"BEGIN cannot be nested inside {what}",
                               "define macros at the top level of a file")
            if len(tokens) < 2:
                raise error_at(line, first.col, "BEGIN takes a macro name",
                               "BEGIN name [param param=default param?=default ...]")
            name = tokens[1].text
            if name in COMMANDS:
                raise error_at(line, tokens[1].col, f"macro name {name!r} is a command name")
            if "," in name or "$" in name:
                # RUN reads "name,reps" and substitutes $variables: it could never call it.
                raise error_at(line, tokens[1].col, f"bad macro name {name!r}",
                               "no ',' or '$' in macro names")
            params = parse_params(line, tokens[2:]) if len(tokens) > 2 else None
            stack.append(_Block("macro", line, first.col, name=name, params=params))
            continue
        if word == "END" and len(tokens) >= 2:
            macro = stack[0] if stack and stack[0].kind == "macro" else None
            if macro is None:
                raise error_at(line, tokens[1].col, f"END {tokens[1].text} without a matching BEGIN")
            if len(stack) > 1:
                raise error_at(line, first.col, f"END {tokens[1].text} inside an open FOR",
                               f"close the FOR of line {stack[-1].line.lineno} with DONE first")
            if tokens[1].text != macro.name:
                raise error_at(line, tokens[1].col,
                               f"END {tokens[1].text} does not match BEGIN {macro.name}",
                               f"BEGIN {macro.name} is at line {macro.line.lineno}")
            if len(tokens) > 2:
                raise error_at(line, tokens[2].col, "END name takes no further arguments")
            stack.pop()
            top.append(Macro(macro.line, macro.col, macro.name, tuple(macro.body), macro.params,
                             uses(macro.lines)))
            continue
        node = _parse_single(line, tokens)
        target.append(node)
        if isinstance(node, End) and not stack:
            return tuple(top)  # the original stops reading at a top-level END
    if stack:
        block = stack[-1]
        if block.kind == "for":
            raise error_at(block.line, block.col, "FOR without a matching DONE")
        raise error_at(block.line, block.col, f"BEGIN {block.name} without a matching END {block.name}")
    return tuple(top)


__all__ = [
    "BLOCK_COMMANDS",
    "COMMANDS",
    "Command",
    "End",
    "For",
    "If",
    "IfDef",
    "MAX_SCRIPT_CHARS",
    "Macro",
    "Node",
    "SIMPLE_COMMANDS",
    "error_at",
    "parse",
    "suggest",
]
