"""Macro parameters: the ones a ``BEGIN`` line declares, or those inferred from the body.

A macro declares its parameters after its name (continue long lines with ``\\``)::

    BEGIN TwoFlowBaseStream server client1 client2 ca1 ca2 dur1 dur2 delay2 \\
        exp=COUNTER instances=$instances

``p`` must be given by every RUN; ``p=value`` takes ``value`` when the RUN does
not give ``p`` (its ``$names`` are read then: ``instances=$instances`` is the
global, which must be set); ``p?=value`` takes the global ``p`` if one is set,
else ``value`` (make's ``?=``); ``p?`` takes the global ``p`` if one is set and
is otherwise left unset (``IF_DEF $p`` tells). A macro that declares nothing
takes every ``$name`` its body reads. RUN refuses any other argument.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

from netesto.errors import ScriptError
from netesto.script.lexer import Line, Token

REQUIRED = "required"
DEFAULT = "default"  # p=value
GLOBAL = "global"  # p?=value: the global p when set, else value
OPTIONAL = "optional"  # p?: the global p when set, else unset

_NAME = re.compile(r"[A-Za-z0-9_]+")
_USES = re.compile(r"\$([A-Za-z0-9_]+)")
# SET_EXP reads bare names too (SET_EXP d=dur/3): the names of its expression.
_SET_EXP = re.compile(r"\bSET_EXP\s+[A-Za-z0-9_]+=(\S*)")
_BARE = re.compile(r"(?<![A-Za-z0-9_$])([A-Za-z_][A-Za-z0-9_]*)")


@dataclass(frozen=True, slots=True)
class Param:
    """One declared parameter: its name, kind (REQUIRED, DEFAULT, GLOBAL, OPTIONAL),
    default text (DEFAULT, GLOBAL) and column on the BEGIN line."""

    name: str
    kind: str
    default: str = ""
    col: int = 0

    def __str__(self) -> str:
        """As it is declared: ``p``, ``p=value``, ``p?=value``, ``p?``."""
        if self.kind == REQUIRED:
            return self.name
        if self.kind == OPTIONAL:
            return self.name + "?"
        return f"{self.name}{'?' if self.kind == GLOBAL else ''}={self.default}"


def parse_params(line: Line, tokens: Iterable[Token]) -> tuple[Param, ...]:
    """The parameters declared by the words after a ``BEGIN name``."""
    out: list[Param] = []
    seen: dict[str, int] = {}
    for tok in tokens:
        head, eq, default = tok.text.partition("=")
        name, mark = (head[:-1], "?") if head.endswith("?") else (head, "")
        if not _NAME.fullmatch(name):
            raise _error(line, tok.col, f"bad macro parameter {tok.text!r}",
                         "name, name=default, name?=default or name? (letters, digits and _)")
        if name in seen:
            raise _error(line, tok.col, f"parameter {name} declared twice",
                         f"the first is at column {seen[name]}")
        seen[name] = tok.col
        if mark:
            kind = GLOBAL if eq else OPTIONAL
        else:
            kind = DEFAULT if eq else REQUIRED
        out.append(Param(name, kind, default, tok.col))
    return tuple(out)


def uses(lines: Iterable[Line]) -> frozenset[str]:
    """Every variable the lines read: ``$name`` anywhere, and SET_EXP's bare names."""
    names: set[str] = set()
    for line in lines:
        text = line.text
        if "$" in text:
            names.update(_USES.findall(text))
        if "SET_EXP" in text:
            for expr in _SET_EXP.findall(text):
                names.update(_BARE.findall(expr))
    return frozenset(names)


def _error(line: Line, col: int, message: str, hint: str) -> ScriptError:
    return ScriptError(message, file=line.file, line=line.lineno, column=col, text=line.text, hint=hint)


__all__ = ["DEFAULT", "GLOBAL", "OPTIONAL", "Param", "REQUIRED", "parse_params", "uses"]
